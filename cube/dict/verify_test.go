package dict

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// layoutEntries are 30,000 random keys (and 2^64-1) with values of one size
// (inline) or of many (referenced): a file of dozens of blocks.
func layoutEntries(rng *rand.Rand, inline bool) map[uint64][]byte {
	want := map[uint64][]byte{}
	for len(want) < 30000 {
		k := rng.Uint64()
		if len(want) == 0 {
			k = emptyKey
		}
		v := make([]byte, 40)
		if !inline {
			v = make([]byte, rng.IntN(60))
		}
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		want[k] = v
	}
	return want
}

// TestFlippedByteRefusedWhenTouched flips one byte in each block of a
// dictionary in turn. Open refuses it; opened with VerifyOnTouch, it opens,
// every lookup that reads the bad block is refused with a *CorruptError
// naming it before any value is returned, every other lookup returns the
// right value, and VerifyPending finds the block.
func TestFlippedByteRefusedWhenTouched(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			want := layoutEntries(rng, inline)
			path, st := buildWith(t, func(add func(uint64, []byte)) {
				for k, v := range want {
					add(k, v)
				}
			})
			if (st.Inline != 0) != inline {
				t.Fatalf("inline value size %d", st.Inline)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			good, err := OpenBytes(data, Options{VerifyOnTouch: true})
			if err != nil {
				t.Fatal(err)
			}
			blocks := good.hdr.blocks
			if blocks < 16 {
				t.Fatalf("only %d blocks", blocks)
			}
			for b := range blocks {
				bad := bytes.Clone(data)
				lo := headerSize + b<<defaultBlockShift
				hi := min(lo+1<<defaultBlockShift, good.blocks.end)
				bad[lo+rng.Uint64N(hi-lo)] ^= 1 << rng.IntN(8)
				if _, err := OpenBytes(bad, Options{}); !isBlock(err, b) {
					t.Fatalf("block %d: Open = %v, want a *CorruptError for it", b, err)
				}
				d, err := OpenBytes(bad, Options{VerifyOnTouch: true})
				if err != nil {
					t.Fatalf("block %d: Open with VerifyOnTouch: %v", b, err)
				}
				refused := 0
				for k, v := range want {
					func() {
						defer func() {
							if r := recover(); r != nil {
								if err, _ := r.(error); !isBlock(err, b) {
									t.Fatalf("block %d: key %d: panic %v", b, k, r)
								}
								refused++
							}
						}()
						if got, ok := d.Get(nil, k); !ok || !bytes.Equal(got, v) {
							t.Fatalf("block %d flipped: key %d read %x, %v; want %x", b, k, got, ok, v)
						}
					}()
				}
				if refused == 0 {
					t.Fatalf("block %d flipped: no lookup was refused", b)
				}
				if err := d.VerifyPending(); !isBlock(err, b) {
					t.Fatalf("block %d: VerifyPending = %v", b, err)
				}
			}
		})
	}
}

func isBlock(err error, b uint64) bool {
	var c *CorruptError
	return errors.As(err, &c) && c.Block == b && errors.Is(err, ErrChecksum)
}

