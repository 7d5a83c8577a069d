package dict

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// stackModel builds a base and layers from rng, opens them and returns the
// stack with the map it must equal: the newest value of every key.
func stackModel(t testing.TB, rng *rand.Rand, baseKeys, layers, layerKeys int, sizes func() int) (*Stack, map[uint64][]byte) {
	t.Helper()
	want := map[uint64][]byte{}
	open := func(n int, keys func() uint64) *Dict {
		path, _ := buildWith(t, func(add func(uint64, []byte)) {
			for range n {
				k, v := keys(), make([]byte, sizes())
				for i := range v {
					v[i] = byte(rng.Uint32())
				}
				want[k] = v
				add(k, v)
			}
		})
		d, err := Open(path, Options{VerifyOnTouch: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	base := open(baseKeys, func() uint64 { return rng.Uint64N(uint64(baseKeys) * 2) })
	var ls []*Dict
	for range layers {
		// Half the keys a base key or an older layer's, half new; the
		// key 2^64-1 in some.
		l := open(layerKeys, func() uint64 {
			switch rng.IntN(20) {
			case 0:
				return emptyKey
			case 1, 2, 3, 4, 5, 6, 7, 8, 9:
				return rng.Uint64N(uint64(baseKeys) * 2)
			}
			return rng.Uint64()
		})
		ls = append([]*Dict{l}, ls...) // newest first
	}
	s, err := NewStack(base, ls...)
	if err != nil {
		t.Fatal(err)
	}
	return s, want
}

// TestStack checks a stack against a map of the newest values: Lookup,
// LookupBatch (in key order), Range (every key once) and Len, with inline
// and referenced layers over inline and referenced bases.
func TestStack(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	for _, c := range []struct {
		name  string
		sizes func(rng *rand.Rand) func() int
	}{
		{"inline", func(*rand.Rand) func() int { return func() int { return 24 } }},
		{"referenced", func(rng *rand.Rand) func() int { return func() int { return rng.IntN(50) } }},
	} {
		for _, layers := range []int{0, 1, 4} {
			t.Run(fmt.Sprintf("%s/%d layers", c.name, layers), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(layers)))
				s, want := stackModel(t, rng, 20000, layers, 2000, c.sizes(rng))
				if s.Len() != len(want) {
					t.Fatalf("Len %d, want %d", s.Len(), len(want))
				}
				keys := make([]uint64, 0, 2*len(want))
				for k := range want {
					keys = append(keys, k, rng.Uint64())
				}
				next := 0
				s.LookupBatch(keys, func(i int, v []byte, ok bool) {
					if i != next {
						t.Fatalf("LookupBatch called back for key %d, want %d", i, next)
					}
					next++
					w, in := want[keys[i]]
					if ok != in || !bytes.Equal(v, w) {
						t.Fatalf("LookupBatch key %d: %x %v, want %x %v", keys[i], v, ok, w, in)
					}
				})
				if next != len(keys) {
					t.Fatalf("LookupBatch called back %d times for %d keys", next, len(keys))
				}
				for k, w := range want {
					if v, ok := s.Get(nil, k); !ok || !bytes.Equal(v, w) {
						t.Fatalf("Get(%d) = %x %v, want %x", k, v, ok, w)
					}
				}
				seen := map[uint64]bool{}
				s.Range(func(k uint64, v []byte) bool {
					if seen[k] {
						t.Fatalf("Range: key %d twice", k)
					}
					seen[k] = true
					if !bytes.Equal(v, want[k]) {
						t.Fatalf("Range: key %d = %x, want %x", k, v, want[k])
					}
					return true
				})
				if len(seen) != len(want) {
					t.Fatalf("Range saw %d keys, want %d", len(seen), len(want))
				}
			})
		}
	}
}

// BenchmarkStack looks random keys up in a 1M-key base alone and under 1
// and 8 layers of 10,000 keys each: the overlay makes the layers cost one
// probe, whatever their number.
func BenchmarkStack(b *testing.B) {
	for _, layers := range []int{0, 1, 8} {
		b.Run(fmt.Sprintf("layers=%d", layers), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			s, want := stackModel(b, rng, benchKeys, layers, 10000, func() int { return benchValue })
			keys := make([]uint64, 0, len(want))
			for k := range want {
				keys = append(keys, k)
			}
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			batch := make([]uint64, 1000)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				copy(batch, keys[(i*len(batch))%(len(keys)-len(batch)):])
				s.LookupBatch(batch, func(int, []byte, bool) {})
			}
		})
	}
}
