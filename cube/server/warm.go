package server

import (
	"slices"

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

// warmUp runs one request of warmKeys keys through the lookup and encoding
// path of v (the version served at start, or one just prepared, before it is
// reported prepared and so before any switch to it), so that a kept buffer
// set is sized for large requests and the heap has grown once before the
// first client arrives. The dictionary's own pages are resident already:
// dict.Open reads every page of the mapping to verify its checksums.
func (s *Server) warmUp(v *version) {
	if v == nil {
		return
	}
	n := min(v.d.Len(), warmKeys)
	if n == 0 {
		return
	}
	b := s.buffers()
	b.keys = b.keys[:0]
	for k := range uint64(n) {
		b.keys = append(b.keys, k)
	}
	meta := proto.RpcMeta{HasResponse: true}
	out, start, metaSize := proto.BeginFrame(b.out[:0], &meta)
	out, _, _, err := s.lookup(slices.Grow(out, n*missSize), v, b.keys)
	if err == nil {
		b.out = proto.FinishFrame(out, start, metaSize)
	}
	s.keepBuffers(b)
}

// warmCurrent warms the version served now.
func (s *Server) warmCurrent() {
	if v := s.store.acquire(); v != nil {
		s.warmUp(v)
		v.release()
	}
}

// warmBackground warms the background version.
func (s *Server) warmBackground() {
	s.store.mu.Lock()
	v := s.store.bg.Load()
	ok := v != nil && tryRef(v)
	s.store.mu.Unlock()
	if ok {
		s.warmUp(v)
		v.release()
	}
}
