// Package server serves one shard of a cube dictionary over baidu_std RPC and
// HTTP on one port, compatible with Paddle Serving's cube-server, and runs the
// agent through which the transfer prepares, commits and aborts versions on the
// same port (agent.go).
package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// DataDir holds published versions (see package layout). Required.
	DataDir string
	// Shard is the shard index this server serves.
	Shard int
	// MaxFrameSize bounds a baidu_std frame body in bytes. If 0, it
	// defaults to 64 MiB (brpc's max_body_size default).
	MaxFrameSize int
	// MaxKeys, if > 0, refuses seek requests with more keys (baidu_std:
	// EREQUEST, which brpc does not retry; HTTP: 400). 0, the default, means
	// no limit, as in Paddle's cube: a request's memory is then bounded by
	// MaxFrameSize, MaxInflightBytes and a response that grows with what it
	// returns.
	MaxKeys int
	// MaxConns bounds concurrent client connections; more are closed at
	// accept. If 0, it defaults to 10,000.
	MaxConns int
	// MaxInflightBytes bounds the memory of baidu_std frame bodies being read
	// and served, across all connections, beyond the first FreeFrameBytes of
	// each; a frame that would exceed it closes its connection. If 0, it
	// defaults to 256 MiB (four frames of the default MaxFrameSize).
	MaxInflightBytes int64
	// HeaderTimeout bounds the wait for a new connection's first four bytes
	// and for an HTTP request's header. If 0, it defaults to 10s.
	HeaderTimeout time.Duration
	// ReadTimeout bounds reading one request once its first byte arrived: a
	// whole baidu_std frame, or an HTTP request with its body. If 0, it
	// defaults to 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response. If 0, it defaults to 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that waits this long for its next
	// request. If 0, it defaults to 5 minutes: brpc clients keep one
	// connection per server and reconnect on demand, so only idle peers
	// notice.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds an HTTP request's header. If 0, it defaults to
	// 64 KiB.
	MaxHeaderBytes int
	// MaxValueSize, if > 0, answers values larger than it as misses, as
	// Paddle's cube does with its fixed 1,024-byte buffer. 0 means no limit.
	MaxValueSize int
	// InMemory copies each dictionary into anonymous memory advised to use
	// huge pages (dict.Options.InMemory) instead of serving it from a
	// read-only file mapping. Default false: on the development machine the
	// mapping was faster (the page cache uses large folios there) and it
	// costs no memory beyond the page cache.
	InMemory bool
	// ControlToken, if set, is required as "Authorization: Bearer <token>"
	// on POST /ControlService/cmd (401 otherwise). Paddle's cube-agent sends
	// no token, so leave it empty where that agent drives the server.
	ControlToken string
	// Agent enables the rollout agent's /agent/* endpoints (see agent.go);
	// it needs ControlToken and SourceURL.
	Agent bool
	// SourceURL is the only place the agent downloads from: a URL must have
	// its scheme and host and lie below its path.
	SourceURL string
	// DiskReserve is the free space, in bytes, the agent keeps beyond a
	// download. If 0, it defaults to 64 MiB.
	DiskReserve int64
	// DownloadTimeout bounds one download attempt. If 0, it defaults to 10
	// minutes.
	DownloadTimeout time.Duration
	// Log defaults to slog.Default().
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = 64 << 20
	}
	if o.MaxKeys < 0 {
		o.MaxKeys = 0
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = 256 << 20
	}
	o.HeaderTimeout = orDefault(o.HeaderTimeout, 10*time.Second)
	o.ReadTimeout = orDefault(o.ReadTimeout, 30*time.Second)
	o.WriteTimeout = orDefault(o.WriteTimeout, 30*time.Second)
	o.IdleTimeout = orDefault(o.IdleTimeout, 5*time.Minute)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 10_000
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.DiskReserve <= 0 {
		o.DiskReserve = 64 << 20
	}
	if o.DownloadTimeout <= 0 {
		o.DownloadTimeout = 10 * time.Minute
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// FreeFrameBytes of each baidu_std connection's body buffer are not counted
// against Options.MaxInflightBytes (a 1,000-key request is about 10 KB), so
// ordinary requests never wait on hostile ones; MaxConns bounds their sum.
const FreeFrameBytes = 16 << 10

// connReadBuffer is the read buffer of each connection; small, because
// thousands of idle connections each hold one.
const connReadBuffer = 16 << 10

// Server serves one shard.
type Server struct {
	opts  Options
	store store
	m     *metrics
	log   *slog.Logger
	agent *agent // nil without Options.Agent

	httpSrv *http.Server
	httpLn  *chanListener

	handlers sync.WaitGroup          // connection handlers (HTTP ones return after handing off)
	inflight byteBudget              // baidu_std body bytes beyond FreeFrameBytes per connection
	stopping atomic.Bool             // set by Shutdown before it expires the baidu_std read deadlines
	faulted  atomic.Pointer[version] // the last version whose mapping faulted; never read again
	spare    chan *connBuffers       // buffers of closed baidu_std connections, for new ones (warm.go)

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool // true once handed to the HTTP server
	closed bool
}

// New creates a server and loads the newest complete version of its shard.
// A missing or unloadable dictionary is logged and served as empty (all
// misses), as Paddle's cube-server does; Load errors are returned too so
// callers may choose to stop.
func New(opts Options) (*Server, error) {
	opts.defaults()
	s := &Server{
		opts:  opts,
		store: store{dataDir: opts.DataDir, shard: opts.Shard, inMemory: opts.InMemory},
		log:   opts.Log.With("shard", opts.Shard),
		conns: map[net.Conn]bool{},
		spare: make(chan *connBuffers, spareBuffers),
	}
	s.inflight.max = opts.MaxInflightBytes
	s.m = newMetrics(opts.Shard, func() float64 { return float64(s.inflight.used.Load()) })
	s.store.onChange = s.dictChanged
	s.store.warm = s.warmUp
	if opts.Agent {
		a, err := newAgent(s)
		if err != nil {
			return nil, err
		}
		s.agent = a
	}
	name, err := s.store.loadNewest()
	if v, at, previous := readCurrentFile(opts.DataDir); at > 0 && name == previous && s.agent != nil {
		// A commit that had not reached its instant when the process died: switch then, with
		// the replicas that did not die.
		s.log.Info("agent: resuming a commit", "version", v, "at_unix_ms", at, "serving_until_then", previous)
		go func() {
			if err := s.agent.commit(api.CommitRequest{Version: v, AtUnixMs: at}); err != nil {
				s.log.Error("agent: resumed commit failed", "version", v, "err", err)
			}
		}()
	}
	if name != "" {
		s.log.Info("dictionary loaded", "version", name, "data", opts.DataDir)
	} else {
		s.log.Warn("no dictionary loaded; serving every key as a miss", "data", opts.DataDir)
	}
	if err != nil {
		s.log.Error("dictionary load problem", "err", err)
	}
	s.httpLn = newChanListener()
	s.httpSrv = &http.Server{
		Handler:           s.httpHandler(),
		ReadHeaderTimeout: opts.HeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s, err
}

// dictChanged refreshes the dictionary gauges; store.mu is held.
func (s *Server) dictChanged() {
	s.m.swapCount.Inc()
	s.m.info.Reset()
	var mapped int64
	if v := s.store.cur.Load(); v != nil {
		s.m.info.WithLabelValues("current", v.name).Set(1)
		s.m.dictKeys.Set(float64(v.d.Len()))
		mapped += v.d.Size()
	} else {
		s.m.dictKeys.Set(0)
	}
	if bg := s.store.bg.Load(); bg != nil {
		s.m.info.WithLabelValues("background", bg.name).Set(1)
		mapped += bg.d.Size()
	}
	s.m.mapped.Set(float64(mapped))
}

// Serve accepts connections on ln until Close. Each connection is sniffed:
// "PRPC" starts baidu_std, anything else is handed to the HTTP server.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	go func() {
		if err := s.httpSrv.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of descriptors (EMFILE), memory, or a transient network
			// error: the pending connection waits in the backlog while the
			// connections we serve finish, so back off and try again.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.m.acceptErrors.Inc()
			s.log.Warn("accept failed; retrying", "err", err, "retry_in", delay.String())
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !s.track(c) {
			s.m.rejectedConns.Inc()
			c.Close()
			continue
		}
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			s.handleConn(c)
		}()
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.conns) >= s.opts.MaxConns {
		return false
	}
	s.conns[c] = false
	s.m.conns.Inc()
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		s.m.conns.Dec()
	}
}

