package seqfile

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/dsnet/compress/bzip2"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
)

// Hadoop codec class names this package decompresses. Lz4Codec is not
// among them.
const (
	GzipCodec    = "org.apache.hadoop.io.compress.GzipCodec"
	DefaultCodec = "org.apache.hadoop.io.compress.DefaultCodec" // zlib
	SnappyCodec  = "org.apache.hadoop.io.compress.SnappyCodec"
	Bzip2Codec   = "org.apache.hadoop.io.compress.BZip2Codec"
	ZstdCodec    = "org.apache.hadoop.io.compress.ZStandardCodec"
)

// errTooLarge is what decompress returns for output beyond its limit.
var errTooLarge = errors.New("decompresses to more than the limit (a corrupt length or a decompression bomb)")

// codec decompresses whole buffers of one Hadoop codec. Each buffer is one
// independent compressed stream (a record-compressed value, or one section
// of a block) that must be consumed exactly.
type codec struct {
	class string
	// fn decompresses src into dst's storage, failing past limit bytes.
	fn  func(dst, src []byte, limit int) ([]byte, error)
	src bytes.Reader // what fn's readers read
	gz  *gzip.Reader
	zl  io.ReadCloser
	bz  *bzip2.Reader
	zs  *zstd.Decoder
}

// newCodec returns the decompressor of a Hadoop codec class; maxOut bounds
// what any one buffer may decompress to.
func newCodec(class string, maxOut int) (*codec, error) {
	c := &codec{class: class}
	switch class {
	case GzipCodec:
		c.fn = c.gunzip
	case DefaultCodec:
		c.fn = c.inflate
	case SnappyCodec:
		c.fn = unsnappy
	case Bzip2Codec:
		c.fn = c.bunzip2
	case ZstdCodec:
		// Concurrency 1 decodes synchronously (no goroutines); the memory
		// limit bounds the window and the output of DecodeAll.
		var err error
		c.zs, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(max(maxOut, 1))), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		c.fn = c.unzstd
	default:
		return nil, fmt.Errorf("%q is not supported (want %s, %s, %s, %s or %s)", class, GzipCodec, DefaultCodec, SnappyCodec, Bzip2Codec, ZstdCodec)
	}
	return c, nil
}

func (c *codec) close() {
	if c.zs != nil {
		c.zs.Close()
	}
}

// decompress decompresses src into dst's storage (reused), failing if the
// output passes limit bytes or src holds anything after the stream. A panic
// inside a decompressor is returned as an error: the builder runs inside
// the transfer, and a hostile file must fail one build, not kill it (and
// every restart of it).
func (c *codec) decompress(dst, src []byte, limit int) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = dst[:0], fmt.Errorf("%s decompressor panicked: %v", c.class, r)
		}
	}()
	return c.fn(dst, src, limit)
}

// unzstd decodes zstd frames; DecodeAll requires every byte of src to be
// part of a whole frame.
func (c *codec) unzstd(dst, src []byte, limit int) ([]byte, error) {
	out, err := c.zs.DecodeAll(src, dst[:0])
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || len(out) > limit {
		return out, errTooLarge
	}
	return out, err
}

// gunzip reads gzip members until the buffer ends (a multistream reader
// refuses anything after a member that is not another member).
func (c *codec) gunzip(dst, src []byte, limit int) ([]byte, error) {
	c.src.Reset(src)
	var err error
	if c.gz == nil {
		c.gz, err = gzip.NewReader(&c.src)
	} else {
		err = c.gz.Reset(&c.src)
	}
	if err != nil {
		return dst[:0], err
	}
	return readLimited(dst, c.gz, limit)
}

// bunzip2 reads bzip2 streams until the buffer ends (the reader refuses
// anything after a stream that is not another stream). dsnet's reader, not
// the standard library's: it can be reset, and the standard one allocates
// 3.6 MB per stream, which is per record in a record-compressed file.
func (c *codec) bunzip2(dst, src []byte, limit int) ([]byte, error) {
	c.src.Reset(src)
	var err error
	if c.bz == nil {
		c.bz, err = bzip2.NewReader(&c.src, nil)
	} else {
		err = c.bz.Reset(&c.src)
	}
	if err != nil {
		return dst[:0], err
	}
	return readLimited(dst, c.bz, limit)
}

