package dict

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// build writes entries (in order, later ones win) to a dictionary in a temp
// dir and returns its path.
func build(t testing.TB, entries [][2]any) (string, Stats) {
	t.Helper()
	return buildWith(t, func(add func(uint64, []byte)) {
		for _, e := range entries {
			add(e[0].(uint64), e[1].([]byte))
		}
	})
}

// buildWith writes the entries fill adds to a dictionary in a temp dir and
// returns its path.
func buildWith(t testing.TB, fill func(add func(key uint64, value []byte))) (string, Stats) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.cube")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	fill(func(key uint64, value []byte) {
		if err := w.Add(key, value); err != nil {
			t.Fatal(err)
		}
	})
	st, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return path, st
}

func goldenEntries() [][2]any {
	return [][2]any{
		{uint64(0), []byte("zero")},
		{uint64(1), []byte{}},
		{uint64(42), []byte("forty-two")},
		{uint64(1 << 63), bytes.Repeat([]byte{0xab}, 200)}, // two-byte uvarint length
		{uint64(7), []byte("first")},
		{uint64(7), []byte("second wins")},
		{^uint64(0), []byte("max")},
	}
}

// goldenInlineEntries have values of one size: the inline layout, the key
// 2^64-1 in the extra slot.
func goldenInlineEntries() [][2]any {
	return [][2]any{
		{uint64(0), []byte("zero....")},
		{uint64(42), []byte("fortytwo")},
		{uint64(1 << 63), []byte{0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab}},
		{uint64(7), []byte("first...")},
		{uint64(7), []byte("second..")},
		{^uint64(0), []byte("max.....")},
	}
}

// goldens are the files TestGolden keeps: what the writer makes of each
// entry list, byte for byte. small.v1.cube is what the version 1 writer
// made of goldenEntries, and the *.v2-unordered.cube files what the version 2
// writer made before it ordered its index (flagOrdered): never rewritten,
// they must keep opening.
var goldens = []struct {
	file    string
	entries func() [][2]any
	inline  int
}{
	{"small.v2.cube", goldenEntries, 0},
	{"inline.v2.cube", goldenInlineEntries, 8},
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.file, func(t *testing.T) {
			path, st := build(t, g.entries())
			if st.Inline != g.inline {
				t.Fatalf("layout: inline value size %d, want %d", st.Inline, g.inline)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", g.file)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("writer output differs from %s (format change? bump FormatCurrent, keep the old golden readable, and run -update)", golden)
			}
			checkGolden(t, golden, g.entries())
		})
	}
	for name, entries := range map[string]func() [][2]any{
		"small.v1.cube": goldenEntries, "small.v2-unordered.cube": goldenEntries, "inline.v2-unordered.cube": goldenInlineEntries,
	} {
		t.Run(name, func(t *testing.T) { checkGolden(t, filepath.Join("testdata", name), entries()) })
	}
}

