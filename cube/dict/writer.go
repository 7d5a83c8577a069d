package dict

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Stats describe a written dictionary.
type Stats struct {
	Count      uint64 // distinct keys
	Added      uint64 // Add calls, including overwritten keys
	Slots      uint64 // index slots
	IndexSize  int64  // bytes of the index section
	ValuesSize int64  // bytes of the values section
	FileSize   int64  // total file size
	MaxValue   int    // largest value in bytes
	Inline     int    // every value's size in the inline layout; 0 referenced
	MaxProbe   uint64 // the most slots past its home slot a key sits
}

// The layout a Writer is writing.
type writerLayout int

const (
	layoutUnset  writerLayout = iota // no value yet
	layoutInline                     // every value so far had inlineSize bytes
	layoutRef                        // values of several sizes, or large ones
)

// Writer builds a dictionary from a stream of (key, value) pairs with upsert
// semantics: a key added twice keeps its last value.
//
// Memory does not grow with the input. While every value has the same size,
// up to MaxInlineValue, (key, order, value) records go to a spill file next
// to the dictionary (the inline layout); once a value of another size comes,
// what was spilled is rewritten once into the referenced layout: values
// streamed into the final file, (key, offset) records into the spill. Finish
// builds the index in place in the file, indexChunkBytes (8 MiB) of slots at
// a time, from the spill partitioned by chunk into a second spill file, so
// it holds about 13 MiB beyond the write buffers whatever the key count: one
// chunk, the partitions' buffers (partitionBufBytes, or 4 KiB a chunk past
// 1024 chunks) and the few records whose probes cross from one chunk into
// the next.
type Writer struct {
	path       string
	f          *os.File // the dictionary; values start at headerSize
	fbuf       *bufio.Writer
	pairs      *os.File // the spill
	pairsBuf   *bufio.Writer
	bufSize    int
	mode       writerLayout
	inlineSize int
	valsOff    uint64
	added      uint64 // Add calls
	spilled    uint64 // spill records
	maxValue   int
	extra      []byte // inline: the value of emptyKey, which has no slot of its own
	hasExtra   bool
	scratch    [binary.MaxVarintLen64]byte
}

// NewWriter creates (or truncates) the dictionary file at path; a spill file
// is created next to it and removed by Finish or Abort. It buffers 1 MiB.
func NewWriter(path string) (*Writer, error) { return NewWriterSize(path, 1<<20) }

// NewWriterSize is NewWriter with a write buffer of bufSize bytes (at least
// 4 KiB); builders with many shards use it to bound their buffers.
func NewWriterSize(path string, bufSize int) (*Writer, error) {
	bufSize = max(bufSize, 4<<10)
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create dictionary %q: %w", path, err)
	}
	w := &Writer{path: path, f: f, bufSize: bufSize, fbuf: bufio.NewWriterSize(f, bufSize)}
	if err := w.newSpill(); err != nil {
		removeFile(f)
		return nil, err
	}
	var hdr [headerSize]byte // placeholder, rewritten by Finish
	if _, err := w.fbuf.Write(hdr[:]); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write dictionary %q: %w", path, err)
	}
	return w, nil
}

// newSpill starts an empty spill file.
func (w *Writer) newSpill() error {
	pairs, err := os.CreateTemp(filepath.Dir(w.path), ".pairs-*.spill")
	if err != nil {
		return fmt.Errorf("create key spill: %w", err)
	}
	w.pairs, w.spilled = pairs, 0
	w.pairsBuf = bufio.NewWriterSize(pairs, max(w.bufSize/4, 4<<10))
	return nil
}

