package server

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	mux.HandleFunc("GET /healthz", s.httpHealth)
	mux.HandleFunc("GET /readyz", s.httpReady)
	if s.agent != nil {
		s.agent.routes(mux)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	return mux
}

func (s *Server) httpSeek(w http.ResponseWriter, r *http.Request) {
	var req SeekRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.opts.MaxFrameSize)))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.m.httpErr.Inc()
		httpError(w, http.StatusBadRequest, fmt.Sprintf("fail to parse rec.mcube.DictRequest from JSON: %v", err))
		return
	}
	if len(req.Keys) > s.opts.MaxKeys {
		s.m.httpErr.Inc()
		httpError(w, http.StatusBadRequest, fmt.Sprintf("more than %d keys in one request (--max-keys)", s.opts.MaxKeys))
		return
	}
	start := time.Now()
	// Reuse the binary path, then decode it: one code path decides values.
	enc := s.seek(nil, req.Keys, req.VersionRequired)
	vals, version, err := proto.DecodeDictResponse(enc, make([]proto.Value, 0, len(req.Keys)))
	if err != nil {
		s.m.httpErr.Inc()
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	resp := SeekResponse{Values: make([]SeekValue, len(vals))}
	for i, v := range vals {
		resp.Values[i] = SeekValue{Status: v.Status, Value: v.Value}
		if resp.Values[i].Value == nil {
			resp.Values[i].Value = []byte{}
		}
	}
	if req.VersionRequired {
		resp.Version = &version
	}
	s.m.httpOK.Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, resp)
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

// authorized checks the bearer token (constant time); with no token
// configured every request is.
func (s *Server) authorized(r *http.Request) bool {
	tok := s.opts.ControlToken
	if tok == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1
}

// httpReady is the readiness probe: 200 only while a version is served.
func (s *Server) httpReady(w http.ResponseWriter, _ *http.Request) {
	cur, _ := s.store.versionNames()
	if cur == "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "shard": s.opts.Shard})
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