// checkGolden opens a golden file every way a reader may and looks up
// every entry of it and a key it lacks.
func checkGolden(t *testing.T, golden string, entries [][2]any) {
	t.Helper()
	wantMap := map[uint64][]byte{}
	for _, e := range entries {
		wantMap[e[0].(uint64)] = e[1].([]byte)
	}
	for _, opts := range []Options{{}, {VerifyOnTouch: true}, {InMemory: true}, {SkipVerify: true}} {
		d, err := Open(golden, opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		if d.Len() != len(wantMap) {
			t.Fatalf("Len = %d, want %d", d.Len(), len(wantMap))
		}
		for k, v := range wantMap {
			got, ok := d.Get(nil, k)
			if !ok || !bytes.Equal(got, v) {
				t.Errorf("%+v: Get(%d) = %q, %v; want %q", opts, k, got, ok, v)
			}
		}
		if _, ok := d.Get(nil, 3); ok {
			t.Error("Get(3) found a key that was never added")
		}
		seen := 0
		d.Range(func(k uint64, v []byte) bool {
			if seen++; !bytes.Equal(wantMap[k], v) {
				t.Errorf("Range: %d = %q, want %q", k, v, wantMap[k])
			}
			return true
		})
		if seen != len(wantMap) {
			t.Errorf("Range saw %d entries, want %d", seen, len(wantMap))
		}
		d.Close()
	}
}

func TestOpenErrors(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type errCase struct {
		name string
		data []byte
		want error
	}
	var cases []errCase
	for _, name := range []string{"small.v1.cube", "small.v2.cube", "inline.v2.cube"} {
		good := read(name)
		mutate := func(f func(b []byte)) []byte {
			b := bytes.Clone(good)
			f(b)
			return b
		}
		hs := headerSize
		if name == "small.v1.cube" {
			hs = headerSizeV1
		}
		cases = append(cases,
			errCase{name + "/empty", nil, ErrTruncated},
			errCase{name + "/short header", good[:50], ErrTruncated},
			errCase{name + "/magic", mutate(func(b []byte) { b[0] = 'X' }), ErrBadMagic},
			errCase{name + "/version", mutate(func(b []byte) { b[8] = 3 }), ErrVersionMismatch},
			errCase{name + "/header crc", mutate(func(b []byte) { b[16]++ }), ErrChecksum},
			errCase{name + "/truncated body", good[:len(good)-1], ErrTruncated},
			errCase{name + "/last byte flipped", mutate(func(b []byte) { b[len(b)-3] ^= 1 }), ErrChecksum},
			errCase{name + "/first body byte flipped", mutate(func(b []byte) { b[hs] ^= 0x80 }), ErrChecksum},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenBytes(c.data, Options{})
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			// The same through the file path, which also maps and unmaps.
			p := filepath.Join(t.TempDir(), "bad.cube")
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(p, Options{}); !errors.Is(err, c.want) {
				t.Fatalf("Open: err = %v, want %v", err, c.want)
			}
		})
	}
}

// TestRandom is a property test: random keys, sizes and overwrites must read
// back exactly. It prints its seed so a failure can be replayed.
func TestRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CUBE_DICT_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (set CUBE_DICT_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	want := map[uint64][]byte{}
	var entries [][2]any
	for i := 0; i < 20000; i++ {
		k := rng.Uint64N(30000) * 7 // shared residue, as within a shard
		if rng.IntN(10) == 0 {
			k = rng.Uint64()
		}
		v := make([]byte, rng.IntN(60))
		if rng.IntN(100) == 0 {
			v = make([]byte, 5000+rng.IntN(70000)) // values of any size
		}
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		want[k] = v
		entries = append(entries, [2]any{k, v})
	}
	path, st := build(t, entries)
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if st.Count != uint64(len(want)) || d.Len() != len(want) {
		t.Fatalf("count %d/%d, want %d", st.Count, d.Len(), len(want))
	}
	for k, v := range want {
		got, ok := d.Get(nil, k)
		if !ok || !bytes.Equal(got, v) {
			t.Fatalf("Get(%d): ok=%v len=%d, want len=%d", k, ok, len(got), len(v))
		}
	}
	for i := 0; i < 10000; i++ {
		k := rng.Uint64()
		if _, in := want[k]; !in && d.Has(k) {
			t.Fatalf("Has(%d) = true for a missing key", k)
		}
	}
	batch := make([]uint64, 0, len(want)+100)
	for k := range want {
		batch = append(batch, k, rng.Uint64())
	}
	d.LookupBatch(batch, func(i int, v []byte, ok bool) {
		w, in := want[batch[i]]
		if ok != in || !bytes.Equal(v, w) {
			t.Fatalf("LookupBatch key %d: ok=%v, want %v", batch[i], ok, in)
		}
	})
	seen := 0
	d.Range(func(k uint64, v []byte) bool {
		seen++
		if !bytes.Equal(want[k], v) {
			t.Fatalf("Range: key %d has wrong value", k)
		}
		return true
	})
	if seen != len(want) {
		t.Fatalf("Range saw %d entries, want %d", seen, len(want))
	}
}

func TestEmpty(t *testing.T) {
	path, _ := build(t, nil)
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, ok := d.Get(nil, 0); ok || d.Len() != 0 {
		t.Fatal("empty dictionary returned a value")
	}
}

