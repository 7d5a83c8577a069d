package dict

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"syscall"
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
	// InMemory copies the file into anonymous memory backed by transparent
	// huge pages (where the kernel allows MADV_HUGEPAGE) instead of mapping
	// the file. Random lookups over a large file-backed mapping miss the TLB
	// on almost every key; 2 MiB pages make those misses rare. The copy is
	// made read-only after loading. Paddle's cube loads into memory too
	// (--in_mem, its default).
	InMemory bool
}

// Dict is an open, read-only dictionary. Get is safe for concurrent use;
// Close must not race with Get (the server guards this with a refcount).
type Dict struct {
	path     string
	mapped   bool   // data is a file mapping (not a copy)
	data     []byte // the whole file, mapped PROT_READ
	index    []byte
	values   []byte
	slots    uint64
	slotSize uint64
	maxProbe uint64
	indexOff uint64 // of the index in data
	inline   bool
	hdr      header
	blocks   *blockState // version 2; nil for version 1, checked whole at Open
}

// Open maps the dictionary at path read-only and validates it.
func Open(path string, opts Options) (*Dict, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open dictionary %q: %w", path, err)
	}
	defer f.Close() // the mapping outlives the descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open dictionary %q: %w", path, err)
	}
	size := st.Size()
	if size < headerSize {
		return nil, fmt.Errorf("open dictionary %q: %d bytes: %w", path, size, ErrTruncated)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("open dictionary %q: too large to map", path)
	}
	var data []byte
	if opts.InMemory {
		data, err = loadAnon(f, int(size))
	} else {
		data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	}
	if err != nil {
		return nil, fmt.Errorf("map dictionary %q: %w", path, err)
	}
	d, err := newDict(path, data, opts, !opts.InMemory)
	if err != nil {
		_ = syscall.Munmap(data)
		return nil, fmt.Errorf("open dictionary %q: %w", path, err)
	}
	if !opts.InMemory {
		// Lookups hit random pages; read-ahead would only evict useful ones.
		_ = syscall.Madvise(data, syscall.MADV_RANDOM)
	}
	return d, nil
}

// madvise advice values missing from package syscall.
const (
	madvHugePage      = 14
	madvPopulateRead  = 22
	madvPopulateWrite = 23
)

// hugePage is the transparent huge page size on x86-64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// loadAnon reads f into an anonymous mapping advised to use huge pages and
// then write-protects it. The mapping is rounded up to whole huge pages;
// the returned slice has the file's length (munmap rounds the same way).
func loadAnon(f *os.File, size int) ([]byte, error) {
	mapped := (size + hugePage - 1) &^ (hugePage - 1)
	mem, err := syscall.Mmap(-1, 0, mapped, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, err
	}
	_ = syscall.Madvise(mem, madvHugePage) // ignored where THP is off
	// Fault every page in with one call rather than one fault a page while
	// reading (where the kernel has MADV_POPULATE_WRITE, Linux 5.14+).
	_ = syscall.Madvise(mem, madvPopulateWrite)
	if _, err := io.ReadFull(f, mem[:size]); err != nil {
		_ = syscall.Munmap(mem)
		return nil, err
	}
	if err := syscall.Mprotect(mem, syscall.PROT_READ); err != nil {
		_ = syscall.Munmap(mem)
		return nil, err
	}
	return mem[:size], nil
}

// OpenBytes validates an in-memory dictionary image (used by tests and fuzzing).
func OpenBytes(data []byte, opts Options) (*Dict, error) {
	return newDict("", data, opts, false)
}

