package server

import (
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// serveSized serves a shard of keys 0..n-1 with size-byte values, with
// options adjusted by set.
func serveSized(t *testing.T, n, size int, set func(*Options)) (*Server, string) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	publishSized(t, data, "", n, size, 0)
	opts := Options{DataDir: data}
	set(&opts)
	return serveOpts(t, opts)
}

// seekRefused sends keys and wants EREQUEST (1003, which brpc does not
// retry) whose text names want.
func seekRefused(t *testing.T, addr string, keys []uint64, want string) {
	t.Helper()
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.Seek(keys, false, time.Now().Add(20*time.Second))
	var rerr *client.RPCError
	if !errors.As(err, &rerr) || rerr.Code != proto.EREQUEST || !strings.Contains(rerr.Text, want) {
		t.Fatalf("%d keys: %v; want EREQUEST naming %s", len(keys), err, want)
	}
}

func seekOK(t *testing.T, addr string, keys []uint64) {
	t.Helper()
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if vals, _, err := c.Seek(keys, false, time.Now().Add(20*time.Second)); err != nil || len(vals) != len(keys) {
		t.Fatalf("%d keys: %d values, %v", len(keys), len(vals), err)
	}
}

func repeated(key uint64, n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = key
	}
	return keys
}

// TestResponseBytesBounded: a response is never built past
// --max-response-bytes. One present 1 KiB key asked for 2 million times (a
// 4 MB frame) asked for 2 GB before; it is refused, with EREQUEST, counted,
// and what it held is given back.
func TestResponseBytesBounded(t *testing.T) {
	srv, addr := serveSized(t, 100, 1024, func(o *Options) {})
	seekRefused(t, addr, repeated(7, 2_000_000), "--max-response-bytes")
	seekOK(t, addr, repeated(7, 60_000)) // 61 MB: under 64 MiB
	if n := metric(t, addr, "cube_requests_total", `protocol="baidu_std"`, `result="too_large"`); n != 1 {
		t.Fatalf("too_large = %v, want 1", n)
	}
	noneInFlight(t, srv)
}

// TestKeysBoundedByResponseBytes: with no --max-keys, a request may still
// not ask for more keys than a --max-response-bytes response answers (12
// bytes a miss): 32 MiB of absent keys took 771 MiB before.
func TestKeysBoundedByResponseBytes(t *testing.T) {
	_, addr := serveSized(t, 100, 40, func(o *Options) { o.MaxResponseBytes = 1 << 20 })
	limit := (1 << 20) / missSize
	seekRefused(t, addr, repeated(1<<40, limit+1), "more than "+strconv.Itoa(limit)+" keys")
	seekOK(t, addr, repeated(1<<40, limit))
	if n := metric(t, addr, "cube_requests_total", `protocol="baidu_std"`, `result="too_many_keys"`); n != 1 {
		t.Fatalf("too_many_keys = %v, want 1", n)
	}
	body := `{"keys":[` + strings.Repeat("1,", limit) + `1]}`
	resp, err := http.Post("http://"+addr+"/DictService/seek", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP, %d keys: %s, want 400", limit+1, resp.Status)
	}
}

// TestReplyCountsAgainstInflightBytes: keys and responses count against
// --max-inflight-bytes beyond FreeReplyBytes (and beyond a kept buffer's
// capacity, which costs nothing new): with a 2 MiB budget, an 8 MB response
// is refused (EREQUEST, counted as memory) while ordinary requests are
// served, and nothing stays counted.
func TestReplyCountsAgainstInflightBytes(t *testing.T) {
	srv, addr := serveSized(t, 10_000, 1024, func(o *Options) { o.MaxInflightBytes = 2 << 20 })
	keys := make([]uint64, 8000)
	for i := range keys {
		keys[i] = uint64(i)
	}
	seekRefused(t, addr, keys, "--max-inflight-bytes")
	seekOK(t, addr, keys[:100])
	seekOK(t, addr, keys[:1500]) // 1.5 MB: within the budget
	if n := metric(t, addr, "cube_requests_total", `protocol="baidu_std"`, `result="memory"`); n != 1 {
		t.Fatalf("memory = %v, want 1", n)
	}
	resp, err := http.Post("http://"+addr+"/DictService/seek", "application/json",
		strings.NewReader(`{"keys":[`+strings.TrimSuffix(strings.Repeat("5,", 8000), ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("HTTP, an 8 MB response over a 2 MiB budget: %s, want 503", resp.Status)
	}
	noneInFlight(t, srv)
}

// noneInFlight waits until nothing is counted in flight: a connection gives its frame
// buffer back after it has written its answer, which the client may read first.
func noneInFlight(t *testing.T, srv *Server) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); srv.inflight.used.Load() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still counted in flight after the requests", srv.inflight.used.Load())
		}
	}
}
