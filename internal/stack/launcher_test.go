package stack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeServing stands in for paddle_serving_server in the launcher's tests: the calls the
// launcher makes, with the names and parameters of Paddle Serving 0.9.0's Python API
// (python/paddle_serving_server/server.py: OpMaker.create(node_type), OpSeqMaker.add_op,
// Server.set_op_sequence, set_num_threads, load_model_config, prepare_server(workdir, port,
// device, cube_conf), run_server), recorded as JSON instead of starting a server. The real
// image cannot run here (no registry access, no container runtime).
const fakeServing = `import json, os
calls = []
def _record(*call):
    calls.append(list(call))
    with open(os.environ["FAKE_SERVING_OUT"], "w") as f:
        json.dump(calls, f)
class OpMaker:
    def create(self, node_type, engine_name=None, inputs=[], outputs=[]):
        return node_type
class OpSeqMaker:
    def __init__(self): self.ops = []
    def add_op(self, op): self.ops.append(op)
    def get_op_sequence(self): return list(self.ops)
class Server:
    def set_op_sequence(self, ops): _record("set_op_sequence", ops)
    def set_num_threads(self, n): _record("set_num_threads", n)
    def load_model_config(self, path):
        _record("load_model_config", sorted(os.listdir(path)))
    def prepare_server(self, workdir=None, port=9292, device=None, use_encryption_model=False, cube_conf=None):
        _record("prepare_server", port, device, cube_conf)
    def run_server(self): _record("run_server")
`

func modelArchive(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// runLauncher runs the launcher as the serving container does (python3 <launcher> args),
// with MODEL_URL served from loopback; calls are what it asked of Paddle Serving.
func runLauncher(t *testing.T, archive []byte, cubeConf bool, args ...string) (calls [][]any, stderr string, err error) {
	t.Helper()
	python, lerr := exec.LookPath("python3")
	if lerr != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "pkgs", "paddle_serving_server"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pkgs", "paddle_serving_server", "__init__.py"), []byte(fakeServing), 0o644))
	launcher := filepath.Join(dir, servingLauncherKey)
	require.NoError(t, os.WriteFile(launcher, []byte(ServingLauncher), 0o644))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(srv.Close)
	env := []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + filepath.Join(dir, "pkgs"), "FAKE_SERVING_OUT=" + filepath.Join(dir, "calls.json"),
		"MODEL_URL=" + srv.URL + "/output/ctr_model.tar.gz", "PYTHONDONTWRITEBYTECODE=1"}
	if cubeConf {
		conf := filepath.Join(dir, "cube.conf")
		require.NoError(t, os.WriteFile(conf, []byte(`[{"dict_name":"d","shard":1}]`), 0o644))
		env = append(env, "CUBE_CONF="+conf)
	}
	cmd := exec.Command(python, append([]string{launcher, "--model_dir=" + filepath.Join(dir, "model"), "--workdir=" + filepath.Join(dir, "work")}, args...)...)
	cmd.Env = env
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	err = cmd.Run()
	if b, rerr := os.ReadFile(filepath.Join(dir, "calls.json")); rerr == nil {
		require.NoError(t, json.Unmarshal(b, &calls))
	}
	return calls, errBuf.String(), err
}

var ctrModel = map[string]string{"ctr_model/serving_server_conf.prototxt": "feed_var {}", "ctr_model/__model__": "dense"}

func TestServingLauncher_StartsServingWithTheCube(t *testing.T) {
	calls, stderr, err := runLauncher(t, modelArchive(t, ctrModel), true, Serving{}.Defaulted().Args...)
	require.NoError(t, err, stderr)
	require.Len(t, calls, 5)
	assert.Equal(t, []any{"set_op_sequence", []any{"GeneralReaderOp", "GeneralDistKVInferOp", "GeneralResponseOp"}}, calls[0])
	assert.Equal(t, []any{"load_model_config", []any{"__model__", "serving_server_conf.prototxt"}}, calls[2], "the directory with serving_server_conf.prototxt")
	assert.Equal(t, "prepare_server", calls[3][0])
	assert.Equal(t, float64(DefaultServingPort), calls[3][1])
	assert.Equal(t, "cpu", calls[3][2])
	assert.True(t, strings.HasSuffix(calls[3][3].(string), "cube.conf"), "cube.conf from CUBE_CONF")
	assert.Equal(t, []any{"run_server"}, calls[4])
}

func TestServingLauncher_Arguments(t *testing.T) {
	archive := modelArchive(t, ctrModel)
	calls, stderr, err := runLauncher(t, archive, false, "--port=9010", "--enable_cube=false", "--thread=8")
	require.NoError(t, err, stderr)
	assert.Equal(t, []any{"set_op_sequence", []any{"GeneralReaderOp", "GeneralInferOp", "GeneralResponseOp"}}, calls[0])
	assert.Equal(t, []any{"set_num_threads", float64(8)}, calls[1])
	assert.Equal(t, []any{"prepare_server", float64(9010), "cpu", nil}, calls[3])

	for name, c := range map[string]struct {
		archive  []byte
		cubeConf bool
		args     []string
		says     string
	}{
		"cube without CUBE_CONF": {archive, false, []string{"--enable_cube=true"}, "CUBE_CONF"},
		"port out of range":      {archive, true, []string{"--port=70000"}, "--port must be between 1 and 65535"},
		"unknown argument":       {archive, true, []string{"--gpu=0"}, "unrecognized arguments: --gpu=0"},
		"not a model":            {modelArchive(t, map[string]string{"README": "x"}), true, nil, "has no serving_server_conf.prototxt"},
		"archive escapes":        {modelArchive(t, map[string]string{"../evil/serving_server_conf.prototxt": "x"}), true, nil, "outside its directory"},
		"not an archive":         {[]byte("<html>not found</html>"), true, nil, "is not a tar archive"},
	} {
		t.Run(name, func(t *testing.T) {
			calls, stderr, err := runLauncher(t, c.archive, c.cubeConf, c.args...)
			require.Error(t, err)
			assert.Contains(t, stderr, c.says)
			assert.Empty(t, calls, "Serving must not be started")
		})
	}
}
