package seqfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/colinmarc/sequencefile"
	"github.com/dsnet/compress/bzip2"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
)

// compressedFiles are real record- and block-compressed files of n records,
// written by an independent implementation (colinmarc/sequencefile's writer).
func compressedFiles(t testing.TB, n int) map[string][]byte {
	recs := sample(n)
	out := map[string][]byte{}
	for _, comp := range []struct {
		name string
		c    sequencefile.Compression
	}{{"record", sequencefile.RecordCompression}, {"block", sequencefile.BlockCompression}} {
		for _, codec := range []struct {
			name string
			c    sequencefile.CompressionCodec
		}{
			{"gzip", sequencefile.GzipCompression}, {"snappy", sequencefile.SnappyCompression},
			{"zstd", sequencefile.ZstdCompression}, {"bzip2", sequencefile.Bzip2Compression},
		} {
			out[comp.name+"-"+codec.name] = hadoopBytes(t, LongWritable, comp.c, codec.c, recs, false)
		}
	}
	return out
}

// readFile writes data to a file and reads it with ReadFile, as a build does.
func readFile(t testing.TB, data []byte, opts Options) (string, int, error) {
	path := filepath.Join(t.TempDir(), "part-00000")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := ReadFile(path, opts, func(uint64, []byte) error { n++; return nil })
	return path, n, err
}

// wantFileError checks that err is a *Error naming path at an offset inside
// the file, with reason in its text.
func wantFileError(t *testing.T, err error, path string, size int, reason string) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *seqfile.Error", err)
	}
	if se.File != path || se.Offset < 0 || se.Offset > int64(size) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("err = %q, want file %q, an offset in [0, %d] and %q", err, path, size, reason)
	}
}

// TestCompressedTruncated cuts real compressed files everywhere after the
// header: each cut must fail with the file and an offset, never end quietly
// with the records before it (the library we used to call did), unless it
// falls exactly between two records or blocks, where a shorter file is valid.
func TestCompressedTruncated(t *testing.T) {
	for name, data := range compressedFiles(t, 300) {
		t.Run(name, func(t *testing.T) {
			ends := recordEnds(t, data)
			// Every cut in the first blocks and records, then a sample.
			for cut := int(ends[0]) + 1; cut < len(data); cut += max(1, (cut-int(ends[0]))/1500*97) {
				got, err := readAll(t, data[:cut], Options{})
				var se *Error
				switch {
				case err == nil && !atBoundary(data, ends, cut, len(got)):
					t.Fatalf("cut at %d of %d: %d records and no error", cut, len(data), len(got))
				case err != nil && (!errors.As(err, &se) || se.Offset > int64(cut)):
					t.Fatalf("cut at %d of %d: err %v", cut, len(data), err)
				}
			}
		})
	}
}

// recordEnds reads a whole file and returns the header size, then the
// offset reached after each record.
func recordEnds(t *testing.T, data []byte) []int64 {
	rd, err := NewReader(bytes.NewReader(data), "mem", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ends := []int64{rd.Header.Size}
	for {
		if _, _, err := rd.Next(); err == io.EOF {
			return ends
		} else if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, rd.Offset())
	}
}

// atBoundary reports whether a file cut at cut, read cleanly as n records,
// ends where those n records end (optionally followed by a sync escape and
// marker, which start the next record or block).
func atBoundary(data []byte, ends []int64, cut, n int) bool {
	if n >= len(ends) {
		return false
	}
	e := int(ends[n])
	if n+1 < len(ends) && ends[n+1] == ends[n] {
		return false // the cut is inside a block that holds more records
	}
	return cut == e || cut == e+4+syncSize && bytes.Equal(data[e:e+4], []byte{0xff, 0xff, 0xff, 0xff})
}

