package server

// The agent lives inside "cube server", on the same port, rather than beside
// it as Paddle's cube-agent does: a pod then has one port and one process
// (no second container, no shell tools), and a prepared version is loaded
// straight into the serving store instead of being announced over a second
// HTTP hop to /ControlService/cmd. The agent's endpoints are
//
//	POST /agent/prepare  {"version","dict","shard","url","sha256","size"}  → 202, loads in the background
//	POST /agent/commit   {"version","at_unix_ms"}                         → 200 once serving it
//	POST /agent/abort    {"version"}                                      → 200, unloads and deletes it
//	GET  /agent/status                                                    → api.AgentStatus
//
// all behind "Authorization: Bearer <token>".

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

// CurrentFile names the committed version in the data directory (Paddle's
// data/VERSION). At start the server serves it in preference to the newest
// directory, so a version that was prepared but never committed everywhere
// is not served after a restart. Its first line is the version, as Paddle
// reads it; "at <unix ms>" and "previous <version>" lines may follow: a
// commit whose switch instant had not come when the process died.
const CurrentFile = "VERSION"

func currentFileContent(version string, atUnixMs int64, previous string) string {
	out := version + "\n"
	if atUnixMs > 0 && previous != "" && previous != version {
		out += fmt.Sprintf("at %d\nprevious %s\n", atUnixMs, previous)
	}
	return out
}

// readCurrentFile returns the committed version and, when its switch instant
// is still ahead, that instant and the version to serve until then.
func readCurrentFile(dataDir string) (version string, atUnixMs int64, previous string) {
	b, err := os.ReadFile(filepath.Join(dataDir, CurrentFile))
	if err != nil {
		return "", 0, ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	version = strings.TrimSpace(lines[0])
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "at":
			atUnixMs, _ = strconv.ParseInt(f[1], 10, 64)
		case "previous":
			previous = f[1]
		}
	}
	if atUnixMs <= time.Now().UnixMilli() {
		return version, 0, ""
	}
	return version, atUnixMs, previous
}

type agent struct {
	s         *Server
	source    *url.URL
	client    *http.Client
	diskSlack int64 // free bytes to keep beyond the download

	mu       sync.Mutex
	state    string
	version  string
	err      string
	cancel   context.CancelFunc
	done     chan struct{}
	previous string
	switched time.Time
	dlMs     int64
	loadMs   int64
}

func newAgent(s *Server) (*agent, error) {
	if s.token.Empty() {
		return nil, errors.New("agent: a control token is required")
	}
	if err := os.MkdirAll(s.opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	src, err := url.Parse(s.opts.SourceURL)
	if err != nil || (src.Scheme != "http" && src.Scheme != "https") || src.Host == "" {
		return nil, fmt.Errorf("agent: --source-url %q: want http(s)://host[:port]/path", s.opts.SourceURL)
	}
	a := &agent{s: s, source: src, state: api.AgentIdle, diskSlack: s.opts.DiskReserve}
	a.client = &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		return a.allowed(r.URL)
	}}
	return a, nil
}

// allowed refuses any URL not under --source-url, redirects included, so a
// stolen token cannot make replicas fetch from elsewhere.
func (a *agent) allowed(u *url.URL) error {
	p := path.Clean("/" + u.Path)
	prefix := strings.TrimSuffix(a.source.Path, "/") + "/"
	if u.Scheme != a.source.Scheme || u.Host != a.source.Host || !strings.HasPrefix(p, prefix) || strings.Contains(u.Path, "..") {
		return fmt.Errorf("url %q is not under --source-url %q", u.String(), a.source.String())
	}
	return nil
}

func (a *agent) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+api.AgentPreparePath, a.auth(a.httpPrepare))
	mux.HandleFunc("POST "+api.AgentCommitPath, a.auth(a.httpCommit))
	mux.HandleFunc("POST "+api.AgentAbortPath, a.auth(a.httpAbort))
	mux.HandleFunc("POST "+api.AgentFencePath, a.auth(a.httpFence))
	mux.HandleFunc("GET "+api.AgentStatusPath, a.auth(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.status())
	}))
}

func (a *agent) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.s.authorized(r) {
			httpError(w, http.StatusUnauthorized, "agent commands need \"Authorization: Bearer <token>\"")
			return
		}
		h(w, r)
	}
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

