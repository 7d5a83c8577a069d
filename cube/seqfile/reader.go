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
// Every layout, compressed or not, is framed by our own code (block.go has
// the block-compressed layout); codecs are only asked to decompress one
// buffer whose compressed length the file states (codec.go). We used to hand
// compressed files to github.com/colinmarc/sequencefile, but it treats a
// short read as the end of the file (a corrupt length built a model of the
// records before it), sizes its buffers from untrusted lengths, panics on
// negative counts, and reports no offsets; patching around it would have
// meant re-checking everything it parses, so we parse it ourselves.
//
// A file is consumed to its end or it is an error that names the file and
// the byte offset: the end must fall on a record or block boundary, and
// when the file size is known (NewReaderSize, ReadFile) it must be that size.
// Lengths and counts are checked against Options' limits and against the
// bytes left in the file before anything is allocated for them, and the
// decompressed size of a record or block is bounded (Options.MaxRecord,
// Options.MaxBlock), so a decompression bomb fails instead of taking memory.
package seqfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
)

// Hadoop class names this package understands.
const (
	BytesWritable = "org.apache.hadoop.io.BytesWritable"
	LongWritable  = "org.apache.hadoop.io.LongWritable"
	Text          = "org.apache.hadoop.io.Text"
)

const syncSize = 16

// Default limits (see Options).
const (
	DefaultMaxRecord = 64 << 20
	DefaultMaxBlock  = 128 << 20
)

// Options tune how records are decoded. The zero value suits Paddle's files.
type Options struct {
	// KeyBigEndian decodes the 8 payload bytes of a length-prefixed
	// BytesWritable key as big-endian (Java's ByteBuffer order). If false,
	// they are little-endian, the same bytes Paddle's raw keys hold.
	KeyBigEndian bool
	// MaxRecord bounds a record's size in bytes, as stored and, for a
	// record-compressed file, once its value is decompressed; it also bounds
	// each key and value of a block. If 0, it defaults to DefaultMaxRecord.
	MaxRecord int
	// MaxBlock bounds the decompressed size in bytes of one block of a
	// block-compressed file (its key lengths, keys, value lengths and values
	// together), which is what a build holds in memory at once. Hadoop closes
	// a block once it passes io.seqfile.compress.blocksize (1 MB by default),
	// so a block is at most that plus one record. If 0, it defaults to
	// DefaultMaxBlock.
	MaxBlock int
}

func (o *Options) setDefaults() {
	if o.MaxRecord <= 0 {
		o.MaxRecord = DefaultMaxRecord
	}
	if o.MaxBlock <= 0 {
		o.MaxBlock = DefaultMaxBlock
	}
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

	br   *bufio.Reader
	off  int64 // bytes consumed
	size int64 // file size, or -1 if unknown
	buf  []byte

	codec *codec // nil for an uncompressed file
	value []byte // a record-compressed value, decompressed
	blk   block  // the block being read, for a block-compressed file

	layout layout
	rec    int64 // records read
}

type layout int

const (
	layoutUnknown layout = iota
	layoutPaddle         // 8 raw LE key bytes, raw value
	layoutHadoop         // genuine writables
)

// NewReader reads the header of a SequenceFile from r, whose size is not
// known; name is used in errors. Prefer NewReaderSize when the size is known.
func NewReader(r io.Reader, name string, opts Options) (*Reader, error) {
	return newReader(r, -1, name, opts)
}

// NewReaderSize is NewReader for a file of size bytes: lengths are checked
// against the bytes left before anything is allocated for them, nothing
// beyond size is read, and the file must end exactly there.
func NewReaderSize(r io.Reader, size int64, name string, opts Options) (*Reader, error) {
	return newReader(io.LimitReader(r, size), size, name, opts)
}

func newReader(r io.Reader, size int64, name string, opts Options) (*Reader, error) {
	opts.setDefaults()
	rd := &Reader{name: name, opts: opts, size: size}
	bufSize := 1 << 20
	if size >= 0 {
		bufSize = int(min(int64(bufSize), size)) // bufio makes it at least 16
	}
	rd.br = bufio.NewReaderSize(r, bufSize)
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	switch rd.Header.KeyClass {
	case BytesWritable, LongWritable, Text:
	default:
		return nil, rd.errf(0, nil, "key class %q: want %s, %s or %s", rd.Header.KeyClass, BytesWritable, LongWritable, Text)
	}
	return rd, nil
}

// Close releases the decompressor, if any. It does not close the file.
func (rd *Reader) Close() {
	if rd.codec != nil {
		rd.codec.close()
	}
}

func (rd *Reader) errf(off int64, err error, format string, args ...any) error {
	return &Error{File: rd.name, Offset: off, Reason: fmt.Sprintf(format, args...), Err: err}
}

// remaining is the number of bytes left in the file, or a huge number if the
// size is not known.
func (rd *Reader) remaining() int64 {
	if rd.size < 0 {
		return 1<<63 - 1
	}
	return rd.size - rd.off
}

