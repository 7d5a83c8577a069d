package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

const testToken = "s3cret"

// publish builds a one-shard version whose values start with gen.
func publish(t *testing.T, out, version string, gen byte) layout.ShardManifest {
	t.Helper()
	in := t.TempDir()
	f, _ := os.Create(filepath.Join(in, "part-0"))
	w, _ := seqfile.NewWriter(f, [16]byte{1})
	for k := range 100 {
		v := make([]byte, 40)
		v[0] = gen
		binary.LittleEndian.PutUint64(v[8:], uint64(k))
		w.Append(uint64(k), v)
	}
	w.Close()
	f.Close()
	m, err := build.Build(build.Options{Input: in, Output: out, Shards: 1, Dict: "d", Version: version})
	if err != nil {
		t.Fatal(err)
	}
	return m.Shards[0]
}

type agentEnv struct {
	t      *testing.T
	srv    *Server
	addr   string
	data   string
	source string // URL of the published root
	out    string
}

func startAgent(t *testing.T, data string, reserve int64) *agentEnv {
	t.Helper()
	out := t.TempDir()
	files := httptest.NewServer(http.StripPrefix("/files/", http.FileServer(http.Dir(out))))
	t.Cleanup(files.Close)
	e := &agentEnv{t: t, data: data, out: out, source: files.URL + "/files/"}
	e.start(reserve)
	return e
}

func (e *agentEnv) start(reserve int64) {
	srv, err := New(Options{DataDir: e.data, Agent: true, ControlToken: testToken, SourceURL: e.source, DiskReserve: reserve})
	if srv == nil {
		e.t.Fatal(err)
	}
	e.srv, e.addr = srv, cubetest.ServeLoopback(e.t, srv)
}

func (e *agentEnv) call(method, path, token string, body any) (int, api.AgentStatus, string) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+e.addr+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var st api.AgentStatus
	json.Unmarshal(raw, &st)
	return resp.StatusCode, st, string(raw)
}

func (e *agentEnv) prepare(version string, sm layout.ShardManifest) (int, string) {
	code, _, raw := e.call("POST", "/agent/prepare", testToken, api.PrepareRequest{Version: version, Dict: "d", URL: e.source + version + "/" + sm.File, SHA256: sm.SHA256, Size: sm.Size})
	return code, raw
}

