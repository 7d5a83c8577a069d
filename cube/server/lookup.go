package server

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"

	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

func (s *Server) handleRPC(out []byte, f *proto.Frame, keys []uint64) ([]byte, []uint64) {
	resp := proto.RpcMeta{HasResponse: true, CorrelationID: f.Meta.CorrelationID}
	fail := func(code int32, format string, args ...any) ([]byte, []uint64) {
		s.m.rpcErr.Inc()
		resp.ErrorCode = code
		resp.ErrorText = fmt.Appendf(nil, format, args...)
		return proto.AppendFrame(out, &resp, nil), keys
	}
	if !f.Meta.HasRequest {
		return fail(proto.EREQUEST, "baidu_std: frame carries no request meta")
	}
	// string(b) == "..." compiles to a comparison, without allocating.
	if svc := f.Meta.Service; string(svc) != proto.DictServiceFull && string(svc) != proto.DictServiceShort {
		return fail(proto.ENOSERVICE, "fail to find service=%s", f.Meta.Service)
	}
	if string(f.Meta.Method) != proto.SeekMethod {
		return fail(proto.ENOMETHOD, "fail to find method=%s in service=%s", f.Meta.Method, f.Meta.Service)
	}
	if f.Meta.CompressType != 0 {
		return fail(proto.EREQUEST, "compress_type %d is not supported", f.Meta.CompressType)
	}
	// Keys take 8 bytes each, and every key is at least one byte of the
	// payload: count what decoding may take before it does.
	r := reply{budget: &s.inflight}
	defer r.release()
	if !r.cover(8 * min(s.keyLimit+1, len(f.Payload))) {
		return s.refuseRPC(out, &resp, s.outOfMemory()), keys
	}
	start := time.Now()
	keys, versionRequired, tooMany, err := proto.DecodeDictRequest(f.Payload, keys[:0], s.keyLimit)
	if err != nil {
		return fail(proto.EREQUEST, "fail to parse rec.mcube.DictRequest: %v", err)
	}
	if tooMany {
		// EREQUEST, not ELIMIT: brpc retries ELIMIT, and after the retries
		// Paddle's cube-api would serve this shard's keys as empty values.
		s.m.rpcTooMany.Inc()
		resp.ErrorCode = proto.EREQUEST
		resp.ErrorText = []byte(s.tooManyKeys())
		return proto.AppendFrame(out, &resp, nil), keys
	}
	if len(keys) > HeavyKeys {
		ok, done := s.heavyTurn()
		if !ok {
			return s.refuseRPC(out, &resp, s.heavyBusyError()), keys
		}
		defer done()
	}
	begin := len(out)
	out, fstart, metaSize := proto.BeginFrame(out, &resp)
	out, err = s.seek(out, keys, versionRequired, &r)
	if err != nil {
		out = out[:begin] // never a partial response
		if _, ok := isRefusal(err); ok {
			return s.refuseRPC(out, &resp, err), keys
		}
		return fail(proto.ELOGOFF, "%v", err)
	}
	out = proto.FinishFrame(out, fstart, metaSize)
	s.m.rpcOK.Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
	return out, keys
}

// refuseRPC answers a request refused for its size (a refusal): EREQUEST,
// which brpc does not retry, counted by its result.
func (s *Server) refuseRPC(out []byte, resp *proto.RpcMeta, err error) []byte {
	ref, _ := isRefusal(err)
	s.m.requests.WithLabelValues("baidu_std", ref.result).Inc()
	resp.ErrorCode = proto.EREQUEST
	resp.ErrorText = []byte(err.Error())
	return proto.AppendFrame(out, resp, nil)
}

