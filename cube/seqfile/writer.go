package seqfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// Writer writes an uncompressed SequenceFile in Paddle's layout: class names
// say BytesWritable, keys are 8 raw little-endian bytes, values are raw, and
// a sync marker follows every 2,000 bytes of records, as kvtool.py does.
// (colinmarc/sequencefile's writer always length-prefixes BytesWritable, so
// it cannot produce this layout.)
type Writer struct {
	w         *bufio.Writer
	sync      [syncSize]byte
	sinceSync int
	err       error
}

// SyncInterval is the number of record bytes between sync markers.
const SyncInterval = 2000

// NewWriter writes the header to w. sync is the file's 16-byte sync marker.
func NewWriter(w io.Writer, sync [16]byte) (*Writer, error) {
	sw := &Writer{w: bufio.NewWriterSize(w, 1<<16), sync: sync}
	var b bytes.Buffer
	b.WriteString("SEQ\x06")
	writeText(&b, BytesWritable)
	writeText(&b, BytesWritable)
	b.Write([]byte{0, 0})       // not compressed, not block-compressed
	b.Write([]byte{0, 0, 0, 0}) // no metadata
	b.Write(sync[:])
	if _, err := sw.w.Write(b.Bytes()); err != nil {
		return nil, err
	}
	return sw, nil
}

// Append writes one record.
func (sw *Writer) Append(key uint64, value []byte) error {
	if sw.err != nil {
		return sw.err
	}
	if sw.sinceSync >= SyncInterval {
		var m [4]byte
		binary.BigEndian.PutUint32(m[:], 0xffffffff)
		// bufio errors are sticky: the value Write below reports them.
		_, _ = sw.w.Write(m[:])
		_, _ = sw.w.Write(sw.sync[:])
		sw.sinceSync = 0
	}
	h := sw.w.AvailableBuffer()
	h = binary.BigEndian.AppendUint32(h, uint32(8+len(value)))
	h = binary.BigEndian.AppendUint32(h, 8)
	h = binary.LittleEndian.AppendUint64(h, key)
	_, _ = sw.w.Write(h)
	_, sw.err = sw.w.Write(value)
	sw.sinceSync += 8 + 8 + len(value)
	return sw.err
}

// Close flushes buffered records; it does not close the underlying writer.
func (sw *Writer) Close() error {
	if sw.err != nil {
		return sw.err
	}
	if err := sw.w.Flush(); err != nil {
		return fmt.Errorf("flush sequencefile: %w", err)
	}
	return nil
}

// writeText writes a Hadoop Text (vint length + bytes); lengths here are
// always < 128 or small enough for the two-byte form.
func writeText(b *bytes.Buffer, s string) {
	writeVInt(b, int64(len(s)))
	b.WriteString(s)
}

func writeVInt(b *bytes.Buffer, v int64) {
	if v >= -112 && v <= 127 {
		b.WriteByte(byte(v))
		return
	}
	l := int8(-112)
	if v < 0 {
		v = ^v
		l = -120
	}
	var tmp [8]byte
	n := 0
	for t := v; t != 0; t >>= 8 {
		n++
	}
	l -= int8(n)
	b.WriteByte(byte(l))
	binary.BigEndian.PutUint64(tmp[:], uint64(v))
	b.Write(tmp[8-n:])
}
