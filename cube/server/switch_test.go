package server

import (
	"testing"
	"time"
)

// TestScheduledSwitchAtInstant: a scheduled version serves every request
// that arrives from its instant on, before anything installs it; earlier
// requests get the old one; settle installs it and releases the old one
// once its last request lets go.
func TestScheduledSwitchAtInstant(t *testing.T) {
	s := twoVersions(t)
	s.mu.Lock()
	at := time.Now().Add(200 * time.Millisecond)
	got, err := s.schedule("1000", at)
	s.mu.Unlock()
	if err != nil || !got.Equal(at) {
		t.Fatalf("schedule: %v %v", got, err)
	}
	old := s.acquire()
	if old.name != "2000" {
		t.Fatalf("before the instant: %q", old.name)
	}
	// A retried commit keeps the first instant; another version is refused.
	s.mu.Lock()
	again, err := s.schedule("1000", at.Add(time.Second))
	_, errOther := s.schedule("2000", at)
	s.mu.Unlock()
	if err != nil || !again.Equal(at) || errOther == nil {
		t.Fatalf("reschedule: %v %v %v", again, err, errOther)
	}
	if err := s.busy(); err == nil {
		t.Fatal("control commands are not refused while a switch is scheduled")
	}
	time.Sleep(time.Until(at))
	v := s.acquire()
	if v.name != "1000" {
		t.Fatalf("after the instant, not settled: %q", v.name)
	}
	if cur, _ := s.versionNames(); cur != "1000" {
		t.Fatalf("versionNames after the instant: %q", cur)
	}
	v.release()
	s.mu.Lock()
	s.settle()
	s.mu.Unlock()
	if cur := s.cur.Load(); cur.name != "1000" || s.pending.Load() != nil || s.bg.Load() != nil {
		t.Fatalf("after settle: cur %q pending %v bg %v", cur.name, s.pending.Load(), s.bg.Load())
	}
	if n := old.refs.Load(); n != 1 {
		t.Fatalf("old version refs %d, want 1 (the request still holding it)", n)
	}
	old.release() // unmaps it
	if n := s.cur.Load().refs.Load(); n != 1 {
		t.Fatalf("new version refs %d, want 1 (the cur slot)", n)
	}
	s.close()
}

// TestUnscheduleBeforeInstant: an abort before the instant keeps the old
// version, for every request before and after the instant.
func TestUnscheduleBeforeInstant(t *testing.T) {
	s := twoVersions(t)
	s.mu.Lock()
	at := time.Now().Add(50 * time.Millisecond)
	if _, err := s.schedule("1000", at); err != nil {
		t.Fatal(err)
	}
	if !s.unschedule("1000") {
		t.Fatal("unschedule found nothing")
	}
	time.Sleep(time.Until(at))
	s.settle()
	if cur, bg := s.versionNames(); cur != "2000" || bg != "1000" {
		t.Fatalf("after an abort: cur %q bg %q", cur, bg)
	}
	s.bgUnload()
	s.mu.Unlock()
	s.close()
}

// twoVersions is a store serving version 2000 (the newest) with 1000 loaded
// in the background, ready to be scheduled.
func twoVersions(t *testing.T) *store {
	t.Helper()
	data := t.TempDir()
	publish(t, data, "1000", 1)
	publish(t, data, "2000", 2)
	s := &store{dataDir: data}
	if _, err := s.loadNewest(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.bgLoad("/1000"); err != nil {
		t.Fatal(err)
	}
	return s
}
