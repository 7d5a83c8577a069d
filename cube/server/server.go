// Package server serves one shard of a cube dictionary over baidu_std RPC and
// HTTP on one port, compatible with Paddle Serving's cube-server, and runs the
// agent through which the transfer prepares, commits and aborts versions on the
// same port (agent.go).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/portmux"
	"github.com/elasticctr/terraform-provider-ctr/cube/token"
)

// Defaults of Options, used by New and by the server command's flags.
const (
	DefaultMaxFrameSize = 64 << 20
	// DefaultMaxResponseBytes is the -max_body_size Paddle Serving starts its server
	// with (brpc applies it to every message the process reads, responses included),
	// so a larger response would be refused by the client anyway.
	DefaultMaxResponseBytes = 64 << 20
	// MaxResponseLimit is the largest MaxResponseBytes: a frame's length is 32 bits.
	MaxResponseLimit = 1 << 31
	DefaultMaxConns  = 10_000
	// DefaultMaxConnsPerClient: brpc keeps one connection per server and
	// channel (more when pooled, about one per request in flight).
	DefaultMaxConnsPerClient = 256
	DefaultMaxInflightBytes  = 4 * DefaultMaxFrameSize
	// DefaultHeavyShare: requests of more than HeavyKeys keys together use at most a quarter
	// of the cores over time, leaving the rest to ordinary ones (Paddle Serving asks for about
	// a thousand keys a request). On 2 cores, half of them let a flood of huge requests raise
	// an ordinary client's p99 about 11x; a quarter, about 2x (cube bench hostile).
	DefaultHeavyShare      = 0.25
	DefaultHeaderTimeout   = 10 * time.Second
	DefaultReadTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
	DefaultIdleTimeout     = 5 * time.Minute
	DefaultMaxHeaderBytes  = 64 << 10
	DefaultDiskReserve     = 64 << 20
	DefaultDownloadTimeout = 10 * time.Minute
)

