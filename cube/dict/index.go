package dict

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// indexChunkBytes is how much of the index a build holds in memory at once.
// The index is built one chunk of slots at a time, so a build's memory does
// not grow with its key count.
const indexChunkBytes = 8 << 20

// chunkSlots is indexChunkBytes in slots; tests shrink it to cross chunk
// boundaries with few keys.
var chunkSlots uint64 = indexChunkBytes / slotSize

// partitionBufBytes bounds the write buffers of all partitions together
// (each has at least minPartitionBuf).
const (
	partitionBufBytes = 4 << 20
	minPartitionBuf   = 4 << 10
)

// pair is a spilled (key, ref) whose home chunk is behind it: it is
// inserted into the next chunk from that chunk's first slot. ref-1 is the
// value's offset, which grows with every Add, so refs order pairs as they
// were added.
type pair struct{ key, ref uint64 }

// indexBuilder builds an index into the dictionary file, chunk by chunk.
//
// The table is the one that inserting every pair, in the order added, into
// a line of slots that does not wrap would give, after which the pairs that
// ran past the last slot are inserted from slot 0 on, in the order added.
// It does not depend on the chunk size: a chunk receives the pairs that ran
// past the end of the chunk before it (the carry) merged by ref with its own
// pairs, exactly the inserts that reach its slots in that order.
type indexBuilder struct {
	w     *Writer
	off   uint64 // index offset in w.f
	slots uint64
	chunk uint64 // slots per chunk
	buf   []byte // one chunk of the index; reused as scratch by the caller
	rd    *bufio.Reader
	parts *os.File // the spill partitioned by chunk, when there are several
	count uint64   // distinct keys placed so far
}

func newIndexBuilder(w *Writer, off uint64) *indexBuilder {
	chunk := min(slotsFor(w.added), chunkSlots)
	return &indexBuilder{
		w: w, off: off,
		buf: make([]byte, chunk*slotSize),
		rd:  bufio.NewReaderSize(nil, 1<<18),
	}
}

// close removes the partition file.
func (b *indexBuilder) close() {
	if b.parts != nil {
		removeFile(b.parts)
		b.parts = nil
	}
}

// build writes an index of slots slots built from the pair spill at b.off
// in the dictionary file and returns the number of distinct keys.
func (b *indexBuilder) build(slots uint64) (uint64, error) {
	b.slots, b.count = slots, 0
	b.chunk = min(slots, uint64(len(b.buf))/slotSize)
	chunks := (slots + b.chunk - 1) / b.chunk
	spill := io.NewSectionReader(b.w.pairs, 0, int64(b.w.added*16))
	sources := []*io.SectionReader{spill}
	if chunks > 1 {
		var err error
		if sources, err = b.partition(spill, chunks); err != nil {
			return 0, err
		}
	}
	var carry []pair
	for c := range chunks {
		tbl := b.table(c)
		clear(tbl)
		var err error
		if carry, err = b.fill(tbl, c*b.chunk, carry, sources[c]); err != nil {
			return 0, err
		}
		if err := b.writeChunk(tbl, c); err != nil {
			return 0, err
		}
	}
	// Pairs that ran past the last slot wrap around to slot 0.
	for c := uint64(0); len(carry) > 0; c++ {
		if c == chunks {
			return 0, errors.New("build index: no empty slot") // slots > added rules this out
		}
		tbl := b.table(c)
		if _, err := b.w.f.ReadAt(tbl, int64(b.off+c*b.chunk*slotSize)); err != nil {
			return 0, fmt.Errorf("read index: %w", err)
		}
		var err error
		if carry, err = b.fill(tbl, c*b.chunk, carry, nil); err != nil {
			return 0, err
		}
		if err := b.writeChunk(tbl, c); err != nil {
			return 0, err
		}
	}
	return b.count, nil
}

// table returns the buffer for chunk c, the last one possibly shorter.
func (b *indexBuilder) table(c uint64) []byte {
	return b.buf[:min(b.chunk, b.slots-c*b.chunk)*slotSize]
}

func (b *indexBuilder) writeChunk(tbl []byte, c uint64) error {
	if _, err := b.w.f.WriteAt(tbl, int64(b.off+c*b.chunk*slotSize)); err != nil {
		return fmt.Errorf("write dictionary %q: %w", b.w.path, err)
	}
	return nil
}

