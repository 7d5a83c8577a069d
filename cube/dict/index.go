package dict

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/elasticctr/terraform-provider-ctr/cube/prefetch"
)

// indexChunkBytes is how much of the index a build holds in memory at once.
// The index is built one chunk of slots at a time, so a build's memory does
// not grow with its key count.
const indexChunkBytes = 8 << 20

// chunkSlots caps the slots of a chunk below indexChunkBytes; tests shrink
// it to cross chunk boundaries with few keys.
var chunkSlots uint64 = indexChunkBytes / refSlotSize

// partitionBufBytes bounds the write buffers of all partitions together
// (each has at least minPartitionBuf).
const (
	partitionBufBytes = 4 << 20
	minPartitionBuf   = 4 << 10
)

// A spill record is (key, order, payload), little-endian: order grows with
// every Add, so it orders records as they were added. In the referenced
// layout order is the value's offset and there is no payload; in the inline
// layout order is the Add's sequence number and the payload is the value.
const recordHeader = 16

// indexBuilder builds an index into the dictionary file, chunk by chunk.
//
// The table is the one that inserting every record, in the order added,
// into a line of slots that does not wrap would give, after which the
// records that ran past the last slot are inserted from slot 0 on, in the
// order added. It does not depend on the chunk size: a chunk receives the
// records that ran past the end of the chunk before it (the carry) merged by
// order with its own records, exactly the inserts that reach its slots in
// that order.
type indexBuilder struct {
	w        *Writer
	off      uint64 // index offset in w.f
	rec      uint64 // spill record size
	slot     uint64 // index slot size
	inline   bool
	slots    uint64
	chunk    uint64 // slots per chunk
	buf      []byte // one chunk of the index; reused as scratch by the caller
	rd       *bufio.Reader
	parts    *os.File // the spill partitioned by chunk, when there are several
	occupied []uint64 // per chunk, the slots its last write held: their sum is the distinct keys
	maxProbe uint64   // the most slots past its home slot a key was placed
	cur, out []byte   // the record being placed and the one it displaces (b.rec bytes each)
}

func newIndexBuilder(w *Writer, off uint64) *indexBuilder {
	b := &indexBuilder{w: w, off: off, rec: recordHeader, slot: refSlotSize, rd: bufio.NewReaderSize(nil, 1<<18)}
	if w.mode == layoutInline {
		b.inline = true
		b.rec += uint64(w.inlineSize)
		b.slot = 8 + uint64(w.inlineSize)
	}
	b.cur, b.out = make([]byte, b.rec), make([]byte, b.rec)
	chunk := min(slotsFor(w.spilled), chunkSlots, indexChunkBytes/b.slot)
	b.buf = make([]byte, chunk*b.slot)
	return b
}

// close removes the partition file.
func (b *indexBuilder) close() {
	if b.parts != nil {
		removeFile(b.parts)
		b.parts = nil
	}
}