func (a *agent) status() api.AgentStatus {
	cur, bg := a.s.store.versionNames()
	a.mu.Lock()
	defer a.mu.Unlock()
	st := api.AgentStatus{Shard: a.s.opts.Shard, State: a.state, Version: a.version, Error: a.err,
		ServedVersion: cur, BackgroundVersion: bg, PreviousVersion: a.previous}
	st.DownloadMs, st.LoadMs = a.dlMs, a.loadMs
	if !a.switched.IsZero() {
		st.SwitchedAtUnixUs = a.switched.UnixMicro()
	}
	st.OnDisk, _ = layout.Versions(a.s.opts.DataDir)
	st.NowUnixUs = time.Now().UnixMicro()
	if f := a.s.fencedFor.Load(); f != nil {
		st.Fenced = *f
	}
	return st
}

// httpFence takes this replica out of service until it serves the version named (see
// api.FenceRequest).
func (a *agent) httpFence(w http.ResponseWriter, r *http.Request) {
	var req api.FenceRequest
	if !decodeBody(w, r, &req) || !versionOK(w, req.Version) {
		return
	}
	a.s.fencedFor.Store(&req.Version)
	a.s.m.agentOps.WithLabelValues("fence", "ok").Inc()
	a.s.log.Warn("agent: out of service until this replica serves the decided version", "version", req.Version, "reason", req.Reason)
	writeJSON(w, http.StatusOK, a.status())
}

func validVersion(v string) bool {
	_, _, ok := layout.ParseVersion(v)
	return ok && !strings.ContainsAny(v, `/\.`)
}

// versionOK answers 400 to a request that names no valid version.
func versionOK(w http.ResponseWriter, v string) bool {
	if !validVersion(v) {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("bad version %q", v))
		return false
	}
	return true
}

func (a *agent) httpPrepare(w http.ResponseWriter, r *http.Request) {
	var req api.PrepareRequest
	if !decodeBody(w, r, &req) {
		return
	}
	err := a.checkPrepare(req)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if cur, _ := a.s.store.versionNames(); cur == req.Version {
		writeJSON(w, http.StatusOK, a.status()) // already serving it
		return
	}
	a.mu.Lock()
	if a.version == req.Version && (a.state == api.AgentPreparing || a.state == api.AgentPrepared) {
		a.mu.Unlock()
		writeJSON(w, http.StatusAccepted, a.status()) // a retry: idempotent
		return
	}
	prev, prevDone := a.cancel, a.done
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	a.state, a.version, a.err, a.cancel, a.done = api.AgentPreparing, req.Version, "", cancel, done
	a.mu.Unlock()
	go func() {
		defer close(done)
		if prev != nil { // a newer version supersedes the one in flight
			prev()
			<-prevDone
		}
		a.prepare(ctx, req)
	}()
	a.s.log.Info("agent: prepare started", "version", req.Version, "url", req.URL, "size", req.Size)
	writeJSON(w, http.StatusAccepted, a.status())
}

// checkPrepare refuses a prepare request that is not whole and consistent:
// a chain of layers that does not end in a version holding every key, or
// whose links do not match, would load something else than was built.
func (a *agent) checkPrepare(req api.PrepareRequest) error {
	refs := append([]api.LayerRef{{Version: req.Version, Layered: req.Layered, Base: req.Base, URL: req.URL, SHA256: req.SHA256, Size: req.Size}}, req.Layers...)
	if req.Shard != a.s.opts.Shard {
		return fmt.Errorf("this server serves shard %d, not %d", a.s.opts.Shard, req.Shard)
	}
	if len(refs) > layers.Max+1 {
		return fmt.Errorf("%d layers: at most %d", len(req.Layers), layers.Max)
	}
	for i, r := range refs {
		u, err := url.Parse(r.URL)
		switch {
		case !validVersion(r.Version):
			return fmt.Errorf("bad version %q", r.Version)
		case len(r.SHA256) != 64 || r.Size <= 0:
			return fmt.Errorf("version %q: sha256 (64 hex digits) and size are required", r.Version)
		case err != nil:
			return err
		case r.Layered && (i+1 == len(refs) || refs[i+1].Version != r.Base):
			return fmt.Errorf("version %q is layered over %q, which is not the next of its layers", r.Version, r.Base)
		case !r.Layered && i+1 < len(refs):
			return fmt.Errorf("version %q holds every key, but layers are listed under it", r.Version)
		}
		if err := a.allowed(u); err != nil {
			return err
		}
	}
	return nil
}