// TestCompressedCorruptLengths overwrites every length-sized window near the
// start of real compressed files with lying values (huge, negative, small):
// the reader must fail or still return every record, never a prefix, never
// panic, and never take long (it used to allocate what the lengths said).
func TestCompressedCorruptLengths(t *testing.T) {
	for name, data := range compressedFiles(t, 300) {
		t.Run(name, func(t *testing.T) {
			rd, err := NewReader(bytes.NewReader(data), "mem", Options{})
			if err != nil {
				t.Fatal(err)
			}
			h := int(rd.Header.Size)
			for pos := h; pos < min(len(data)-4, h+200); pos++ {
				for _, v := range []uint32{0x7fffffff, 0xfffffff0, 0x100, 0x8f000000} {
					b := bytes.Clone(data)
					binary.BigEndian.PutUint32(b[pos:], v)
					if bytes.Equal(b, data) {
						continue
					}
					got, err := readAll(t, b, Options{})
					if err == nil && len(got) != 300 {
						t.Fatalf("%08x at byte %d: %d records and no error", v, pos, len(got))
					}
				}
			}
		})
	}
}

// hostile is a file header plus raw bytes after it.
func hostile(compressed, blocked bool, codec string, body ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString("SEQ\x06")
	writeText(&b, LongWritable)
	writeText(&b, BytesWritable)
	b.WriteByte(boolByte(compressed))
	b.WriteByte(boolByte(blocked))
	if compressed {
		writeText(&b, codec)
	}
	b.Write([]byte{0, 0, 0, 0})
	b.WriteString("0123456789abcdef")
	for _, p := range body {
		b.Write(p)
	}
	return b.Bytes()
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// blockStart is the sync escape and marker that starts a block, then its
// record count.
func blockStart(n int64) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xff, 0xff, 0xff})
	b.WriteString("0123456789abcdef")
	writeVInt(&b, n)
	return b.Bytes()
}

func vint(v int64) []byte {
	var b bytes.Buffer
	writeVInt(&b, v)
	return b.Bytes()
}

func gz(data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// section is one block section: compressed length, then the bytes.
func section(comp []byte) []byte { return append(vint(int64(len(comp))), comp...) }

// hadoopSnappy frames data as Hadoop's SnappyCodec does, with a chosen
// claimed uncompressed length.
func hadoopSnappy(claim uint32, data []byte) []byte {
	c := snappy.Encode(nil, data)
	b := binary.BigEndian.AppendUint32(nil, claim)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c)))
	return append(b, c...)
}

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// TestHostileCompressed feeds small hand-made files that lie about counts
// and lengths; each must fail with the file, an offset and a reason, without
// panicking and without allocating what the lie asks for. Before the reader
// did its own framing, several of these panicked inside the library
// (makeslice with a negative record count) or built zero records.
func TestHostileCompressed(t *testing.T) {
	oneRec := func() [4][]byte {
		return [4][]byte{section(gz([]byte{8})), section(gz(make([]byte, 8))), section(gz([]byte{4})), section(gz(be32(0)))}
	}
	good := oneRec()
	cases := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"sane block", hostile(true, true, GzipCodec, blockStart(1), good[0], good[1], good[2], good[3]), ""},
		{"negative record count", hostile(true, true, GzipCodec, blockStart(-5), good[0]), "block record count -5 out of range"},
		{"huge record count", hostile(true, true, GzipCodec, blockStart(1<<40), good[0]), "block record count 1099511627776 out of range"},
		{"zero record count", hostile(true, true, GzipCodec, blockStart(0)), "block record count 0 out of range"},
		{"negative section length", hostile(true, true, GzipCodec, blockStart(1), vint(-7)), "compressed length -7 out of range"},
		{"section beyond the file", hostile(true, true, GzipCodec, blockStart(1), vint(100000), []byte{1, 2, 3}), "truncated"},
		{"count beyond lengths", hostile(true, true, GzipCodec, blockStart(3), good[0], good[1], good[2], good[3]), "key lengths: 1 of 3 records"},
		{"lengths beyond data", hostile(true, true, GzipCodec, blockStart(1), section(gz([]byte{9})), good[1], good[2], good[3]), "add up to 9 bytes"},
		{"negative key length", hostile(true, true, GzipCodec, blockStart(1), section(gz(vint(-1))), good[1], good[2], good[3]), "length -1 out of range"},
		{"gzip bomb", hostile(true, true, GzipCodec, blockStart(1), good[0], good[1], good[2], section(gz(make([]byte, 4<<20)))), "decompresses to more than the limit"},
		{"snappy claims 4 GiB", hostile(true, true, SnappyCodec, blockStart(1), section(hadoopSnappy(0xffffffff, []byte{8}))), "decompresses to more than the limit"},
		{"snappy chunk beyond its block", hostile(true, true, SnappyCodec, blockStart(1), section(hadoopSnappy(1, make([]byte, 100)))), "chunk decodes to 100 bytes"},
		{"gzip trailing garbage", hostile(true, true, GzipCodec, blockStart(1), section(append(gz([]byte{8}), 0, 0, 0))), "key lengths"},
		{"block without escape", hostile(true, true, GzipCodec, be32(5), []byte("0123456789abcdef")), "want the sync escape -1"},
		{"block with wrong sync", hostile(true, true, GzipCodec, be32(-1), []byte("0123456789abcdeX"), vint(1)), "bad sync marker"},
		{"negative record length", hostile(true, false, GzipCodec, be32(-2), be32(8)), "record length -2 out of range"},
		{"record value bomb", hostile(true, false, GzipCodec, func() []byte {
			v := gz(make([]byte, 2<<20))
			return append(append(be32(int32(8+len(v))), be32(8)...), append(make([]byte, 8), v...)...)
		}()), "decompresses to more than the limit"},
		{"unsupported codec", hostile(true, false, "org.apache.hadoop.io.compress.Lz4Codec"), "is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			path, n, err := readFile(t, c.data, Options{MaxRecord: 1 << 20, MaxBlock: 1 << 20})
			runtime.ReadMemStats(&after)
			if c.reason == "" {
				if err != nil || n != 1 {
					t.Fatalf("%d records, err %v", n, err)
				}
				return
			}
			wantFileError(t, err, path, len(c.data), c.reason)
			// The limits are 1 MiB; decompression may fill them, no more.
			if a := after.TotalAlloc - before.TotalAlloc; a > 8<<20 {
				t.Fatalf("allocated %d bytes reading a %d-byte file", a, len(c.data))
			}
			t.Logf("%d bytes: %v", len(c.data), err)
		})
	}
}

