package build

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
)

func writeInput(t *testing.T, dir string, parts int, kv map[uint64][]byte, keys []uint64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < parts; p++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%05d", p)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := seqfile.NewWriter(f, [16]byte{byte(p)})
		if err != nil {
			t.Fatal(err)
		}
		for i := p; i < len(keys); i += parts {
			if err := w.Append(keys[i], kv[keys[i]]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func value(k uint64, gen byte) []byte {
	v := make([]byte, 40)
	binary.LittleEndian.PutUint64(v, k)
	v[39] = gen
	return v
}

func clock(sec int64) func() time.Time {
	return func() time.Time { return time.Unix(sec, 0) }
}

func checkShards(t *testing.T, root, version string, shards int, want map[uint64][]byte) {
	t.Helper()
	m, err := layout.ReadManifest(root, version)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i := 0; i < shards; i++ {
		p := filepath.Join(root, version, layout.ShardFile(i))
		if err := VerifyShard(p, m.Shards[i]); err != nil {
			t.Fatal(err)
		}
		d, err := dict.Open(p, dict.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d.Range(func(k uint64, v []byte) bool {
			if k%uint64(shards) != uint64(i) {
				t.Errorf("key %d in shard %d", k, i)
			}
			if !bytes.Equal(v, want[k]) {
				t.Errorf("key %d: value %x, want %x", k, v, want[k])
			}
			return true
		})
		total += d.Len()
		if uint64(d.Len()) != m.Shards[i].Count {
			t.Errorf("shard %d: %d entries, manifest says %d", i, d.Len(), m.Shards[i].Count)
		}
		d.Close()
	}
	if total != len(want) {
		t.Fatalf("%d entries in all shards, want %d", total, len(want))
	}
}

func TestBaseThenDelta(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	want := map[uint64][]byte{}
	var keys []uint64
	for k := uint64(0); k < 5000; k++ {
		want[k] = value(k, 0)
		keys = append(keys, k)
	}
	writeInput(t, filepath.Join(dir, "base"), 3, want, keys)
	m, err := Build(Options{Input: filepath.Join(dir, "base"), Output: out, Shards: 4, Dict: "test_dict", Now: clock(1700000000)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != "1700000000" || m.Records != 5000 {
		t.Fatalf("manifest %+v", m)
	}
	checkShards(t, out, m.Version, 4, want)
	ents, _ := os.ReadDir(filepath.Join(out, m.Version))
	if len(ents) != 1+2*4 { // manifest + per shard .cube and .json; no spill files left
		t.Fatalf("version dir holds %d entries", len(ents))
	}

	// Patch: overwrite every 10th key, add new keys.
	patch := map[uint64][]byte{}
	var pkeys []uint64
	for k := uint64(0); k < 7000; k += 10 {
		patch[k] = value(k, 1)
		pkeys = append(pkeys, k)
	}
	writeInput(t, filepath.Join(dir, "patch"), 1, patch, pkeys)
	d, err := Build(Options{Input: filepath.Join(dir, "patch"), Output: out, Shards: 4, Dict: "test_dict", Base: m.Version, Now: clock(1700000100)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "1700000000_1700000100" || d.Depend != "1700000000" || d.Mode != "delta" {
		t.Fatalf("delta manifest %+v", d)
	}
	for k, v := range patch {
		want[k] = v
	}
	checkShards(t, out, d.Version, 4, want)
	if v, _ := layout.Newest(out, 2); v != d.Version {
		t.Fatalf("Newest = %q, want %q", v, d.Version)
	}

	if _, err := Build(Options{Input: filepath.Join(dir, "patch"), Output: out, Shards: 3, Dict: "test_dict", Base: m.Version}); err == nil {
		t.Fatal("delta with a different shard count was accepted")
	}
}

func TestBadInputPublishesNothing(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	kv := map[uint64][]byte{1: value(1, 0), 2: value(2, 0)}
	writeInput(t, in, 2, kv, []uint64{1, 2})
	// Truncate one part file in the middle of a record.
	p := filepath.Join(in, "part-00001")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-5], 0o644)
	out := filepath.Join(dir, "out")
	_, err := Build(Options{Input: in, Output: out, Shards: 2, Dict: "d"})
	if err == nil || !strings.Contains(err.Error(), "part-00001") || !strings.Contains(err.Error(), "at byte") {
		t.Fatalf("err = %v, want one naming the file and offset", err)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 0 {
		t.Fatalf("output holds %v after a failed build", ents)
	}
}

// TestEmptyInput: an input without a single record fails with ErrEmptyInput
// (so that the transfer can tell it from a broken file) and publishes
// nothing, unless AllowEmpty; a delta with an empty patch likewise.
func TestEmptyInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeInput(t, in, 2, nil, nil) // two header-only part files
	out := filepath.Join(dir, "out")
	opts := Options{Input: in, Output: out, Shards: 2, Dict: "d", Now: clock(1700000000)}
	if _, err := Build(opts); !errors.Is(err, ErrEmptyInput) || !strings.Contains(err.Error(), "2 files") {
		t.Fatalf("err = %v, want ErrEmptyInput", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("output holds %v after a refused build", ents)
	}
	opts.AllowEmpty = true
	m, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	checkShards(t, out, m.Version, 2, nil)
	opts.AllowEmpty, opts.Base, opts.Now = false, m.Version, clock(1700000100)
	if _, err := Build(opts); !errors.Is(err, ErrEmptyInput) {
		t.Fatalf("empty patch: err = %v, want ErrEmptyInput", err)
	}
}

// BenchmarkBuild reports input MB/s for 1M 40-byte records into 2 shards.
func BenchmarkBuild(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	f, _ := os.Create(filepath.Join(in, "part-0"))
	w, _ := seqfile.NewWriter(f, [16]byte{9})
	v := make([]byte, 40)
	for k := uint64(0); k < 1_000_000; k++ {
		w.Append(k, v)
	}
	w.Close()
	st, _ := f.Stat()
	f.Close()
	b.SetBytes(st.Size())
	for i := 0; b.Loop(); i++ {
		if _, err := Build(Options{Input: in, Output: filepath.Join(dir, "out"), Shards: 2, Dict: "d", Version: fmt.Sprint(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBigBuildMemory builds 10M keys x 40 B and checks that the builder's
// peak heap stays within twice the largest shard's index. It takes a while
// and ~1.5 GB of disk, so it runs only with CUBE_BIG_BUILD=1; the figures
// it logs are the ones quoted in cube/README.md.
func TestBigBuildMemory(t *testing.T) {
	if os.Getenv("CUBE_BIG_BUILD") == "" {
		t.Skip("set CUBE_BIG_BUILD=1 to build 10M keys")
	}
	const n = 10_000_000
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	for p := 0; p < 4; p++ {
		f, _ := os.Create(filepath.Join(in, fmt.Sprintf("part-%05d", p)))
		w, _ := seqfile.NewWriter(f, [16]byte{byte(p)})
		v := make([]byte, 40)
		for k := uint64(p); k < n; k += 4 {
			binary.LittleEndian.PutUint64(v, k)
			w.Append(k, v)
		}
		w.Close()
		f.Close()
	}
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	start := time.Now()
	m, err := Build(Options{Input: in, Output: filepath.Join(dir, "out"), Shards: 1, Dict: "big"})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	index := m.Shards[0].IndexSize
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t.Logf("10M keys: input %d B in %.2fs = %.0f MB/s; index %d B; peak heap in use %d B (%.2fx index); max RSS of the test process %d KiB (%.2fx index)",
		m.InputBytes, el.Seconds(), float64(m.InputBytes)/1e6/el.Seconds(), index, peak.Load(), float64(peak.Load())/float64(index),
		ru.Maxrss, float64(ru.Maxrss*1024)/float64(index))
	if peak.Load() > uint64(2*index) {
		t.Fatalf("peak heap %d B exceeds twice the index (%d B)", peak.Load(), index)
	}
}
