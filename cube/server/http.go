package server

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/portmux"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// SeekRequest is the JSON body of POST /DictService/seek.
type SeekRequest struct {
	Keys            []uint64 `json:"keys"`
	VersionRequired bool     `json:"version_required,omitempty"`
}

// SeekValue is one entry of SeekResponse; Value is base64 in JSON, as brpc
// renders bytes fields.
type SeekValue struct {
	Status uint32 `json:"status"`
	Value  []byte `json:"value"`
}

// SeekResponse is the JSON reply of POST /DictService/seek.
type SeekResponse struct {
	Values  []SeekValue `json:"values"`
	Version *string     `json:"version,omitempty"`
}

// ControlRequest is the JSON body of POST /ControlService/cmd.
type ControlRequest struct {
	Cmd         string `json:"cmd"`
	VersionPath string `json:"version_path"`
	Version     string `json:"version"`
}

// ControlStatus is the reply to {"cmd":"status"}.
type ControlStatus struct {
	CurVersion string `json:"cur_version"`
	BgVersion  string `json:"bg_version"`
	Status     int    `json:"status"` // 0 running, 1 loading
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	for _, svc := range []string{proto.DictServiceShort, proto.DictServiceFull} {
		mux.HandleFunc("POST /"+svc+"/seek", s.httpSeek)
	}
	for _, svc := range []string{proto.ControlServiceShort, proto.ControlServiceFull} {
		mux.HandleFunc("POST /"+svc+"/cmd", s.httpControl)
	}
	s.probeRoutes(mux)
	if s.agent != nil {
		s.agent.routes(mux)
	}
	return mux
}

// ProbeHandler serves only /healthz, /readyz and /metrics, as the main port does: for a
// listener of its own (cube server --probe-listen) whose connections hold no client slot,
// so that the kubelet's probes never compete with clients for them.
func (s *Server) ProbeHandler() http.Handler {
	mux := http.NewServeMux()
	s.probeRoutes(mux)
	return mux
}

// probeRoutes are the endpoints of ProbeHandler, on the main port too.
func (s *Server) probeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.httpHealth)
	mux.HandleFunc("GET /readyz", s.httpReady)
	mux.Handle("GET "+api.MetricsPath, promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
}

// httpSeek answers POST /DictService/seek. The body is bounded before it is
// read (by the key limit, else by --max-frame-size) and decoded as a stream
// that stops at the first key over the limit; the response is written as a
// stream from the binary one, so neither side holds a second copy per key.
// The keys and the binary response count against --max-inflight-bytes as
// the baidu_std ones do.
func (s *Server) httpSeek(w http.ResponseWriter, r *http.Request) {
	limit := s.seekBodyLimit()
	body := bufio.NewReaderSize(http.MaxBytesReader(w, r.Body, limit), 16<<10)
	if r.ContentLength >= 0 {
		limit = min(limit, r.ContentLength)
	}
	// Every key is at least two bytes of the body ("1," or "1]").
	rep := reply{budget: &s.inflight}
	defer rep.release()
	if !rep.cover(8 * int(min(int64(s.keyLimit+1), limit/2+1))) {
		s.httpRefuse(w, s.outOfMemory())
		return
	}
	keys, versionRequired, tooMany, err := decodeSeekJSON(body, nil, s.keyLimit)
	if tooMany {
		s.m.httpTooMany.Inc()
		httpError(w, http.StatusBadRequest, s.tooManyKeys())
		return
	}
	if err != nil {
		s.m.httpErr.Inc()
		code := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			code = http.StatusRequestEntityTooLarge
		}
		httpError(w, code, fmt.Sprintf("fail to parse rec.mcube.DictRequest from JSON: %v", err))
		return
	}
	if len(keys) > HeavyKeys {
		ok, done := s.heavyTurn()
		if !ok {
			s.httpRefuse(w, s.heavyBusyError())
			return
		}
		defer done()
	}
	start := time.Now()
	// Reuse the binary path, then re-encode it: one code path decides values.
	enc, err := s.seek(nil, keys, versionRequired, &rep)
	if _, ok := isRefusal(err); ok {
		s.httpRefuse(w, err)
		return
	}
	if err != nil {
		s.m.httpErr.Inc()
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.m.httpOK.Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	if err := writeSeekJSON(bw, enc, versionRequired); err == nil {
		_ = bw.Flush()
	}
}

// httpRefuse answers a request refused for its size: 413 for a response
// over --max-response-bytes, 503 when the in-flight budget is spent.
func (s *Server) httpRefuse(w http.ResponseWriter, err error) {
	ref, _ := isRefusal(err)
	s.m.requests.WithLabelValues("http", ref.result).Inc()
	code := http.StatusServiceUnavailable
	if ref.result == "too_large" {
		code = http.StatusRequestEntityTooLarge
	}
	httpError(w, code, err.Error())
}

// seekBodyLimit is the largest seek body read: 24 bytes per key (a quoted
// 20-digit key and a comma) plus 64 KiB for the rest, for the most keys a
// request may ask for, never more than --max-frame-size.
func (s *Server) seekBodyLimit() int64 {
	return min(int64(s.opts.MaxFrameSize), 24*int64(s.keyLimit+1)+64<<10)
}