// build writes an index of slots slots built from the record spill at b.off
// in the dictionary file and returns the number of distinct keys.
func (b *indexBuilder) build(slots uint64) (uint64, error) {
	b.slots, b.maxProbe = slots, 0
	b.chunk = min(slots, uint64(len(b.buf))/b.slot)
	chunks := (slots + b.chunk - 1) / b.chunk
	b.occupied = make([]uint64, chunks)
	spill := io.NewSectionReader(b.w.pairs, 0, int64(b.w.spilled*b.rec))
	sources := []*io.SectionReader{spill}
	if chunks > 1 {
		var err error
		if sources, err = b.partition(spill, chunks); err != nil {
			return 0, err
		}
	}
	var carry []byte
	for c := range chunks {
		tbl := b.table(c)
		b.clear(tbl)
		var err error
		if carry, err = b.fill(tbl, c*b.chunk, carry, sources[c]); err != nil {
			return 0, err
		}
		if err := b.writeChunk(tbl, c); err != nil {
			return 0, err
		}
	}
	// Records that ran past the last slot wrap around to slot 0.
	for c := uint64(0); len(carry) > 0; c++ {
		if c == chunks {
			return 0, errors.New("build index: no empty slot") // slots > added rules this out
		}
		tbl := b.table(c)
		if _, err := b.w.f.ReadAt(tbl, int64(b.off+c*b.chunk*b.slot)); err != nil {
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
	count := uint64(0)
	for _, n := range b.occupied {
		count += n
	}
	return count, nil
}

// table returns the buffer for chunk c, the last one possibly shorter.
func (b *indexBuilder) table(c uint64) []byte {
	return b.buf[:min(b.chunk, b.slots-c*b.chunk)*b.slot]
}

// clear makes every slot of tbl empty.
func (b *indexBuilder) clear(tbl []byte) {
	clear(tbl)
	if b.inline {
		for at := 0; at < len(tbl); at += int(b.slot) {
			binary.LittleEndian.PutUint64(tbl[at:], emptyKey)
		}
	}
}

func (b *indexBuilder) writeChunk(tbl []byte, c uint64) error {
	b.occupied[c] = 0
	for at := uint64(0); at < uint64(len(tbl)); at += b.slot {
		if _, empty := b.slotKey(tbl[at:]); !empty {
			b.occupied[c]++
		}
	}
	if _, err := b.w.f.WriteAt(tbl, int64(b.off+c*b.chunk*b.slot)); err != nil {
		return fmt.Errorf("write dictionary %q: %w", b.w.path, err)
	}
	return nil
}

// fill inserts into tbl, the chunk starting at slot lo, the carried records
// and the records read from src (nil for none), merged in the order they
// were added, and returns the records that ran past its end, in that order
// too.
func (b *indexBuilder) fill(tbl []byte, lo uint64, carry []byte, src *io.SectionReader) ([]byte, error) {
	var out []byte
	rec := b.rec
	put := func(r []byte, i uint64) {
		if over := b.place(tbl, lo, r, i); over != nil {
			out = append(out, over...)
		}
	}
	if src != nil {
		var homes [BatchGroup]uint64
		err := b.readRecords(src, func(batch []byte) {
			// Inserts are random writes into a chunk larger than the
			// caches: prefetch a batch's home slots before inserting any.
			n := uint64(len(batch)) / rec
			for j := range n {
				homes[j] = homeSlot(binary.LittleEndian.Uint64(batch[j*rec:]), b.slots) - lo
				prefetch.Line(&tbl[homes[j]*b.slot])
			}
			for j := range n {
				r := batch[j*rec : (j+1)*rec]
				order := binary.LittleEndian.Uint64(r[8:])
				for len(carry) > 0 && binary.LittleEndian.Uint64(carry[8:]) < order {
					put(carry[:rec], 0)
					carry = carry[rec:]
				}
				put(r, homes[j])
			}
		})
		if err != nil {
			return nil, err
		}
	}
	for ; len(carry) > 0; carry = carry[rec:] {
		put(carry[:rec], 0)
	}
	return out, nil
}

// slotKey reads the key of slot s, or reports it empty.
func (b *indexBuilder) slotKey(s []byte) (key uint64, empty bool) {
	key = binary.LittleEndian.Uint64(s)
	if b.inline {
		return key, key == emptyKey
	}
	return key, binary.LittleEndian.Uint64(s[8:]) == 0
}

// put writes record r into slot s.
func (b *indexBuilder) put(s, r []byte) {
	copy(s[:8], r[:8])
	if b.inline {
		copy(s[8:], r[recordHeader:])
	} else {
		binary.LittleEndian.PutUint64(s[8:], binary.LittleEndian.Uint64(r[8:])+1) // ref = 1 + offset
	}
}

// take reads slot s back into record r. In the referenced layout the order
// is the value's offset, as in the spill; in the inline layout it is order,
// when the displaced record joins the carry.
func (b *indexBuilder) take(s, r []byte, order uint64) {
	copy(r[:8], s[:8])
	if b.inline {
		binary.LittleEndian.PutUint64(r[8:], order)
		copy(r[recordHeader:], s[8:])
	} else {
		binary.LittleEndian.PutUint64(r[8:], binary.LittleEndian.Uint64(s[8:])-1)
	}
}

// place upserts record r into tbl, the chunk starting at slot lo, probing
// from its slot i on without wrapping, Robin Hood style: a key passes a slot
// only while the key there is at least as far from its own home slot (the
// smaller key first at equal distances), and takes the slot of one nearer
// to its home, which goes on probing in its place. So along the index a
// key's distance from its home grows by one slot at most from the slot
// before, and a lookup stops at the first key nearer to its home than the
// lookup has walked (flagOrdered); and the index is the same whatever order
// the keys are added in. It returns the record that ran past the end of tbl
// (r, or one it displaced; valid until the next call), or nil.
func (b *indexBuilder) place(tbl []byte, lo uint64, r []byte, i uint64) []byte {
	cur := b.cur
	copy(cur, r)
	key := binary.LittleEndian.Uint64(cur)
	d := distance(key, lo+i, b.slots)
	for n := uint64(len(tbl)) / b.slot; i < n; i, d = i+1, d+1 {
		s := tbl[i*b.slot : (i+1)*b.slot]
		k, empty := b.slotKey(s)
		switch {
		case empty:
			b.put(s, cur)
			b.maxProbe = max(b.maxProbe, d)
			return nil
		case k == key: // added again: the later value wins
			b.put(s, cur)
			return nil
		}
		if kd := distance(k, lo+i, b.slots); kd < d || (kd == d && k > key) {
			b.take(s, b.out, binary.LittleEndian.Uint64(cur[8:]))
			b.put(s, cur)
			b.maxProbe = max(b.maxProbe, d)
			cur, b.out = b.out, cur
			b.cur = cur
			key, d = k, kd
		}
	}
	return cur
}

// readRecords calls fn with successive batches of at most BatchGroup spill
// records read from r, from its start.
func (b *indexBuilder) readRecords(r *io.SectionReader, fn func(batch []byte)) error {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind key spill: %w", err)
	}
	b.rd.Reset(r)
	buf := make([]byte, BatchGroup*b.rec)
	for {
		n, err := io.ReadFull(b.rd, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read key spill: %w", err)
		}
		if uint64(n)%b.rec != 0 {
			return fmt.Errorf("read key spill: %d stray bytes", uint64(n)%b.rec)
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
// turn, the records whose home slot is in it, in the order added (a
// counting sort: one pass counts, the second places), and returns each
// chunk's section of it.
func (b *indexBuilder) partition(spill *io.SectionReader, chunks uint64) ([]*io.SectionReader, error) {
	rec := b.rec
	counts := make([]uint64, chunks)
	err := b.readRecords(spill, func(batch []byte) {
		for j := uint64(0); j < uint64(len(batch)); j += rec {
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
	next := make([]int64, chunks) // where chunk c's next records go
	sections := make([]*io.SectionReader, chunks)
	var at int64
	for c, n := range counts {
		next[c] = at
		sections[c] = io.NewSectionReader(b.parts, at, int64(n*rec))
		at += int64(n * rec)
	}
	size := max(minPartitionBuf, partitionBufBytes/int(chunks))
	size = max(size-size%int(rec), int(rec))
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
	err = b.readRecords(spill, func(batch []byte) {
		for j := uint64(0); j < uint64(len(batch)); j += rec {
			c := homeSlot(binary.LittleEndian.Uint64(batch[j:]), b.slots) / b.chunk
			copy(bufs[int(c)*size+used[c]:], batch[j:j+rec])
			if used[c] += int(rec); used[c] == size {
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
