// Package proto encodes and decodes brpc's baidu_std framing, its RpcMeta,
// and the rec.mcube DictService messages, by hand and without per-key
// allocations.
//
// A baidu_std frame is
//
//	"PRPC" | uint32 BE body size | uint32 BE meta size | meta | payload | attachment
//
// where body size counts meta, payload and attachment, meta is a serialized
// brpc.policy.RpcMeta and attachment_size comes from the meta.
//
// The messages are proto2 (package rec.mcube):
//
//	message DictRequest  { repeated uint64 keys = 1; optional bool version_required = 2 [default = false]; }
//	message DictValue    { required uint32 status = 1; required bytes value = 2; }
//	message DictResponse { repeated DictValue values = 1; optional string version = 2; }
//
// Required fields are always written, even when zero or empty: Paddle's C++
// client rejects a DictValue without them.
package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic opens every baidu_std frame.
const Magic = "PRPC"

// HeaderSize is the size of the fixed frame header.
const HeaderSize = 12

// Errors from ReadFrame.
var (
	ErrBadMagic     = errors.New("baidu_std: bad magic")
	ErrFrameTooBig  = errors.New("baidu_std: frame exceeds the size limit")
	ErrBadMetaSize  = errors.New("baidu_std: meta size exceeds body size")
	ErrBadAttach    = errors.New("baidu_std: attachment size exceeds payload")
	ErrMalformed    = errors.New("protobuf: malformed message")
	ErrMissingField = errors.New("protobuf: missing required field")
)

// Frame is a decoded frame; its slices alias the buffer passed to ReadFrame.
type Frame struct {
	Meta       RpcMeta
	Payload    []byte
	Attachment []byte
}

// FirstChunk is the body buffer ReadFrame starts with; it doubles as bytes
// arrive, up to the declared body size.
const FirstChunk = 4 << 10

// ReadFrame reads one frame from r into buf (grown as needed and returned)
// and decodes its meta. maxBody bounds the body size.
func ReadFrame(r io.Reader, buf []byte, maxBody int, f *Frame) ([]byte, error) {
	return ReadFrameFunc(r, buf, maxBody, f, nil)
}

// ReadFrameFunc is ReadFrame with a memory hook. The body is read in chunks
// as its bytes arrive: the buffer starts at FirstChunk (or cap(buf)) and
// doubles only once full, so a header that declares a large body costs
// nothing until the peer really sends it, and never more than twice what it
// sent. Before the buffer grows to newCap bytes, grow (if not nil) is asked;
// its error stops the read and is returned as is.
func ReadFrameFunc(r io.Reader, buf []byte, maxBody int, f *Frame, grow func(newCap int) error) ([]byte, error) {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, err
	}
	if string(hdr[:4]) != Magic {
		return buf, ErrBadMagic
	}
	body := binary.BigEndian.Uint32(hdr[4:])
	metaSize := binary.BigEndian.Uint32(hdr[8:])
	if int64(body) > int64(maxBody) {
		return buf, fmt.Errorf("%w: %d > %d bytes", ErrFrameTooBig, body, maxBody)
	}
	if metaSize > body {
		return buf, ErrBadMetaSize
	}
	buf, err := readBody(r, buf[:0], int(body), grow)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf, err
	}
	if err := f.Meta.Unmarshal(buf[:metaSize]); err != nil {
		return buf, err
	}
	rest := buf[metaSize:]
	att := f.Meta.AttachmentSize
	if att < 0 || int64(att) > int64(len(rest)) {
		return buf, ErrBadAttach
	}
	f.Payload = rest[:len(rest)-int(att)]
	f.Attachment = rest[len(rest)-int(att):]
	return buf, nil
}

// readBody appends exactly n bytes from r to buf (empty on entry), growing it
// by doubling only when it is full.
func readBody(r io.Reader, buf []byte, n int, grow func(int) error) ([]byte, error) {
	for len(buf) < n {
		if len(buf) == cap(buf) {
			newCap := min(n, max(2*cap(buf), FirstChunk))
			if grow != nil {
				if err := grow(newCap); err != nil {
					return buf, err
				}
			}
			nb := make([]byte, len(buf), newCap)
			copy(nb, buf)
			buf = nb
		}
		end := min(n, cap(buf))
		got, err := io.ReadFull(r, buf[len(buf):end])
		buf = buf[:len(buf)+got]
		if err != nil {
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

// AppendFrame appends a frame with the given meta and payload to dst.
func AppendFrame(dst []byte, meta *RpcMeta, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, Magic...)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = meta.Append(dst)
	metaSize := len(dst) - start - HeaderSize
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-HeaderSize))
	binary.BigEndian.PutUint32(dst[start+8:], uint32(metaSize))
	return dst
}

// BeginFrame reserves a header and appends meta; FinishFrame fills the sizes
// once the payload has been appended in place (avoids copying responses).
func BeginFrame(dst []byte, meta *RpcMeta) (out []byte, start, metaSize int) {
	start = len(dst)
	dst = append(dst, Magic...)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = meta.Append(dst)
	return dst, start, len(dst) - start - HeaderSize
}

// FinishFrame completes a frame begun with BeginFrame.
func FinishFrame(dst []byte, start, metaSize int) []byte {
	binary.BigEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-HeaderSize))
	binary.BigEndian.PutUint32(dst[start+8:], uint32(metaSize))
	return dst
}
