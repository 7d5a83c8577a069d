package dict

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

type entry struct {
	key   uint64
	value []byte
}

// buildChunked writes entries with chunks of chunk slots and returns the
// file's bytes and stats.
func buildChunked(t *testing.T, chunk uint64, entries []entry) ([]byte, Stats) {
	t.Helper()
	saved := chunkSlots
	chunkSlots = chunk
	defer func() { chunkSlots = saved }()
	path := filepath.Join(t.TempDir(), "d.cube")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := w.Add(e.key, e.value); err != nil {
			t.Fatal(err)
		}
	}
	st, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	size := -1 // every value's size, if they have one and it fits a slot
	for i, e := range entries {
		if i == 0 && len(e.value) > 0 && len(e.value) <= MaxInlineValue {
			size = len(e.value)
		} else if len(e.value) != size {
			size = -1
			break
		}
	}
	if want := max(size, 0); st.Inline != want {
		t.Fatalf("inline value size %d, want %d", st.Inline, want)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) > 0 {
		t.Fatalf("Finish left %v behind", left)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, st
}

// checkAgainstMap opens the file (checksums, checkIndex) and looks every key
// of entries up, the last value added winning.
func checkAgainstMap(t *testing.T, data []byte, entries []entry) {
	t.Helper()
	want := map[uint64][]byte{}
	for _, e := range entries {
		want[e.key] = e.value
	}
	path := filepath.Join(t.TempDir(), "check.cube")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", d.Len(), len(want))
	}
	for k, v := range want {
		if got, ok := d.Get(nil, k); !ok || !bytes.Equal(got, v) {
			t.Fatalf("Get(%d) = %q, %v; want %q", k, got, ok, v)
		}
	}
}

// slotLayout describes where a file's index put its keys relative to their home
// slots and to chunks of chunk slots.
type slotLayout struct {
	wrapped int // keys stored before their home slot: they wrapped around the end
	carried int // keys stored in a later chunk than their home slot's
	at      map[uint64]uint64
}

func indexLayout(t *testing.T, data []byte, chunk uint64) slotLayout {
	t.Helper()
	d, err := OpenBytes(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := slotLayout{at: map[uint64]uint64{}}
	for i := uint64(0); i < d.slots; i++ {
		s := d.view.Load().index[i*d.slotSize:]
		key := binary.LittleEndian.Uint64(s)
		if d.inline && key == emptyKey || !d.inline && binary.LittleEndian.Uint64(s[8:]) == 0 {
			continue
		}
		home := homeSlot(key, d.slots)
		l.at[key] = i
		if i < home {
			l.wrapped++
		}
		if i/chunk != home/chunk {
			l.carried++
		}
	}
	return l
}

// crowdedKeys returns n random keys whose home slots all fall in the last
// tenth of the table, whatever its size: their probes pile up at the end,
// run across many chunk boundaries and wrap around to slot 0.
func crowdedKeys(rng *rand.Rand, n int) []uint64 {
	keys := make([]uint64, 0, n)
	for len(keys) < n {
		if k := rng.Uint64(); fmix64(k) >= math.MaxUint64/10*9 {
			keys = append(keys, k)
		}
	}
	return keys
}

// value returns a value for tag; forEachLayout makes their sizes vary
// (the referenced layout) or not (the inline one).
var value func(rng *rand.Rand, tag string) []byte

// forEachLayout runs test once with values of several sizes and once with
// values of one size.
func forEachLayout(t *testing.T, test func(t *testing.T, inline bool)) {
	defer func() { value = nil }()
	for _, inline := range []bool{false, true} {
		value = func(rng *rand.Rand, tag string) []byte {
			v := fmt.Appendf(nil, "%s-%d", tag, rng.Uint64N(1000))
			if inline {
				v = fmt.Appendf(nil, "%-16s", v)
			}
			return v
		}
		t.Run(map[bool]string{false: "referenced", true: "inline"}[inline], func(t *testing.T) { test(t, inline) })
	}
}

// oneChunk is a chunk size no test table reaches.
const oneChunk = 1 << 40

// TestChunkedBuildIsTheOneChunkBuild builds the same input with chunks of a
// few slots and with one chunk: the files must be byte for byte the same and
// read back as the input, the last value of a key winning.
func TestChunkedBuildIsTheOneChunkBuild(t *testing.T) {
	forEachLayout(t, func(t *testing.T, inline bool) {
		rng := rand.New(rand.NewPCG(1, 2))
		var random []entry
		for range 3000 {
			k := rng.Uint64N(2500) * 7 // duplicates among them
			random = append(random, entry{k, value(rng, "r")})
		}

		// Crowded keys, then a third of them again with new values: their
		// first copies were carried into later chunks or wrapped, so the new
		// values must find and replace carried entries.
		keys := crowdedKeys(rng, 400)
		var crowded []entry
		for _, k := range keys {
			crowded = append(crowded, entry{k, value(rng, "first")})
		}
		for _, k := range keys {
			if rng.IntN(3) == 0 {
				crowded = append(crowded, entry{k, value(rng, "second")})
			}
		}

		for _, c := range []struct {
			name    string
			entries []entry
			crowded bool
		}{
			{"empty", nil, false},
			{"one key", []entry{{42, []byte("v")}}, false},
			{"random with duplicates", random, false},
			{"crowded with carried duplicates", crowded, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				want, _ := buildChunked(t, oneChunk, c.entries)
				checkAgainstMap(t, want, c.entries)
				for _, chunk := range []uint64{1, 2, 3, 5, 16, 100} {
					got, _ := buildChunked(t, chunk, c.entries)
					checkAgainstMap(t, got, c.entries)
					if !bytes.Equal(got, want) {
						t.Fatalf("chunks of %d slots: file differs from the one-chunk build", chunk)
					}
					if !c.crowded {
						continue
					}
					l := indexLayout(t, got, chunk)
					if l.wrapped == 0 || l.carried == 0 {
						t.Fatalf("chunks of %d slots: %d keys wrapped, %d carried: the test does not cross chunks", chunk, l.wrapped, l.carried)
					}
				}
			})
		}
	})
}

