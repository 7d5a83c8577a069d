package cceemu

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
)

// APIPrefix is the path prefix of every CCE v2 endpoint (bce-sdk-go services/cce/v2 URI_PREFIX).
const APIPrefix = "/api/cce/service/v2"

// maxBody bounds what the emulator reads of a request body; CCE bodies are a few kilobytes.
const maxBody = 4 << 20

// Server emulates CCE v2. It is an http.Handler; Start also serves it on a loopback port.
// All methods are safe for concurrent use.
type Server struct {
	opts Options
	auth *verifier
	mux  *http.ServeMux
	now  func() time.Time

	// mu guards the fields below. Request goroutines (ServeHTTP) and test goroutines (the fault and
	// inspection methods) meet here; each holds mu for one whole read-modify-write, so a test that injects a
	// fault and then calls the API observes its fault, and phases advance exactly once per elapsed delay
	// however many goroutines look at a cluster at the same time.
	mu          sync.Mutex
	phaseDelay  time.Duration
	clusters    map[string]*cluster
	seq         int // creation order, so that lists are stable
	nextFailure *createFailure
	faults      []*faultRule
	requests    []RecordedRequest

	// logMu serialises writes to opts.Log, which need not be safe for concurrent use.
	logMu sync.Mutex

	// srvMu guards the listener state; Start and Close may be called from different goroutines.
	srvMu sync.Mutex
	srv   *http.Server
	done  chan struct{}
}

// New returns a Server with opts (defaults filled in). It does not listen until Start.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		opts:       opts,
		now:        time.Now,
		phaseDelay: opts.PhaseDelay,
		clusters:   map[string]*cluster{},
	}
	s.auth = &verifier{
		credentials: cloneMap(opts.Credentials),
		stsTokens:   cloneMap(opts.STSTokens),
		maxSkew:     opts.MaxClockSkew,
		now:         func() time.Time { return s.now() },
	}
	s.mux = s.routes()
	return s
}

// Start serves the emulator on a free port of 127.0.0.1 and returns its endpoint, "http://127.0.0.1:PORT",
// which is what ccev2.NewClient takes.
func (s *Server) Start() (string, error) {
	return s.StartOn("127.0.0.1:0")
}

// StartOn is Start on a given address; it must be a loopback address.
func (s *Server) StartOn(addr string) (string, error) {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv != nil {
		return "", errors.New("cceemu: server already started")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("cceemu: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("cceemu: listen address %q is not a loopback IP", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cceemu: listen on %q: %w", addr, err)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after Close; nothing to report
	}(s.srv, s.done)
	return "http://" + ln.Addr().String(), nil
}

// Close stops the listener started by Start and waits for the serving goroutine to end. It is a no-op if
// the server was never started.
func (s *Server) Close() {
	s.srvMu.Lock()
	srv, done := s.srv, s.done
	s.srvMu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-done
}

// call carries one request through a route handler; the handler fills result or err.
type call struct {
	r         *http.Request
	body      []byte
	requestID string
	route     string
	result    any
	err       *apiError
}

type callKey struct{}

// ServeHTTP authenticates r, applies injected faults, dispatches to the CCE route, and records the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	c := &call{requestID: newUUID()}
	body, err := bounded.ReadAll(r.Body, maxBody)
	c.body = body
	switch {
	case err != nil:
		c.err = errorf(http.StatusBadRequest, "InvalidHTTPRequest", "read body: %v", err)
	default:
		c.err = s.auth.verify(r, body)
	}
	if c.err == nil {
		c.err = s.injectedFault(r)
	}
	if c.err == nil {
		s.mux.ServeHTTP(discard{}, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
		if c.result == nil && c.err == nil {
			// The mux answered by itself (a redirect to a cleaned path); the service would not.
			c.err = errorf(http.StatusNotFound, CodeInvalidURI, "the emulator does not serve %s %s", r.Method, r.URL.Path)
		}
	}
	status := s.write(w, c)
	s.record(r, c, status)
	s.logf("cceemu: %s %s %d %s%s", r.Method, r.URL.RequestURI(), status, s.now().Sub(start).Round(time.Microsecond), errSuffix(c.err))
}

// write sends the JSON answer and returns its status. Successful answers get "requestID" like the service's.
func (s *Server) write(w http.ResponseWriter, c *call) int {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.Header().Set(headerRequestID, c.requestID)
	status := http.StatusOK
	var payload any
	if c.err != nil {
		status = c.err.Status
		payload = map[string]string{"code": c.err.Code, "message": c.err.Message, "requestId": c.requestID}
	} else {
		payload = c.result
		if m, ok := payload.(map[string]any); ok {
			m["requestID"] = c.requestID
		}
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(payload); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, `{"code":%q,"message":"encode response","requestId":%q}`, CodeInternalError, c.requestID)
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return status
}

// handler is a route: it reads c.r and c.body and returns the response object or an error.
type handler func(c *call) (map[string]any, *apiError)

// routes maps the CCE v2 paths bce-sdk-go uses (services/cce/v2/url.go) to handlers.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	add := func(pattern string, h handler) {
		method, path, _ := strings.Cut(pattern, " ")
		route := method + " " + path
		mux.HandleFunc(method+" "+APIPrefix+path, func(_ http.ResponseWriter, r *http.Request) {
			c := r.Context().Value(callKey{}).(*call)
			c.r, c.route = r, route
			res, err := h(c)
			c.result, c.err = res, err
		})
	}
	add("POST /cluster", s.createCluster)
	add("GET /cluster/{id}", s.getCluster)
	add("DELETE /cluster/{id}", s.deleteCluster)
	add("GET /clusters", s.listClusters)
	add("GET /event/cluster/{id}", s.clusterEvents)
	add("GET /kubeconfig/{id}/{type}", s.kubeconfig)
	add("POST /cluster/{id}/instancegroup", s.createGroup)
	add("GET /cluster/{id}/instancegroups", s.listGroups)
	add("GET /cluster/{id}/instancegroup/{gid}", s.getGroup)
	add("DELETE /cluster/{id}/instancegroup/{gid}", s.deleteGroup)
	add("PUT /cluster/{id}/instancegroup/{gid}/replicas", s.updateReplicas)
	add("PUT /cluster/{id}/instancegroup/{gid}/configure", s.configureGroup)
	// Everything else, including a known path with another method, is a URI the emulator does not serve.
	mux.HandleFunc("/", func(_ http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(callKey{}).(*call)
		c.err = errorf(http.StatusNotFound, CodeInvalidURI, "the emulator does not serve %s %s", r.Method, r.URL.Path)
	})
	return mux
}

func (s *Server) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.opts.Log, format+"\n", args...)
}

func errSuffix(e *apiError) string {
	if e == nil {
		return ""
	}
	return " " + e.Code
}

// discard is the ResponseWriter route handlers get: they return values and ServeHTTP writes them.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newID returns prefix + 8 random lower-case letters and digits, the shape of CCE IDs ("cce-abcd1234").
func newID(prefix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [8]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b[:])
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