// writeSeekJSON writes the SeekResponse of a binary DictResponse, exactly as
// encoding/json would encode it.
func writeSeekJSON(w *bufio.Writer, enc []byte, versionRequired bool) error {
	var b []byte
	_, _ = w.WriteString(`{"values":[`)
	first := true
	version, err := proto.EachDictValue(enc, func(v proto.Value) {
		b = b[:0]
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"status":`...)
		b = strconv.AppendUint(b, uint64(v.Status), 10)
		b = append(b, `,"value":"`...)
		b = base64.StdEncoding.AppendEncode(b, v.Value)
		b = append(b, `"}`...)
		_, _ = w.Write(b)
	})
	if err != nil {
		return err // the binary response is ours; this does not happen
	}
	_, _ = w.WriteString("]")
	if versionRequired {
		v, _ := json.Marshal(version)
		_, _ = w.WriteString(`,"version":`)
		_, _ = w.Write(v)
	}
	_, err = w.WriteString("}\n")
	return err
}

// httpControl implements Paddle cube-server's ControlService.cmd: 200 on
// success, 500 on failure or when another command is running, 400 for an
// unparsable body or a missing cmd. Successful non-status commands answer
// "null" (the serialized empty document of the original).
func (s *Server) httpControl(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		httpError(w, http.StatusUnauthorized, "control commands need \"Authorization: Bearer <token>\"")
		return
	}
	var req ControlRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Cmd == "" {
		if err == nil {
			err = fmt.Errorf("missing cmd")
		}
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Cmd == "status" {
		cur, bg := s.store.versionNames()
		st := ControlStatus{CurVersion: cur, BgVersion: bg}
		if s.store.loading.Load() {
			st.Status = 1
		}
		writeJSON(w, http.StatusOK, st)
		return
	}
	if !s.store.mu.TryLock() {
		httpError(w, http.StatusInternalServerError, "another control command is running")
		return
	}
	defer s.store.mu.Unlock()
	// Loading verifies a whole dictionary, which may outlast --write-timeout:
	// no write deadline while the command runs, a fresh one for the answer.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	defer func() { _ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout)) }()
	log := s.log.With("cmd", req.Cmd, "version_path", req.VersionPath, "version", req.Version)
	var cmdErr error
	switch req.Cmd {
	case "bg_load_base", "bg_load_patch":
		// Our delta builds are self-contained (base + patch merged by the
		// builder), so a patch loads exactly like a base.
		cmdErr = s.store.bgLoad(req.VersionPath)
	case "bg_switch":
		cmdErr = s.store.bgSwitch()
	case "bg_unload":
		s.store.bgUnload()
	case "enable":
		cmdErr = s.store.enable(req.Version)
	case "reload_base", "reload_patch":
		if cmdErr = s.store.bgLoad(req.VersionPath); cmdErr == nil {
			if cmdErr = s.store.bgSwitch(); cmdErr == nil {
				s.store.bgUnload()
			}
		}
	default:
		httpError(w, http.StatusBadRequest, fmt.Sprintf("unknown cmd %q", req.Cmd))
		return
	}
	if cmdErr != nil {
		log.Error("control command failed", "err", cmdErr)
		httpError(w, http.StatusInternalServerError, cmdErr.Error())
		return
	}
	cur, bg := s.store.versionNames()
	log.Info("control command done", "cur_version", cur, "bg_version", bg)
	writeJSON(w, http.StatusOK, nil)
}

// authorized checks the bearer token (constant time, the previous token
// within its grace period too); with no token configured every request is.
func (s *Server) authorized(r *http.Request) bool { return s.token.AcceptsRequest(r) }

// httpReady is the readiness probe: 200 only while a version is served.
func (s *Server) httpReady(w http.ResponseWriter, _ *http.Request) {
	cur, _ := s.store.versionNames()
	if cur == "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "shard": s.opts.Shard})
		return
	}
	if f := s.fencedFor.Load(); f != nil && *f != cur {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "shard": s.opts.Shard, "version": cur,
			"fenced": "out of service until it serves " + *f + ", the version the transfer decided (it could not switch in time)"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "shard": s.opts.Shard, "version": cur})
}

func (s *Server) httpHealth(w http.ResponseWriter, _ *http.Request) {
	cur := ""
	if v := s.store.acquire(); v != nil {
		cur = v.name
		v.release()
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "shard": s.opts.Shard, "version": cur})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// httpConnState keeps an HTTP connection's slot idle between requests and
// busy while one is read and answered.
func (s *Server) httpConnState(c net.Conn, st http.ConnState) {
	pc, ok := c.(*portmux.Conn)
	if !ok || (st != http.StateActive && st != http.StateIdle) {
		return
	}
	s.mu.Lock()
	sl := s.conns[pc.Conn]
	s.mu.Unlock()
	switch {
	case sl == nil:
	case st == http.StateActive:
		sl.setBusy()
	default:
		sl.setIdle()
	}
}