// Close stops accepting, closes every connection and unmaps the dictionaries
// once in-flight requests finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return s.Shutdown(ctx)
}

// Shutdown stops accepting, lets every connection finish the request it is
// serving (baidu_std connections see a read deadline, HTTP ones are drained
// by http.Server.Shutdown), and closes what is left when ctx ends. The
// dictionaries are released last.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	var rpcConns []net.Conn
	for c, isHTTP := range s.conns {
		if !isHTTP {
			rpcConns = append(rpcConns, c)
		}
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	// A read deadline in the past makes each baidu_std loop stop at its next
	// ReadFrame, after the response in progress has been written.
	for _, c := range rpcConns {
		_ = c.SetReadDeadline(time.Now())
	}
	err := s.httpSrv.Shutdown(ctx)
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.httpSrv.Close()
		<-done
	}
	s.store.close()
	return err
}

func (s *Server) handleConn(c net.Conn) {
	br := bufio.NewReaderSize(c, connReadBuffer)
	// A peer that connects and stays silent must not hold a connection
	// slot forever; after sniffing, the protocols manage their own time.
	_ = c.SetReadDeadline(time.Now().Add(s.opts.HeaderTimeout))
	head, err := br.Peek(4)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		s.closedConn(c, err, "silent")
		s.untrack(c)
		c.Close()
		return
	}
	if string(head) == proto.Magic {
		defer s.untrack(c)
		defer c.Close()
		s.serveRPC(c, br)
		return
	}
	// HTTP: the http.Server owns the connection from here; untrack on Close.
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		s.conns[c] = true
	}
	s.mu.Unlock()
	s.httpLn.push(&sniffedConn{Conn: c, r: br, onClose: func() { s.untrack(c) }})
}

