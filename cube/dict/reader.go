package dict

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/elasticctr/terraform-provider-ctr/cube/anonmem"
	"github.com/elasticctr/terraform-provider-ctr/cube/prefetch"
)

// Options control Open. The zero value verifies everything.
type Options struct {
	// SkipVerify skips the section checksums and the structural pass over the
	// index. The header is always validated. Only for files already verified
	// by this process (e.g. right after writing them).
	SkipVerify bool
	// VerifyOnTouch opens a version 2 dictionary after checking its header
	// and block table only: each block is then checked against its CRC the
	// first time a lookup reads it, and VerifyPending checks the rest (a
	// server runs it in the background). A lookup reading a block that does
	// not match panics with a *CorruptError before returning any of it.
	// Version 1 files are checked whole at Open regardless.
	VerifyOnTouch bool
	// InMemory serves a copy of the file in anonymous memory backed by
	// transparent huge pages (where the kernel allows MADV_HUGEPAGE) instead
	// of the file mapping. Random lookups over a large file-backed mapping
	// miss the TLB on almost every key; 2 MiB pages make those misses rare.
	// The copy is made read-only after loading. Paddle's cube loads into
	// memory too (--in_mem, its default). With VerifyOnTouch, a version 2
	// dictionary serves from the file mapping, checked as usual, until
	// VerifyPending has checked it whole and then made and checked the copy:
	// getting huge pages from the kernel can take far longer than reading
	// the file.
	InMemory bool
}

// Dict is an open, read-only dictionary. Get is safe for concurrent use;
// Close must not race with Get (the server guards this with a refcount).
type Dict struct {
	path     string
	view     atomic.Pointer[view]
	mapping  []byte // the file mapping, if any (unmapped by Close)
	copy     []byte // the anonymous copy, if any, in whole huge pages (unmapped by Close)
	slots    uint64
	slotSize uint64
	maxProbe uint64
	indexOff uint64 // of the index in the file
	inline   bool
	ordered  bool // flagOrdered: a lookup stops at a key nearer its home than it walked
	hdr      header
	blocks   *blockState // version 2; nil for version 1, checked whole at Open

	// A version 2 dictionary opened InMemory: the file, kept open until
	// VerifyPending has copied it; nil once it has (or for any other).
	file *os.File
}

// view is the bytes lookups read: the file mapping, or the copy that
// replaces it.
type view struct {
	data   []byte // the whole file
	index  []byte
	values []byte
}

// Open maps the dictionary at path read-only and validates it.
func Open(path string, opts Options) (*Dict, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open dictionary %q: %w", path, err)
	}
	d, err := openFile(f, opts)
	if d == nil || d.file == nil {
		_ = f.Close() // the mapping outlives the descriptor
	}
	if err != nil {
		return nil, fmt.Errorf("open dictionary %q: %w", path, err)
	}
	return d, nil
}