func removeFile(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// Add appends a key and its value; the value is copied.
func (w *Writer) Add(key uint64, value []byte) error {
	if w.mode == layoutUnset {
		w.mode, w.inlineSize = layoutRef, 0
		if len(value) > 0 && len(value) <= MaxInlineValue {
			w.mode, w.inlineSize = layoutInline, len(value)
		}
	}
	if w.mode == layoutInline && len(value) != w.inlineSize {
		if err := w.toReferenced(); err != nil {
			return err
		}
	}
	w.added++
	w.maxValue = max(w.maxValue, len(value))
	if w.mode == layoutRef {
		return w.addRef(key, value)
	}
	if key == emptyKey {
		w.extra, w.hasExtra = append(w.extra[:0], value...), true
		return nil
	}
	// AvailableBuffer avoids a heap-allocated scratch array per call.
	p := w.pairsBuf.AvailableBuffer()
	p = binary.LittleEndian.AppendUint64(p, key)
	p = binary.LittleEndian.AppendUint64(p, w.spilled)
	p = append(p, value...)
	if _, err := w.pairsBuf.Write(p); err != nil {
		return fmt.Errorf("spill key: %w", err)
	}
	w.spilled++
	return nil
}

// addRef writes value into the values section and (key, offset) into the
// spill.
func (w *Writer) addRef(key uint64, value []byte) error {
	n := binary.PutUvarint(w.scratch[:], uint64(len(value)))
	_, _ = w.fbuf.Write(w.scratch[:n]) // bufio errors are sticky: the next Write reports them
	if _, err := w.fbuf.Write(value); err != nil {
		return fmt.Errorf("write dictionary %q: %w", w.path, err)
	}
	p := w.pairsBuf.AvailableBuffer()
	p = binary.LittleEndian.AppendUint64(p, key)
	p = binary.LittleEndian.AppendUint64(p, w.valsOff)
	if _, err := w.pairsBuf.Write(p); err != nil {
		return fmt.Errorf("spill key: %w", err)
	}
	w.valsOff += uint64(n + len(value))
	w.spilled++
	return nil
}

// toReferenced rewrites what an inline writer spilled into the referenced
// layout, in the order it was added, the value of emptyKey last (no other
// record has that key, so its place in the order does not matter).
func (w *Writer) toReferenced() error {
	if err := w.pairsBuf.Flush(); err != nil {
		return fmt.Errorf("spill key: %w", err)
	}
	old, n := w.pairs, w.spilled
	defer removeFile(old)
	if err := w.newSpill(); err != nil {
		return err
	}
	rec := recordHeader + w.inlineSize
	w.mode, w.inlineSize = layoutRef, 0
	rd := bufio.NewReaderSize(io.NewSectionReader(old, 0, int64(n)*int64(rec)), 1<<18)
	r := make([]byte, rec)
	for range n {
		if _, err := io.ReadFull(rd, r); err != nil {
			return fmt.Errorf("read key spill: %w", err)
		}
		if err := w.addRef(binary.LittleEndian.Uint64(r), r[recordHeader:]); err != nil {
			return err
		}
	}
	if w.hasExtra {
		w.hasExtra = false
		return w.addRef(emptyKey, w.extra)
	}
	return nil
}

// Added returns the number of Add calls so far.
func (w *Writer) Added() uint64 { return w.added }

// Abort removes the dictionary and spill files.
func (w *Writer) Abort() {
	if w.f != nil {
		removeFile(w.f)
		w.f = nil
	}
	if w.pairs != nil {
		removeFile(w.pairs)
		w.pairs = nil
	}
}

// Finish completes and syncs the dictionary file. Publishing it atomically
// is the caller's job.
func (w *Writer) Finish() (Stats, error) {
	defer w.Abort() // after success only the spill is left to remove
	if err := w.fbuf.Flush(); err != nil {
		return Stats{}, fmt.Errorf("write dictionary %q: %w", w.path, err)
	}
	if err := w.pairsBuf.Flush(); err != nil {
		return Stats{}, fmt.Errorf("spill key: %w", err)
	}
	if w.mode == layoutUnset {
		w.mode = layoutRef // empty: no value says what size they have
	}
	off := indexOffset(w.valsOff)
	b := newIndexBuilder(w, off)
	defer b.close()
	slots := slotsFor(w.spilled)
	count, err := b.build(slots)
	if err != nil {
		return Stats{}, err
	}
	// Many overwritten keys (a delta on top of a base) leave the table
	// sparse; build again, at the size a fresh build would have.
	if want := slotsFor(count); want < slots*3/4 {
		slots = want
		if count, err = b.build(slots); err != nil {
			return Stats{}, err
		}
	}
	h := header{
		count:        count,
		slots:        slots,
		valuesOffset: headerSize,
		valuesSize:   w.valsOff,
		maxValue:     uint64(w.maxValue),
		slotSize:     uint32(b.slot),
		inline:       uint32(w.inlineSize),
		maxProbe:     b.maxProbe,
		blockShift:   defaultBlockShift,
		flags:        flagOrdered,
	}
	f := w.f
	if b.inline {
		if err := w.writeExtraSlot(off + slots*b.slot); err != nil {
			return Stats{}, err
		}
		if w.hasExtra {
			h.count++
			h.flags |= flagExtraKey
		}
	} else if count != w.spilled {
		// Overwritten keys left dead values behind: write a compacted copy.
		if f, h.valuesSize, err = w.compact(off, slots, b.buf); err != nil {
			return Stats{}, err
		}
	}
	h.indexOffset = indexOffset(h.valuesSize)
	if err := finishFile(f, &h, b.buf); err != nil {
		return Stats{}, fmt.Errorf("write dictionary %q: %w", w.path, err)
	}
	if f != w.f {
		_ = w.f.Close() // replaced by the rename below, not removed
		w.f = nil
		if err := os.Rename(f.Name(), w.path); err != nil {
			_ = os.Remove(f.Name())
			return Stats{}, fmt.Errorf("write dictionary %q: %w", w.path, err)
		}
	} else {
		w.f = nil // keep the finished file
	}
	return Stats{
		Count:      h.count,
		Added:      w.added,
		Slots:      slots,
		IndexSize:  int64(h.indexSize()),
		ValuesSize: int64(h.valuesSize),
		FileSize:   int64(h.blockTableOffset() + 4*h.blocks),
		MaxValue:   w.maxValue,
		Inline:     w.inlineSize,
		MaxProbe:   h.maxProbe,
	}, nil
}

// writeExtraSlot writes the inline layout's extra slot at off: emptyKey and
// its value if it was added, zeros otherwise.
func (w *Writer) writeExtraSlot(off uint64) error {
	s := make([]byte, 8+w.inlineSize)
	if w.hasExtra {
		binary.LittleEndian.PutUint64(s, emptyKey)
		copy(s[8:], w.extra)
	}
	if _, err := w.f.WriteAt(s, int64(off)); err != nil {
		return fmt.Errorf("write dictionary %q: %w", w.path, err)
	}
	return nil
}

// compact copies the live values, in slot order, into a new file next to
// the dictionary, rewrites the refs of the index at off in place to match
// (a chunk at a time, through buf), then copies the index after the new
// values. It returns the new file and its values' size.
func (w *Writer) compact(off, slots uint64, buf []byte) (*os.File, uint64, error) {
	src, err := syscall.Mmap(int(w.f.Fd()), 0, int(headerSize+w.valsOff), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, 0, fmt.Errorf("map dictionary %q: %w", w.path, err)
	}
	defer func() { _ = syscall.Munmap(src) }()
	vals := src[headerSize:]
	f, err := os.CreateTemp(filepath.Dir(w.path), ".compact-*.cube")
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*os.File, uint64, error) {
		removeFile(f)
		return nil, 0, fmt.Errorf("compact dictionary %q: %w", w.path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var hdr [headerSize]byte
	_, _ = bw.Write(hdr[:]) // sticky; reported by Flush below
	var newOff uint64
	size := slots * refSlotSize
	for at := uint64(0); at < size; at += uint64(len(buf)) {
		tbl := buf[:min(uint64(len(buf)), size-at)]
		if _, err := w.f.ReadAt(tbl, int64(off+at)); err != nil {
			return fail(err)
		}
		for i := 0; i < len(tbl); i += refSlotSize {
			ref := binary.LittleEndian.Uint64(tbl[i+8:])
			if ref == 0 {
				continue
			}
			l, n := binary.Uvarint(vals[ref-1:])
			rec := vals[ref-1 : ref-1+uint64(n)+l]
			if _, err := bw.Write(rec); err != nil {
				return fail(err)
			}
			binary.LittleEndian.PutUint64(tbl[i+8:], newOff+1)
			newOff += uint64(len(rec))
		}
		if _, err := w.f.WriteAt(tbl, int64(off+at)); err != nil {
			return fail(err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := copySection(f, indexOffset(newOff), w.f, off, size, buf); err != nil {
		return fail(err)
	}
	return f, newOff, nil
}

// copySection copies size bytes of src from srcOff to dst at dstOff through
// buf.
func copySection(dst *os.File, dstOff uint64, src *os.File, srcOff, size uint64, buf []byte) error {
	for done := uint64(0); done < size; {
		p := buf[:min(uint64(len(buf)), size-done)]
		if _, err := src.ReadAt(p, int64(srcOff+done)); err != nil {
			return err
		}
		if _, err := dst.WriteAt(p, int64(dstOff+done)); err != nil {
			return err
		}
		done += uint64(len(p))
	}
	return nil
}

// finishFile writes the padding between values and index, the block table
// and the header h into f, whose values and index are in place, trims f to
// its size, syncs and closes it. It reads the file back through scratch
// when that holds a block or more.
func finishFile(f *os.File, h *header, scratch []byte) error {
	pad := make([]byte, h.indexOffset-headerSize-h.valuesSize)
	if _, err := f.WriteAt(pad, int64(headerSize+h.valuesSize)); err != nil {
		return err
	}
	end := h.blockTableOffset()
	h.blocks = blocksFor(end, h.blockShift)
	table := make([]byte, 0, 4*h.blocks)
	block := uint64(1) << h.blockShift
	buf := scratch[:uint64(len(scratch))&^(block-1)]
	if len(buf) == 0 {
		buf = make([]byte, block)
	}
	for at := uint64(headerSize); at < end; {
		p := buf[:min(uint64(len(buf)), end-at)]
		if _, err := f.ReadAt(p, int64(at)); err != nil {
			return err
		}
		for len(p) > 0 {
			n := min(block, uint64(len(p)))
			table = binary.LittleEndian.AppendUint32(table, crc32.Checksum(p[:n], castagnoli))
			p = p[n:]
			at += n
		}
	}
	if _, err := f.WriteAt(table, int64(end)); err != nil {
		return err
	}
	h.blocksCRC = crc32.Checksum(table, castagnoli)
	var hb [headerSize]byte
	h.marshal(hb[:])
	if _, err := f.WriteAt(hb[:], 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(end + 4*h.blocks)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}
