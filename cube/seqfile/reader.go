// Package seqfile reads Hadoop SequenceFiles of uint64 keys, both in the
// layout Paddle's tools write and as genuine Hadoop writes them.
//
// Paddle's layout (parameter_to_seqfile, kvtool.py, seq_file.cpp) claims
// org.apache.hadoop.io.BytesWritable for key and value but stores the key as
// 8 raw little-endian bytes and the value raw, without BytesWritable's 4-byte
// length prefix. Genuine Hadoop files carry the prefix (a 12-byte key for a
// uint64), or use LongWritable (8 bytes big-endian) or Text (decimal) keys,
// and may be record- or block-compressed.
//
// Uncompressed files, the ones Paddle writes and the hot path of a build,
// are parsed here directly: that gives exact byte offsets in errors and reads
// records without copying or allocating. Compressed files are delegated to
// github.com/colinmarc/sequencefile, which implements Hadoop's codecs (gzip,
// DefaultCodec/zlib, snappy, bzip2, zstd); its errors carry no offset, so
// ours report the position in the file the library had reached. The library
// also sizes its buffers from the lengths in the file, so a hostile compressed
// file can make it allocate up to 2 GiB before failing; inputs come from our
// own training jobs, and the fuzz target covers the uncompressed path only.
package seqfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/colinmarc/sequencefile"
)

// Hadoop class names this package understands.
const (
	BytesWritable = "org.apache.hadoop.io.BytesWritable"
	LongWritable  = "org.apache.hadoop.io.LongWritable"
	Text          = "org.apache.hadoop.io.Text"
)

const syncSize = 16

// Options tune how records are decoded. The zero value suits Paddle's files.
type Options struct {
	// KeyBigEndian decodes the 8 payload bytes of a length-prefixed
	// BytesWritable key as big-endian (Java's ByteBuffer order). If false,
	// they are little-endian, the same bytes Paddle's raw keys hold.
	KeyBigEndian bool
	// MaxRecord bounds a record's size in bytes. If 0, it defaults to 64 MiB.
	MaxRecord int
}

// Error is a problem with one input file.
type Error struct {
	File   string
	Offset int64 // byte offset in File where the bad data starts
	Reason string
	Err    error // underlying error, if any
}

func (e *Error) Error() string {
	s := fmt.Sprintf("sequencefile %q at byte %d: %s", e.File, e.Offset, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Header is the decoded file header.
type Header struct {
	Version          int
	KeyClass         string
	ValueClass       string
	Compressed       bool
	BlockCompressed  bool
	CompressionCodec string
	Metadata         map[string]string
	Sync             [syncSize]byte
	Size             int64 // header length in bytes
}

// Reader reads one SequenceFile.
type Reader struct {
	name   string
	opts   Options
	Header Header

	// uncompressed path
	br  *bufio.Reader
	off int64
	buf []byte

	// compressed path
	lib     *sequencefile.Reader
	counter *countingReader // bytes pulled from the file into libBuf
	libBuf  *bufio.Reader   // what the library reads from

	layout layout
	rec    int64 // records read
}

type layout int

const (
	layoutUnknown layout = iota
	layoutPaddle         // 8 raw LE key bytes, raw value
	layoutHadoop         // genuine writables
)

// NewReader reads the header of a SequenceFile from r; name is used in errors.
func NewReader(r io.Reader, name string, opts Options) (*Reader, error) {
	if opts.MaxRecord <= 0 {
		opts.MaxRecord = 64 << 20
	}
	rd := &Reader{name: name, opts: opts}
	cr := &countingReader{r: r}
	rd.br = bufio.NewReaderSize(cr, 1<<20)
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	if rd.Header.Compressed {
		// Hand the rest of the stream to the library. It needs its own view
		// of the header to learn codec and sync marker, so replay ours.
		hdr, err := rd.replayHeader()
		if err != nil {
			return nil, err
		}
		rd.counter = cr
		rd.lib = sequencefile.NewReader(io.MultiReader(bytes.NewReader(hdr), rd.br))
		if err := rd.lib.ReadHeader(); err != nil {
			return nil, rd.errf(rd.off, err, "compressed header")
		}
		rd.libBuf, rd.br = rd.br, nil
	}
	switch rd.Header.KeyClass {
	case BytesWritable, LongWritable, Text:
	default:
		return nil, rd.errf(0, nil, "key class %q: want %s, %s or %s", rd.Header.KeyClass, BytesWritable, LongWritable, Text)
	}
	return rd, nil
}

// replayHeader re-serialises the header bytes already consumed.
func (rd *Reader) replayHeader() ([]byte, error) {
	var b bytes.Buffer
	h := &rd.Header
	b.WriteString("SEQ")
	b.WriteByte(byte(h.Version))
	writeText(&b, h.KeyClass)
	writeText(&b, h.ValueClass)
	b.WriteByte(1)
	if h.BlockCompressed {
		b.WriteByte(1)
	} else {
		b.WriteByte(0)
	}
	writeText(&b, h.CompressionCodec)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(h.Metadata)))
	b.Write(n[:])
	keys := make([]string, 0, len(h.Metadata))
	for k := range h.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		writeText(&b, k)
		writeText(&b, h.Metadata[k])
	}
	b.Write(h.Sync[:])
	return b.Bytes(), nil
}

