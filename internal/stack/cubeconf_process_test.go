package stack_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestCubeConf_LooksUpThroughRealServers proves the cube.conf that ctr_cube exports is usable:
// a table in Paddle's SequenceFile layout is built into shards with `cube build`, one real
// `cube server` process per shard listens on loopback, the rendered cube.conf's shard
// addresses are rewritten to those servers, and `cube seek --conf` finds every key's value on
// the shard Paddle's client rule (key % shards) sends it to.
func TestCubeConf_LooksUpThroughRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the cube binary")
	}
	dir := t.TempDir()
	bin := cubetest.Binary(t)

	// 1,000 keys with 40-byte values, as Paddle's dumper writes them.
	input := filepath.Join(dir, "input")
	require.NoError(t, os.MkdirAll(input, 0o755))
	f, err := os.Create(filepath.Join(input, "part-00000"))
	require.NoError(t, err)
	w, err := seqfile.NewWriter(f, [16]byte{1, 2, 3})
	require.NoError(t, err)
	value := func(k uint64) []byte { return []byte(fmt.Sprintf("value-of-%031d", k)) }
	const n = 1000
	for k := uint64(0); k < n; k++ {
		require.NoError(t, w.Append(k*7919, value(k*7919)))
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())

	c := stack.Cube{Name: "cube", Namespace: "ads", Shards: 3, Replicas: 1, Dict: "ctr_dict",
		DonefileURL: "http://fs.ads.svc:8080/base.txt"}.Defaulted()
	data := filepath.Join(dir, "data")
	out, err := exec.Command(bin, "build", "--input", input, "--output", data, "--shards", fmt.Sprint(c.Shards), "--dict", c.Dict).CombinedOutput()
	require.NoError(t, err, "cube build: %s", out)

	conf := c.CubeConf()
	for i := int32(0); i < c.Shards; i++ {
		port := freePort(t)
		srv := exec.Command(bin, "server", "--data", data, "--shard", fmt.Sprint(i), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
		srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
		require.NoError(t, srv.Start())
		t.Cleanup(func() { _ = srv.Process.Kill(); _, _ = srv.Process.Wait() })
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		// The shard's Service name, as Kubernetes DNS would resolve it, is this server.
		svc := c.Endpoints()[i]
		require.Contains(t, conf, "http://"+svc)
		conf = strings.Replace(conf, "http://"+svc, fmt.Sprintf("http://127.0.0.1:%d", port), 1)
	}
	confPath := filepath.Join(dir, "cube.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o644))

	args := []string{"seek", "--conf", confPath, "--dict", c.Dict}
	var want []string
	for k := uint64(0); k < n; k += 37 {
		args = append(args, fmt.Sprint(k*7919))
		want = append(want, fmt.Sprintf("%d\t%s", k*7919, base64.StdEncoding.EncodeToString(value(k*7919))))
	}
	args = append(args, "1") // not in the table
	out, err = exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "cube seek: %s", out)
	got := string(out)
	for _, line := range want {
		require.Contains(t, got, line+"\n")
	}
	require.Regexp(t, regexp.MustCompile(`(?m)^1\tMISS$`), got)
	require.NotContains(t, got, "FAILED")
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := loopback.Port()
	require.NoError(t, err)
	return port
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer", url)
}
