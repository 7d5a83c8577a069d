package dict

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync/atomic"
	"syscall"

	"github.com/elasticctr/terraform-provider-ctr/cube/anonmem"
)

// CorruptError is what a version 2 dictionary panics with when a block read
// for the first time does not match its checksum (Options.VerifyOnTouch):
// nothing of the block has been returned. Readers that serve lookups recover
// it and stop using the dictionary, as they would after a memory fault.
type CorruptError struct {
	Path   string // "" for OpenBytes
	Block  uint64
	Offset uint64 // of the block in the file
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("dictionary %q: block %d at byte %d does not match its checksum", e.Path, e.Block, e.Offset)
}

// Unwrap makes errors.Is(err, ErrChecksum) hold.
func (e *CorruptError) Unwrap() error { return ErrChecksum }

// blockState tracks which blocks of a version 2 dictionary have been checked.
type blockState struct {
	shift   uint32
	end     uint64          // block table offset: where the last block ends
	crcs    []byte          // the block table
	checked []atomic.Uint64 // bit b: block b matched its CRC
	pending atomic.Int64    // blocks not checked yet
}

func newBlockState(data []byte, h *header) (*blockState, error) {
	end := h.blockTableOffset()
	crcs := data[end : end+4*h.blocks]
	if crc32.Checksum(crcs, castagnoli) != h.blocksCRC {
		return nil, fmt.Errorf("block table: %w", ErrChecksum)
	}
	s := &blockState{shift: h.blockShift, end: end, crcs: crcs, checked: make([]atomic.Uint64, (h.blocks+63)/64)}
	s.pending.Store(int64(h.blocks))
	return s, nil
}

// markAll records every block as checked (Options.SkipVerify).
func (s *blockState) markAll() {
	for i := range s.checked {
		s.checked[i].Store(^uint64(0))
	}
	s.pending.Store(0)
}

// ensure checks every block holding a byte of [lo, hi) not checked yet, and
// panics with a *CorruptError on the first that does not match. Concurrent
// callers may check one block twice; the result is the same.
//
// The bytes checked are those of v, the view the caller reads. A block
// checked in the copy of an InMemory dictionary counts as checked in its
// file mapping too: the copy was read from the page cache the mapping shows.
func (d *Dict) ensure(v *view, lo, hi uint64) {
	s := d.blocks
	if s == nil || s.pending.Load() == 0 || hi <= lo {
		return
	}
	for b := (lo - headerSize) >> s.shift; b <= (hi-1-headerSize)>>s.shift; b++ {
		if s.checked[b/64].Load()&(1<<(b%64)) == 0 {
			if err := d.checkBlock(v.data, b); err != nil {
				panic(err)
			}
		}
	}
}

// checkBlock checks block b of data, the whole file, against its CRC and
// records it as checked.
func (d *Dict) checkBlock(data []byte, b uint64) error {
	s := d.blocks
	lo := headerSize + b<<s.shift
	hi := min(lo+1<<s.shift, s.end)
	if d.mapping != nil && len(data) > 0 && &data[0] == &d.mapping[0] && s.pending.Load() > 0 {
		// Fill the block's page table entries with one call: reading them
		// one fault a page (MADV_RANDOM turns fault-around off) costs far
		// more than their checksum in a virtual machine.
		_ = syscall.Madvise(d.mapping[lo&^(pageSize-1):hi], madvPopulateRead)
	}
	if crc32.Checksum(data[lo:hi], castagnoli) != binary.LittleEndian.Uint32(s.crcs[4*b:]) {
		return &CorruptError{Path: d.path, Block: b, Offset: lo}
	}
	if old := s.checked[b/64].Or(1 << (b % 64)); old&(1<<(b%64)) == 0 {
		s.pending.Add(-1)
	}
	return nil
}