// seek appends the DictResponse for keys to out. The response grows with
// what it returns: it reserves one miss per key (12 bytes, the least a key
// can cost) and grows as values are found, so a request of keys that all
// miss costs its size in misses, whatever the dictionary's largest value.
// The keys and the response are counted in r as they grow; a response over
// Options.MaxResponseBytes, or one the in-flight budget cannot take, is a
// refusal.
//
// If the dictionary's mapping faults (its file was truncated under the
// server), seek returns an error and out holds a partial response the caller
// must drop; see dictFaulted.
func (s *Server) seek(out []byte, keys []uint64, versionRequired bool, r *reply) ([]byte, error) {
	v := s.store.acquire()
	if v != nil {
		defer v.release()
		if v == s.faulted.Load() {
			return out, s.faultError(v)
		}
	}
	name := ""
	if v != nil {
		name = v.name
	}
	// The payload's bound, with room for the version the response ends with.
	limit := len(out) + s.opts.MaxResponseBytes
	if versionRequired {
		limit -= len(proto.AppendDictVersion(nil, name))
	}
	// What a request adds to memory: its keys, and its response as it grows;
	// a kept buffer's capacity is bounded where it is kept (warm.go).
	keyBytes := 8 * len(keys)
	if len(out)+len(keys)*missSize > limit {
		return out, s.responseTooLarge()
	}
	if !r.cover(keyBytes + len(out) + len(keys)*missSize) {
		return out, s.outOfMemory()
	}
	misses := 0
	if v == nil {
		for range keys {
			out = proto.AppendDictMiss(out)
		}
		misses = len(keys)
	} else {
		reserve := len(keys) * missSize
		if reserve > s.opts.MaxResponseBytes/sizeFirst {
			// A response this large is sized before it is built: one over the
			// cap is refused without allocating it (two million lookups of a
			// present key used to build 64 MiB to throw it away, and the
			// collector's work slowed every other request).
			size, err := s.responseSize(v, keys, limit-len(out))
			if err != nil {
				return out, err
			}
			if !r.cover(keyBytes + len(out) + size) {
				return out, s.outOfMemory()
			}
			reserve = size
		}
		out = slices.Grow(out, reserve)
		var long int
		var err error
		grow := func(c int) error {
			if !r.cover(keyBytes + c) {
				return s.outOfMemory()
			}
			return nil
		}
		if out, misses, long, err = s.lookup(out, v, keys, limit, grow); err != nil {
			return out, err
		}
		if long > 0 {
			s.m.longValues.Add(float64(long))
		}
	}
	if versionRequired {
		out = proto.AppendDictVersion(out, name)
	}
	s.m.keys.Add(float64(len(keys)))
	if misses > 0 {
		s.m.misses.Add(float64(misses))
	}
	return out, nil
}

// yieldEvery+1 keys of one request are looked up between yields of its core.
const yieldEvery = 1<<14 - 1

// sizeFirst: a request whose least response (a miss a key) is over
// MaxResponseBytes/sizeFirst is sized before it is built (seek).
const sizeFirst = 8

// missSize is the encoded size of one missing key's DictValue.
var missSize = len(proto.AppendDictMiss(nil))

// lookup appends v's values for keys to out, to at most limit bytes of out
// (beyond it: responseTooLarge); grow, if not nil, is told each new capacity
// of out and may refuse it.
func (s *Server) lookup(out []byte, v *version, keys []uint64, limit int, grow func(int) error) (_ []byte, misses, long int, err error) {
	err = s.eachValue(v, keys, func(val []byte, ok, tooLong bool) error {
		c := cap(out)
		if tooLong {
			long++
		}
		if !ok {
			misses++
			out = proto.AppendDictMiss(out)
		} else {
			out = proto.AppendDictValue(out, 0, val)
		}
		switch {
		case len(out) > limit:
			return s.responseTooLarge()
		case cap(out) != c && grow != nil:
			return grow(cap(out))
		}
		return nil
	})
	return out, misses, long, err
}

// responseSize is the size of the values lookup would append for keys,
// found without building them; responseTooLarge once it passes limit.
func (s *Server) responseSize(v *version, keys []uint64, limit int) (size int, err error) {
	err = s.eachValue(v, keys, func(val []byte, ok, _ bool) error {
		if !ok {
			size += missSize
		} else {
			size += proto.SizeDictValue(0, len(val))
		}
		if size > limit {
			return s.responseTooLarge()
		}
		return nil
	})
	return size, err
}