// TestDecompressorPanicIsAnError: a panic inside a codec comes back as an
// error naming the file, not a crash of the process.
func TestDecompressorPanicIsAnError(t *testing.T) {
	data := hadoopBytes(t, LongWritable, sequencefile.BlockCompression, sequencefile.GzipCompression, sample(10), false)
	rd, err := NewReaderSize(bytes.NewReader(data), int64(len(data)), "part-7", Options{})
	if err != nil {
		t.Fatal(err)
	}
	rd.codec.fn = func([]byte, []byte, int) ([]byte, error) { panic("index out of range [5] with length 3") }
	_, _, err = rd.Next()
	var se *Error
	if !errors.As(err, &se) || se.File != "part-7" || !strings.Contains(err.Error(), "decompressor panicked: index out of range") {
		t.Fatalf("err = %v", err)
	}
}

// TestFileShorterThanItsSize: a file that shrinks while it is read (or a
// reader handed a wrong size) fails rather than ending early.
func TestFileShorterThanItsSize(t *testing.T) {
	data := paddleBytes(t, sample(50))
	rd, err := NewReaderSize(bytes.NewReader(data), int64(len(data))+10, "short", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, _, err = rd.Next(); err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "file ended 10 bytes before its size") {
		t.Fatalf("err = %v", err)
	}
}

// TestDecompressLimitIsExact: output of exactly the limit is accepted, one
// byte more is refused, for every codec.
func TestDecompressLimitIsExact(t *testing.T) {
	data := bytes.Repeat([]byte("cube"), 5000)
	var bz bytes.Buffer
	bw, _ := bzip2.NewWriter(&bz, nil)
	bw.Write(data)
	bw.Close()
	zw, _ := zstd.NewWriter(nil)
	cases := map[string][]byte{
		GzipCodec:   gz(data),
		SnappyCodec: hadoopSnappy(uint32(len(data)), data),
		Bzip2Codec:  bz.Bytes(),
		ZstdCodec:   zw.EncodeAll(data, nil),
	}
	for class, comp := range cases {
		t.Run(class, func(t *testing.T) {
			c, err := newCodec(class, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			if out, err := c.decompress(nil, comp, len(data)); err != nil || !bytes.Equal(out, data) {
				t.Fatalf("at the limit: %d bytes, err %v", len(out), err)
			}
			if _, err := c.decompress(nil, comp, len(data)-1); !errors.Is(err, errTooLarge) {
				t.Fatalf("one byte over: err %v", err)
			}
		})
	}
}