func (e *agentEnv) waitState(want string) api.AgentStatus {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, st, _ := e.call("GET", "/agent/status", testToken, nil)
		if st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("agent state %q, want %q (%s)", st.State, want, st.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *agentEnv) ready() int {
	resp, err := http.Get("http://" + e.addr + "/readyz")
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAgentPrepareCommitAbort(t *testing.T) {
	e := startAgent(t, t.TempDir(), 1)
	if e.ready() != http.StatusServiceUnavailable {
		t.Fatal("ready with nothing served")
	}
	sm1 := publish(t, e.out, "1000", 1)
	if code, _, _ := e.call("GET", "/agent/status", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("status without token: %d", code)
	}
	if code, _, _ := e.call("POST", "/agent/prepare", "wrong", api.PrepareRequest{}); code != http.StatusUnauthorized {
		t.Fatalf("prepare with wrong token: %d", code)
	}
	// URLs outside --source-url are refused, whatever the token.
	for _, u := range []string{"http://example.invalid/files/1000/shard-0.cube", e.source + "../etc/passwd", strings.Replace(e.source, "/files/", "/other/", 1) + "x"} {
		code, _, raw := e.call("POST", "/agent/prepare", testToken, api.PrepareRequest{Version: "1000", URL: u, SHA256: sm1.SHA256, Size: sm1.Size})
		if code != http.StatusBadRequest {
			t.Fatalf("url %s: %d %s", u, code, raw)
		}
	}
	if code, raw := e.prepare("1000", sm1); code != http.StatusAccepted {
		t.Fatalf("prepare: %d %s", code, raw)
	}
	e.waitState(api.AgentPrepared)
	if cur, bg := e.srv.store.versionNames(); cur != "" || bg != "1000" {
		t.Fatalf("after prepare cur=%q bg=%q", cur, bg)
	}
	if code, _, raw := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "1000"}); code != 200 {
		t.Fatalf("commit %d %s", code, raw)
	}
	if e.ready() != 200 {
		t.Fatal("not ready after commit")
	}
	// Committing again is a no-op success (the transfer retries).
	if code, _, _ := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "1000"}); code != 200 {
		t.Fatal("second commit")
	}

	// A corrupted shard (wrong sha256) fails prepare and leaves 1000 serving.
	sm2 := publish(t, e.out, "2000", 2)
	bad := sm2
	bad.SHA256 = strings.Repeat("0", 64)
	e.prepare("2000", bad)
	st := e.waitState(api.AgentFailed)
	if !strings.Contains(st.Error, "sha256") || st.ServedVersion != "1000" {
		t.Fatalf("corrupt: %+v", st)
	}
	if code, _, _ := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "2000"}); code == 200 {
		t.Fatal("commit of a failed version succeeded")
	}
	// Prepare then abort: unloaded, files removed, 1000 still served.
	e.prepare("2000", sm2)
	e.waitState(api.AgentPrepared)
	if code, _, raw := e.call("POST", "/agent/abort", testToken, api.AbortRequest{Version: "2000"}); code != 200 {
		t.Fatalf("abort %d %s", code, raw)
	}
	if cur, bg := e.srv.store.versionNames(); cur != "1000" || bg != "" {
		t.Fatalf("after abort cur=%q bg=%q", cur, bg)
	}
	if _, err := os.Stat(filepath.Join(e.data, "2000")); !os.IsNotExist(err) {
		t.Fatal("aborted version left on disk")
	}
	// Prepare 2000 again (kill -9 after prepare is simulated by a restart):
	// the restarted server serves the committed 1000, not the newer 2000.
	e.prepare("2000", sm2)
	e.waitState(api.AgentPrepared)
	e.srv.Close()
	e.start(1)
	if cur, _ := e.srv.store.versionNames(); cur != "1000" {
		t.Fatalf("restart serves %q, want the committed 1000", cur)
	}
	// Commit after the restart loads it from disk.
	if code, _, raw := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "2000", AtUnixMs: time.Now().Add(50 * time.Millisecond).UnixMilli()}); code != 200 {
		t.Fatalf("commit after restart %d %s", code, raw)
	}
	// Third version: GC keeps current and previous only.
	sm3 := publish(t, e.out, "3000", 3)
	e.prepare("3000", sm3)
	e.waitState(api.AgentPrepared)
	_, st, _ = e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "3000"})
	if st.ServedVersion != "3000" || st.PreviousVersion != "2000" || fmt.Sprint(st.OnDisk) != "[2000 3000]" {
		t.Fatalf("after third commit: %+v", st)
	}
	// Rollback to the previous version is a commit of it.
	if _, st, _ = e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "2000"}); st.ServedVersion != "2000" {
		t.Fatalf("rollback: %+v", st)
	}
}

func TestAgentDiskFull(t *testing.T) {
	e := startAgent(t, t.TempDir(), 1<<62) // more than any disk: "full"
	sm := publish(t, e.out, "1000", 1)
	e.prepare("1000", sm)
	if st := e.waitState(api.AgentFailed); !strings.Contains(st.Error, "disk space") {
		t.Fatalf("%+v", st)
	}
}

func TestAgentNeedsToken(t *testing.T) {
	if _, err := New(Options{DataDir: t.TempDir(), Agent: true, SourceURL: "http://h/"}); err == nil {
		t.Fatal("agent without token accepted")
	}
}

// TestAgentFence: a fenced replica is not Ready (its shard's Service stops sending it
// lookups) until it serves the version named, or a commit succeeds; its status says so.
func TestAgentFence(t *testing.T) {
	e := startAgent(t, t.TempDir(), 1)
	sm := publish(t, e.out, "1000", 1)
	if code, raw := e.prepare("1000", sm); code != http.StatusAccepted {
		t.Fatalf("prepare: %d %s", code, raw)
	}
	e.waitState(api.AgentPrepared)
	if code, _, raw := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "1000"}); code != 200 {
		t.Fatalf("commit %d %s", code, raw)
	}
	if code, _, _ := e.call("POST", api.AgentFencePath, "", api.FenceRequest{Version: "2000"}); code != http.StatusUnauthorized {
		t.Fatalf("fence without a token: %d", code)
	}
	code, st, raw := e.call("POST", api.AgentFencePath, testToken, api.FenceRequest{Version: "2000", Reason: "commit timed out"})
	if code != 200 || st.Fenced != "2000" {
		t.Fatalf("fence: %d %s", code, raw)
	}
	if e.ready() != http.StatusServiceUnavailable {
		t.Fatal("Ready while fenced for a version it does not serve")
	}
	e.call("POST", api.AgentFencePath, testToken, api.FenceRequest{Version: "1000"})
	if e.ready() != 200 {
		t.Fatal("not Ready although it serves the version it is fenced for")
	}
	e.call("POST", api.AgentFencePath, testToken, api.FenceRequest{Version: "2000"})
	if code, st, raw := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "1000"}); code != 200 || st.Fenced != "" {
		t.Fatalf("commit while fenced: %d %s", code, raw)
	}
	if e.ready() != 200 {
		t.Fatal("not Ready after a commit")
	}
}