// prepare downloads, verifies and background-loads one shard, then records
// the outcome unless the request was superseded or aborted meanwhile.
func (a *agent) prepare(ctx context.Context, req api.PrepareRequest) {
	start := time.Now()
	var err error
	// The layers first, the one holding every key first of all: a version
	// is published on disk only once what it is served over is.
	for i := len(req.Layers) - 1; i >= 0 && err == nil; i-- {
		err = a.fetch(ctx, req.Dict, req.Shard, req.Layers[i])
	}
	if err == nil {
		err = a.fetch(ctx, req.Dict, req.Shard, api.LayerRef{Version: req.Version, Layered: req.Layered, Base: req.Base, URL: req.URL, SHA256: req.SHA256, Size: req.Size})
	}
	fetched := time.Now()
	if err == nil {
		a.s.store.mu.Lock()
		if ctx.Err() == nil {
			err = a.s.store.bgLoad("/" + req.Version)
		} else {
			err = ctx.Err()
		}
		a.s.store.mu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.version != req.Version || ctx.Err() != nil {
		return
	}
	if err != nil {
		a.state, a.err = api.AgentFailed, err.Error()
		a.s.log.Error("agent: prepare failed", "version", req.Version, "err", err)
		a.s.m.agentOps.WithLabelValues("prepare", "error").Inc()
		return
	}
	a.state = api.AgentPrepared
	a.dlMs, a.loadMs = fetched.Sub(start).Milliseconds(), time.Since(fetched).Milliseconds()
	a.s.log.Info("agent: prepared", "version", req.Version, "duration_ms", time.Since(start).Milliseconds())
	a.s.m.agentOps.WithLabelValues("prepare", "ok").Inc()
}

// fetch puts <data>/<version>/shard-<i>.cube in place, verified. A version
// directory already there (an earlier prepare, or the previous version kept
// for rollback) is reused if it verifies.
func (a *agent) fetch(ctx context.Context, dict string, shard int, req api.LayerRef) error {
	data := a.s.opts.DataDir
	sm := layout.ShardManifest{Dict: dict, Version: req.Version, Shard: shard, File: layout.ShardFile(shard), Size: req.Size, SHA256: req.SHA256}
	final := filepath.Join(data, req.Version)
	if sum, err := atomicfile.SHA256(filepath.Join(final, sm.File)); err == nil && sum == req.SHA256 {
		return nil
	}
	if err := a.checkDisk(req.Size); err != nil {
		return err
	}
	tmp := filepath.Join(data, ".tmp-"+req.Version+"-agent")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	file := filepath.Join(tmp, sm.File)
	err := retry.Do(retry.WithLog(ctx, a.s.log.With("url", req.URL)), 2, 200*time.Millisecond, func() error {
		return a.download(ctx, req.URL, file, req.Size)
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	got, err := atomicfile.SHA256(file)
	if err != nil {
		return err
	}
	if got != req.SHA256 {
		os.Remove(file) // do not resume from bad bytes
		return fmt.Errorf("shard %q: sha256 %s, expected %s", req.URL, got, req.SHA256)
	}
	m := layout.Manifest{Dict: dict, Version: req.Version, ShardCount: 0, Created: time.Now().UTC(), Shards: []layout.ShardManifest{sm},
		Mode: "base", Layered: req.Layered}
	if req.Layered {
		m.Mode, m.Base = "delta", req.Base
	}
	if err := atomicfile.WriteJSON(filepath.Join(tmp, layout.ShardManifestFile(shard)), sm, 0o644); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(tmp, layout.ManifestName), m, 0o644); err != nil {
		return err
	}
	os.RemoveAll(final) // a damaged leftover
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return atomicfile.SyncDir(data)
}

// download fetches url into file, resuming a partial file with a Range
// request (a killed agent or a dropped connection does not start over).
func (a *agent) download(ctx context.Context, rawURL, file string, size int64) error {
	have := int64(0)
	if st, err := os.Stat(file); err == nil {
		have = st.Size()
	}
	if have > size {
		os.Remove(file)
		have = 0
	}
	if have == size {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.s.opts.DownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	flag := os.O_WRONLY | os.O_CREATE
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		flag |= os.O_APPEND
	case resp.StatusCode == http.StatusOK:
		flag |= os.O_TRUNC
		have = 0
	default:
		return fmt.Errorf("get %s: %s", rawURL, resp.Status)
	}
	f, err := os.OpenFile(file, flag, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, size-have+1))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if have+n != size {
		return fmt.Errorf("get %s: %d bytes, expected %d", rawURL, have+n, size)
	}
	return nil
}

// checkDisk refuses a download that would not fit with DiskReserve to spare.
func (a *agent) checkDisk(need int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(a.s.opts.DataDir, &st); err != nil {
		return fmt.Errorf("check free space in %q: %w", a.s.opts.DataDir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < need+a.diskSlack {
		return fmt.Errorf("not enough disk space in %q: %d bytes free, need %d + %d reserved", a.s.opts.DataDir, free, need, a.diskSlack)
	}
	return nil
}

func (a *agent) httpCommit(w http.ResponseWriter, r *http.Request) {
	var req api.CommitRequest
	if !decodeBody(w, r, &req) || !versionOK(w, req.Version) {
		return
	}
	if err := a.commit(req); err != nil {
		a.s.m.agentOps.WithLabelValues("commit", "error").Inc()
		a.s.log.Error("agent: commit failed", "version", req.Version, "err", err)
		httpError(w, http.StatusConflict, err.Error())
		return
	}
	a.s.m.agentOps.WithLabelValues("commit", "ok").Inc()
	a.s.fencedFor.Store(nil) // in line with the transfer again
	writeJSON(w, http.StatusOK, a.status())
}

// commit makes req.Version current. It is idempotent (committing the served
// version succeeds) and also serves rollback: a version still on disk (the
// previous one) is loaded first if it is not the background one.
func (a *agent) commit(req api.CommitRequest) error {
	if cur, _ := a.s.store.versionNames(); cur == req.Version {
		return nil
	}
	if _, bg := a.s.store.versionNames(); bg != req.Version {
		a.mu.Lock()
		preparing := a.version == req.Version && a.state == api.AgentPreparing
		a.mu.Unlock()
		if preparing {
			return fmt.Errorf("version %q is still being prepared", req.Version)
		}
		if _, err := os.Stat(filepath.Join(a.s.opts.DataDir, req.Version, layout.ShardFile(a.s.opts.Shard))); err != nil {
			return fmt.Errorf("version %q is not prepared here", req.Version)
		}
		a.s.store.mu.Lock()
		err := a.s.store.bgLoad("/" + req.Version)
		a.s.store.mu.Unlock()
		if err != nil {
			return err
		}
	}
	// Schedule the switch in memory first, then record the decision on
	// disk: the instant is what every replica agreed on, and an fsync under
	// load must not make this one switch late. If we die after the instant
	// but before the file is written, the restart serves the old version
	// and the transfer, which persisted the decision and has had no answer
	// from us, commits again.
	now := time.Now()
	at := now
	if req.AtUnixMs > 0 {
		at = time.UnixMilli(req.AtUnixMs)
	}
	if at.After(now.Add(api.MaxCommitAhead)) {
		return fmt.Errorf("commit instant %s is more than %s ahead", at.UTC().Format(time.RFC3339Nano), api.MaxCommitAhead)
	}
	current := filepath.Join(a.s.opts.DataDir, CurrentFile)
	a.s.store.mu.Lock()
	old, _ := a.s.store.versionNames()
	a.s.store.mu.Unlock()
	// A switch due at once (a heal, a late commit) has no instant to keep with its siblings:
	// the decision is recorded first, so that a commit that cannot record it (a volume turned
	// read-only) fails with the old version still serving; a due switch made in memory could
	// not be taken back.
	immediate := !at.After(now)
	if immediate {
		if err := atomicfile.WriteFile(current, []byte(currentFileContent(req.Version, now.UnixMilli(), old)), 0o644); err != nil {
			return err
		}
	}
	a.s.store.mu.Lock()
	at, err := a.s.store.schedule(req.Version, at)
	a.s.store.mu.Unlock()
	if err != nil {
		if immediate {
			_ = atomicfile.WriteFile(current, []byte(currentFileContent(old, 0, "")), 0o644)
		}
		return err
	}
	late := now.Sub(at)
	if req.AtUnixMs > 0 && late > 0 {
		// Every other replica switched at the instant; this one only now.
		a.s.m.agentOps.WithLabelValues("commit", "late").Inc()
		a.s.log.Warn("agent: commit arrived after its switch instant", "version", req.Version, "late_ms", late.Milliseconds())
	}
	switched := at
	if late > 0 {
		switched = now
	}
	// The instant written is the scheduled one: a retried commit keeps the first.
	if !immediate {
		if err := atomicfile.WriteFile(current, []byte(currentFileContent(req.Version, at.UnixMilli(), old)), 0o644); err != nil {
			a.s.store.mu.Lock()
			a.s.store.unschedule(req.Version)
			a.s.store.mu.Unlock()
			return err
		}
	}
	time.Sleep(time.Until(at))
	a.s.store.mu.Lock()
	a.s.store.settle()
	a.s.store.mu.Unlock()
	if cur, _ := a.s.store.versionNames(); cur != req.Version {
		// Aborted before its instant: the decision on disk is undone too.
		_ = atomicfile.WriteFile(current, []byte(currentFileContent(cur, 0, "")), 0o644)
		return fmt.Errorf("the switch to %q was aborted before its instant; serving %q", req.Version, cur)
	}
	a.mu.Lock()
	if old != "" {
		a.previous = old
	}
	a.switched = switched
	if a.version == req.Version {
		a.state, a.version, a.err, a.cancel = api.AgentIdle, "", "", nil
	}
	keep := a.withLayers(req.Version, a.previous, a.version)
	a.mu.Unlock()
	a.s.log.Info("agent: committed", "version", req.Version, "previous", old)
	a.gc(keep)
	return nil
}

// withLayers is the set of versions and the layers each is served over.
func (a *agent) withLayers(versions ...string) map[string]bool {
	keep := map[string]bool{}
	for _, v := range versions {
		keep[v] = true
		if chain, err := layers.Chain(a.s.opts.DataDir, v); err == nil {
			for _, l := range chain {
				keep[l] = true
			}
		}
	}
	return keep
}

// gc removes version directories other than the ones to keep (current,
// previous, in flight, and the layers under them) and stale temporary
// directories.
func (a *agent) gc(keep map[string]bool) {
	ents, err := os.ReadDir(a.s.opts.DataDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || keep[name] {
			continue
		}
		_, _, isVersion := layout.ParseVersion(name)
		if isVersion || strings.HasPrefix(name, ".tmp-") {
			if err := os.RemoveAll(filepath.Join(a.s.opts.DataDir, name)); err == nil {
				a.s.log.Info("agent: removed old version", "dir", name)
			}
		}
	}
}

func (a *agent) httpAbort(w http.ResponseWriter, r *http.Request) {
	var req api.AbortRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := a.abort(req.Version); err != nil {
		httpError(w, http.StatusConflict, err.Error())
		return
	}
	a.s.m.agentOps.WithLabelValues("abort", "ok").Inc()
	writeJSON(w, http.StatusOK, a.status())
}

// abort cancels a prepare, unloads the background version and deletes its
// files, unless it is the served or previous version. Idempotent.
func (a *agent) abort(version string) error {
	a.mu.Lock()
	if version == "" {
		version = a.version
	}
	var wait chan struct{}
	if a.version == version && a.version != "" {
		if a.cancel != nil {
			a.cancel()
		}
		wait = a.done
		a.state, a.version, a.err, a.cancel = api.AgentIdle, "", "", nil
	}
	prev := a.previous
	a.mu.Unlock()
	if wait != nil {
		<-wait
	}
	if version == "" {
		return nil
	}
	cur, bg := a.s.store.versionNames()
	if cur == version {
		return fmt.Errorf("version %q is already served; commit the previous one to roll back", version)
	}
	a.s.store.mu.Lock()
	a.s.store.unschedule(version) // a commit whose instant has not come
	if bg == version {
		a.s.store.bgUnload()
	}
	a.s.store.mu.Unlock()
	if !a.withLayers(cur, prev)[version] && validVersion(version) {
		os.RemoveAll(filepath.Join(a.s.opts.DataDir, version))
		os.RemoveAll(filepath.Join(a.s.opts.DataDir, ".tmp-"+version+"-agent"))
	}
	a.s.log.Info("agent: aborted", "version", version)
	return nil
}
