package bench

import (
	"context"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "none": nil, "1": {1}, "0-3": {0, 1, 2, 3}, "0,2,2": {0, 2}, "3,0-1": {3, 0, 1}} {
		got, err := parseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "1-", "3-1", "-1", "1,,2"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) accepted", bad)
		}
	}
	if got := pinned("none", "redis-server", "--port", "1"); !slices.Equal(got, []string{"redis-server", "--port", "1"}) {
		t.Errorf("unpinned argv %v", got)
	}
	if got := pinned("1", "memcached"); !slices.Equal(got, []string{"taskset", "-c", "1", "memcached"}) {
		t.Errorf("pinned argv %v", got)
	}
}

func TestPeerThreads(t *testing.T) {
	// redis.conf: threads only from 4 cores, "2 or 3" on 4, "6" on 8.
	for cores, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 3, 8: 6} {
		if got := redisIOThreads(cores); got != want {
			t.Errorf("redisIOThreads(%d) = %d, want %d", cores, got, want)
		}
	}
	if memcachedThreads(1) != 1 || memcachedThreads(4) != 4 {
		t.Error("memcached: one worker thread per core")
	}
}

func TestSpread(t *testing.T) {
	rs := []Result{{Keys: 5, Elapsed: time.Second}, {Keys: 1, Elapsed: time.Second}, {Keys: 3, Elapsed: time.Second}, {Keys: 9, Elapsed: time.Second}}
	if s := spreadOf(rs[:3], Result.KeysPerSec); s != (spread{3, 1, 5}) {
		t.Errorf("odd count: %+v", s)
	}
	if s := spreadOf(rs, Result.KeysPerSec); s != (spread{4, 1, 9}) {
		t.Errorf("even count: %+v", s)
	}
}

// TestMemcachedMultiGet checks the multi-get client on a real memcached:
// values come back in the order asked, and the misses memcached leaves out
// of its answer are reported as nil at their places.
func TestMemcachedMultiGet(t *testing.T) {
	exe, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make deps)")
	}
	o := Options{Keys: 100, ValueSize: 16, MemcachedServer: exe, ServerCPUs: NoPinning}
	s, err := memcachedServer(o, 1).start(context.Background(), o, io.Discard) // loads every key
	if s != nil {
		defer s.proc.stop()
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := dialMemcached(s.proc.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := []uint64{7, 1000, 3, 99, 100, 101, 0}
	var got []bool
	err = c.mget(keys, func(i int, v []byte) {
		got = append(got, v != nil)
		if v != nil && !valueOK(v, keys[i], o.ValueSize) {
			t.Errorf("key %d: wrong value %x", keys[i], v)
		}
	})
	if want := []bool{true, false, true, true, false, false, true}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("found %v (%v), want %v", got, err, want)
	}
}

func TestParseValueLine(t *testing.T) {
	if k, n, ok := parseValueLine([]byte("VALUE 123 0 40")); !ok || k != 123 || n != 40 {
		t.Errorf("got %d %d %v", k, n, ok)
	}
	for _, bad := range []string{"VALUE", "VALUE  0 40", "VALUE x1 0 40", "VALUE 1 0 -1", "VALUE 1 0", "END"} {
		if _, _, ok := parseValueLine([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestMachineLoad(t *testing.T) {
	if s := machineLoad(); !strings.HasPrefix(s, "load average ") || strings.Contains(s, "unknown") {
		t.Errorf("machineLoad() = %q", s)
	}
}
