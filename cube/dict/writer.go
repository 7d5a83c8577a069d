package dict

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
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
// Memory does not grow with the input: values are spilled to a temporary
// file and (key, offset) pairs to another; only Finish holds the index, which
// is the size of the final index section.
type Writer struct {
	vals, pairs       *os.File
	valsBuf, pairsBuf *bufio.Writer
	valsOff           uint64
	added             uint64
	maxValue          int
	scratch           [binary.MaxVarintLen64]byte
}

// NewWriter creates a writer whose spill files live in tmpDir.
func NewWriter(tmpDir string) (*Writer, error) {
	vals, err := os.CreateTemp(tmpDir, "values-*.spill")
	if err != nil {
		return nil, fmt.Errorf("create value spill: %w", err)
	}
	pairs, err := os.CreateTemp(tmpDir, "pairs-*.spill")
	if err != nil {
		removeFile(vals)
		return nil, fmt.Errorf("create pair spill: %w", err)
	}
	return &Writer{
		vals: vals, pairs: pairs,
		valsBuf:  bufio.NewWriterSize(vals, 1<<20),
		pairsBuf: bufio.NewWriterSize(pairs, 1<<18),
	}, nil
}

func removeFile(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// Add appends a key and its value; the value is copied.
func (w *Writer) Add(key uint64, value []byte) error {
	n := binary.PutUvarint(w.scratch[:], uint64(len(value)))
	if _, err := w.valsBuf.Write(w.scratch[:n]); err != nil {
		return fmt.Errorf("spill value: %w", err)
	}
	if _, err := w.valsBuf.Write(value); err != nil {
		return fmt.Errorf("spill value: %w", err)
	}
	var p [16]byte
	binary.LittleEndian.PutUint64(p[:], key)
	binary.LittleEndian.PutUint64(p[8:], w.valsOff)
	if _, err := w.pairsBuf.Write(p[:]); err != nil {
		return fmt.Errorf("spill key: %w", err)
	}
	w.valsOff += uint64(n + len(value))
	w.added++
	w.maxValue = max(w.maxValue, len(value))
	return nil
}

// Added returns the number of Add calls so far.
func (w *Writer) Added() uint64 { return w.added }

// Abort removes the spill files.
func (w *Writer) Abort() {
	if w.vals != nil {
		removeFile(w.vals)
		removeFile(w.pairs)
		w.vals, w.pairs = nil, nil
	}
}

// Finish writes the dictionary to path (created or truncated, then synced)
// and removes the spill files. Publishing it atomically is the caller's job.
func (w *Writer) Finish(path string) (Stats, error) {
	defer w.Abort()
	if err := w.valsBuf.Flush(); err != nil {
		return Stats{}, fmt.Errorf("spill value: %w", err)
	}
	if err := w.pairsBuf.Flush(); err != nil {
		return Stats{}, fmt.Errorf("spill key: %w", err)
	}
	index, count, err := w.buildIndex()
	if err != nil {
		return Stats{}, err
	}
	var spill []byte
	if w.valsOff > 0 {
		spill, err = syscall.Mmap(int(w.vals.Fd()), 0, int(w.valsOff), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return Stats{}, fmt.Errorf("map value spill: %w", err)
		}
		defer syscall.Munmap(spill)
	}
	st, err := writeFile(path, index, count, spill, w.maxValue)
	st.Added = w.added
	return st, err
}

// buildIndex reads the pair spill into an open-addressing table. The
// table's refs still point into the value spill; writeFile rewrites them.
func (w *Writer) buildIndex() ([]byte, uint64, error) {
	slots := slotsFor(w.added)
	index := make([]byte, slots*slotSize)
	if _, err := w.pairs.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("rewind key spill: %w", err)
	}
	r := bufio.NewReaderSize(w.pairs, 1<<18)
	var p [16]byte
	var count uint64
	for {
		if _, err := io.ReadFull(r, p[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, fmt.Errorf("read key spill: %w", err)
		}
		if insert(index, slots, binary.LittleEndian.Uint64(p[:]), binary.LittleEndian.Uint64(p[8:])+1) {
			count++
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
	i := homeSlot(key, slots)
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

// writeFile lays out header, index and values. Values are copied from the
// spill in slot order, which drops overwritten ones, and refs are rewritten
// to point into the new values section.
func writeFile(path string, index []byte, count uint64, spill []byte, maxValue int) (Stats, error) {
	slots := uint64(len(index)) / slotSize
	h := header{
		version:      FormatCurrent,
		count:        count,
		slots:        slots,
		indexOffset:  headerSize,
		valuesOffset: headerSize + uint64(len(index)),
		maxValue:     uint64(maxValue),
	}
	f, err := os.Create(path)
	if err != nil {
		return Stats{}, fmt.Errorf("create dictionary %q: %w", path, err)
	}
	fail := func(err error) (Stats, error) {
		_ = f.Close()
		_ = os.Remove(path)
		return Stats{}, fmt.Errorf("write dictionary %q: %w", path, err)
	}
	bw := bufio.NewWriterSize(io.NewOffsetWriter(f, int64(h.valuesOffset)), 1<<20)
	crc := crc32.New(castagnoli)
	mw := io.MultiWriter(bw, crc)
	var off uint64
	for i := uint64(0); i < slots; i++ {
		s := index[i*slotSize:]
		ref := binary.LittleEndian.Uint64(s[8:])
		if ref == 0 {
			continue
		}
		src := ref - 1
		l, n := binary.Uvarint(spill[src:])
		rec := spill[src : src+uint64(n)+l]
		if _, err := mw.Write(rec); err != nil {
			return fail(err)
		}
		binary.LittleEndian.PutUint64(s[8:], off+1)
		off += uint64(len(rec))
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	h.valuesSize = off
	h.valuesCRC = crc.Sum32()
	h.indexCRC = crc32.Checksum(index, castagnoli)
	if _, err := f.WriteAt(index, headerSize); err != nil {
		return fail(err)
	}
	var hb [headerSize]byte
	h.marshal(hb[:])
	if _, err := f.WriteAt(hb[:], 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return Stats{}, fmt.Errorf("write dictionary %q: %w", path, err)
	}
	return Stats{
		Count:      count,
		Slots:      slots,
		IndexSize:  int64(len(index)),
		ValuesSize: int64(off),
		FileSize:   int64(h.valuesOffset + off),
		MaxValue:   maxValue,
	}, nil
}
