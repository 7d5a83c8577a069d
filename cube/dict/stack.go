package dict

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/elasticctr/terraform-provider-ctr/cube/prefetch"
)

// A Stack serves a base dictionary with smaller dictionaries layered over
// it, newest first: the value of a key is the one of the newest layer that
// has it, else the base's. A patch of k keys is then a dictionary of k keys,
// built, shipped and loaded in proportion to k, instead of a rebuilt base.
//
// Lookups cost the same whatever the number of layers: the overlay, built
// when the stack is made, holds every key of every layer with its newest
// value (aliasing the layers' bytes), and a filter of 16 bits per key (one
// bit set per key, at a place its hash picks; 2 KB per 1,000 keys, so it
// stays in the CPU's caches) answers "not in any layer" for most keys the
// layers lack with one bit test; only the others probe the overlay.
type Stack struct {
	base   *Dict
	layers []*Dict // newest first
	ov     overlay
	count  int // distinct keys
}

// NewStack makes a stack of base and layers (newest first). The layers are
// checked whole against their checksums (they are small); the base as its
// Options said. With no layers, the stack is the base.
func NewStack(base *Dict, layers ...*Dict) (*Stack, error) {
	s := &Stack{base: base, layers: layers, count: base.Len()}
	if len(layers) == 0 {
		return s, nil
	}
	n := 0
	for _, l := range layers {
		if err := l.VerifyPending(); err != nil {
			return nil, fmt.Errorf("layer %q: %w", l.Path(), err)
		}
		n += l.Len()
	}
	s.ov = newOverlay(n)
	for i := len(layers) - 1; i >= 0; i-- { // oldest first: newer values overwrite
		layers[i].Range(func(k uint64, v []byte) bool {
			s.ov.put(k, v)
			return true
		})
	}
	s.ov.each(func(k uint64, _ []byte) {
		if !base.Has(k) {
			s.count++
		}
	})
	return s, nil
}

// Base returns the bottom dictionary.
func (s *Stack) Base() *Dict { return s.base }

// Layers returns the dictionaries over the base, newest first.
func (s *Stack) Layers() []*Dict { return s.layers }

// Lookup returns key's newest value, aliasing the dictionaries.
func (s *Stack) Lookup(key uint64) ([]byte, bool) {
	if v, ok := s.ov.get(key); ok { // an empty overlay has no slots
		return v, true
	}
	return s.base.Lookup(key)
}

// Get appends key's newest value to dst.
func (s *Stack) Get(dst []byte, key uint64) ([]byte, bool) {
	v, ok := s.Lookup(key)
	if !ok {
		return dst, false
	}
	return append(dst, v...), true
}

// LookupBatch is Dict.LookupBatch over the stack: fn gets each key's newest
// value, in the order of keys.
func (s *Stack) LookupBatch(keys []uint64, fn func(i int, value []byte, ok bool)) {
	if s.ov.slots == 0 {
		s.base.LookupBatch(keys, fn)
		return
	}
	s.base.lookupBatch(keys, &s.ov, fn)
}

// Range calls fn for every key once, with its newest value, until fn
// returns false: the base's keys no layer has, then the layers' keys.
func (s *Stack) Range(fn func(key uint64, value []byte) bool) {
	more := true
	s.base.Range(func(k uint64, v []byte) bool {
		if _, ok := s.ov.get(k); ok {
			return true
		}
		more = fn(k, v)
		return more
	})
	if more {
		s.ov.each(func(k uint64, v []byte) {
			if more {
				more = fn(k, v)
			}
		})
	}
}

// Len returns the number of distinct keys.
func (s *Stack) Len() int { return s.count }

// Size returns the bytes of every dictionary of the stack.
func (s *Stack) Size() int64 {
	n := s.base.Size()
	for _, l := range s.layers {
		n += l.Size()
	}
	return n
}

// Path returns the newest dictionary's file.
func (s *Stack) Path() string {
	if len(s.layers) > 0 {
		return s.layers[0].Path()
	}
	return s.base.Path()
}

