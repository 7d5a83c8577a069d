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
// file as they arrive and (key, offset) pairs into a spill file next to it;
// only Finish holds the index, which is the size of the final index section.
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
	index, count, err := w.buildIndex()
	if err != nil {
		return Stats{}, err
	}
	f, valsSize, valsCRC := w.f, w.valsOff, w.valsCRC
	if count != w.added {
		// Overwritten keys left dead values behind: write a compacted copy.
		if f, valsSize, valsCRC, err = w.compact(index); err != nil {
			return Stats{}, err
		}
	}
	st, err := finishFile(f, index, count, valsSize, valsCRC, w.maxValue)
	if err != nil {
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
	st.Added = w.added
	return st, nil
}

// buildIndex reads the pair spill into an open-addressing table whose refs
// point into the values written so far.
func (w *Writer) buildIndex() ([]byte, uint64, error) {
	slots := slotsFor(w.added)
	index := make([]byte, slots*slotSize)
	if _, err := w.pairs.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("rewind key spill: %w", err)
	}
	r := bufio.NewReaderSize(w.pairs, 1<<18)
	var (
		chunk [batchGroup * 16]byte
		homes [batchGroup]uint64
		count uint64
	)
	for {
		// Inserts are random writes into a table far larger than the
		// caches: prefetch a chunk's home slots before inserting any.
		n, err := io.ReadFull(r, chunk[:])
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, fmt.Errorf("read key spill: %w", err)
		}
		if n%16 != 0 {
			return nil, 0, fmt.Errorf("read key spill: %d stray bytes", n%16)
		}
		pairs := chunk[:n]
		for j := 0; j < n/16; j++ {
			homes[j] = homeSlot(binary.LittleEndian.Uint64(pairs[j*16:]), slots)
			prefetch(&index[homes[j]*slotSize])
		}
		for j := 0; j < n/16; j++ {
			p := pairs[j*16:]
			if insertAt(index, slots, binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])+1, homes[j]) {
				count++
			}
		}
		if n < len(chunk) {
			break
		}
	}
	// Many overwritten keys (a delta on top of a base) leave the table
	// sparse; rehash into one of the size a fresh build would have.
	if want := slotsFor(count); want < slots*3/4 {
		small := make([]byte, want*slotSize)
		for i := uint64(0); i < slots; i++ {
			s := index[i*slotSize:]
			if ref := binary.LittleEndian.Uint64(s[8:]); ref != 0 {
				insert(small, want, binary.LittleEndian.Uint64(s), ref)
			}
		}
		index = small
	}
	return index, count, nil
}

// insert upserts key -> ref and reports whether the key is new.
func insert(index []byte, slots, key, ref uint64) bool {
	return insertAt(index, slots, key, ref, homeSlot(key, slots))
}

// insertAt is insert with the home slot i already computed.
func insertAt(index []byte, slots, key, ref, i uint64) bool {
	for {
		s := index[i*slotSize : i*slotSize+slotSize]
		old := binary.LittleEndian.Uint64(s[8:])
		if old == 0 {
			binary.LittleEndian.PutUint64(s, key)
			binary.LittleEndian.PutUint64(s[8:], ref)
			return true
		}
		if binary.LittleEndian.Uint64(s) == key {
			binary.LittleEndian.PutUint64(s[8:], ref)
			return false
		}
		if i++; i == slots {
			i = 0
		}
	}
}

// compact copies the live values, in slot order, into a new file next to
// the dictionary and rewrites the refs in index to match.
func (w *Writer) compact(index []byte) (*os.File, uint64, uint32, error) {
	src, err := syscall.Mmap(int(w.f.Fd()), 0, int(headerSize+w.valsOff), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("map dictionary %q: %w", w.path, err)
	}
	defer func() { _ = syscall.Munmap(src) }()
	vals := src[headerSize:]
	f, err := os.CreateTemp(filepath.Dir(w.path), ".compact-*.cube")
	if err != nil {
		return nil, 0, 0, err
	}
	fail := func(err error) (*os.File, uint64, uint32, error) {
		removeFile(f)
		return nil, 0, 0, fmt.Errorf("compact dictionary %q: %w", w.path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var hdr [headerSize]byte
	_, _ = bw.Write(hdr[:]) // sticky; reported by Flush below
	var crc uint32
	var off uint64
	for i := uint64(0); i < uint64(len(index))/slotSize; i++ {
		s := index[i*slotSize:]
		ref := binary.LittleEndian.Uint64(s[8:])
		if ref == 0 {
			continue
		}
		l, n := binary.Uvarint(vals[ref-1:])
		rec := vals[ref-1 : ref-1+uint64(n)+l]
		if _, err := bw.Write(rec); err != nil {
			return fail(err)
		}
		crc = crc32.Update(crc, castagnoli, rec)
		binary.LittleEndian.PutUint64(s[8:], off+1)
		off += uint64(len(rec))
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	return f, off, crc, nil
}

// finishFile appends padding and the index after valsSize bytes of values,
// writes the header, syncs and closes f.
func finishFile(f *os.File, index []byte, count, valsSize uint64, valsCRC uint32, maxValue int) (Stats, error) {
	h := header{
		version:      FormatCurrent,
		count:        count,
		slots:        uint64(len(index)) / slotSize,
		indexOffset:  indexOffset(valsSize),
		valuesOffset: headerSize,
		valuesSize:   valsSize,
		maxValue:     uint64(maxValue),
		valuesCRC:    valsCRC,
		indexCRC:     crc32.Checksum(index, castagnoli),
	}
	var pad [8]byte
	if _, err := f.WriteAt(pad[:h.indexOffset-headerSize-valsSize], int64(headerSize+valsSize)); err != nil {
		return Stats{}, err
	}
	if _, err := f.WriteAt(index, int64(h.indexOffset)); err != nil {
		return Stats{}, err
	}
	var hb [headerSize]byte
	h.marshal(hb[:])
	if _, err := f.WriteAt(hb[:], 0); err != nil {
		return Stats{}, err
	}
	if err := f.Truncate(int64(h.indexOffset) + int64(len(index))); err != nil {
		return Stats{}, err
	}
	if err := f.Sync(); err != nil {
		return Stats{}, err
	}
	if err := f.Close(); err != nil {
		return Stats{}, err
	}
	return Stats{
		Count:      count,
		Slots:      h.slots,
		IndexSize:  int64(len(index)),
		ValuesSize: int64(valsSize),
		FileSize:   int64(h.indexOffset) + int64(len(index)),
		MaxValue:   maxValue,
	}, nil
}