// inflate reads one zlib stream (DefaultCodec), which must end the buffer.
func (c *codec) inflate(dst, src []byte, limit int) ([]byte, error) {
	c.src.Reset(src)
	var err error
	if c.zl == nil {
		c.zl, err = zlib.NewReader(&c.src)
	} else {
		err = c.zl.(zlib.Resetter).Reset(&c.src, nil)
	}
	if err != nil {
		return dst[:0], err
	}
	out, err := readLimited(dst, c.zl, limit)
	if err == nil && c.src.Len() != 0 {
		err = fmt.Errorf("%d bytes after the zlib stream", c.src.Len())
	}
	return out, err
}

// readLimited reads r to its end into dst's storage, growing it as data
// arrives, never beyond limit bytes: past that it fails. Growing by copying
// means up to about 1.5 × limit is held for a moment.
func readLimited(dst []byte, r io.Reader, limit int) ([]byte, error) {
	dst = dst[:0]
	for empty := 0; empty < maxEmptyReads; {
		if len(dst) >= limit {
			return dst, probeEnd(r)
		}
		if len(dst) == cap(dst) {
			grow := min(max(cap(dst), 4096), limit-len(dst))
			dst = append(dst, make([]byte, grow)...)[:len(dst)]
		}
		// Never read past the limit, whatever capacity append gave.
		n, err := r.Read(dst[len(dst):min(cap(dst), limit)])
		dst = dst[:len(dst)+n]
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, err
		case n == 0:
			empty++
		default:
			empty = 0
		}
	}
	return dst, io.ErrNoProgress
}

// maxEmptyReads bounds the reads in a row that return nothing, as bufio
// does: a decompressor stuck that way must not spin forever.
const maxEmptyReads = 100

// probeEnd checks that r, which has filled the limit, has nothing more.
func probeEnd(r io.Reader) error {
	var b [1]byte
	for range maxEmptyReads {
		n, err := r.Read(b[:])
		switch {
		case n > 0:
			return errTooLarge
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
	return io.ErrNoProgress
}

// unsnappy decodes Hadoop's SnappyCodec framing (BlockCompressorStream):
// one or more blocks, each an int32 uncompressed length followed by chunks
// (int32 compressed length, raw snappy data) that decompress to exactly
// that length. golang/snappy only decodes the raw chunks.
func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	dst = dst[:0]
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errors.New("snappy: truncated block length")
		}
		want := int64(binary.BigEndian.Uint32(src))
		src = src[4:]
		if want > int64(limit-len(dst)) {
			return dst, errTooLarge
		}
		end := len(dst) + int(want)
		for len(dst) < end {
			if len(src) < 4 {
				return dst, errors.New("snappy: truncated chunk length")
			}
			n := int64(binary.BigEndian.Uint32(src))
			src = src[4:]
			if n > int64(len(src)) {
				return dst, fmt.Errorf("snappy: chunk of %d bytes, %d left", n, len(src))
			}
			chunk := src[:n]
			src = src[n:]
			dl, err := snappy.DecodedLen(chunk)
			if err != nil {
				return dst, fmt.Errorf("snappy: %w", err)
			}
			if dl > end-len(dst) {
				return dst, fmt.Errorf("snappy: chunk decodes to %d bytes, block has %d left", dl, end-len(dst))
			}
			if cap(dst)-len(dst) < dl {
				dst = append(dst, make([]byte, dl)...)[:len(dst)]
			}
			got, err := snappy.Decode(dst[len(dst):len(dst)+dl], chunk)
			if err != nil {
				return dst, fmt.Errorf("snappy: %w", err)
			}
			dst = dst[:len(dst)+len(got)]
		}
	}
	return dst, nil
}
