package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// minorFaults reads minflt of /proc/<pid>/stat: pages the process touched
// for the first time (fresh heap, or a mapping not yet in its page tables).
func minorFaults(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, err := strconv.ParseInt(f[7], 10, 64) // field 10 of stat, minflt
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFirstRequestIsWarm: the first large request a freshly started server
// answers, on a fresh connection, finds its dictionary pages mapped and its
// buffers grown (warmUp): it costs the server almost no first touches of
// memory. Before, it faulted in well over a thousand pages (~5 MiB) — the
// 10× slower first request a Paddle Serving client with a 200 ms timeout
// fails on.
func TestFirstRequestIsWarm(t *testing.T) {
	testFirstRequestIsWarm(t, 400_000, 40, 25_000)
}

// TestFirstRequestIsWarm_LargeValues: the same with 1 KiB values, where a
// warm-up of 32,768 keys would need 33 MiB and its buffer, over what is
// kept, was thrown away (no request was warm for values over ~120 bytes).
// Warm-up now takes as many keys as a kept buffer holds, so a 3,000-key
// request (3 MiB) finds its buffer grown.
func TestFirstRequestIsWarm_LargeValues(t *testing.T) {
	testFirstRequestIsWarm(t, 100_000, 1024, 3_000)
}

func testFirstRequestIsWarm(t *testing.T, n, valueSize, batch int) {
	data := filepath.Join(t.TempDir(), "data")
	publishSized(t, data, "", n, valueSize, 0)
	p := startCube(t, data)
	keys := make([]uint64, batch)
	seed := uint64(7)
	for i := range keys {
		seed = seed*6364136223846793005 + 1442695040888963407
		keys[i] = (seed >> 33) % uint64(n)
	}
	seek := func() int64 {
		c, err := client.Dial(p.Addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		before := minorFaults(t, p.PID())
		vals, _, err := c.Seek(keys, true, time.Now().Add(10*time.Second))
		if err != nil || len(vals) != len(keys) {
			t.Fatalf("seek: %d values, %v", len(vals), err)
		}
		return minorFaults(t, p.PID()) - before
	}
	first := seek()
	second := seek()
	t.Logf("server minor faults: first request %d, second (fresh connection too) %d", first, second)
	// Warm, it touches tens of pages, and up to 256 (one fresh 1 MiB span of the heap) on a
	// loaded machine; cold, well over a thousand.
	if first > 500 {
		t.Fatalf("the first %d-key request of %d-byte values made the server touch %d new pages; want it warm (< 500)", batch, valueSize, first)
	}
}

// TestKeyLimitProcess: the cube binary accepts what Paddle's server accepts
// by default (no per-request key limit), and with --max-keys refuses with
// EREQUEST, which brpc does not retry (2004 ELIMIT is retried four times and
// then becomes zero embeddings in Paddle's client).
func TestKeyLimitProcess(t *testing.T) {
	data := buildData(t, 1000)
	keys := make([]uint64, 150_000)
	for i := range keys {
		keys[i] = uint64(i)
	}
	seek := func(p *cubetest.Server, keys []uint64) ([]proto.Value, error) {
		c, err := client.Dial(p.Addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		vals, _, err := c.Seek(keys, false, time.Now().Add(10*time.Second))
		return vals, err
	}
	if vals, err := seek(startCube(t, data), keys); err != nil || len(vals) != len(keys) || vals[999].Status != 0 || vals[1000].Status != proto.StatusMiss {
		t.Fatalf("150,000 keys with the default flags: %d values, %v", len(vals), err)
	}
	_, err := seek(startCube(t, data, "--max-keys", "100000"), keys)
	var rerr *client.RPCError
	if !errors.As(err, &rerr) || rerr.Code != proto.EREQUEST || !strings.Contains(rerr.Text, "--max-keys") {
		t.Fatalf("150,000 keys with --max-keys 100000: %v; want EREQUEST (%d) naming the flag", err, proto.EREQUEST)
	}
}

// buildData builds a one-shard dictionary of keys 0..n-1 with 40-byte
// values (the key, then zeros) and returns its data directory.
func buildData(tb testing.TB, n int) string {
	tb.Helper()
	data := filepath.Join(tb.TempDir(), "data")
	publishSized(tb, data, "", n, 40, 0)
	return data
}