func TestGetZeroAlloc(t *testing.T) {
	d := openBench(t, 10000, 40)
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		buf, _ = d.Get(buf[:0], 1234)
		_, _ = d.Get(buf[:0], 99999999)
	})
	if allocs != 0 {
		t.Fatalf("Get allocates %.1f times per call", allocs)
	}
}

// TestOverhead reports the per-entry overhead of the format for the
// reference workload (1M keys x 40 B) and fails if it regresses.
func TestOverhead(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1M keys")
	}
	const n, vs = benchKeys, benchValue
	d := openBench(t, n, vs)
	over := float64(d.Size()-int64(n)*(8+vs)) / n
	t.Logf("1M x %d B: file %d bytes, %.2f bytes/entry overhead beyond key+value", vs, d.Size(), over)
	if over > 13 {
		t.Fatalf("per-entry overhead %.2f B > 13 B", over)
	}
}

func openBench(t testing.TB, n, valueSize int) *Dict {
	return openBenchOpts(t, n, valueSize, Options{})
}

func openBenchOpts(t testing.TB, n, valueSize int, opts Options) *Dict {
	t.Helper()
	path, _ := buildWith(t, func(add func(uint64, []byte)) {
		v := make([]byte, valueSize)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(v, uint64(i))
			add(uint64(i), v)
		}
	})
	d, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// The benchmarks' reference workload: benchKeys keys of benchValue bytes each.
const benchKeys, benchValue = 1_000_000, 40

// keyStream draws pseudo-random keys below benchKeys (an LCG, one per goroutine: no lock,
// no allocation).
type keyStream uint64

func newKeyStream() keyStream { return keyStream(rand.Uint32()) }

func (k *keyStream) next() uint64 {
	*k = *k*6364136223846793005 + 1442695040888963407
	return uint64(*k>>20) % benchKeys
}

// runParallel reports allocations and bytesPerOp, and runs worker on every goroutine.
func runParallel(b *testing.B, bytesPerOp int64, worker func(pb *testing.PB)) {
	b.ReportAllocs()
	b.SetBytes(bytesPerOp)
	b.ResetTimer()
	b.RunParallel(worker)
}

// benchModes runs worker over the reference dictionary, mapped (mmap) and copied into
// memory (inmemory).
func benchModes(b *testing.B, bytesPerOp int64, worker func(d *Dict, pb *testing.PB)) {
	for _, m := range []struct {
		name string
		opts Options
	}{{"mmap", Options{}}, {"inmemory", Options{InMemory: true}}} {
		b.Run(m.name, func(b *testing.B) {
			d := openBenchOpts(b, benchKeys, benchValue, m.opts)
			runParallel(b, bytesPerOp, func(pb *testing.PB) { worker(d, pb) })
		})
	}
}

// BenchmarkGet measures lookups in a 1M x 40 B dictionary; compare with
// BenchmarkGoMap, the obvious in-heap competitor.
func BenchmarkGet(b *testing.B) {
	benchModes(b, benchValue, func(d *Dict, pb *testing.PB) {
		buf := make([]byte, 0, 64)
		k := newKeyStream()
		for pb.Next() {
			buf, _ = d.Get(buf[:0], k.next())
		}
	})
}

// BenchmarkLookupBatch is BenchmarkGet through LookupBatch, 1,000 keys per
// call, as the server uses it.
func BenchmarkLookupBatch(b *testing.B) {
	benchModes(b, benchValue*1000, func(d *Dict, pb *testing.PB) {
		keys := make([]uint64, 1000)
		k := newKeyStream()
		buf := make([]byte, 0, 64<<10)
		for pb.Next() {
			for i := range keys {
				keys[i] = k.next()
			}
			buf = buf[:0]
			d.LookupBatch(keys, func(_ int, v []byte, _ bool) { buf = append(buf, v...) })
		}
	})
}

func BenchmarkGoMap(b *testing.B) {
	m := make(map[uint64][]byte, benchKeys)
	for i := 0; i < benchKeys; i++ {
		m[uint64(i)] = make([]byte, benchValue)
	}
	runParallel(b, benchValue, func(pb *testing.PB) {
		buf := make([]byte, 0, 64)
		k := newKeyStream()
		for pb.Next() {
			buf = append(buf[:0], m[k.next()]...)
		}
	})
}