// serveRPC answers frames in order until the peer closes, stays idle longer
// than IdleTimeout, takes longer than ReadTimeout to send a frame it started,
// does not take a response within WriteTimeout, or sends a frame it cannot
// parse; each of these closes this connection only. Responses are flushed
// when no further request is already buffered, so pipelined requests share a
// write.
func (s *Server) serveRPC(c net.Conn, br *bufio.Reader) {
	var (
		bw       *bufio.Writer // made on the first pipelined response
		f        proto.Frame
		buf      []byte
		reserved int64 // bytes of buf's capacity taken from s.inflight
		err      error
		cb       = s.buffers()
		keys     = cb.keys
		out      = cb.out
	)
	defer func() { s.inflight.give(reserved) }()
	defer func() { cb.keys, cb.out = keys, out; s.keepBuffers(cb) }()
	grow := func(newCap int) error {
		need := max(0, int64(newCap)-FreeFrameBytes) - reserved
		if need <= 0 {
			return nil
		}
		if !s.inflight.take(need) {
			return errInflight
		}
		reserved += need
		return nil
	}
	for {
		if err := s.awaitFrame(c, br); err != nil {
			s.closedConn(c, err, "idle")
			return
		}
		s.setReadDeadline(c, s.opts.ReadTimeout)
		buf, err = proto.ReadFrameFunc(br, buf, s.opts.MaxFrameSize, &f, grow)
		if err != nil {
			s.closedConn(c, err, "slow_frame")
			return
		}
		out, keys = s.handleRPC(out[:0], &f, keys)
		_ = c.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if br.Buffered() == 0 && (bw == nil || bw.Buffered() == 0) {
			// Nothing else queued: write the response without copying it.
			if _, err := c.Write(out); err != nil {
				s.closedConn(c, err, "slow_write")
				return
			}
		} else {
			if bw == nil {
				bw = bufio.NewWriterSize(c, 64<<10)
			}
			if _, err := bw.Write(out); err != nil {
				s.closedConn(c, err, "slow_write")
				return
			}
			if br.Buffered() == 0 {
				if err := bw.Flush(); err != nil {
					s.closedConn(c, err, "slow_write")
					return
				}
			}
		}
		// Keep small buffers for the next request; give large ones back.
		if cap(buf) > FreeFrameBytes {
			buf = nil
			s.inflight.give(reserved)
			reserved = 0
		}
		if cap(out) > 8<<20 {
			out = nil
		}
		if cap(keys) > 1<<20 {
			keys = nil
		}
	}
}

// awaitFrame waits up to IdleTimeout for the first byte of the next frame.
func (s *Server) awaitFrame(c net.Conn, br *bufio.Reader) error {
	if br.Buffered() > 0 {
		return nil
	}
	s.setReadDeadline(c, s.opts.IdleTimeout)
	_, err := br.Peek(1)
	return err
}

// setReadDeadline sets c's read deadline d from now, unless Shutdown has
// begun: it expires the deadlines of baidu_std connections once, and one set
// after that would undo it. Frames already buffered are still answered.
func (s *Server) setReadDeadline(c net.Conn, d time.Duration) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	if s.stopping.Load() {
		_ = c.SetReadDeadline(time.Now())
	}
}

var errInflight = errors.New("baidu_std: frame bodies in flight exceed --max-inflight-bytes")

