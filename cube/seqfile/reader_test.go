package seqfile

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/colinmarc/sequencefile"
)

type kv struct {
	k uint64
	v []byte
}

func sample(n int) []kv {
	out := make([]kv, n)
	for i := range out {
		v := make([]byte, 4*(i%13))
		for j := range v {
			v[j] = byte(i + j)
		}
		out[i] = kv{uint64(i) * 1_000_003, v}
	}
	return out
}

func paddleBytes(t testing.TB, recs []kv) []byte {
	var b bytes.Buffer
	w, err := NewWriter(&b, [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Append(r.k, r.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readAll(t testing.TB, data []byte, opts Options) ([]kv, error) {
	rd, err := NewReaderSize(bytes.NewReader(data), int64(len(data)), "mem", opts)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []kv
	for {
		k, v, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, kv{k, bytes.Clone(v)})
	}
}

func check(t *testing.T, got, want []kv) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].k != want[i].k || !bytes.Equal(got[i].v, want[i].v) {
			t.Fatalf("record %d = (%d, %x), want (%d, %x)", i, got[i].k, got[i].v, want[i].k, want[i].v)
		}
	}
}

func TestPaddleLayout(t *testing.T) {
	want := sample(2000)
	data := paddleBytes(t, want)
	if bytes.Count(data, []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}) < 10 {
		t.Fatal("writer emitted too few sync markers")
	}
	got, err := readAll(t, data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, want)
}

// TestPaddleFixture reads a file in the exact bytes kvtool.py produces
// (struct.pack('Q', key) keys, float32 values), built by hand here so the
// test does not depend on our own writer.
func TestPaddleFixture(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("SEQ\x06")
	for range 2 {
		b.WriteByte(byte(len(BytesWritable)))
		b.WriteString(BytesWritable)
	}
	b.Write([]byte{0, 0, 0, 0, 0, 0})
	b.WriteString("0123456789abcdef")
	rec := func(key uint64, floats ...float32) {
		binary.Write(&b, binary.BigEndian, int32(8+4*len(floats)))
		binary.Write(&b, binary.BigEndian, int32(8))
		binary.Write(&b, binary.LittleEndian, key)
		binary.Write(&b, binary.LittleEndian, floats)
	}
	rec(0, 0.5, -1)
	b.Write([]byte{0xff, 0xff, 0xff, 0xff})
	b.WriteString("0123456789abcdef")
	rec(1000001, 2)
	got, err := readAll(t, b.Bytes(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, []kv{
		{0, []byte{0, 0, 0, 0x3f, 0, 0, 0x80, 0xbf}},
		{1000001, []byte{0, 0, 0, 0x40}},
	})
}

func hadoopBytes(t testing.TB, keyClass string, comp sequencefile.Compression, codec sequencefile.CompressionCodec, recs []kv, keyBE bool) []byte {
	var b bytes.Buffer
	w, err := sequencefile.NewWriter(&sequencefile.WriterConfig{
		Writer: &b, KeyClass: keyClass, ValueClass: sequencefile.BytesWritableClassName,
		Compression: comp, CompressionCodec: codec, BlockSize: 500,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var key any
		switch keyClass {
		case LongWritable:
			key = int64(r.k)
		case Text:
			key = fmt.Sprint(r.k)
		default:
			kb := make([]byte, 8)
			if keyBE {
				binary.BigEndian.PutUint64(kb, r.k)
			} else {
				binary.LittleEndian.PutUint64(kb, r.k)
			}
			key = kb
		}
		if err := w.Append(key, r.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestHadoopLayouts(t *testing.T) {
	want := sample(700)
	type codec struct {
		name  string
		comp  sequencefile.Compression
		codec sequencefile.CompressionCodec
	}
	codecs := []codec{
		{"none", sequencefile.NoCompression, 0},
		{"record-gzip", sequencefile.RecordCompression, sequencefile.GzipCompression},
		{"record-snappy", sequencefile.RecordCompression, sequencefile.SnappyCompression},
		{"block-gzip", sequencefile.BlockCompression, sequencefile.GzipCompression},
		{"block-snappy", sequencefile.BlockCompression, sequencefile.SnappyCompression},
		{"block-zstd", sequencefile.BlockCompression, sequencefile.ZstdCompression},
		{"block-bzip2", sequencefile.BlockCompression, sequencefile.Bzip2Compression},
	}
	for _, keyClass := range []string{BytesWritable, LongWritable, Text} {
		for _, c := range codecs {
			t.Run(keyClass[strings.LastIndex(keyClass, ".")+1:]+"/"+c.name, func(t *testing.T) {
				data := hadoopBytes(t, keyClass, c.comp, c.codec, want, false)
				got, err := readAll(t, data, Options{})
				if err != nil {
					t.Fatal(err)
				}
				check(t, got, want)
			})
		}
	}
	t.Run("BytesWritable-bigendian", func(t *testing.T) {
		data := hadoopBytes(t, BytesWritable, sequencefile.NoCompression, 0, want, true)
		got, err := readAll(t, data, Options{KeyBigEndian: true})
		if err != nil {
			t.Fatal(err)
		}
		check(t, got, want)
	})
}

func TestBadFiles(t *testing.T) {
	good := paddleBytes(t, sample(300))
	syncAt := bytes.Index(good[100:], []byte{0xff, 0xff, 0xff, 0xff}) + 100
	wideKey := func() []byte {
		var b bytes.Buffer
		b.Write(good[:bytes.Index(good, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})+16])
		binary.Write(&b, binary.BigEndian, int32(16))
		binary.Write(&b, binary.BigEndian, int32(10))
		b.Write(make([]byte, 16))
		return b.Bytes()
	}()
	cases := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"wrong magic", append([]byte("PAR1"), good[4:]...), "bad magic"},
		{"old version", append([]byte("SEQ\x03"), good[4:]...), "unsupported SequenceFile version"},
		{"truncated header", good[:20], "reading"},
		{"truncated record", good[:len(good)-3], "truncated record"},
		{"bad sync", func() []byte { b := bytes.Clone(good); b[syncAt+5] ^= 0xff; return b }(), "bad sync marker"},
		{"wrong key width", wideKey, "key of 10 bytes"},
		{"huge record", func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[syncAt+20:], 1<<30); return b }(), "record length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "part-00000")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := ReadFile(path, Options{}, func(uint64, []byte) error { return nil })
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *seqfile.Error", err)
			}
			if se.File != path || !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), "at byte") {
				t.Fatalf("err = %q, want file %q and reason %q", err, path, c.reason)
			}
			t.Log(err)
		})
	}
}