// VerifyPending checks every block not checked yet (a server runs it in the
// background after opening with VerifyOnTouch). It returns the first
// mismatch as a *CorruptError; version 1 dictionaries were checked at Open.
//
// A file mapping's page tables are filled first with one call (where the
// kernel has MADV_POPULATE_READ): the pass, and the lookups after it, then
// take no page fault of their own, which in a virtual machine costs far more
// than the page's checksum.
//
// A dictionary opened InMemory is then copied, each block checked again in
// the copy, and served from the copy from then on: the mapping, checked,
// serves until then.
func (d *Dict) VerifyPending() error {
	if err := d.checkPending(); err != nil {
		return err
	}
	if d.file == nil {
		return nil
	}
	err := d.copyToMemory()
	_ = d.file.Close()
	d.file = nil
	if errors.Is(err, ErrChecksum) {
		return err
	}
	return nil // no memory for the copy: the file mapping, checked, serves on
}

// checkPending checks every block not checked yet in the view served.
func (d *Dict) checkPending() error {
	s := d.blocks
	if s == nil || s.pending.Load() == 0 {
		return nil
	}
	v := d.view.Load()
	if d.mapping != nil {
		_ = syscall.Madvise(d.mapping, madvPopulateRead)
	}
	for b := range uint64(len(s.crcs) / 4) {
		if s.pending.Load() == 0 {
			return nil
		}
		if s.checked[b/64].Load()&(1<<(b%64)) != 0 {
			continue
		}
		if err := d.checkBlock(v.data, b); err != nil {
			return err
		}
	}
	return nil
}

// copyToMemory reads the file into anonymous memory advised to use huge
// pages, checks every block of the copy, write-protects it and serves it
// instead of the file mapping, which stays mapped until Close for the
// lookups that still read it.
func (d *Dict) copyToMemory() error {
	size := len(d.mapping)
	mem, err := anonmem.Map(size, true)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		_ = syscall.Munmap(mem)
		return err
	}
	if _, err := d.file.ReadAt(mem[:size], 0); err != nil {
		return fail(err)
	}
	s := d.blocks
	// The header and the block table, checked at Open in the mapping, must
	// be the same bytes in the copy.
	if string(mem[:headerSize]) != string(d.mapping[:headerSize]) || string(mem[s.end:size]) != string(d.mapping[s.end:]) {
		return fail(fmt.Errorf("dictionary %q changed while it was copied: %w", d.path, ErrChecksum))
	}
	for b := range uint64(len(s.crcs) / 4) {
		if err := d.checkBlock(mem, b); err != nil {
			return fail(err)
		}
	}
	if err := syscall.Mprotect(mem, syscall.PROT_READ); err != nil {
		return fail(err)
	}
	d.copy = mem
	d.view.Store(d.viewOf(mem[:size:size]))
	return nil
}

// UncheckedBytes returns the size of the blocks not checked yet.
func (d *Dict) UncheckedBytes() int64 {
	if d.blocks == nil {
		return 0
	}
	return min(d.blocks.pending.Load()<<d.blocks.shift, int64(d.blocks.end-headerSize))
}

// CopiedBytes returns the size of the dictionary if it is served from a
// copy in anonymous memory (Options.InMemory, once VerifyPending made it),
// else 0.
func (d *Dict) CopiedBytes() int64 {
	if v := d.view.Load(); d.copy != nil && len(v.data) > 0 && &v.data[0] == &d.copy[0] {
		return int64(len(v.data))
	}
	return 0
}

// Pending returns how many blocks have not been checked yet.
func (d *Dict) Pending() int64 {
	if d.blocks == nil {
		return 0
	}
	return d.blocks.pending.Load()
}

// Verify checks the whole dictionary against its checksums again: what was
// checked before may have changed since (a file edited in place, a bit
// flipped on disk or in the page cache). It reads every byte.
func (d *Dict) Verify() error {
	if d.blocks != nil {
		data := d.view.Load().data
		for b := range uint64(len(d.blocks.crcs) / 4) {
			if err := d.checkBlock(data, b); err != nil {
				return err
			}
		}
		return nil
	}
	v := d.view.Load()
	if crc32.Checksum(v.index, castagnoli) != d.hdr.indexCRC {
		return fmt.Errorf("index section: %w", ErrChecksum)
	}
	if crc32.Checksum(v.values, castagnoli) != d.hdr.valuesCRC {
		return fmt.Errorf("values section: %w", ErrChecksum)
	}
	return nil
}