// eachValue calls f with each key's value in v, in order, until f returns an error: ok is
// false for a missing key and for one whose value is over MaxValueSize, which tooLong tells
// apart (both are answered as misses). It reads under readGuarded, and a large request lets
// the others on its core run (about every 0.5 ms), within its share.
func (s *Server) eachValue(v *version, keys []uint64, f func(val []byte, ok, tooLong bool) error) (err error) {
	maxv := s.opts.MaxValueSize
	slice := time.Now()
	ferr := s.readGuarded(v, func() {
		v.d.LookupBatch(keys, func(i int, val []byte, ok bool) {
			if err != nil {
				return
			}
			if i&yieldEvery == yieldEvery {
				s.pace(&slice)
			}
			tooLong := ok && maxv > 0 && len(val) > maxv
			err = f(val, ok && !tooLong, tooLong)
		})
	})
	return cmp.Or(ferr, err)
}

// readGuarded runs read, which reads v's mapping, with the runtime's
// panic-on-fault enabled: when the file was truncated in place, touching a
// page past its new end raises SIGBUS, which would otherwise kill the
// process. The fault is recovered here and returned as an error, and so is
// a block found not to match its checksum the first time it is read
// (dict.Options.VerifyOnTouch): v is retired either way.
func (s *Server) readGuarded(v *version, read func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if corrupt, ok := r.(*dict.CorruptError); ok {
				s.dictCorrupted(v, corrupt)
				err = s.faultError(v)
				return
			}
			// Only memory faults carry an address; anything else is a bug
			// that must not be swallowed.
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = s.dictFaulted(v, fault.Addr())
		}
	}()
	read()
	return nil
}

// dictCorrupted retires v, whose bytes no longer match their checksums
// (found by a lookup, the background check after open, or the scrub).
func (s *Server) dictCorrupted(v *version, bad error) {
	if s.faulted.Swap(v) != v {
		s.m.dictCorrupt.Inc()
		s.log.Error("the dictionary does not match its checksums; no longer serving it", "version", v.name, "path", v.d.Path(), "err", bad)
		go s.retire(v)
	}
}

// faultError is what a request reading a faulted version is answered.
func (s *Server) faultError(v *version) error {
	return fmt.Errorf("shard %d: dictionary version %q became unreadable (its file %q was truncated, replaced in place, or no longer matches its checksums); retry another replica",
		s.opts.Shard, v.name, v.d.Path())
}

// dictFaulted handles a fault in v's mapping: the first request to see it
// logs and counts it and retires v in the background; every request that
// reads v from then on is refused without touching the mapping.
func (s *Server) dictFaulted(v *version, addr uintptr) error {
	if s.faulted.Swap(v) != v {
		s.m.dictFaults.Inc()
		s.log.Error("dictionary mapping faulted; no longer serving it", "version", v.name, "path", v.d.Path(),
			"fault_addr", fmt.Sprintf("%#x", addr))
		go s.retire(v)
	}
	return s.faultError(v)
}

// retire stops serving a faulted version: it leaves the background slot, and
// the current slot falls back to the newest older version on disk whose
// file still opens and passes its checksums, or, with none, to no dictionary
// (every key a miss, /readyz 503) -- the same choice a restart would make.
func (s *Server) retire(v *version) {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if s.store.bg.Load() == v {
		s.store.bgUnload()
	}
	if s.store.cur.Load() != v {
		return
	}
	next := s.fallback(v.name)
	s.store.setCurrent(next)
	if next != nil {
		s.log.Warn("serving an older version after a fault", "faulted", v.name, "version", next.name)
	} else {
		s.log.Warn("serving every key as a miss after a fault: no older complete version opens", "faulted", v.name)
	}
}

// fallback opens the newest complete version older than faulted, or returns
// nil.
func (s *Server) fallback(faulted string) *version {
	vs, err := layout.Versions(s.opts.DataDir)
	if err != nil {
		s.log.Error("fallback after a fault", "err", err)
		return nil
	}
	i := slices.Index(vs, faulted)
	if i < 0 {
		i = len(vs)
	}
	for j := i - 1; j >= 0; j-- {
		if nv, err := s.openGuarded(vs[j]); err == nil {
			return nv
		} else {
			s.log.Warn("fallback candidate refused", "version", vs[j], "err", err)
		}
	}
	return nil
}

// openGuarded opens a version with faults recovered: the checksum pass reads
// the whole mapping, and its file may be truncated meanwhile too.
func (s *Server) openGuarded(name string) (v *version, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			v, err = nil, fmt.Errorf("version %q: mapping faulted while verifying it", name)
		}
	}()
	return s.store.open(name)
}
