// Package server serves one shard of a cube dictionary over baidu_std RPC and
// HTTP on one port, compatible with Paddle Serving's cube-server.
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
	"slices"
	"sync"
	"time"

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
	// MaxKeys bounds the keys of one seek request. If 0, it defaults to
	// 100,000 (Paddle Serving sends about 1,000).
	MaxKeys int
	// MaxConns bounds concurrent client connections; more are closed at
	// accept. If 0, it defaults to 10,000.
	MaxConns int
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
	if o.MaxKeys <= 0 {
		o.MaxKeys = 100_000
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

// sniffTimeout bounds the wait for a new connection's first four bytes.
const sniffTimeout = 30 * time.Second

// Server serves one shard.
type Server struct {
	opts  Options
	store store
	m     *metrics
	log   *slog.Logger
	agent *agent // nil without Options.Agent

	httpSrv *http.Server
	httpLn  *chanListener

	handlers sync.WaitGroup // connection handlers (HTTP ones return after handing off)

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
		m:     newMetrics(opts.Shard),
		log:   opts.Log.With("shard", opts.Shard),
		conns: map[net.Conn]bool{},
	}
	s.store.onChange = s.dictChanged
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
			if err := s.agent.commit(CommitRequest{Version: v, AtUnixMs: at}); err != nil {
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
	s.httpSrv = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
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
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
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
	br := bufio.NewReaderSize(c, 64<<10)
	// A peer that connects and stays silent must not hold a connection
	// slot forever; after sniffing, the protocols manage their own time.
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	head, err := br.Peek(4)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
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

// serveRPC answers frames in order until the peer closes or sends a frame it
// cannot parse; such a frame closes this connection only. Responses are
// flushed when no further request is already buffered, so pipelined requests
// share a write.
func (s *Server) serveRPC(c net.Conn, br *bufio.Reader) {
	bw := bufio.NewWriterSize(c, 64<<10)
	var (
		f    proto.Frame
		buf  []byte
		keys = make([]uint64, 0, 1024)
		out  = make([]byte, 0, 64<<10)
		err  error
	)
	for {
		buf, err = proto.ReadFrame(br, buf, s.opts.MaxFrameSize, &f)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.m.badFrames.Inc()
				s.log.Debug("closing baidu_std connection", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		out, keys = s.handleRPC(out[:0], &f, keys)
		if br.Buffered() == 0 && bw.Buffered() == 0 {
			// Nothing else queued: write the response without copying it.
			if _, err := c.Write(out); err != nil {
				return
			}
		} else {
			if _, err := bw.Write(out); err != nil {
				return
			}
			if br.Buffered() == 0 {
				if err := bw.Flush(); err != nil {
					return
				}
			}
		}
		if cap(out) > 8<<20 { // do not keep one huge response's buffer forever
			out = make([]byte, 0, 64<<10)
		}
	}
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
		return fail(proto.ELIMIT, "more than %d keys in one request (--max-keys)", s.opts.MaxKeys)
	}
	out, fstart, metaSize := proto.BeginFrame(out, &resp)
	out = s.seek(out, keys, versionRequired)
	out = proto.FinishFrame(out, fstart, metaSize)
	s.m.rpcOK.Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
	return out, keys
}

// seek appends the DictResponse for keys to out.
func (s *Server) seek(out []byte, keys []uint64, versionRequired bool) []byte {
	v := s.store.acquire()
	misses := 0
	if v == nil {
		for range keys {
			out = proto.AppendDictMiss(out)
		}
		misses = len(keys)
	} else {
		maxv := s.opts.MaxValueSize
		long := 0
		// Reserve the whole response up front (values up to 16 KiB) so the
		// appends below never reallocate.
		if mv := v.d.MaxValueSize(); mv <= 16<<10 {
			out = slices.Grow(out, len(keys)*(mv+12))
		}
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
	if v != nil {
		v.release()
	}
	s.m.keys.Add(float64(len(keys)))
	if misses > 0 {
		s.m.misses.Add(float64(misses))
	}
	return out
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