// TestChunkedBuildCarriedDuplicates checks the case the merge by ref exists
// for: a key carried out of its home chunk, added again later, must keep the
// later value and a single slot.
func TestChunkedBuildCarriedDuplicates(t *testing.T) {
	forEachLayout(t, func(t *testing.T, inline bool) {
		rng := rand.New(rand.NewPCG(3, 4))
		keys := crowdedKeys(rng, 300)
		var entries []entry
		for _, k := range keys {
			entries = append(entries, entry{k, value(rng, "first")})
		}
		const chunk = 4
		first, _ := buildChunked(t, chunk, entries)
		l := indexLayout(t, first, chunk)
		var carried []uint64
		d, err := OpenBytes(first, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if l.at[k]/chunk != homeSlot(k, d.slots)/chunk {
				carried = append(carried, k)
			}
		}
		if len(carried) < 10 {
			t.Fatalf("only %d keys carried across chunks", len(carried))
		}
		for _, k := range carried {
			entries = append(entries, entry{k, value(rng, "second")})
		}
		got, st := buildChunked(t, chunk, entries)
		checkAgainstMap(t, got, entries)
		if st.Count != uint64(len(keys)) {
			t.Fatalf("Count = %d, want %d", st.Count, len(keys))
		}
		if want, _ := buildChunked(t, oneChunk, entries); !bytes.Equal(got, want) {
			t.Fatal("file differs from the one-chunk build")
		}
	})
}

// TestChunkedBuildOverwrites overwrites most keys many times: the build
// shrinks the table to a fresh build's size and compacts the values, both
// a chunk at a time.
func TestChunkedBuildOverwrites(t *testing.T) {
	forEachLayout(t, func(t *testing.T, inline bool) {
		rng := rand.New(rand.NewPCG(5, 6))
		var entries []entry
		for round := range 8 {
			for k := range uint64(500) {
				if round == 0 || k%10 != 0 {
					entries = append(entries, entry{k * 3, value(rng, fmt.Sprint("round", round))})
				}
			}
		}
		want, wantSt := buildChunked(t, oneChunk, entries)
		checkAgainstMap(t, want, entries)
		if wantSt.Slots != slotsFor(500) {
			t.Fatalf("Slots = %d, want %d (a fresh build's)", wantSt.Slots, slotsFor(500))
		}
		live := map[uint64]int{}
		for _, e := range entries {
			live[e.key] = len(e.value) + 1
		}
		var liveSize int64
		for _, n := range live {
			liveSize += int64(n)
		}
		if inline {
			liveSize = 0 // the values are in the slots
		}
		if wantSt.ValuesSize != liveSize {
			t.Fatalf("ValuesSize = %d, want %d (live values only)", wantSt.ValuesSize, liveSize)
		}
		for _, chunk := range []uint64{1, 7, 64} {
			got, st := buildChunked(t, chunk, entries)
			checkAgainstMap(t, got, entries)
			if st != wantSt {
				t.Fatalf("chunks of %d: stats %+v, want %+v", chunk, st, wantSt)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("chunks of %d slots: file differs from the one-chunk build", chunk)
			}
		}
	})
}

// TestFinishMemoryIsBounded builds 2M keys with the default chunk size and
// checks that Finish allocated far less than the index it wrote: it holds
// one chunk, not the table.
func TestFinishMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 2M keys")
	}
	const n = 2_000_000
	path := filepath.Join(t.TempDir(), "big.cube")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	var v [8]byte
	for i := range uint64(n) {
		binary.LittleEndian.PutUint64(v[:], i)
		if err := w.Add(i*0x9e3779b97f4a7c15, v[:]); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("Finish of %d keys allocated %.1f MiB for a %.1f MiB index", n, float64(alloc)/(1<<20), float64(st.IndexSize)/(1<<20))
	if limit := uint64(indexChunkBytes + partitionBufBytes + 1<<20); alloc > limit || alloc > uint64(st.IndexSize)/2 {
		t.Fatalf("Finish allocated %d bytes, want at most %d and under half the %d-byte index", alloc, limit, st.IndexSize)
	}
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, i := range []uint64{0, 1, n / 2, n - 1} {
		if got, ok := d.Get(nil, i*0x9e3779b97f4a7c15); !ok || binary.LittleEndian.Uint64(got) != i {
			t.Fatalf("key %d: %v %v", i, got, ok)
		}
	}
}

