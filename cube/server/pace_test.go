package server

import (
	"runtime"
	"testing"
	"time"
)

// TestPacer: at a rate of r cores, a slice of work d is paid for d/r later; slices that
// run together share the rate; time the lane sat idle is not saved up.
func TestPacer(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	ms := time.Millisecond
	half := &pacer{rate: 0.5}
	if w := half.pay(t0, t0.Add(ms)); w != ms {
		t.Fatalf("half a core: a 1 ms slice waits %s, want 1ms", w)
	}
	one := &pacer{rate: 1}
	if w := one.pay(t0, t0.Add(ms)); w != 0 {
		t.Fatalf("one core, one worker: waits %s, want 0", w)
	}
	if w := one.pay(t0, t0.Add(ms)); w != ms { // a second slice over the same millisecond
		t.Fatalf("one core, two slices at once: the second waits %s, want 1ms", w)
	}
	if w := one.pay(t0.Add(time.Hour), t0.Add(time.Hour+ms)); w != 0 {
		t.Fatalf("after an idle hour: waits %s, want 0 (idle time is not saved up, nor owed)", w)
	}
}

// TestHeavyRequestsKeepToTheirShare: with --heavy-cpu-share small, a large request pauses
// between slices of its work (counted in cube_heavy_paused_seconds_total) and is still
// answered in full; with a share worth one core, one request alone never pauses.
func TestHeavyRequestsKeepToTheirShare(t *testing.T) {
	keys := make([]uint64, 100_000) // six slices of yieldEvery+1 keys
	for i := range keys {
		keys[i] = uint64(i % 100)
	}
	_, addr := serveSized(t, 100, 40, func(o *Options) { o.HeavyShare = 0.05 })
	seekOK(t, addr, keys)
	if n := metric(t, addr, "cube_heavy_paused_seconds_total"); n <= 0 {
		t.Fatalf("paused %v s with --heavy-cpu-share 0.05; want pauses", n)
	}
	_, addr = serveSized(t, 100, 40, func(o *Options) { o.HeavyShare = 1 / float64(runtime.GOMAXPROCS(0)) })
	seekOK(t, addr, keys)
	if n := metric(t, addr, "cube_heavy_paused_seconds_total"); n != 0 {
		t.Fatalf("paused %v s with a share of one core; want none", n)
	}
}
