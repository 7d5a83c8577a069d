package launch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingstandin"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
)

func TestMain(m *testing.M) { cubetest.Main(m, nil) }

const modelConf = `feed_var {
  name: "dense_input"
  alias_name: "dense_input"
  is_lod_tensor: false
  feed_type: 1
  shape: 13
}
fetch_var {
  name: "prob"
  alias_name: "prob"
  is_lod_tensor: false
  fetch_type: 1
  shape: 2
}
`

// archive is a .tar.gz of the entries, in order; a name ending in "/" is a folder, "->" makes
// a symlink.
func archive(t *testing.T, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o644, Size: int64(len(e[1])), Typeflag: tar.TypeReg}
		switch {
		case strings.HasSuffix(e[0], "/"):
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case strings.HasPrefix(e[1], "->"):
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, strings.TrimPrefix(e[1], "->")
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var goodModel = [][2]string{{"ctr_serving_model/", ""}, {"ctr_serving_model/serving_server_conf.prototxt", modelConf}, {"ctr_serving_model/__model__", "program"}}

// modelServer serves the model at /model.tar.gz once published (404 before).
type modelServer struct {
	*httptest.Server
	body atomic.Pointer[[]byte]
}

func newModelServer(t *testing.T) *modelServer {
	m := &modelServer{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b := m.body.Load()
		if b == nil {
			http.NotFound(w, nil)
			return
		}
		_, _ = w.Write(*b)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *modelServer) publish(b []byte) { m.body.Store(&b) }

func TestFetchModel_RefusesWhatIsNotAModelFolder(t *testing.T) {
	srv := newModelServer(t)
	stage := t.TempDir()
	if _, err := FetchModel(context.Background(), http.DefaultClient, srv.URL, stage, 1<<20); !errors.Is(err, ErrNoModel) {
		t.Fatalf("nothing published: %v, want ErrNoModel", err)
	}
	for name, c := range map[string]struct {
		entries [][2]string
		max     int64
		want    string
	}{
		"symlink":   {append(goodModel[:3:3], [2]string{"ctr_serving_model/fc_0.w_0", "->/etc/passwd"}), 1 << 20, "link or a device"},
		"outside":   {append(goodModel[:3:3], [2]string{"../escape", "x"}), 1 << 20, "outside the archive"},
		"absolute":  {[][2]string{{"/etc/cron.d/x", "x"}}, 1 << 20, "outside the archive"},
		"too large": {append(goodModel[:3:3], [2]string{"ctr_serving_model/params", strings.Repeat("p", 2048)}), 1024, "over 1024 bytes"},
		"no conf":   {[][2]string{{"m/__model__", "program"}}, 1 << 20, "no serving_server_conf.prototxt"},
		"not a tar": {nil, 1 << 20, "not a .tar.gz"},
	} {
		body := []byte("plain text")
		if c.entries != nil {
			body = archive(t, c.entries...)
		}
		srv.publish(body)
		_, err := FetchModel(context.Background(), http.DefaultClient, srv.URL, stage, c.max)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if left, _ := os.ReadDir(stage); len(left) != 0 {
		t.Errorf("refused archives left %d folders behind", len(left))
	}
	srv.publish(archive(t, goodModel...))
	dir, err := FetchModel(context.Background(), http.DefaultClient, srv.URL, stage, 1<<20)
	if err != nil || filepath.Base(dir) != "ctr_serving_model" {
		t.Fatalf("a model folder: %q, %v", dir, err)
	}
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	p, err := loopback.Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// standin links the cube binary under Paddle Serving's binary name: started so, it is the
// stand-in that keeps the server's rules.
func standin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), servingstandin.BinaryName)
	if err := os.Symlink(cubetest.Binary(t), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRun_WaitsForTheModelThenServesAndStopsOnSIGTERM: with no model yet the launcher waits
// and says so (no crash loop); once the model is published it writes the configuration,
// the server (the stand-in) starts with cube.conf where it opens it and answers /health;
// the context's end reaches the server as SIGTERM and the launcher returns its status 0.
func TestRun_WaitsForTheModelThenServesAndStopsOnSIGTERM(t *testing.T) {
	models := newModelServer(t)
	dir := t.TempDir()
	conf := filepath.Join(t.TempDir(), "my-cube.json") // the binary opens cube.conf whatever the source's name
	if err := os.WriteFile(conf, []byte(`[{"dict_name":"test_dict","shard":1,"dup":1,"type":"ipport_list","nodes":[{"ipport_list":"list://127.0.0.1:8027"}]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	var logs, out cubetest.SyncBuffer
	o := Options{Bin: standin(t), ModelURL: models.URL, Dir: dir, CubeConf: conf, Port: port, Threads: 2, Poll: 20 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), Stdout: &out, Stderr: &out}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() { c, err := Run(ctx, o); done <- result{c, err} }()
	waitFor(t, "the launcher to say it waits", func() bool { return strings.Contains(logs.String(), "waiting for the first model") })
	models.publish(archive(t, goodModel...))
	waitFor(t, "the server to start", func() bool { return strings.Contains(out.String(), servingstandin.Started) })
	if body := cubetest.Get(t, "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(port))+"/health"); string(body) != "OK" {
		t.Errorf("/health: %q", body)
	}
	if _, err := os.Stat(filepath.Join(dir, Workdir, servingconf.CubeConfFile)); err != nil {
		t.Errorf("cube.conf in the workdir: %v", err)
	}
	cancel()
	select {
	case r := <-done:
		if r.err != nil || r.code != 0 {
			t.Fatalf("after SIGTERM: status %d, %v; output:\n%s", r.code, r.err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the launcher did not return after its context ended")
	}
}

// TestRun_TheServersFailureIsTheLaunchers: a cube.conf the server cannot use makes it exit
// 255 with Paddle's messages; the launcher returns 255 too (the old one exited 0).
func TestRun_TheServersFailureIsTheLaunchers(t *testing.T) {
	models := newModelServer(t)
	models.publish(archive(t, goodModel...))
	conf := filepath.Join(t.TempDir(), "cube.conf")
	if err := os.WriteFile(conf, []byte(`{"not": "an array"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out cubetest.SyncBuffer
	code, err := Run(context.Background(), Options{Bin: standin(t), ModelURL: models.URL, Dir: t.TempDir(), CubeConf: conf,
		Port: freePort(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stdout: &out, Stderr: &out})
	if err != nil || code != servingstandin.ExitInitFailed || !strings.Contains(out.String(), "cube init error") {
		t.Fatalf("status %d, %v; output:\n%s", code, err, out.String())
	}
}

// TestRun_NoBinaryNoDownload: a missing server binary is an error that names SERVING_BIN;
// nothing is fetched, not even the model.
func TestRun_NoBinaryNoDownload(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { asked.Add(1); http.NotFound(w, nil) }))
	defer srv.Close()
	_, err := Run(context.Background(), Options{Bin: filepath.Join(t.TempDir(), "serving"), ModelURL: srv.URL, Dir: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "SERVING_BIN") || asked.Load() != 0 {
		t.Fatalf("%v (model asked %d times)", err, asked.Load())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