// checkOrdered checks that the index of data is ordered as flagOrdered
// promises: around the table, a key sits no further from its home slot than
// one more than the key before it (none: at its home), and keys of one home
// slot ascend.
func checkOrdered(t *testing.T, data []byte) {
	t.Helper()
	d, err := OpenBytes(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.ordered {
		t.Fatal("the writer did not set flagOrdered")
	}
	idx := d.view.Load().index
	at := func(i uint64) (key, dist uint64, empty bool) {
		s := idx[i*d.slotSize:]
		key = binary.LittleEndian.Uint64(s)
		if d.inline && key == emptyKey || !d.inline && binary.LittleEndian.Uint64(s[8:]) == 0 {
			return 0, 0, true
		}
		home := homeSlot(key, d.slots)
		if i < home {
			i += d.slots
		}
		return key, i - home, false
	}
	for i := range d.slots {
		key, dist, empty := at(i)
		if empty {
			continue
		}
		pk, pdist, pempty := at((i + d.slots - 1) % d.slots)
		switch {
		case pempty && dist != 0:
			t.Fatalf("slot %d: key %d sits %d slots past its home, after an empty slot", i, key, dist)
		case !pempty && dist > pdist+1:
			t.Fatalf("slot %d: key %d sits %d slots past its home, after one %d past its own", i, key, dist, pdist)
		case !pempty && dist == pdist+1 && pk > key:
			t.Fatalf("slot %d: key %d follows key %d of the same home slot", i, key, pk)
		}
	}
}

// TestOrderedIndex: the writer builds its index Robin Hood style (flagOrdered)
// whatever chunks it is built in, with keys that wrap around the end and
// keys added twice; every key is found, no absent key is, and for distinct
// keys the index does not depend on the order they were added in.
func TestOrderedIndex(t *testing.T) {
	forEachLayout(t, func(t *testing.T, inline bool) {
		rng := rand.New(rand.NewPCG(3, 4))
		keys := append(crowdedKeys(rng, 300), make([]uint64, 0, 300)...)
		for range 300 {
			keys = append(keys, rng.Uint64())
		}
		var entries []entry
		for i, k := range keys {
			entries = append(entries, entry{k, value(rng, "a")})
			if i%7 == 0 {
				entries = append(entries, entry{keys[rng.IntN(i+1)], value(rng, "again")})
			}
		}
		for _, chunk := range []uint64{5, 64, oneChunk} {
			data, _ := buildChunked(t, chunk, entries)
			checkOrdered(t, data)
			checkAgainstMap(t, data, entries)
			d, err := OpenBytes(data, Options{})
			if err != nil {
				t.Fatal(err)
			}
			present := map[uint64]bool{}
			for _, k := range keys {
				present[k] = true
			}
			for _, k := range append(crowdedKeys(rng, 500), rng.Uint64(), rng.Uint64()) {
				if _, ok := d.Get(nil, k); ok && !present[k] {
					t.Fatalf("absent key %d found", k)
				}
			}
		}
		// Distinct keys in another order: the same slots (inline: the same file).
		distinct := map[uint64]bool{}
		var once []entry
		for _, k := range keys {
			if !distinct[k] {
				distinct[k] = true
				once = append(once, entry{k, value(rng, "once")})
			}
		}
		shuffled := slices.Clone(once)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		a, _ := buildChunked(t, 64, once)
		b, _ := buildChunked(t, 64, shuffled)
		if la, lb := indexLayout(t, a, 64), indexLayout(t, b, 64); !maps.Equal(la.at, lb.at) {
			t.Fatal("the same keys added in another order sit in other slots")
		}
		if inline && !bytes.Equal(a, b) {
			t.Fatal("the same inline entries added in another order make another file")
		}
	})
}

// TestOrderedIndexProbesShort: the longest probe of an ordered index of
// 200,000 random keys at load 0.8 stays under 64 slots (placed in the order
// added, it was 100 or more).
func TestOrderedIndexProbesShort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	_, st := buildWith(t, func(add func(uint64, []byte)) {
		v := make([]byte, 8)
		for range 200_000 {
			add(rng.Uint64(), v)
		}
	})
	if st.MaxProbe >= 64 {
		t.Fatalf("max probe %d slots, want under 64", st.MaxProbe)
	}
	t.Logf("max probe: %d slots", st.MaxProbe)
}