func openFile(f *os.File, opts Options) (*Dict, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < headerSizeV1 {
		return nil, fmt.Errorf("%d bytes: %w", size, ErrTruncated)
	}
	if int64(int(size)) != size {
		return nil, errors.New("too large to map")
	}
	var version [12]byte
	if _, err := f.ReadAt(version[:], 0); err != nil {
		return nil, err
	}
	v1 := binary.LittleEndian.Uint32(version[8:]) == FormatV1
	var data, whole []byte
	if opts.InMemory && v1 {
		whole, err = loadAnon(f, int(size))
		data = whole[:size:size]
	} else {
		data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	}
	if err != nil {
		return nil, fmt.Errorf("map: %w", err)
	}
	d, err := newDict(f.Name(), data)
	if err != nil {
		if whole == nil {
			whole = data
		}
		_ = syscall.Munmap(whole)
		return nil, err
	}
	if opts.InMemory && v1 {
		d.copy = whole
	} else {
		d.mapping = data
		// Lookups hit random pages; read-ahead would only evict useful ones.
		_ = syscall.Madvise(data, syscall.MADV_RANDOM)
	}
	if opts.InMemory && !v1 {
		d.file = f
	}
	if err := d.verifyAtOpen(opts); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// madvise advice values missing from package syscall.
const madvPopulateRead = 22

// pageSize is the base page size on x86-64 and arm64 (as Linux configures
// them here; madvise needs addresses aligned to it).
const pageSize = 4 << 10

// loadAnon reads f into an anonymous mapping advised to use huge pages and
// then write-protects it. The mapping is rounded up to whole huge pages, and
// so is the returned slice: the file is its first size bytes.
func loadAnon(f *os.File, size int) ([]byte, error) {
	mem, err := anonmem.Map(size, true)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(f, mem[:size]); err != nil {
		_ = syscall.Munmap(mem)
		return nil, err
	}
	if err := syscall.Mprotect(mem, syscall.PROT_READ); err != nil {
		_ = syscall.Munmap(mem)
		return nil, err
	}
	return mem, nil
}

// OpenBytes validates an in-memory dictionary image (used by tests and fuzzing).
func OpenBytes(data []byte, opts Options) (*Dict, error) {
	d, err := newDict("", data)
	if err != nil {
		return nil, err
	}
	if err := d.verifyAtOpen(opts); err != nil {
		return nil, err
	}
	return d, nil
}

// newDict validates the header of data and sets d up to read it.
func newDict(path string, data []byte) (*Dict, error) {
	d := &Dict{path: path}
	h := &d.hdr
	if err := h.unmarshal(data, uint64(len(data))); err != nil {
		return nil, err
	}
	d.slots, d.slotSize, d.maxProbe = h.slots, uint64(h.slotSize), h.maxProbe
	d.inline = h.inline > 0
	d.ordered = h.flags&flagOrdered != 0
	d.indexOff = h.indexOffset
	d.view.Store(d.viewOf(data))
	if h.version == FormatV2 {
		var err error
		if d.blocks, err = newBlockState(data, h); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// viewOf is the view of a whole file's bytes.
func (d *Dict) viewOf(data []byte) *view {
	h := &d.hdr
	return &view{
		data:   data,
		index:  data[h.indexOffset : h.indexOffset+h.indexSize()],
		values: data[h.valuesOffset : h.valuesOffset+h.valuesSize],
	}
}

// verifyAtOpen checks what opts ask to be checked before Open returns.
func (d *Dict) verifyAtOpen(opts Options) error {
	switch {
	case d.hdr.version == FormatV1:
		if opts.SkipVerify {
			return nil
		}
		if err := d.Verify(); err != nil {
			return err
		}
		return d.checkIndex()
	case opts.SkipVerify && d.file == nil:
		d.blocks.markAll()
	case !opts.VerifyOnTouch || opts.SkipVerify:
		return d.VerifyPending()
	}
	return nil
}

// checkIndex makes sure every ref of a version 1 index points at a whole
// record inside the values section and that the entry count matches, so Get
// can never read out of bounds nor probe forever.
func (d *Dict) checkIndex() error {
	var n uint64
	v := d.view.Load()
	for i := uint64(0); i < d.slots; i++ {
		ref := binary.LittleEndian.Uint64(v.index[i*refSlotSize+8:])
		if ref == 0 {
			continue
		}
		n++
		off := ref - 1
		if off >= uint64(len(v.values)) {
			return fmt.Errorf("slot %d: value offset %d beyond values section: %w", i, off, ErrTruncated)
		}
		l, w := binary.Uvarint(v.values[off:])
		if w <= 0 || l > uint64(len(v.values))-off-uint64(w) {
			return fmt.Errorf("slot %d: value record at %d overruns values section: %w", i, off, ErrTruncated)
		}
	}
	if n != d.hdr.count {
		return fmt.Errorf("index holds %d entries, header says %d: %w", n, d.hdr.count, ErrTruncated)
	}
	return nil
}

// Get appends the value of key to dst and reports whether the key exists.
// It allocates only if dst lacks capacity.
func (d *Dict) Get(dst []byte, key uint64) ([]byte, bool) {
	v, ok := d.lookup(key)
	if !ok {
		return dst, false
	}
	return append(dst, v...), true
}

// Has reports whether key exists.
func (d *Dict) Has(key uint64) bool {
	_, ok := d.lookup(key)
	return ok
}

// ValueSize returns the size of key's value without copying it.
func (d *Dict) ValueSize(key uint64) (int, bool) {
	v, ok := d.lookup(key)
	return len(v), ok
}

// Lookup returns key's value without copying: the slice aliases the read-only
// mapping and must not be used after Close (the server holds a reference on
// the dictionary while it encodes a response).
func (d *Dict) Lookup(key uint64) ([]byte, bool) { return d.lookup(key) }

func (d *Dict) lookup(key uint64) ([]byte, bool) {
	v := d.view.Load()
	if d.inline {
		return d.probeInline(v, key, homeSlot(key, d.slots))
	}
	ref := d.probeRef(v, key, homeSlot(key, d.slots))
	if ref == 0 {
		return nil, false
	}
	return d.record(v, ref-1)
}

// ensureProbe checks the blocks of the slots a lookup starting at slot i may
// read: i to i + max probe, wrapping to slot 0.
func (d *Dict) ensureProbe(v *view, i uint64) {
	if d.blocks == nil || d.blocks.pending.Load() == 0 {
		return
	}
	s, last := d.slotSize, i+d.maxProbe
	if last < d.slots {
		d.ensure(v, d.indexOff+i*s, d.indexOff+(last+1)*s)
		return
	}
	d.ensure(v, d.indexOff+i*s, d.indexOff+d.slots*s)
	d.ensure(v, d.indexOff, d.indexOff+(last-d.slots+1)*s)
}

// probeInline looks key up in an inline index from slot i and returns its
// value, aliasing the index.
func (d *Dict) probeInline(v *view, key, i uint64) ([]byte, bool) {
	s, idx := d.slotSize, v.index
	if key == emptyKey {
		if d.hdr.flags&flagExtraKey == 0 {
			return nil, false
		}
		at := d.slots * s
		d.ensure(v, d.indexOff+at, d.indexOff+at+s)
		return idx[at+8 : at+s : at+s], true
	}
	d.ensureProbe(v, i)
	for walked := uint64(0); ; walked++ {
		at := i * s
		k := binary.LittleEndian.Uint64(idx[at:])
		if k == key {
			return idx[at+8 : at+s : at+s], true
		}
		if k == emptyKey || walked == d.maxProbe || d.passed(k, i, walked) {
			return nil, false
		}
		if i++; i == d.slots {
			i = 0
		}
	}
}

// orderedFrom is the walk from which a lookup asks passed.
const orderedFrom = 2

// passed reports whether a lookup that walked walked slots to slot i, where
// key k sits, has passed every slot its key could be in: in an ordered index
// (flagOrdered), when k is nearer to its own home slot than that.
//
// It is not asked before orderedFrom slots: a lookup reads those anyway (they
// are in the lines LookupBatch prefetches), and most hits are there, which
// then hash no other key.
func (d *Dict) passed(k, i, walked uint64) bool {
	if !d.ordered || walked < orderedFrom {
		return false
	}
	return distance(k, i, d.slots) < walked
}

// probeRef walks a referenced index from slot i and returns key's ref (0 if
// absent).
func (d *Dict) probeRef(v *view, key, i uint64) uint64 {
	idx := v.index
	d.ensureProbe(v, i)
	for walked := uint64(0); ; walked++ {
		s := idx[i*refSlotSize : i*refSlotSize+refSlotSize]
		ref := binary.LittleEndian.Uint64(s[8:])
		k := binary.LittleEndian.Uint64(s)
		if ref == 0 || k == key {
			return ref
		}
		if walked == d.maxProbe || d.passed(k, i, walked) {
			return 0
		}
		if i++; i == d.slots {
			i = 0
		}
	}
}

// BatchGroup is how many lookups LookupBatch keeps in flight: it prefetches
// the home slots of that many keys before it reads any of them.
const BatchGroup = 32

// LookupBatch looks up keys in order and calls fn with each key's index,
// value (aliasing the mapping, as in Lookup) and presence.
//
// It is Lookup for many keys at once, arranged for memory-level
// parallelism. For a group of keys it first prefetches every home slot, and
// only then probes (now from cache), so the cache misses of different keys
// overlap instead of being paid one after another. In the inline layout
// that is the only miss of a lookup; in the referenced layout the probes
// then prefetch every value record (the second miss) before any value is
// read.
func (d *Dict) LookupBatch(keys []uint64, fn func(i int, value []byte, ok bool)) {
	d.lookupBatch(keys, nil, fn)
}

// lookupBatch is LookupBatch under an overlay (nil for none): a key the
// overlay holds is answered from it. The overlay's filter is read and its
// slots prefetched with the dictionary's home slots.
func (d *Dict) lookupBatch(keys []uint64, ov *overlay, fn func(i int, value []byte, ok bool)) {
	if d.inline {
		d.lookupBatchInline(keys, ov, fn)
		return
	}
	var (
		slots [BatchGroup]uint64
		refs  [BatchGroup]uint64
		over  [BatchGroup]bool
	)
	n := d.slots
	v := d.view.Load()
	idx, vals := v.index, v.values
	for base := 0; base < len(keys); base += BatchGroup {
		group := keys[base:min(base+BatchGroup, len(keys))]
		for j, k := range group {
			s := homeSlot(k, n)
			slots[j] = s
			prefetch.Line(&idx[s*refSlotSize])
			over[j] = ov.mayHold(k)
		}
		for j, k := range group {
			r := d.probeRef(v, k, slots[j])
			refs[j] = r
			if r != 0 && r-1 < uint64(len(vals)) {
				prefetch.Line(&vals[r-1])
				if r+63 < uint64(len(vals)) {
					prefetch.Line(&vals[r+63]) // a record may straddle two lines
				}
			}
		}
		for j, k := range group {
			if over[j] {
				if val, ok := ov.get(k); ok {
					fn(base+j, val, true)
					continue
				}
			}
			if refs[j] == 0 {
				fn(base+j, nil, false)
				continue
			}
			val, ok := d.record(v, refs[j]-1)
			fn(base+j, val, ok)
		}
	}
}

// inlinePrefetchSlots is how many slots from a key's home slot LookupBatch
// prefetches in the inline layout: the home slot and the next, which hold
// most keys at a load factor of 0.8.
const inlinePrefetchSlots = 2

func (d *Dict) lookupBatchInline(keys []uint64, ov *overlay, fn func(i int, value []byte, ok bool)) {
	var (
		homes [BatchGroup]uint64
		over  [BatchGroup]bool
	)
	v := d.view.Load()
	n, s, idx := d.slots, d.slotSize, v.index
	span := inlinePrefetchSlots*s - 1 // within the index: the extra slot follows the last
	for base := 0; base < len(keys); base += BatchGroup {
		group := keys[base:min(base+BatchGroup, len(keys))]
		for j, k := range group {
			h := homeSlot(k, n)
			homes[j] = h
			for at := h * s; at < h*s+span; at += 64 {
				prefetch.Line(&idx[at])
			}
			prefetch.Line(&idx[h*s+span]) // the line the span ends in
			over[j] = ov.mayHold(k)
		}
		for j, k := range group {
			if over[j] {
				if val, ok := ov.get(k); ok {
					fn(base+j, val, true)
					continue
				}
			}
			val, ok := d.probeInline(v, k, homes[j])
			fn(base+j, val, ok)
		}
	}
}

// record returns the value record at off in the values section, checking its
// blocks first.
func (d *Dict) record(v *view, off uint64) ([]byte, bool) {
	vals := v.values
	if off >= uint64(len(vals)) {
		return nil, false
	}
	if d.blocks != nil {
		at := d.hdr.valuesOffset + off
		d.ensure(v, at, at+min(binary.MaxVarintLen64+d.hdr.maxValue, uint64(len(vals))-off))
	}
	l, w := binary.Uvarint(vals[off:])
	start := off + uint64(w)
	if w <= 0 || l > uint64(len(vals))-start {
		return nil, false
	}
	return vals[start : start+l], true
}

// Range calls fn for every entry in slot order until fn returns false. The
// value slice is only valid during the call.
func (d *Dict) Range(fn func(key uint64, value []byte) bool) {
	s := d.slotSize
	v := d.view.Load()
	for i := uint64(0); i < d.slots; i++ {
		at := i * s
		d.ensure(v, d.indexOff+at, d.indexOff+at+s)
		key := binary.LittleEndian.Uint64(v.index[at:])
		var (
			val []byte
			ok  bool
		)
		if d.inline {
			val, ok = v.index[at+8:at+s:at+s], key != emptyKey
		} else if ref := binary.LittleEndian.Uint64(v.index[at+8:]); ref != 0 {
			val, ok = d.record(v, ref-1)
		}
		if ok && !fn(key, val) {
			return
		}
	}
	if d.inline && d.hdr.flags&flagExtraKey != 0 {
		val, _ := d.probeInline(v, emptyKey, 0)
		fn(emptyKey, val)
	}
}

// Len returns the number of entries.
func (d *Dict) Len() int { return int(d.hdr.count) }

// Slots returns the number of index slots.
func (d *Dict) Slots() uint64 { return d.slots }

// Size returns the size of the file (and of the mapping) in bytes.
func (d *Dict) Size() int64 { return int64(len(d.view.Load().data)) }

// ValuesSize returns the size of the values section in bytes.
func (d *Dict) ValuesSize() int64 { return int64(d.hdr.valuesSize) }

// Version returns the file's format version.
func (d *Dict) Version() uint32 { return d.hdr.version }

// InlineValueSize returns the size every value has in the inline layout, 0
// in the referenced layout.
func (d *Dict) InlineValueSize() int { return int(d.hdr.inline) }

// MaxProbe returns the most slots past its home slot any key sits.
func (d *Dict) MaxProbe() uint64 { return d.maxProbe }

// MaxValueSize returns the largest value size in bytes.
func (d *Dict) MaxValueSize() int { return int(d.hdr.maxValue) }

// Path returns the file the dictionary was opened from ("" for OpenBytes).
func (d *Dict) Path() string { return d.path }

// Close unmaps the file and the copy. The Dict must not be used afterwards.
func (d *Dict) Close() error {
	var errs []error
	for _, m := range []*[]byte{&d.mapping, &d.copy} {
		if *m != nil && d.path != "" {
			if err := syscall.Munmap(*m); err != nil {
				errs = append(errs, fmt.Errorf("unmap dictionary %q: %w", d.path, err))
			}
		}
		*m = nil
	}
	if d.file != nil {
		_ = d.file.Close()
		d.file = nil
	}
	d.view.Store(&view{})
	return errors.Join(errs...)
}
