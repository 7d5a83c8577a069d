package token

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// secretVolume lays a token out as the kubelet lays out a Secret volume:
// dir/token -> ..data/token, ..data -> a timestamped directory. rotate
// writes a new directory and swaps ..data to it in one rename.
type secretVolume struct {
	dir string
	n   int
}

func newSecretVolume(t *testing.T, tok string) *secretVolume {
	t.Helper()
	v := &secretVolume{dir: t.TempDir()}
	v.rotate(t, tok)
	if err := os.Symlink(filepath.Join("..data", "token"), v.file()); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *secretVolume) file() string { return filepath.Join(v.dir, "token") }

func (v *secretVolume) rotate(t *testing.T, tok string) {
	t.Helper()
	v.n++
	ts := filepath.Join(v.dir, "..2026_11_27_"+string(rune('a'+v.n)))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// clock is a settable time for the tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time            { return c.t }
func (c *clock) add(d time.Duration)       { c.t = c.t.Add(d) }
func withClock(tk *Token, c *clock) *Token { tk.now = c.now; tk.checked = c.t; return tk }

// TestRotation: a rotated Secret is read without a restart; the new token
// is accepted and sent, the old one accepted (and offered as Previous) for
// the grace period, then no more.
func TestRotation(t *testing.T) {
	v := newSecretVolume(t, "old")
	tk, err := FromFile(v.file(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	withClock(tk, c)
	if !tk.Accepts("old") || tk.Accepts("new") || tk.Current() != "old" {
		t.Fatal("before the rotation: want old accepted and sent, new refused")
	}
	v.rotate(t, "new")
	c.add(100 * time.Millisecond) // a peer with the new token, before the next periodic look
	if !tk.Accepts("new") {
		t.Fatal("the new token refused right after the rotation")
	}
	if got := tk.Current(); got != "new" {
		t.Fatalf("Current = %q, want new", got)
	}
	if p, ok := tk.Previous(); !ok || p != "old" || !tk.Accepts("old") {
		t.Fatalf("within the grace period: Previous = %q, %v; old accepted: %v", p, ok, tk.Accepts("old"))
	}
	c.add(time.Minute)
	if _, ok := tk.Previous(); ok || tk.Accepts("old") || !tk.Accepts("new") {
		t.Fatal("after the grace period: want old refused, new accepted")
	}
}

// TestUnreadableFileKeepsTheToken: a file that disappears or is empty for a
// moment (mid-update) keeps the token read last.
func TestUnreadableFileKeepsTheToken(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := FromFile(f, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	withClock(tk, c)
	for _, change := range []func() error{
		func() error { return os.WriteFile(f, nil, 0o600) },
		func() error { return os.Remove(f) },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
		c.add(2 * checkEvery)
		if tk.Current() != "a" || !tk.Accepts("a") {
			t.Fatal("the last token read was dropped")
		}
	}
	if _, err := FromFile(filepath.Join(dir, "none"), time.Minute); err == nil {
		t.Fatal("FromFile of a missing file: no error")
	}
	if err := os.WriteFile(f, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FromFile(f, time.Minute); err == nil {
		t.Fatal("FromFile of an empty file: no error")
	}
}

func TestStatic(t *testing.T) {
	if !Static("").Accepts("anything") || !Static("").Empty() {
		t.Fatal("an empty static token accepts every request")
	}
	s := Static("s")
	if s.Empty() || !s.Accepts("s") || s.Accepts("t") || s.Accepts("") {
		t.Fatal("a static token accepts itself only")
	}
	if _, ok := s.Previous(); ok {
		t.Fatal("a static token has no previous one")
	}
}