func newDict(path string, data []byte, opts Options, mapped bool) (*Dict, error) {
	d := &Dict{path: path, data: data, mapped: mapped}
	h := &d.hdr
	if err := h.unmarshal(data, uint64(len(data))); err != nil {
		return nil, err
	}
	d.slots, d.slotSize, d.maxProbe = h.slots, uint64(h.slotSize), h.maxProbe
	d.inline = h.inline > 0
	d.indexOff = h.indexOffset
	d.index = data[h.indexOffset : h.indexOffset+h.indexSize()]
	d.values = data[h.valuesOffset : h.valuesOffset+h.valuesSize]
	if h.version == FormatV1 {
		if opts.SkipVerify {
			return d, nil
		}
		if err := d.Verify(); err != nil {
			return nil, err
		}
		if err := d.checkIndex(); err != nil {
			return nil, err
		}
		return d, nil
	}
	var err error
	if d.blocks, err = newBlockState(data, h); err != nil {
		return nil, err
	}
	switch {
	case opts.SkipVerify:
		d.blocks.markAll()
	case !opts.VerifyOnTouch:
		if err := d.VerifyPending(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// checkIndex makes sure every ref of a version 1 index points at a whole
// record inside the values section and that the entry count matches, so Get
// can never read out of bounds nor probe forever.
func (d *Dict) checkIndex() error {
	var n uint64
	for i := uint64(0); i < d.slots; i++ {
		ref := binary.LittleEndian.Uint64(d.index[i*refSlotSize+8:])
		if ref == 0 {
			continue
		}
		n++
		off := ref - 1
		if off >= uint64(len(d.values)) {
			return fmt.Errorf("slot %d: value offset %d beyond values section: %w", i, off, ErrTruncated)
		}
		l, w := binary.Uvarint(d.values[off:])
		if w <= 0 || l > uint64(len(d.values))-off-uint64(w) {
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
	if d.inline {
		return d.probeInline(key, homeSlot(key, d.slots))
	}
	ref := d.probeRef(key, homeSlot(key, d.slots))
	if ref == 0 {
		return nil, false
	}
	return d.record(ref - 1)
}

// ensureProbe checks the blocks of the slots a lookup starting at slot i may
// read: i to i + max probe, wrapping to slot 0.
func (d *Dict) ensureProbe(i uint64) {
	if d.blocks == nil || d.blocks.pending.Load() == 0 {
		return
	}
	s, last := d.slotSize, i+d.maxProbe
	if last < d.slots {
		d.ensure(d.indexOff+i*s, d.indexOff+(last+1)*s)
		return
	}
	d.ensure(d.indexOff+i*s, d.indexOff+d.slots*s)
	d.ensure(d.indexOff, d.indexOff+(last-d.slots+1)*s)
}

// probeInline looks key up in an inline index from slot i and returns its
// value, aliasing the index.
func (d *Dict) probeInline(key, i uint64) ([]byte, bool) {
	s, idx := d.slotSize, d.index
	if key == emptyKey {
		if d.hdr.flags&flagExtraKey == 0 {
			return nil, false
		}
		at := d.slots * s
		d.ensure(d.indexOff+at, d.indexOff+at+s)
		return idx[at+8 : at+s : at+s], true
	}
	d.ensureProbe(i)
	for n := d.maxProbe; ; n-- {
		at := i * s
		k := binary.LittleEndian.Uint64(idx[at:])
		if k == key {
			return idx[at+8 : at+s : at+s], true
		}
		if k == emptyKey || n == 0 {
			return nil, false
		}
		if i++; i == d.slots {
			i = 0
		}
	}
}

// probeRef walks a referenced index from slot i and returns key's ref (0 if
// absent).
func (d *Dict) probeRef(key, i uint64) uint64 {
	idx := d.index
	d.ensureProbe(i)
	for n := d.maxProbe; ; n-- {
		s := idx[i*refSlotSize : i*refSlotSize+refSlotSize]
		ref := binary.LittleEndian.Uint64(s[8:])
		if ref == 0 || binary.LittleEndian.Uint64(s) == key {
			return ref
		}
		if n == 0 {
			return 0
		}
		if i++; i == d.slots {
			i = 0
		}
	}
}

// batchGroup is how many lookups LookupBatch keeps in flight.
const batchGroup = 32

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
	if d.inline {
		d.lookupBatchInline(keys, fn)
		return
	}
	var (
		slots [batchGroup]uint64
		refs  [batchGroup]uint64
	)
	n := d.slots
	idx, vals := d.index, d.values
	for base := 0; base < len(keys); base += batchGroup {
		group := keys[base:min(base+batchGroup, len(keys))]
		for j, k := range group {
			s := homeSlot(k, n)
			slots[j] = s
			prefetch(&idx[s*refSlotSize])
		}
		for j, k := range group {
			r := d.probeRef(k, slots[j])
			refs[j] = r
			if r != 0 && r-1 < uint64(len(vals)) {
				prefetch(&vals[r-1])
				if r+63 < uint64(len(vals)) {
					prefetch(&vals[r+63]) // a record may straddle two lines
				}
			}
		}
		for j := range group {
			if refs[j] == 0 {
				fn(base+j, nil, false)
				continue
			}
			v, ok := d.record(refs[j] - 1)
			fn(base+j, v, ok)
		}
	}
}

// inlinePrefetchSlots is how many slots from a key's home slot LookupBatch
// prefetches in the inline layout: the home slot and the next, which hold
// most keys at a load factor of 0.8.
const inlinePrefetchSlots = 2

func (d *Dict) lookupBatchInline(keys []uint64, fn func(i int, value []byte, ok bool)) {
	var homes [batchGroup]uint64
	n, s, idx := d.slots, d.slotSize, d.index
	span := inlinePrefetchSlots*s - 1 // within the index: the extra slot follows the last
	for base := 0; base < len(keys); base += batchGroup {
		group := keys[base:min(base+batchGroup, len(keys))]
		for j, k := range group {
			h := homeSlot(k, n)
			homes[j] = h
			for at := h * s; at < h*s+span; at += 64 {
				prefetch(&idx[at])
			}
			prefetch(&idx[h*s+span]) // the line the span ends in
		}
		for j, k := range group {
			v, ok := d.probeInline(k, homes[j])
			fn(base+j, v, ok)
		}
	}
}

// record returns the value record at off in the values section, checking its
// blocks first.
func (d *Dict) record(off uint64) ([]byte, bool) {
	vals := d.values
	if off >= uint64(len(vals)) {
		return nil, false
	}
	if d.blocks != nil {
		at := d.hdr.valuesOffset + off
		d.ensure(at, at+min(binary.MaxVarintLen64+d.hdr.maxValue, uint64(len(vals))-off))
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
	for i := uint64(0); i < d.slots; i++ {
		at := i * s
		d.ensure(d.indexOff+at, d.indexOff+at+s)
		key := binary.LittleEndian.Uint64(d.index[at:])
		var (
			v  []byte
			ok bool
		)
		if d.inline {
			v, ok = d.index[at+8:at+s:at+s], key != emptyKey
		} else if ref := binary.LittleEndian.Uint64(d.index[at+8:]); ref != 0 {
			v, ok = d.record(ref - 1)
		}
		if ok && !fn(key, v) {
			return
		}
	}
	if d.inline && d.hdr.flags&flagExtraKey != 0 {
		v, _ := d.probeInline(emptyKey, 0)
		fn(emptyKey, v)
	}
}

// Len returns the number of entries.
func (d *Dict) Len() int { return int(d.hdr.count) }

// Slots returns the number of index slots.
func (d *Dict) Slots() uint64 { return d.slots }

// Size returns the size of the file (and of the mapping) in bytes.
func (d *Dict) Size() int64 { return int64(len(d.data)) }

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

// Close unmaps the file. The Dict must not be used afterwards.
func (d *Dict) Close() error {
	if d.path == "" || d.data == nil {
		d.data = nil
		return nil
	}
	err := syscall.Munmap(d.data)
	d.data, d.index, d.values = nil, nil, nil
	if err != nil {
		return fmt.Errorf("unmap dictionary %q: %w", d.path, err)
	}
	return nil
}