func (rd *Reader) errf(off int64, err error, format string, args ...any) error {
	return &Error{File: rd.name, Offset: off, Reason: fmt.Sprintf(format, args...), Err: err}
}

func (rd *Reader) readFull(n int) ([]byte, error) {
	if n <= rd.br.Size() {
		b, err := rd.br.Peek(n)
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		_, _ = rd.br.Discard(n) // cannot fail: Peek just returned n bytes
		rd.off += int64(n)
		return b, nil
	}
	if cap(rd.buf) < n {
		rd.buf = make([]byte, n)
	}
	b := rd.buf[:n]
	if _, err := io.ReadFull(rd.br, b); err != nil {
		return nil, err
	}
	rd.off += int64(n)
	return b, nil
}

func (rd *Reader) readHeader() error {
	h := &rd.Header
	b, err := rd.readFull(4)
	if err != nil {
		return rd.errf(0, err, "reading magic")
	}
	if string(b[:3]) != "SEQ" {
		return rd.errf(0, nil, "bad magic %q, not a SequenceFile", b[:3])
	}
	h.Version = int(b[3])
	if h.Version < 5 || h.Version > 6 {
		return rd.errf(3, nil, "unsupported SequenceFile version %d (want 5 or 6)", h.Version)
	}
	if h.KeyClass, err = rd.readText("key class"); err != nil {
		return err
	}
	if h.ValueClass, err = rd.readText("value class"); err != nil {
		return err
	}
	flagsOff := rd.off
	if b, err = rd.readFull(2); err != nil {
		return rd.errf(flagsOff, err, "reading compression flags")
	}
	h.Compressed, h.BlockCompressed = b[0] != 0, b[1] != 0
	if h.BlockCompressed && !h.Compressed {
		return rd.errf(flagsOff, nil, "block compression flag without compression flag")
	}
	if h.Compressed {
		if h.CompressionCodec, err = rd.readText("compression codec"); err != nil {
			return err
		}
	}
	if h.Version >= 6 {
		mdOff := rd.off
		if b, err = rd.readFull(4); err != nil {
			return rd.errf(mdOff, err, "reading metadata count")
		}
		n := binary.BigEndian.Uint32(b)
		if n > 1<<16 {
			return rd.errf(mdOff, nil, "metadata count %d is implausible", n)
		}
		if n > 0 {
			h.Metadata = make(map[string]string, n)
		}
		for i := uint32(0); i < n; i++ {
			k, err := rd.readText("metadata key")
			if err != nil {
				return err
			}
			v, err := rd.readText("metadata value")
			if err != nil {
				return err
			}
			h.Metadata[k] = v
		}
	}
	syncOff := rd.off
	if b, err = rd.readFull(syncSize); err != nil {
		return rd.errf(syncOff, err, "reading sync marker")
	}
	copy(h.Sync[:], b)
	h.Size = rd.off
	return nil
}

// readText reads a Hadoop Text: a vint length, then UTF-8 bytes.
func (rd *Reader) readText(what string) (string, error) {
	start := rd.off
	n, err := rd.readVInt()
	if err != nil {
		return "", rd.errf(start, err, "reading %s length", what)
	}
	if n < 0 || n > 1<<16 {
		return "", rd.errf(start, nil, "%s length %d is implausible", what, n)
	}
	b, err := rd.readFull(int(n))
	if err != nil {
		return "", rd.errf(start, err, "reading %s", what)
	}
	return string(b), nil
}

func (rd *Reader) readVInt() (int64, error) {
	b, err := rd.readFull(1)
	if err != nil {
		return 0, err
	}
	v, n := decodeVInt(b[0])
	if n == 0 {
		return v, nil
	}
	rest, err := rd.readFull(n)
	if err != nil {
		return 0, err
	}
	var u uint64
	for _, c := range rest {
		u = u<<8 | uint64(c)
	}
	if v < 0 {
		u = ^u
	}
	return int64(u), nil
}

// decodeVInt decodes the first byte of a Hadoop VInt: either the value
// itself (n == 0) or the number of bytes that follow; v < 0 marks negative.
func decodeVInt(first byte) (v int64, n int) {
	l := int8(first)
	switch {
	case l >= -112:
		return int64(l), 0
	case l >= -120:
		return 1, int(-112 - l)
	default:
		return -1, int(-120 - l)
	}
}

