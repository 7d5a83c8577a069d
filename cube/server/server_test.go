package server

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// serve builds one shard of n keys with 40-byte values and serves it on a
// loopback port.
func serve(tb testing.TB, n int) (*Server, string) {
	return serveWith(tb, n, nil)
}

// serveWith is serve with options adjusted by set (if not nil).
func serveWith(tb testing.TB, n int, set func(*Options)) (*Server, string) {
	tb.Helper()
	opts := Options{DataDir: buildData(tb, n)}
	if set != nil {
		set(&opts)
	}
	return serveOpts(tb, opts)
}

// serveOpts serves opts.DataDir on a loopback port until the test ends.
func serveOpts(tb testing.TB, opts Options) (*Server, string) {
	tb.Helper()
	srv, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return srv, cubetest.ServeLoopback(tb, srv)
}

// dial connects to addr; the connection is closed when the test ends.
func dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// rawSeek sends one request frame and reads the response frame.
func rawSeek(tb testing.TB, c net.Conn, keys []uint64, corr int64, out, in []byte) ([]byte, []byte, []proto.Value) {
	meta := proto.RpcMeta{HasRequest: true, Service: []byte(proto.DictServiceFull), Method: []byte("seek"), CorrelationID: corr}
	out, start, ms := proto.BeginFrame(out[:0], &meta)
	out = proto.AppendDictRequest(out, keys, false)
	out = proto.FinishFrame(out, start, ms)
	if _, err := c.Write(out); err != nil {
		tb.Fatal(err)
	}
	var f proto.Frame
	var err error
	if in, err = proto.ReadFrame(c, in, 1<<30, &f); err != nil {
		tb.Fatal(err)
	}
	if f.Meta.CorrelationID != corr {
		tb.Fatalf("correlation_id %d, want %d", f.Meta.CorrelationID, corr)
	}
	vals, _, err := proto.DecodeDictResponse(f.Payload, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return out, in, vals
}

func TestSeekValues(t *testing.T) {
	_, addr := serve(t, 1000)
	c := dial(t, addr)
	_, _, vals := rawSeek(t, c, []uint64{3, 5000, 999}, 42, nil, nil)
	if len(vals) != 3 || binary.LittleEndian.Uint64(vals[0].Value) != 3 || vals[1].Status != proto.StatusMiss ||
		len(vals[1].Value) != 0 || binary.LittleEndian.Uint64(vals[2].Value) != 999 {
		t.Fatalf("values %+v", vals)
	}
}

// BenchmarkRPCSeek1000 measures one connection doing 1,000-key seeks over
// loopback against an in-process server; compare keys/s with the
// dictionary's BenchmarkGet.
func BenchmarkRPCSeek1000(b *testing.B) {
	const n = 1_000_000
	_, addr := serve(b, n)
	c := dial(b, addr)
	keys := make([]uint64, 1000)
	var out, in []byte
	x := uint64(1)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		for j := range keys {
			x = x*6364136223846793005 + 1442695040888963407
			keys[j] = (x >> 20) % n
		}
		out, in, _ = rawSeek(b, c, keys, int64(i+1), out, in)
	}
	b.ReportMetric(float64(b.N*len(keys))/time.Since(start).Seconds(), "keys/s")
}

// TestSwapRace hammers seek while another goroutine loads, switches and
// unloads versions as fast as it can. A dictionary unmapped under a request
// would crash the test; run it with -race too.
func TestSwapRace(t *testing.T) {
	srv, _ := serve(t, 3000)
	dataDir := srv.opts.DataDir
	for _, v := range []string{"2000000000", "2000000001"} {
		in := filepath.Join(t.TempDir(), "in")
		os.MkdirAll(in, 0o755)
		f, _ := os.Create(filepath.Join(in, "part-0"))
		w, _ := seqfile.NewWriter(f, [16]byte{2})
		val := make([]byte, 40)
		for k := 0; k < 3000; k++ {
			binary.LittleEndian.PutUint64(val, uint64(k))
			val[39] = v[9]
			w.Append(uint64(k), val)
		}
		w.Close()
		f.Close()
		if _, err := build.Build(build.Options{Input: in, Output: dataDir, Shards: 1, Dict: "d", Version: v}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan error, 4)
	for g := 0; g < 3; g++ {
		go func() {
			keys := []uint64{1, 2, 2999, 5000}
			var out []byte
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				var err error
				if out, err = srv.seek(out[:0], keys, true, &reply{budget: &srv.inflight}); err != nil {
					done <- err
					return
				}
				vals, _, err := proto.DecodeDictResponse(out, nil)
				if err != nil || len(vals) != 4 || vals[3].Status != proto.StatusMiss {
					done <- err
					return
				}
				for i := 0; i < 3; i++ {
					if binary.LittleEndian.Uint64(vals[i].Value) != keys[i] || vals[i].Value[39] != vals[0].Value[39] {
						t.Errorf("inconsistent response %x", vals)
						done <- nil
						return
					}
				}
			}
		}()
	}
	go func() {
		for i := 0; i < 200; i++ {
			srv.store.mu.Lock()
			v := []string{"/2000000000", "/2000000001"}[i%2]
			if err := srv.store.bgLoad(v); err != nil {
				srv.store.mu.Unlock()
				done <- err
				return
			}
			srv.store.bgSwitch()
			if i%3 == 0 {
				srv.store.bgUnload()
			}
			srv.store.mu.Unlock()
		}
		done <- nil
	}()
	if err := <-done; err != nil { // the swapper finishes first
		t.Fatal(err)
	}
	close(stop)
	for g := 0; g < 3; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestShutdownFinishesPipelinedRequests sends 20 pipelined requests, starts
// a graceful shutdown after the first answer and expects all 20 answers
// before the connection closes.
func TestShutdownFinishesPipelinedRequests(t *testing.T) {
	srv, addr := serve(t, 100)
	c := dial(t, addr)
	var frames []byte
	for i := 1; i <= 20; i++ {
		meta := proto.RpcMeta{HasRequest: true, Service: []byte(proto.DictServiceShort), Method: []byte("seek"), CorrelationID: int64(i)}
		frames = proto.AppendFrame(frames, &meta, proto.AppendDictRequest(nil, []uint64{uint64(i)}, false))
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var f proto.Frame
	var buf []byte
	var err error
	for i := 1; i <= 20; i++ {
		if buf, err = proto.ReadFrame(c, buf, 1<<20, &f); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if f.Meta.CorrelationID != int64(i) {
			t.Fatalf("response %d has correlation_id %d", i, f.Meta.CorrelationID)
		}
		if i == 1 {
			go srv.Shutdown(context.Background())
		}
	}
	if _, err := proto.ReadFrame(c, buf, 1<<20, &f); err == nil {
		t.Fatal("connection still open after shutdown")
	}
}