// TestAgentCommitThatCannotBeRecordedKeepsServing: a commit due at once (a heal, a late
// commit) whose decision cannot be written (VERSION cannot be replaced: a volume turned
// read-only) fails and leaves the old version serving. Before, the switch was made in memory
// first and, being due, could not be taken back: the agent answered an error while serving
// the new version with no record of it on disk.
func TestAgentCommitThatCannotBeRecordedKeepsServing(t *testing.T) {
	e := startAgent(t, t.TempDir(), 1)
	for i, v := range []string{"1000", "2000"} {
		sm := publish(t, e.out, v, byte(i+1))
		if code, raw := e.prepare(v, sm); code != http.StatusAccepted {
			t.Fatalf("prepare %s: %d %s", v, code, raw)
		}
		e.waitState(api.AgentPrepared)
		if v == "2000" {
			break
		}
		if code, _, raw := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: v}); code != 200 {
			t.Fatalf("commit %s: %d %s", v, code, raw)
		}
	}
	current := filepath.Join(e.data, CurrentFile)
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(current, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "2000"}); code == 200 {
		t.Fatal("a commit whose decision could not be written succeeded")
	}
	if _, st, _ := e.call("GET", "/agent/status", testToken, nil); st.ServedVersion != "1000" {
		t.Fatalf("after the failed commit the agent serves %q, want 1000", st.ServedVersion)
	}
	if err := os.RemoveAll(current); err != nil {
		t.Fatal(err)
	}
	if code, st, raw := e.call("POST", "/agent/commit", testToken, api.CommitRequest{Version: "2000"}); code != 200 || st.ServedVersion != "2000" {
		t.Fatalf("commit once the fault is gone: %d %s", code, raw)
	}
}

// TestAgentRefusesABrokenChainOfLayers: a prepare whose layers do not link up, or do not end
// in a version holding every key, is refused before anything is fetched.
func TestAgentRefusesABrokenChainOfLayers(t *testing.T) {
	e := startAgent(t, t.TempDir(), 0)
	sm := publish(t, e.out, "1700000000", 1)
	ref := func(v string, layered bool, base string) api.LayerRef {
		return api.LayerRef{Version: v, Layered: layered, Base: base, URL: e.source + "1700000000/" + sm.File, SHA256: sm.SHA256, Size: sm.Size}
	}
	top := func(base string, under ...api.LayerRef) api.PrepareRequest {
		return api.PrepareRequest{Version: "1700000000_1700000002", Dict: "d", URL: e.source + "1700000000/" + sm.File, SHA256: sm.SHA256, Size: sm.Size,
			Layered: true, Base: base, Layers: under}
	}
	for name, c := range map[string]struct {
		req  api.PrepareRequest
		want string
	}{
		"no layers under a layer":    {top("1700000000"), "not the next of its layers"},
		"base is not the next":       {top("1700000000", ref("1700000000_1700000001", false, "")), "not the next of its layers"},
		"chain ends in a layer":      {top("1700000000_1700000001", ref("1700000000_1700000001", true, "1700000000")), "not the next of its layers"},
		"layers under a full one":    {top("1700000000_1700000001", ref("1700000000_1700000001", false, ""), ref("1700000000", false, "")), "holds every key"},
		"a layer outside --source":   {top("1700000000", api.LayerRef{Version: "1700000000", URL: "http://127.0.0.1:1/x", SHA256: sm.SHA256, Size: sm.Size}), "source"},
		"a layer without its sha256": {top("1700000000", api.LayerRef{Version: "1700000000", URL: e.source + "x", Size: 1}), "sha256"},
	} {
		code, _, raw := e.call("POST", "/agent/prepare", testToken, c.req)
		if code != http.StatusBadRequest || !strings.Contains(raw, c.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", name, code, raw, c.want)
		}
	}
	if ents, _ := os.ReadDir(e.data); len(ents) != 0 {
		t.Fatalf("a refused prepare left %v", ents)
	}
}