// Next returns the next record. The value slice is valid until the next call.
// At the end of the file it returns io.EOF.
func (rd *Reader) Next() (uint64, []byte, error) {
	if rd.lib != nil {
		return rd.nextCompressed()
	}
	for {
		recOff := rd.off
		b, err := rd.readFull(4)
		if err == io.EOF {
			return 0, nil, io.EOF
		}
		if err != nil {
			return 0, nil, rd.errf(recOff, err, "truncated record length")
		}
		recLen := int32(binary.BigEndian.Uint32(b))
		if recLen == -1 {
			s, err := rd.readFull(syncSize)
			if err != nil {
				return 0, nil, rd.errf(recOff, err, "truncated sync marker")
			}
			if !bytes.Equal(s, rd.Header.Sync[:]) {
				return 0, nil, rd.errf(recOff+4, nil, "bad sync marker")
			}
			continue
		}
		if recLen < 0 || int(recLen) > rd.opts.MaxRecord {
			return 0, nil, rd.errf(recOff, nil, "record length %d out of range [0, %d]", recLen, rd.opts.MaxRecord)
		}
		if b, err = rd.readFull(4); err != nil {
			return 0, nil, rd.errf(recOff+4, err, "truncated key length")
		}
		keyLen := int32(binary.BigEndian.Uint32(b))
		if keyLen < 0 || keyLen > recLen {
			return 0, nil, rd.errf(recOff+4, nil, "key length %d out of range [0, %d]", keyLen, recLen)
		}
		rec, err := rd.readFull(int(recLen))
		if err != nil {
			return 0, nil, rd.errf(recOff+8, err, "truncated record (%d bytes)", recLen)
		}
		return rd.decode(recOff, rec[:keyLen], rec[keyLen:])
	}
}

func (rd *Reader) nextCompressed() (uint64, []byte, error) {
	if !rd.lib.Scan() {
		if err := rd.lib.Err(); err != nil {
			return 0, nil, rd.errf(rd.libOffset(), err, "reading compressed data (offset is where reading stopped)")
		}
		return 0, nil, io.EOF
	}
	return rd.decode(rd.libOffset(), rd.lib.Key(), rd.lib.Value())
}

// libOffset is the file position the library has consumed: what was pulled
// from the file minus what still sits unread in the buffer. For a block
// compressed file that is the end of the current block.
func (rd *Reader) libOffset() int64 {
	return rd.counter.n - int64(rd.libBuf.Buffered())
}

// decode turns serialized writables into a uint64 key and value bytes.
func (rd *Reader) decode(off int64, key, val []byte) (uint64, []byte, error) {
	rd.rec++
	var k uint64
	switch rd.Header.KeyClass {
	case BytesWritable:
		switch {
		case len(key) == 8 && rd.layout != layoutHadoop:
			rd.layout = layoutPaddle
			k = binary.LittleEndian.Uint64(key)
		case len(key) == 12 && binary.BigEndian.Uint32(key) == 8 && rd.layout != layoutPaddle:
			rd.layout = layoutHadoop
			if rd.opts.KeyBigEndian {
				k = binary.BigEndian.Uint64(key[4:])
			} else {
				k = binary.LittleEndian.Uint64(key[4:])
			}
		default:
			return 0, nil, rd.errf(off, nil, "record %d: key of %d bytes: want 8 raw bytes (Paddle) or a 12-byte BytesWritable of 8 bytes, consistently", rd.rec, len(key))
		}
	case LongWritable:
		if len(key) != 8 {
			return 0, nil, rd.errf(off, nil, "record %d: LongWritable key of %d bytes, want 8", rd.rec, len(key))
		}
		rd.layout = layoutHadoop
		k = binary.BigEndian.Uint64(key)
	case Text:
		rd.layout = layoutHadoop
		s, ok := unwrapText(key)
		if !ok {
			return 0, nil, rd.errf(off, nil, "record %d: malformed Text key", rd.rec)
		}
		var err error
		if k, err = strconv.ParseUint(string(s), 10, 64); err != nil {
			return 0, nil, rd.errf(off, err, "record %d: Text key is not a uint64", rd.rec)
		}
	}
	if rd.layout == layoutPaddle {
		return k, val, nil
	}
	switch rd.Header.ValueClass {
	case BytesWritable:
		if len(val) < 4 || int(binary.BigEndian.Uint32(val)) != len(val)-4 {
			return 0, nil, rd.errf(off, nil, "record %d: BytesWritable value length prefix does not match its %d bytes", rd.rec, len(val))
		}
		return k, val[4:], nil
	case Text:
		s, ok := unwrapText(val)
		if !ok {
			return 0, nil, rd.errf(off, nil, "record %d: malformed Text value", rd.rec)
		}
		return k, s, nil
	}
	return k, val, nil
}

func unwrapText(b []byte) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	v, n := decodeVInt(b[0])
	if n > 0 {
		if len(b) < 1+n || n > 4 || v < 0 {
			return nil, false
		}
		var u uint64
		for _, c := range b[1 : 1+n] {
			u = u<<8 | uint64(c)
		}
		v = int64(u)
	}
	if v < 0 || int64(len(b)-1-n) != v {
		return nil, false
	}
	return b[1+n:], true
}

// Records returns the number of records read so far.
func (rd *Reader) Records() int64 { return rd.rec }

// Offset returns the number of bytes consumed (exact for uncompressed files).
func (rd *Reader) Offset() int64 {
	if rd.lib != nil {
		return rd.libOffset()
	}
	return rd.off
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
