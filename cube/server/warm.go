package server

import (
	"fmt"
	"math"
	"runtime/debug"
	"slices"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"

	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// A new connection's first large request used to cost several times a
// steady one (a 25,000-key request: tens of milliseconds against a few),
// and Paddle Serving gives a request 200 ms: its response and key buffers
// grew from nothing, on a heap that had never been that large. Buffers of
// closed connections are therefore kept for new ones, and the server grows
// one set, through the real lookup path, before it serves (warmUp).

// connBuffers are a baidu_std connection's response and decoded-key buffers.
type connBuffers struct {
	out  []byte
	keys []uint64
}

const (
	// spareBuffers bounds the buffer sets kept for new connections.
	spareBuffers = 16
	// maxSpareOut and maxSpareKeys bound what one kept set may hold, so that
	// kept buffers cost at most spareBuffers × 6 MiB after a burst of huge
	// requests.
	maxSpareOut  = 4 << 20
	maxSpareKeys = 256 << 10
	// maxEntryOverhead is the most a DictValue's encoding adds to its value.
	maxEntryOverhead = 18
	// warmKeys is the size of the warm-up request: Paddle Serving asks for
	// about 1,000 keys per shard and request, batch jobs for tens of
	// thousands.
	warmKeys = 32 << 10
)

// buffers returns a kept buffer set, or a new empty one.
func (s *Server) buffers() *connBuffers {
	select {
	case b := <-s.spare:
		return b
	default:
		return &connBuffers{}
	}
}

// keepBuffers offers a closing connection's buffers to the next one.
func (s *Server) keepBuffers(b *connBuffers) {
	if cap(b.out) > maxSpareOut || cap(b.keys) > maxSpareKeys {
		return
	}
	select {
	case s.spare <- b:
	default:
	}
}

// warmUp runs one request of up to warmKeys keys of v — keys it holds, so
// that values are read and encoded, not only misses — through the lookup and
// encoding path. The store calls it on every version it opens (at start, on
// the agent's prepare, on Paddle's bg_load_* commands), so before the version
// can be served or switched to: a kept buffer set is then sized for large
// requests and the heap has grown once. A fault while reading (the file
// truncated meanwhile), or a block that does not match its checksum, is
// returned, and the version is refused.
func (s *Server) warmUp(v *version) error {
	if err := s.warmBuffers(v); err != nil {
		return err
	}
	// The blocks no lookup has read yet are checked in the background
	// (dict.Options.VerifyOnTouch): the version serves meanwhile.
	v.refs.Add(1)
	go s.verifyPending(v)
	return nil
}

// warmBuffers runs the warm-up request of warmUp.
func (s *Server) warmBuffers(v *version) error {
	n := min(v.d.Len(), warmKeys)
	if n == 0 {
		return nil
	}
	b := s.buffers()
	defer s.keepBuffers(b)
	b.keys = b.keys[:0]
	var err error
	size := 64 // the frame's header and meta, then each value with its encoding
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				if corrupt, ok := r.(*dict.CorruptError); ok {
					s.m.dictCorrupt.Inc()
					err = fmt.Errorf("version %q: %w", v.name, corrupt)
					return
				}
				if _, ok := r.(interface{ Addr() uintptr }); !ok {
					panic(r) // not a memory fault: a bug
				}
				err = fmt.Errorf("version %q: mapping faulted while warming it", v.name)
			}
		}()
		// As many keys as a kept set's response holds, whatever the values' size.
		v.d.Range(func(key uint64, val []byte) bool {
			if size += len(val) + maxEntryOverhead; size > maxSpareOut-16<<10 { // room for rounding up
				return false
			}
			b.keys = append(b.keys, key)
			return len(b.keys) < n
		})
	}()
	if err != nil {
		return err
	}
	meta := proto.RpcMeta{HasResponse: true}
	out, start, metaSize := proto.BeginFrame(b.out[:0], &meta)
	out, _, _, err = s.lookup(slices.Grow(out, size), v, b.keys, math.MaxInt, nil)
	if err != nil {
		return err
	}
	b.out = proto.FinishFrame(out, start, metaSize)
	return nil
}