// The probe listener's bounds (cube server --probe-listen, which serves ProbeHandler). The
// kubelet opens a connection per probe and closes it, so a few suffice; a connection over
// ProbeMaxConns waits in the listen backlog until one closes, and none is held longer than
// ProbeTimeout without sending a whole request or idle between requests, nor longer than
// ProbeTimeout writing its answer.
const (
	ProbeMaxConns = 8
	ProbeTimeout  = 5 * time.Second
)

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// DataDir holds published versions (see package layout). Required.
	DataDir string
	// Shard is the shard index this server serves.
	Shard int
	// MaxFrameSize bounds a baidu_std frame body in bytes. If 0,
	// DefaultMaxFrameSize (brpc's max_body_size default).
	MaxFrameSize int
	// MaxKeys, if > 0, refuses seek requests with more keys (baidu_std:
	// EREQUEST, which brpc does not retry; HTTP: 400). 0, the default, means
	// no limit, as in Paddle's cube: a request's memory is then bounded by
	// MaxFrameSize, MaxInflightBytes and a response that grows with what it
	// returns.
	MaxKeys int
	// MaxResponseBytes bounds one seek response's payload. A request that
	// would exceed it is refused (baidu_std: EREQUEST; HTTP: 413), and so is
	// one with more keys than such a response can answer (each key costs at
	// least a miss). If 0, DefaultMaxResponseBytes; at most MaxResponseLimit.
	MaxResponseBytes int
	// MaxConns bounds concurrent client connections. A new connection
	// over it closes the longest-idle connection of the client holding the
	// most (slots.go), or is closed at accept when none is idle. If 0,
	// DefaultMaxConns.
	MaxConns int
	// MaxConnsPerClient bounds the connections of one client (remote IP)
	// the same way, within its own. If 0, DefaultMaxConnsPerClient.
	MaxConnsPerClient int
	// HeavyShare is the share of the cores (GOMAXPROCS) that requests of more than
	// HeavyKeys keys may use together: they take turns, at most ceil(HeavyShare × cores) at
	// once, and one that runs ahead of the share over time pauses between slices of its
	// work (reply.go). In (0, 1]; if 0, DefaultHeavyShare.
	HeavyShare float64
	// MaxInflightBytes bounds the memory of requests being read and served,
	// across all connections: baidu_std frame bodies beyond the first
	// FreeFrameBytes of each (a frame that would exceed it closes its
	// connection), and each request's decoded keys and response beyond the
	// first FreeReplyBytes (a request that would exceed it is refused with
	// EREQUEST, or HTTP 503). If 0, DefaultMaxInflightBytes (four frames of
	// the default MaxFrameSize).
	MaxInflightBytes int64
	// HeaderTimeout bounds the wait for a new connection's first four bytes
	// and for an HTTP request's header. If 0, DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// ReadTimeout bounds reading one request once its first byte arrived: a
	// whole baidu_std frame, or an HTTP request with its body. If 0,
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response. If 0, DefaultWriteTimeout.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that waits this long for its next
	// request. If 0, DefaultIdleTimeout: brpc clients keep one
	// connection per server and reconnect on demand, so only idle peers
	// notice.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds an HTTP request's header. If 0,
	// DefaultMaxHeaderBytes.
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
	// ControlTokenFile, if set, holds the control token instead, read again
	// when it changes (a rotated Secret) with the token it replaced accepted
	// for api.ControlTokenGrace more: no restart, no refused peer.
	ControlTokenFile string
	// Agent enables the rollout agent's /agent/* endpoints (see agent.go);
	// it needs ControlToken and SourceURL.
	Agent bool
	// SourceURL is the only place the agent downloads from: a URL must have
	// its scheme and host and lie below its path.
	SourceURL string
	// DiskReserve is the free space, in bytes, the agent keeps beyond a
	// download. If 0, DefaultDiskReserve.
	DiskReserve int64
	// DownloadTimeout bounds one download attempt. If 0,
	// DefaultDownloadTimeout.
	DownloadTimeout time.Duration
	// ScrubInterval, if > 0, is how often the served dictionary is checked against its
	// checksums again (scrub.go); 0: never after it is opened.
	ScrubInterval time.Duration
	// Log defaults to slog.Default().
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.MaxKeys < 0 {
		o.MaxKeys = 0
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	o.MaxResponseBytes = min(o.MaxResponseBytes, MaxResponseLimit)
	o.HeaderTimeout = orDefault(o.HeaderTimeout, DefaultHeaderTimeout)
	o.ReadTimeout = orDefault(o.ReadTimeout, DefaultReadTimeout)
	o.WriteTimeout = orDefault(o.WriteTimeout, DefaultWriteTimeout)
	o.IdleTimeout = orDefault(o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxConnsPerClient <= 0 {
		o.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if o.HeavyShare <= 0 || o.HeavyShare > 1 {
		o.HeavyShare = DefaultHeavyShare
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.DiskReserve <= 0 {
		o.DiskReserve = DefaultDiskReserve
	}
	if o.DownloadTimeout <= 0 {
		o.DownloadTimeout = DefaultDownloadTimeout
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

// FreeReplyBytes of each request's decoded keys and response are not counted
// against Options.MaxInflightBytes (1,000 keys of 100-byte values take about
// 120 KB), so ordinary requests never touch the budget.
const FreeReplyBytes = 128 << 10

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
	httpLn  *portmux.Listener

	handlers  sync.WaitGroup // connection handlers (HTTP ones return after handing off)
	inflight  byteBudget     // baidu_std body bytes beyond FreeFrameBytes per connection, and replies beyond FreeReplyBytes
	keyLimit  int            // the most keys one seek may ask for (reply.go)
	heavy     chan struct{}  // places of large requests (reply.go)
	heavyPace *pacer         // their share of the cores over time (reply.go)
	token     *token.Token   // the control token (Options.ControlToken or ControlTokenFile)
	// fencedFor, when set, is the version this replica must serve to be Ready (agent fence).
	fencedFor atomic.Pointer[string]
	stopping  atomic.Bool             // set by Shutdown before it expires the baidu_std read deadlines
	faulted   atomic.Pointer[version] // the last version whose mapping faulted; never read again
	spare     chan *connBuffers       // buffers of closed baidu_std connections, for new ones (warm.go)

	done      chan struct{} // closed by Shutdown: background loops stop
	mu        sync.Mutex
	ln        net.Listener
	conns     map[net.Conn]*slot // slots.go
	perClient map[string]int     // slots held by each client
	closed    bool
}

// New creates a server and loads the newest complete version of its shard.
// A missing or unloadable dictionary is logged and served as empty (all
// misses), as Paddle's cube-server does; Load errors are returned too so
// callers may choose to stop.
func New(opts Options) (*Server, error) {
	opts.defaults()
	s := &Server{
		opts:      opts,
		store:     store{dataDir: opts.DataDir, shard: opts.Shard, inMemory: opts.InMemory},
		log:       opts.Log.With("shard", opts.Shard),
		conns:     map[net.Conn]*slot{},
		done:      make(chan struct{}),
		perClient: map[string]int{},
		spare:     make(chan *connBuffers, spareBuffers),
	}
	s.inflight.max = opts.MaxInflightBytes
	s.token = token.Static(opts.ControlToken)
	if opts.ControlTokenFile != "" {
		tk, err := token.FromFile(opts.ControlTokenFile, api.ControlTokenGrace)
		if err != nil {
			return nil, fmt.Errorf("control token: %w", err)
		}
		s.token = tk
	}
	s.keyLimit = keyLimit(opts)
	cores := float64(runtime.GOMAXPROCS(0))
	s.heavy = make(chan struct{}, max(1, int(math.Ceil(s.opts.HeavyShare*cores-1e-9))))
	s.heavyPace = &pacer{rate: s.opts.HeavyShare * cores}
	s.m = newMetrics(opts.Shard, readouts{
		inflight:  func() float64 { return float64(s.inflight.used.Load()) },
		unchecked: s.dictBytes((*dict.Stack).UncheckedBytes),
		copied:    s.dictBytes((*dict.Stack).CopiedBytes),
		busy:      s.busyConns,
	})
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
	s.httpLn = portmux.NewListener()
	s.httpSrv = &http.Server{
		Handler:           s.httpHandler(),
		ReadHeaderTimeout: opts.HeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ConnState:         s.httpConnState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s, err
}

// dictBytes sums f over the current and background dictionaries.
func (s *Server) dictBytes(f func(*dict.Stack) int64) func() float64 {
	return func() float64 {
		var n int64
		for _, slot := range []*atomic.Pointer[version]{&s.store.cur, &s.store.bg} {
			if v := s.store.acquireFrom(slot); v != nil {
				n += f(v.d)
				v.release()
			}
		}
		return float64(n)
	}
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
	if s.opts.ScrubInterval > 0 {
		go s.scrubLoop(s.opts.ScrubInterval)
	}
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
		sl, rejected := s.admit(c)
		if sl == nil {
			s.m.rejectedConns.WithLabelValues(rejected).Inc()
			c.Close()
			continue
		}
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			s.handleConn(c, sl)
		}()
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
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	ln := s.ln
	var rpcConns []net.Conn
	for c, sl := range s.conns {
		if !sl.http {
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