// closedConn counts and logs why a connection is closed; a clean close by
// the peer or by Shutdown is not counted. timeoutReason names a deadline
// that expired.
func (s *Server) closedConn(c net.Conn, err error, timeoutReason string) {
	reason := ""
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || s.stopping.Load():
		return
	case errors.Is(err, errInflight):
		reason = "memory"
	case errors.As(err, &ne) && ne.Timeout():
		reason = timeoutReason
	case timeoutReason == "slow_frame":
		s.m.badFrames.Inc()
		reason = "bad_frame"
	default:
		reason = "error"
	}
	s.m.closedConns.WithLabelValues(reason).Inc()
	s.log.Debug("closing connection", "remote", c.RemoteAddr().String(), "reason", reason, "err", err)
}

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
	start := time.Now()
	keys, versionRequired, tooMany, err := proto.DecodeDictRequest(f.Payload, keys[:0], s.opts.MaxKeys)
	if err != nil {
		return fail(proto.EREQUEST, "fail to parse rec.mcube.DictRequest: %v", err)
	}
	if tooMany {
		// EREQUEST, not ELIMIT: brpc retries ELIMIT, and after the retries
		// Paddle's cube-api would serve this shard's keys as empty values.
		s.m.rpcTooMany.Inc()
		resp.ErrorCode = proto.EREQUEST
		resp.ErrorText = fmt.Appendf(nil, "more than %d keys in one request (cube server --max-keys %d)", s.opts.MaxKeys, s.opts.MaxKeys)
		return proto.AppendFrame(out, &resp, nil), keys
	}
	begin := len(out)
	out, fstart, metaSize := proto.BeginFrame(out, &resp)
	out, err = s.seek(out, keys, versionRequired)
	if err != nil {
		out = out[:begin] // never a partial response
		return fail(proto.ELOGOFF, "%v", err)
	}
	out = proto.FinishFrame(out, fstart, metaSize)
	s.m.rpcOK.Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
	return out, keys
}

// seek appends the DictResponse for keys to out. The response grows with
// what it returns: it reserves one miss per key (12 bytes, the least a key
// can cost) and grows as values are found, so a request of keys that all
// miss costs its size in misses, whatever the dictionary's largest value.
//
// If the dictionary's mapping faults (its file was truncated under the
// server), seek returns an error and out holds a partial response the caller
// must drop; see dictFaulted.
func (s *Server) seek(out []byte, keys []uint64, versionRequired bool) ([]byte, error) {
	v := s.store.acquire()
	if v != nil {
		defer v.release()
		if v == s.faulted.Load() {
			return out, s.faultError(v)
		}
	}
	misses := 0
	if v == nil {
		for range keys {
			out = proto.AppendDictMiss(out)
		}
		misses = len(keys)
	} else {
		out = slices.Grow(out, len(keys)*missSize)
		var long int
		var err error
		if out, misses, long, err = s.lookup(out, v, keys); err != nil {
			return out, err
		}
		if long > 0 {
			s.m.longValues.Add(float64(long))
		}
	}
	if versionRequired {
		name := ""
		if v != nil {
			name = v.name
		}
		out = proto.AppendDictVersion(out, name)
	}
	s.m.keys.Add(float64(len(keys)))
	if misses > 0 {
		s.m.misses.Add(float64(misses))
	}
	return out, nil
}

// missSize is the encoded size of one missing key's DictValue.
var missSize = len(proto.AppendDictMiss(nil))

// lookup appends v's values for keys to out. It reads the dictionary's
// mapping with the runtime's panic-on-fault enabled: when the file was
// truncated in place, touching a page past its new end raises SIGBUS, which
// would otherwise kill the process. The fault is recovered here and reported
// as an error.
func (s *Server) lookup(out []byte, v *version, keys []uint64) (_ []byte, misses, long int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			// Only memory faults carry an address; anything else is a bug
			// that must not be swallowed.
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = s.dictFaulted(v, fault.Addr())
		}
	}()
	maxv := s.opts.MaxValueSize
	v.d.LookupBatch(keys, func(_ int, val []byte, ok bool) {
		if ok && maxv > 0 && len(val) > maxv {
			long++
			ok = false
		}
		if !ok {
			misses++
			out = proto.AppendDictMiss(out)
			return
		}
		out = proto.AppendDictValue(out, 0, val)
	})
	return out, misses, long, nil
}

// faultError is what a request reading a faulted version is answered.
func (s *Server) faultError(v *version) error {
	return fmt.Errorf("shard %d: dictionary version %q became unreadable (its file %q was truncated or replaced in place); retry another replica",
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

// sniffedConn replays the bytes read while sniffing.
type sniffedConn struct {
	net.Conn
	r       *bufio.Reader
	once    sync.Once
	onClose func()
}

func (c *sniffedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *sniffedConn) Close() error {
	c.once.Do(c.onClose)
	return c.Conn.Close()
}

// chanListener is a net.Listener fed by the sniffing accept loop.
type chanListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }

// byteBudget is a counter of bytes taken from a fixed allowance; take never
// blocks, so a full budget refuses at once instead of stalling a reader.
type byteBudget struct {
	used atomic.Int64
	max  int64
}

func (b *byteBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *byteBudget) give(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}