// UncheckedBytes returns the bytes of the stack not yet checked.
func (s *Stack) UncheckedBytes() int64 {
	n := s.base.UncheckedBytes()
	for _, l := range s.layers {
		n += l.UncheckedBytes()
	}
	return n
}

// CopiedBytes returns the bytes of the stack served from anonymous memory.
func (s *Stack) CopiedBytes() int64 {
	var n int64
	for _, d := range s.all() {
		n += d.CopiedBytes()
	}
	return n
}

// VerifyPending runs Dict.VerifyPending on every dictionary of the stack.
func (s *Stack) VerifyPending() error { return s.each((*Dict).VerifyPending) }

// Verify runs Dict.Verify on every dictionary of the stack.
func (s *Stack) Verify() error { return s.each((*Dict).Verify) }

// each runs check on every dictionary of the stack until one fails.
func (s *Stack) each(check func(*Dict) error) error {
	for _, d := range s.all() {
		if err := check(d); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every dictionary of the stack.
func (s *Stack) Close() error {
	var errs []error
	for _, d := range s.all() {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

func (s *Stack) all() []*Dict { return append([]*Dict{s.base}, s.layers...) }

// overlay is an open-addressing table of the layers' keys and newest
// values, linear probing, emptyKey marking an empty slot (that key itself
// is kept aside).
type overlay struct {
	filter   []uint64 // bit fmix64(k) >> shift is set for every key k
	shift    uint
	slots    uint64
	slot     []ovSlot
	extra    []byte // the value of emptyKey
	hasExtra bool
}

// ovSlot is a key of the overlay and its newest value: one cache line holds
// both.
type ovSlot struct {
	key uint64
	val []byte
}

// filterBitsPerKey sizes the overlay's filter: at one bit set per key, a
// key the layers lack finds its bit set with a probability of about 1/16.
const filterBitsPerKey = 16

func newOverlay(n int) overlay {
	slots := uint64(2*n + 1)
	bits := uint(6) // at least one word
	for 1<<bits < filterBitsPerKey*n {
		bits++
	}
	o := overlay{slots: slots, slot: make([]ovSlot, slots), filter: make([]uint64, 1<<(bits-6)), shift: 64 - bits}
	for i := range o.slot {
		o.slot[i].key = emptyKey
	}
	return o
}

func (o *overlay) put(k uint64, v []byte) {
	bit := fmix64(k) >> o.shift
	o.filter[bit/64] |= 1 << (bit % 64)
	if k == emptyKey {
		o.extra, o.hasExtra = v, true
		return
	}
	for i := homeSlot(k, o.slots); ; {
		if o.slot[i].key == emptyKey || o.slot[i].key == k {
			o.slot[i] = ovSlot{k, v}
			return
		}
		if i++; i == o.slots {
			i = 0
		}
	}
}

// mayHold reports whether k may be in the overlay (nil: none), and if so
// prefetches its home slot.
func (o *overlay) mayHold(k uint64) bool {
	if o == nil {
		return false
	}
	if bit := fmix64(k) >> o.shift; o.filter[bit/64]&(1<<(bit%64)) == 0 {
		return false
	}
	if k != emptyKey {
		prefetch.Line((*byte)(unsafe.Pointer(&o.slot[homeSlot(k, o.slots)])))
	}
	return true
}

// get returns k's value in the overlay.
func (o *overlay) get(k uint64) ([]byte, bool) {
	if o.slots == 0 {
		return nil, false
	}
	if k == emptyKey {
		return o.extra, o.hasExtra
	}
	for i := homeSlot(k, o.slots); ; {
		switch o.slot[i].key {
		case k:
			return o.slot[i].val, true
		case emptyKey:
			return nil, false
		}
		if i++; i == o.slots {
			i = 0
		}
	}
}

func (o *overlay) each(fn func(k uint64, v []byte)) {
	for _, sl := range o.slot {
		if sl.key != emptyKey {
			fn(sl.key, sl.val)
		}
	}
	if o.hasExtra {
		fn(emptyKey, o.extra)
	}
}