// TestVerifyOnTouchOpensWithoutReading opens a dictionary whose every block
// is wrong but whose header and block table are right: it opens, and the
// first lookup is refused.
func TestVerifyOnTouchOpensWithoutReading(t *testing.T) {
	path, _ := buildWith(t, func(add func(uint64, []byte)) {
		for k := range uint64(10000) {
			add(k, binary.LittleEndian.AppendUint64(nil, k))
		}
	})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenBytes(data, Options{VerifyOnTouch: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := headerSize; i < int(d.blocks.end); i++ {
		data[i] ^= 0xff
	}
	if d.Pending() != int64(d.hdr.blocks) {
		t.Fatalf("%d blocks pending, want all %d", d.Pending(), d.hdr.blocks)
	}
	defer func() {
		if _, ok := recover().(*CorruptError); !ok {
			t.Fatal("a lookup of an unchecked, wrong block was not refused")
		}
	}()
	d.Get(nil, 1)
}

// TestRandomInline is TestRandom's property check for the inline layout,
// and for a writer that leaves it halfway: values of one size, then one of
// another, then more; the last value of a key wins either way.
func TestRandomInline(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	for _, switchAt := range []int{-1, 0, 5000, 19999} {
		t.Run(fmt.Sprint("other size at ", switchAt), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(switchAt)))
			want := map[uint64][]byte{}
			path, st := buildWith(t, func(add func(uint64, []byte)) {
				for i := range 20000 {
					k := rng.Uint64N(15000) * 7
					if i%1000 == 0 {
						k = emptyKey
					}
					v := make([]byte, 24)
					if i == switchAt {
						v = make([]byte, 3)
					}
					for j := range v {
						v[j] = byte(rng.Uint32())
					}
					want[k] = v
					add(k, v)
				}
			})
			if (st.Inline == 24) != (switchAt < 0) {
				t.Fatalf("inline value size %d", st.Inline)
			}
			for _, opts := range []Options{{}, {VerifyOnTouch: true}, {InMemory: true}} {
				d, err := Open(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				if d.Len() != len(want) {
					t.Fatalf("Len %d, want %d", d.Len(), len(want))
				}
				keys := make([]uint64, 0, 2*len(want))
				for k := range want {
					keys = append(keys, k, rng.Uint64())
				}
				d.LookupBatch(keys, func(i int, v []byte, ok bool) {
					w, in := want[keys[i]]
					if ok != in || !bytes.Equal(v, w) {
						t.Fatalf("LookupBatch key %d: %x %v, want %x %v", keys[i], v, ok, w, in)
					}
				})
				for k, v := range want {
					if got, ok := d.Get(nil, k); !ok || !bytes.Equal(got, v) {
						t.Fatalf("Get(%d) = %x %v, want %x", k, got, ok, v)
					}
				}
				n := 0
				d.Range(func(k uint64, v []byte) bool {
					if n++; !bytes.Equal(want[k], v) {
						t.Fatalf("Range: key %d", k)
					}
					return true
				})
				if n != len(want) {
					t.Fatalf("Range saw %d of %d", n, len(want))
				}
				d.Close()
			}
		})
	}
}

// TestInMemoryServesTheMappingUntilCopied: opened InMemory with
// VerifyOnTouch, a version 2 dictionary serves from its file mapping at once
// and from its checked huge-page copy once VerifyPending has made it; a
// block wrong on disk leaves it on the mapping, refused where read.
func TestInMemoryServesTheMappingUntilCopied(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	want := layoutEntries(rng, true)
	path, _ := buildWith(t, func(add func(uint64, []byte)) {
		for k, v := range want {
			add(k, v)
		}
	})
	check := func(d *Dict) {
		t.Helper()
		for k, v := range want {
			if got, ok := d.Get(nil, k); !ok || !bytes.Equal(got, v) {
				t.Fatalf("key %d: %x %v, want %x", k, got, ok, v)
			}
		}
	}
	d, err := Open(path, Options{InMemory: true, VerifyOnTouch: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.copy != nil || &d.view.Load().data[0] != &d.mapping[0] {
		t.Fatal("a copy was made at Open")
	}
	check(d)
	if err := d.VerifyPending(); err != nil {
		t.Fatal(err)
	}
	if d.copy == nil || &d.view.Load().data[0] != &d.copy[0] || d.Pending() != 0 {
		t.Fatal("VerifyPending did not switch to the copy")
	}
	check(d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img[len(img)/2] ^= 0x10 // a block in the middle of the index
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{InMemory: true}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Open InMemory of a damaged file: %v, want ErrChecksum", err)
	}
	d, err = Open(path, Options{InMemory: true, VerifyOnTouch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var c *CorruptError
	if err := d.VerifyPending(); !errors.As(err, &c) {
		t.Fatalf("VerifyPending of a damaged file: %v", err)
	}
	if d.copy != nil {
		t.Fatal("a damaged copy is served")
	}
	refused := 0
	for k := range want {
		func() {
			defer func() {
				if r := recover(); r != nil {
					refused++
				}
			}()
			d.Get(nil, k)
		}()
	}
	if refused == 0 {
		t.Fatal("no lookup of the damaged block was refused")
	}
}
