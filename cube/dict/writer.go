package dict

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
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
}

// Writer builds a dictionary from a stream of (key, value) pairs with upsert
// semantics: a key added twice keeps its last value.
//
// Memory does not grow with the input: values are streamed into the final
// file as they arrive and (key, offset) pairs into a spill file next to it.
// Finish builds the index in place in the file, indexChunkBytes (8 MiB) of
// slots at a time, from the spill partitioned by chunk into a second spill
// file, so it holds about 13 MiB beyond the write buffers whatever the key
// count: one chunk, the partitions' buffers (partitionBufBytes, or 4 KiB a
// chunk past 1024 chunks) and the few pairs whose probes cross from one chunk
// into the next.
type Writer struct {
	path     string
	f        *os.File // the dictionary; values start at headerSize
	fbuf     *bufio.Writer
	pairs    *os.File
	pairsBuf *bufio.Writer
	valsOff  uint64
	valsCRC  uint32
	added    uint64
	maxValue int
	scratch  [binary.MaxVarintLen64]byte
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
	pairs, err := os.CreateTemp(filepath.Dir(path), ".pairs-*.spill")
	if err != nil {
		removeFile(f)
		return nil, fmt.Errorf("create key spill: %w", err)
	}
	w := &Writer{
		path: path, f: f, pairs: pairs,
		fbuf:     bufio.NewWriterSize(f, bufSize),
		pairsBuf: bufio.NewWriterSize(pairs, max(bufSize/4, 4<<10)),
	}
	var hdr [headerSize]byte // placeholder, rewritten by Finish
	if _, err := w.fbuf.Write(hdr[:]); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write dictionary %q: %w", path, err)
	}
	return w, nil
}

func removeFile(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// Add appends a key and its value; the value is copied.
func (w *Writer) Add(key uint64, value []byte) error {
	n := binary.PutUvarint(w.scratch[:], uint64(len(value)))
	_, _ = w.fbuf.Write(w.scratch[:n]) // bufio errors are sticky: the next Write reports them
	if _, err := w.fbuf.Write(value); err != nil {
		return fmt.Errorf("write dictionary %q: %w", w.path, err)
	}
	w.valsCRC = crc32.Update(w.valsCRC, castagnoli, w.scratch[:n])
	w.valsCRC = crc32.Update(w.valsCRC, castagnoli, value)
	// AvailableBuffer avoids a heap-allocated scratch array per call.
	p := w.pairsBuf.AvailableBuffer()
	p = binary.LittleEndian.AppendUint64(p, key)
	p = binary.LittleEndian.AppendUint64(p, w.valsOff)
	if _, err := w.pairsBuf.Write(p); err != nil {
		return fmt.Errorf("spill key: %w", err)
	}
	w.valsOff += uint64(n + len(value))
	w.added++
	w.maxValue = max(w.maxValue, len(value))
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
	off := indexOffset(w.valsOff)
	b := newIndexBuilder(w, off)
	defer b.close()
	slots := slotsFor(w.added)
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
	f, valsSize, valsCRC := w.f, w.valsOff, w.valsCRC
	var idxCRC uint32
	if count != w.added {
		// Overwritten keys left dead values behind: write a compacted copy.
		if f, valsSize, valsCRC, idxCRC, err = w.compact(off, slots, b.buf); err != nil {
			return Stats{}, err
		}
	} else if idxCRC, err = sectionCRC(f, off, slots*slotSize, b.buf); err != nil {
		return Stats{}, fmt.Errorf("read index of %q: %w", w.path, err)
	}
	h := header{
		version:      FormatCurrent,
		count:        count,
		slots:        slots,
		indexOffset:  indexOffset(valsSize),
		valuesOffset: headerSize,
		valuesSize:   valsSize,
		maxValue:     uint64(w.maxValue),
		valuesCRC:    valsCRC,
		indexCRC:     idxCRC,
	}
	if err := finishFile(f, &h); err != nil {
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
	indexSize := int64(slots * slotSize)
	return Stats{
		Count:      count,
		Added:      w.added,
		Slots:      slots,
		IndexSize:  indexSize,
		ValuesSize: int64(valsSize),
		FileSize:   int64(h.indexOffset) + indexSize,
		MaxValue:   w.maxValue,
	}, nil
}

// compact copies the live values, in slot order, into a new file next to
// the dictionary, rewrites the refs of the index at off in place to match
// (a chunk at a time, through buf), then copies the index after the new
// values. It returns the new file, its values' size and CRC and the index CRC.
func (w *Writer) compact(off, slots uint64, buf []byte) (*os.File, uint64, uint32, uint32, error) {
	src, err := syscall.Mmap(int(w.f.Fd()), 0, int(headerSize+w.valsOff), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("map dictionary %q: %w", w.path, err)
	}
	defer func() { _ = syscall.Munmap(src) }()
	vals := src[headerSize:]
	f, err := os.CreateTemp(filepath.Dir(w.path), ".compact-*.cube")
	if err != nil {
		return nil, 0, 0, 0, err
	}
	fail := func(err error) (*os.File, uint64, uint32, uint32, error) {
		removeFile(f)
		return nil, 0, 0, 0, fmt.Errorf("compact dictionary %q: %w", w.path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var hdr [headerSize]byte
	_, _ = bw.Write(hdr[:]) // sticky; reported by Flush below
	var crc uint32
	var newOff uint64
	size := slots * slotSize
	for at := uint64(0); at < size; at += uint64(len(buf)) {
		tbl := buf[:min(uint64(len(buf)), size-at)]
		if _, err := w.f.ReadAt(tbl, int64(off+at)); err != nil {
			return fail(err)
		}
		for i := 0; i < len(tbl); i += slotSize {
			ref := binary.LittleEndian.Uint64(tbl[i+8:])
			if ref == 0 {
				continue
			}
			l, n := binary.Uvarint(vals[ref-1:])
			rec := vals[ref-1 : ref-1+uint64(n)+l]
			if _, err := bw.Write(rec); err != nil {
				return fail(err)
			}
			crc = crc32.Update(crc, castagnoli, rec)
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
	idxCRC, err := copySection(f, indexOffset(newOff), w.f, off, size, buf)
	if err != nil {
		return fail(err)
	}
	return f, newOff, crc, idxCRC, nil
}

// copySection copies size bytes of src from srcOff to dst at dstOff through
// buf and returns their CRC-32C.
func copySection(dst *os.File, dstOff uint64, src *os.File, srcOff, size uint64, buf []byte) (uint32, error) {
	var crc uint32
	for done := uint64(0); done < size; {
		p := buf[:min(uint64(len(buf)), size-done)]
		if _, err := src.ReadAt(p, int64(srcOff+done)); err != nil {
			return 0, err
		}
		if _, err := dst.WriteAt(p, int64(dstOff+done)); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, castagnoli, p)
		done += uint64(len(p))
	}
	return crc, nil
}

// finishFile writes the padding between values and index and the header h
// into f, whose index is already in place, trims f to its size, syncs and
// closes it.
func finishFile(f *os.File, h *header) error {
	var pad [8]byte
	if _, err := f.WriteAt(pad[:h.indexOffset-headerSize-h.valuesSize], int64(headerSize+h.valuesSize)); err != nil {
		return err
	}
	var hb [headerSize]byte
	h.marshal(hb[:])
	if _, err := f.WriteAt(hb[:], 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(h.indexOffset + h.slots*slotSize)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}