// FuzzOpen feeds arbitrary bytes to the opener; whatever it accepts must be
// safe to Get and Range.
func FuzzOpen(f *testing.F) {
	for _, name := range []string{"small.v1.cube", "small.v2.cube", "inline.v2.cube", "small.v2-unordered.cube", "inline.v2-unordered.cube"} {
		good, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(good)
		f.Add(good[:headerSize])
	}
	f.Add([]byte("CUBEDICT"))
	keys := []uint64{0, 1, 7, 42, 1 << 63, ^uint64(0)}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Random bytes rarely pass the checksums, which would leave the
		// structural checks and the lookups unexplored: also try the input
		// with its checksums recomputed.
		for _, img := range [][]byte{data, fixChecksums(bytes.Clone(data))} {
			for _, opts := range []Options{{}, {SkipVerify: true}, {VerifyOnTouch: true}} {
				d, err := OpenBytes(img, opts)
				if err != nil {
					continue
				}
				// Whatever the bytes, a lookup ends and stays in bounds
				// (version 1 files are read only once checked whole, as
				// Open does); a block that does not match its checksum
				// is refused with a *CorruptError panic.
				if d.Version() == FormatV1 && opts.SkipVerify {
					continue
				}
				readAll(t, d, keys)
			}
		}
	})
}

// readAll reads d every way, recovering the *CorruptError panics of blocks
// that do not match their checksums.
func readAll(t *testing.T, d *Dict, keys []uint64) {
	guard := func(read func()) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(*CorruptError); !ok {
					t.Fatalf("panic: %v", r)
				}
			}
		}()
		read()
	}
	guard(func() { d.Range(func(uint64, []byte) bool { return true }) })
	guard(func() { d.LookupBatch(keys, func(int, []byte, bool) {}) })
	for _, k := range keys {
		guard(func() { d.Get(nil, k) })
	}
	_ = d.VerifyPending()
}

// fixChecksums rewrites the checksums of a dictionary image whose header
// offsets are in range; other inputs are returned unchanged.
func fixChecksums(b []byte) []byte {
	if len(b) < headerSizeV1 {
		return b
	}
	le := binary.LittleEndian
	n := uint64(len(b))
	if le.Uint32(b[8:]) == FormatV2 {
		if len(b) < headerSize {
			return b
		}
		var h header
		h.indexOffset, h.inline, h.slotSize, h.slots = le.Uint64(b[32:]), le.Uint32(b[68:]), le.Uint32(b[64:]), le.Uint64(b[24:])
		shift := le.Uint32(b[80:])
		if h.slots > 1<<40 || h.slotSize > 1<<21 || h.indexOffset > n || shift < minBlockShift || shift > maxShift {
			return b
		}
		end := h.blockTableOffset()
		if end < headerSize || end > n {
			return b
		}
		blocks := blocksFor(end, shift)
		if 4*blocks > n-end {
			return b
		}
		for i := range blocks {
			lo := headerSize + i<<shift
			le.PutUint32(b[end+4*i:], crc32.Checksum(b[lo:min(lo+1<<shift, end)], castagnoli))
		}
		le.PutUint64(b[88:], blocks)
		le.PutUint32(b[96:], crc32.Checksum(b[end:end+4*blocks], castagnoli))
		le.PutUint32(b[124:], crc32.Checksum(b[:124], castagnoli))
		return b
	}
	idxOff, valOff, valSize := le.Uint64(b[32:]), le.Uint64(b[40:]), le.Uint64(b[48:])
	if valOff > n || valSize > n-valOff || idxOff > n {
		return b
	}
	le.PutUint32(b[64:], crc32.Checksum(b[idxOff:], castagnoli))
	le.PutUint32(b[68:], crc32.Checksum(b[valOff:valOff+valSize], castagnoli))
	le.PutUint32(b[92:], crc32.Checksum(b[:92], castagnoli))
	return b
}
