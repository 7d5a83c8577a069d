package transfer

import (
	"context"
	"sync"
	"testing"
	"time"
)

// transferOver is a transfer of the given replicas, with the options' defaults.
func transferOver(t *testing.T, replicas [][]string) *Transfer {
	t.Helper()
	return newTestTransfer(t, Options{Replicas: replicas})
}

// TestStatusSharesOneFanOut: 50 concurrent GET /status ask each replica
// once, not 50 times, and an answer younger than statusTTL is served again;
// an older one asks again.
func TestStatusSharesOneFanOut(t *testing.T) {
	a := (&fakeAgent{delay: 50 * time.Millisecond}).start(t)
	tr := transferOver(t, [][]string{{a.addr, a.addr}, {a.addr}})
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := tr.Status(context.Background())
			if len(st.Shards) != 2 || len(st.Shards[0].Replicas) != 2 || st.Shards[0].Replicas[0].State != "idle" {
				t.Errorf("status: %+v", st.Shards)
			}
		}()
	}
	wg.Wait()
	if n := a.calls.Load(); n != 3 {
		t.Fatalf("50 concurrent GET /status made %d agent calls, want 3 (one per replica)", n)
	}
	tr.Status(context.Background())
	if n := a.calls.Load(); n != 3 {
		t.Fatalf("a GET /status within %v asked the replicas again (%d calls)", statusTTL, n)
	}
	time.Sleep(statusTTL)
	tr.Status(context.Background())
	if n := a.calls.Load(); n != 6 {
		t.Fatalf("a GET /status after %v: %d calls, want 6", statusTTL, n)
	}
}

// TestFanOutBounded: a cube of 1,000 replicas is asked at most maxFanOut at
// a time.
func TestFanOutBounded(t *testing.T) {
	a := (&fakeAgent{delay: 20 * time.Millisecond}).start(t)
	reps := make([][]string, 100)
	for i := range reps {
		for range 10 {
			reps[i] = append(reps[i], a.addr)
		}
	}
	tr := transferOver(t, reps)
	st := tr.Status(context.Background())
	if n := a.calls.Load(); n != 1000 {
		t.Fatalf("%d agent calls, want 1000", n)
	}
	if m := a.most.Load(); m > maxFanOut {
		t.Fatalf("%d agent calls in flight at once, want at most %d", m, maxFanOut)
	}
	if st.Shards[99].Replicas[9].State != "idle" {
		t.Fatalf("the last replica: %+v", st.Shards[99].Replicas[9])
	}
}