func TestReadAllDir(t *testing.T) {
	dir := t.TempDir()
	all := sample(900)
	for i := 0; i < 3; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d", i)), paddleBytes(t, all[i*300:(i+1)*300]), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, ".part-00000.crc"), []byte("junk"), 0o644)
	var got []kv
	err := ReadAll(dir, Options{}, func(k uint64, v []byte) error {
		got = append(got, kv{k, bytes.Clone(v)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, all)
}

func BenchmarkReadPaddle(b *testing.B) {
	data := paddleBytes(b, func() []kv {
		r := make([]kv, 200000)
		for i := range r {
			r[i] = kv{uint64(i), make([]byte, 40)}
		}
		return r
	}())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rd, err := NewReader(bytes.NewReader(data), "mem", Options{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, _, err := rd.Next(); err != nil {
				break
			}
		}
	}
}

// FuzzReader checks that no input makes the reader panic, hang, allocate
// beyond its limits, or end cleanly before the end of the file. Seeded with
// uncompressed files; FuzzReaderCompressed starts from compressed ones.
func FuzzReader(f *testing.F) {
	f.Add(paddleBytes(f, sample(40)))
	f.Add(hadoopBytes(f, LongWritable, sequencefile.NoCompression, 0, sample(10), false))
	f.Add(hadoopBytes(f, Text, sequencefile.NoCompression, 0, sample(10), false))
	f.Add([]byte("SEQ\x06"))
	f.Fuzz(fuzzRead)
}

// FuzzReaderCompressed is FuzzReader seeded with real record- and
// block-compressed files of every codec.
func FuzzReaderCompressed(f *testing.F) {
	files := compressedFiles(f, 12)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f.Add(files[name])
	}
	f.Fuzz(fuzzRead)
}

func fuzzRead(t *testing.T, data []byte) {
	rd, err := NewReaderSize(bytes.NewReader(data), int64(len(data)), "fuzz", Options{MaxRecord: 1 << 16, MaxBlock: 1 << 20})
	if err != nil {
		return
	}
	defer rd.Close()
	for i := 0; i < 100000; i++ {
		_, _, err := rd.Next()
		if err == io.EOF && rd.Offset() != int64(len(data)) {
			t.Fatalf("clean end at byte %d of %d", rd.Offset(), len(data))
		}
		if err != nil {
			return
		}
	}
}

func TestCompressedErrorOffset(t *testing.T) {
	data := hadoopBytes(t, LongWritable, sequencefile.BlockCompression, sequencefile.GzipCompression, sample(700), false)
	cut := len(data) - 100
	_, err := readAll(t, data[:cut], Options{})
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v", err)
	}
	if se.Offset <= 0 || se.Offset > int64(cut) {
		t.Fatalf("offset %d outside the %d-byte file", se.Offset, cut)
	}
	t.Log(err)
}

// TestRecordCompressedZlib hand-builds a record-compressed file with
// Hadoop's DefaultCodec (zlib), which the library's writer cannot produce.
func TestRecordCompressedZlib(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("SEQ\x06")
	for _, cls := range []string{LongWritable, BytesWritable} {
		b.WriteByte(byte(len(cls)))
		b.WriteString(cls)
	}
	b.Write([]byte{1, 0}) // record-compressed
	codec := "org.apache.hadoop.io.compress.DefaultCodec"
	b.WriteByte(byte(len(codec)))
	b.WriteString(codec)
	b.Write([]byte{0, 0, 0, 0})
	sync := []byte("0123456789abcdef")
	b.Write(sync)
	want := sample(50)
	for i, r := range want {
		if i == 25 {
			b.Write([]byte{0xff, 0xff, 0xff, 0xff})
			b.Write(sync)
		}
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		binary.Write(zw, binary.BigEndian, int32(len(r.v))) // BytesWritable serialization
		zw.Write(r.v)
		zw.Close()
		binary.Write(&b, binary.BigEndian, int32(8+z.Len()))
		binary.Write(&b, binary.BigEndian, int32(8))
		binary.Write(&b, binary.BigEndian, r.k)
		b.Write(z.Bytes())
	}
	got, err := readAll(t, b.Bytes(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, want)
}