// readFull returns the next n bytes, valid until the next read. A length
// beyond the end of a file of known size fails before any allocation.
func (rd *Reader) readFull(n int) ([]byte, error) {
	if rd.size >= 0 && int64(n) > rd.size-rd.off {
		return nil, rd.pastEnd()
	}
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

// pastEnd is readFull's error for a read beyond the end of the file.
func (rd *Reader) pastEnd() error {
	if rd.off == rd.size {
		return io.EOF
	}
	return io.ErrUnexpectedEOF
}

// atEOF reports a clean end of file at a record or block boundary, or an
// error if a file of known size ended early (it shrank while being read).
func (rd *Reader) atEOF() error {
	if rd.size >= 0 && rd.off != rd.size {
		return rd.errf(rd.off, io.ErrUnexpectedEOF, "file ended %d bytes before its size %d", rd.size-rd.off, rd.size)
	}
	return io.EOF
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
		codecOff := rd.off
		if h.CompressionCodec, err = rd.readText("compression codec"); err != nil {
			return err
		}
		if rd.codec, err = newCodec(h.CompressionCodec, max(rd.opts.MaxBlock, rd.opts.MaxRecord)); err != nil {
			return rd.errf(codecOff, err, "compression codec")
		}
	}
	if h.Version >= 6 {
		if err := rd.readMetadata(); err != nil {
			return err
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

func (rd *Reader) readMetadata() error {
	mdOff := rd.off
	b, err := rd.readFull(4)
	if err != nil {
		return rd.errf(mdOff, err, "reading metadata count")
	}
	n := binary.BigEndian.Uint32(b)
	// Each entry takes at least two bytes (two empty Texts).
	if n > 1<<16 || int64(n) > rd.remaining()/2 {
		return rd.errf(mdOff, nil, "metadata count %d is implausible", n)
	}
	if n > 0 {
		rd.Header.Metadata = make(map[string]string, n)
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
		rd.Header.Metadata[k] = v
	}
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
	return vintValue(v, rest), nil
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

// vintValue assembles the value of a VInt from decodeVInt's sign and the
// bytes that follow the first.
func vintValue(sign int64, rest []byte) int64 {
	var u uint64
	for _, c := range rest {
		u = u<<8 | uint64(c)
	}
	if sign < 0 {
		u = ^u
	}
	return int64(u)
}

// parseVInt decodes a VInt at the start of b, returning its length in bytes
// (0 if b is too short).
func parseVInt(b []byte) (int64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	v, n := decodeVInt(b[0])
	if n == 0 {
		return v, 1
	}
	if len(b) < 1+n {
		return 0, 0
	}
	return vintValue(v, b[1:1+n]), 1 + n
}

// Next returns the next record. The value slice is valid until the next call.
// At the end of the file it returns io.EOF.
func (rd *Reader) Next() (uint64, []byte, error) {
	if rd.Header.BlockCompressed {
		return rd.nextInBlock()
	}
	return rd.nextRecord()
}

// nextRecord reads one record of an uncompressed or record-compressed file:
//
//	int32 record length | int32 key length | key | value (compressed or not)
//
// where a record length of -1 escapes a 16-byte sync marker instead.
func (rd *Reader) nextRecord() (uint64, []byte, error) {
	for {
		recOff := rd.off
		b, err := rd.readFull(4)
		if err == io.EOF {
			return 0, nil, rd.atEOF()
		}
		if err != nil {
			return 0, nil, rd.errf(recOff, err, "truncated record length")
		}
		recLen := int32(binary.BigEndian.Uint32(b))
		if recLen == -1 {
			if err := rd.readSync(recOff); err != nil {
				return 0, nil, err
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
		key, val := rec[:keyLen], rec[keyLen:]
		if rd.codec != nil {
			if rd.value, err = rd.codec.decompress(rd.value, val, rd.opts.MaxRecord); err != nil {
				return 0, nil, rd.errf(recOff+8+int64(keyLen), err, "record %d: compressed value of %d bytes", rd.rec+1, len(val))
			}
			val = rd.value
		}
		return rd.decode(recOff, key, val)
	}
}

// readSync reads the 16-byte sync marker after an escape at off and checks
// it against the header's.
func (rd *Reader) readSync(off int64) error {
	s, err := rd.readFull(syncSize)
	if err != nil {
		return rd.errf(off, err, "truncated sync marker")
	}
	if !bytes.Equal(s, rd.Header.Sync[:]) {
		return rd.errf(off+4, nil, "bad sync marker")
	}
	return nil
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
	v, n := parseVInt(b)
	if n == 0 || v < 0 || int64(len(b)-n) != v {
		return nil, false
	}
	return b[n:], true
}

// Records returns the number of records read so far.
func (rd *Reader) Records() int64 { return rd.rec }

// Offset returns the number of bytes consumed: for a block-compressed file,
// the end of the block being read.
func (rd *Reader) Offset() int64 { return rd.off }