// fill inserts into tbl, the chunk starting at slot lo, the carried pairs
// and the pairs read from src (nil for none), merged in the order they were
// added, and returns the pairs that ran past its end, in that order too.
func (b *indexBuilder) fill(tbl []byte, lo uint64, carry []pair, src *io.SectionReader) ([]pair, error) {
	var out []pair
	put := func(key, ref, i uint64) {
		switch place(tbl, key, ref, i) {
		case placedNew:
			b.count++
		case overflowed:
			out = append(out, pair{key, ref})
		}
	}
	if src != nil {
		var homes [batchGroup]uint64
		err := b.readPairs(src, func(batch []byte) {
			// Inserts are random writes into a chunk larger than the
			// caches: prefetch a batch's home slots before inserting any.
			for j := range len(batch) / 16 {
				homes[j] = homeSlot(binary.LittleEndian.Uint64(batch[j*16:]), b.slots) - lo
				prefetch(&tbl[homes[j]*slotSize])
			}
			for j := range len(batch) / 16 {
				key := binary.LittleEndian.Uint64(batch[j*16:])
				ref := binary.LittleEndian.Uint64(batch[j*16+8:]) + 1
				for len(carry) > 0 && carry[0].ref < ref {
					put(carry[0].key, carry[0].ref, 0)
					carry = carry[1:]
				}
				put(key, ref, homes[j])
			}
		})
		if err != nil {
			return nil, err
		}
	}
	for _, p := range carry {
		put(p.key, p.ref, 0)
	}
	return out, nil
}

type placement int

const (
	placedNew  placement = iota // the key took an empty slot
	placedOld                   // the key was there: its ref was replaced
	overflowed                  // the probe ran past the end of the table
)

// place upserts key -> ref into tbl, probing linearly from slot i without
// wrapping around.
func place(tbl []byte, key, ref, i uint64) placement {
	for n := uint64(len(tbl)) / slotSize; i < n; i++ {
		s := tbl[i*slotSize : i*slotSize+slotSize]
		if binary.LittleEndian.Uint64(s[8:]) == 0 {
			binary.LittleEndian.PutUint64(s, key)
			binary.LittleEndian.PutUint64(s[8:], ref)
			return placedNew
		}
		if binary.LittleEndian.Uint64(s) == key {
			binary.LittleEndian.PutUint64(s[8:], ref)
			return placedOld
		}
	}
	return overflowed
}

// readPairs calls fn with successive batches of at most batchGroup 16-byte
// (key, value offset) pairs read from r, from its start.
func (b *indexBuilder) readPairs(r *io.SectionReader, fn func(batch []byte)) error {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind key spill: %w", err)
	}
	b.rd.Reset(r)
	var buf [batchGroup * 16]byte
	for {
		n, err := io.ReadFull(b.rd, buf[:])
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read key spill: %w", err)
		}
		if n%16 != 0 {
			return fmt.Errorf("read key spill: %d stray bytes", n%16)
		}
		if n > 0 {
			fn(buf[:n])
		}
		if n < len(buf) {
			return nil
		}
	}
}

// partition copies the spill into one file holding, for each chunk in
// turn, the pairs whose home slot is in it, in the order added (a counting
// sort: one pass counts, the second places), and returns each chunk's
// section of it.
func (b *indexBuilder) partition(spill *io.SectionReader, chunks uint64) ([]*io.SectionReader, error) {
	counts := make([]uint64, chunks)
	err := b.readPairs(spill, func(batch []byte) {
		for j := 0; j < len(batch); j += 16 {
			counts[homeSlot(binary.LittleEndian.Uint64(batch[j:]), b.slots)/b.chunk]++
		}
	})
	if err != nil {
		return nil, err
	}
	if b.parts == nil {
		if b.parts, err = os.CreateTemp(filepath.Dir(b.w.path), ".parts-*.spill"); err != nil {
			return nil, fmt.Errorf("create key spill: %w", err)
		}
	}
	next := make([]int64, chunks) // where chunk c's next pairs go
	sections := make([]*io.SectionReader, chunks)
	var at int64
	for c, n := range counts {
		next[c] = at
		sections[c] = io.NewSectionReader(b.parts, at, int64(n*16))
		at += int64(n * 16)
	}
	size := max(minPartitionBuf, partitionBufBytes/int(chunks)) &^ 15
	bufs := make([]byte, int(chunks)*size)
	used := make([]int, chunks)
	var werr error
	flush := func(c uint64) {
		p := bufs[int(c)*size : int(c)*size+used[c]]
		if _, err := b.parts.WriteAt(p, next[c]); err != nil && werr == nil {
			werr = fmt.Errorf("spill key: %w", err)
		}
		next[c] += int64(len(p))
		used[c] = 0
	}
	err = b.readPairs(spill, func(batch []byte) {
		for j := 0; j < len(batch); j += 16 {
			c := homeSlot(binary.LittleEndian.Uint64(batch[j:]), b.slots) / b.chunk
			copy(bufs[int(c)*size+used[c]:], batch[j:j+16])
			if used[c] += 16; used[c] == size {
				flush(c)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for c := range chunks {
		flush(c)
	}
	return sections, werr
}

// sectionCRC returns the CRC-32C of size bytes of f from off, read through buf.
func sectionCRC(f *os.File, off, size uint64, buf []byte) (uint32, error) {
	var crc uint32
	for done := uint64(0); done < size; {
		p := buf[:min(uint64(len(buf)), size-done)]
		if _, err := f.ReadAt(p, int64(off+done)); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, castagnoli, p)
		done += uint64(len(p))
	}
	return crc, nil
}
