package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colinmarc/sequencefile"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/server"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

var cubeBin string

func TestMain(m *testing.M) { cubetest.Main(m, &cubeBin) }

func cube(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(cubeBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cube %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// startServer runs "cube server" for shard on a kernel-chosen loopback port and stops it by
// PID when the test ends (see cubetest.StartServer); it returns its address.
func startServer(t *testing.T, data string, shard int, extra ...string) string {
	t.Helper()
	return cubetest.StartServer(t, data, shard, extra...).Addr
}

func writePaddle(t *testing.T, dir string, parts int, keys []uint64, value func(uint64) []byte) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	for p := 0; p < parts; p++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%05d", p)))
		if err != nil {
			t.Fatal(err)
		}
		w, _ := seqfile.NewWriter(f, [16]byte{0xc0, byte(p)})
		for i := p; i < len(keys); i += parts {
			if err := w.Append(keys[i], value(keys[i])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func writeHadoop(t *testing.T, dir string, keys []uint64, value func(uint64) []byte) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	f, err := os.Create(filepath.Join(dir, "part-r-00000"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := sequencefile.NewWriter(&sequencefile.WriterConfig{
		Writer: f, KeyClass: sequencefile.LongWritableClassName, ValueClass: sequencefile.BytesWritableClassName,
		Compression: sequencefile.BlockCompression, CompressionCodec: sequencefile.GzipCompression,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := w.Append(int64(k), value(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func httpSeek(t *testing.T, addr string, keys []uint64) server.SeekResponse {
	t.Helper()
	body, _ := json.Marshal(server.SeekRequest{Keys: keys, VersionRequired: true})
	resp, err := http.Post("http://"+addr+"/DictService/seek", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out server.SeekResponse
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("HTTP seek: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func control(addr string, body string) (int, string, error) {
	resp, err := http.Post("http://"+addr+"/ControlService/cmd", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// TestEndToEnd builds from Paddle-layout and Hadoop-layout input, serves two
// shards as processes and compares every value over baidu_std, HTTP and the
// seek command.
func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	var keys []uint64
	for k := uint64(0); k < 3000; k++ {
		keys = append(keys, k*7919)
	}
	// Hadoop patch: three new keys (one above 2^63, beyond float64 precision in JSON), two overwrites.
	hkeys := []uint64{1 << 40, 1<<40 + 1, 18446744073709551557, 5, 7919}
	paddleVal := func(k uint64) []byte { return pipeline.Value(k, 1, 8+int(k%50)) }
	hadoopVal := func(k uint64) []byte { return pipeline.Value(k, 2, 40) }
	writePaddle(t, filepath.Join(dir, "paddle"), 3, keys, paddleVal)
	writeHadoop(t, filepath.Join(dir, "hadoop"), hkeys, hadoopVal)
	data := filepath.Join(dir, "data")
	base := strings.TrimSpace(cube(t, "build", "--input", filepath.Join(dir, "paddle"), "--output", data, "--shards", "2", "--dict", "test_dict"))
	delta := strings.TrimSpace(cube(t, "build", "--input", filepath.Join(dir, "hadoop"), "--output", data, "--shards", "2", "--dict", "test_dict", "--base", base))
	if !strings.HasPrefix(delta, base+"_") {
		t.Fatalf("delta version %q does not depend on %q", delta, base)
	}
	want := map[uint64][]byte{}
	for _, k := range keys {
		want[k] = paddleVal(k)
	}
	for _, k := range hkeys {
		want[k] = hadoopVal(k)
	}
	all := append(append([]uint64{}, keys...), 1<<40, 1<<40+1, 18446744073709551557, 3, 1<<62, 18446744073709551556) // the last three are misses
	addrs := []string{startServer(t, data, 0), startServer(t, data, 1)}

	conf := filepath.Join(dir, "cube.conf")
	os.WriteFile(conf, fmt.Appendf(nil, `[{"dict_name":"test_dict","shard":2,"dup":1,"timeout":2000,"retry":1,"backup_request":0,"type":"ipport_list",
	  "nodes":[{"ipport_list":"list://%s"},{"ipport_list":"list://%s"}]}]`, addrs[0], addrs[1]), 0o644)
	confs, err := client.LoadConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(confs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, ver, err := cl.Seek(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	if ver != delta {
		t.Errorf("version %q, want %q", ver, delta)
	}
	for i, k := range all {
		w, ok := want[k]
		if res[i].Found() != ok || !bytes.Equal(res[i].Value, w) {
			t.Fatalf("baidu_std key %d: found=%v value=%x, want found=%v %x", k, res[i].Found(), res[i].Value, ok, w)
		}
		if !ok && res[i].Status != proto.StatusMiss {
			t.Fatalf("miss status %d", res[i].Status)
		}
	}
	// HTTP, shard by shard.
	for s, addr := range addrs {
		var sk []uint64
		for _, k := range all {
			if k%2 == uint64(s) {
				sk = append(sk, k)
			}
		}
		hr := httpSeek(t, addr, sk)
		if hr.Version == nil || *hr.Version != delta || len(hr.Values) != len(sk) {
			t.Fatalf("HTTP shard %d: version %v, %d values", s, hr.Version, len(hr.Values))
		}
		for i, k := range sk {
			w, ok := want[k]
			if (hr.Values[i].Status == 0) != ok || !bytes.Equal(hr.Values[i].Value, w) {
				t.Fatalf("HTTP key %d: status %d value %x, want %x", k, hr.Values[i].Status, hr.Values[i].Value, w)
			}
		}
	}
	// The CLI, through cube.conf and directly.
	out := cube(t, "seek", "--conf", conf, "5", "3", fmt.Sprint(1<<40+1))
	if !strings.Contains(out, "# version "+delta) || !strings.Contains(out, "3\tMISS") || strings.Count(out, "\n") != 4 {
		t.Fatalf("seek output:\n%s", out)
	}
	out = cube(t, "seek", "--addr", addrs[0], "0")
	if !strings.Contains(out, "0\tAAAAAAAAAAA") {
		t.Fatalf("seek --addr output:\n%s", out)
	}
	out = cube(t, "seek", "--addr", addrs[1], "--format", "hex", "7919")
	if !strings.Contains(out, "7919\t"+hex.EncodeToString(hadoopVal(7919))) {
		t.Fatalf("seek --format hex output:\n%s", out)
	}
	// Health and metrics.
	mb := cubetest.Get(t, "http://"+addrs[0]+"/metrics")
	for _, m := range []string{"cube_requests_total", "cube_keys_total", "cube_key_misses_total", "cube_request_duration_seconds_bucket", `cube_dict_info{shard="0",slot="current",version="` + delta + `"} 1`, "cube_dict_bytes_mapped"} {
		if !bytes.Contains(mb, []byte(m)) {
			t.Errorf("metrics lack %s", m)
		}
	}
	if code, body, _ := control(addrs[0], `{"cmd":"status"}`); code != 200 || !strings.Contains(body, `"cur_version":"`+delta+`"`) {
		t.Errorf("status: %d %s", code, body)
	}
}

// TestSwapUnderLoad swaps versions while clients hammer the server over
// baidu_std and HTTP: no request may fail, every response must come from one
// version, and a corrupted version must be refused while the old one serves.
func TestSwapUnderLoad(t *testing.T) {
	dir := t.TempDir()
	var keys []uint64
	for k := uint64(0); k < 2000; k++ {
		keys = append(keys, k)
	}
	data := filepath.Join(dir, "data")
	build := func(gen byte, version string) {
		in := filepath.Join(dir, "in", version)
		writePaddle(t, in, 1, keys, func(k uint64) []byte { return pipeline.Value(k, gen, 40) })
		cube(t, "build", "--input", in, "--output", data, "--shards", "1", "--dict", "d", "--version", version)
	}
	build(1, "100")
	addr := startServer(t, data, 0)

	var (
		stop     atomic.Bool
		requests atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		gensSeen = map[byte]bool{}
	)
	fail := func(f string, a ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	check := func(vals []proto.Value, batch []uint64) {
		gen := byte(0)
		for i, v := range vals {
			if v.Status != 0 || len(v.Value) != 40 || binary.LittleEndian.Uint64(v.Value) != batch[i] {
				fail("key %d: bad value %x status %d", batch[i], v.Value, v.Status)
				return
			}
			if gen == 0 {
				gen = v.Value[39]
			} else if v.Value[39] != gen {
				fail("one response mixes versions %d and %d", gen, v.Value[39])
				return
			}
		}
		mu.Lock()
		gensSeen[gen] = true
		mu.Unlock()
	}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c, err := client.Dial(addr, time.Second)
			if err != nil {
				fail("dial: %v", err)
				return
			}
			defer c.Close()
			if w%2 == 1 {
				c.Service = proto.DictServiceShort
			}
			for i := 0; !stop.Load(); i++ {
				batch := keys[(i*37)%1500 : (i*37)%1500+500]
				vals, _, err := c.Seek(batch, false, time.Now().Add(5*time.Second))
				if err != nil {
					fail("seek: %v", err)
					return
				}
				check(vals, batch)
				requests.Add(1)
			}
		}(w)
	}
	wg.Add(1)
	go func() { // HTTP load
		defer wg.Done()
		for !stop.Load() {
			body, _ := json.Marshal(server.SeekRequest{Keys: keys[:100]})
			resp, err := http.Post("http://"+addr+"/DictService/seek", "application/json", bytes.NewReader(body))
			if err != nil {
				fail("http: %v", err)
				return
			}
			var sr server.SeekResponse
			err = json.NewDecoder(resp.Body).Decode(&sr)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				fail("http: %d %v", resp.StatusCode, err)
				return
			}
			vals := make([]proto.Value, len(sr.Values))
			for i, v := range sr.Values {
				vals[i] = proto.Value{Status: v.Status, Value: v.Value}
			}
			check(vals, keys[:100])
			requests.Add(1)
		}
	}()

	time.Sleep(200 * time.Millisecond)
	for round, v := range []string{"200", "300", "400"} {
		build(byte(round+2), v)
		cmd := `{"cmd":"reload_base","version_path":"/` + v + `"}`
		if round == 1 {
			// The agent's way: background load, then enable, then unload.
			if code, body, err := control(addr, `{"cmd":"bg_load_base","version_path":"/`+v+`"}`); err != nil || code != 200 {
				t.Fatalf("bg_load_base: %d %s %v", code, body, err)
			}
			cmd = `{"cmd":"enable","version":"` + v + `"}`
		}
		if code, body, err := control(addr, cmd); err != nil || code != 200 || body != "null" {
			t.Fatalf("%s: %d %s %v", cmd, code, body, err)
		}
		control(addr, `{"cmd":"bg_unload"}`)
		time.Sleep(150 * time.Millisecond)
	}
	// A corrupted version is refused by checksum; 400 keeps serving.
	build(9, "500")
	p := filepath.Join(data, "500", layout.ShardFile(0))
	b, _ := os.ReadFile(p)
	b[len(b)-3] ^= 0xff
	os.WriteFile(p, b, 0o644)
	code, body, _ := control(addr, `{"cmd":"reload_base","version_path":"/500"}`)
	if code != 500 || !strings.Contains(body, "checksum") {
		t.Fatalf("corrupted reload: %d %s", code, body)
	}
	time.Sleep(150 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, first: %s", len(failures), failures[0])
	}
	if code, body, _ := control(addr, `{"cmd":"status"}`); code != 200 || !strings.Contains(body, `"cur_version":"400"`) {
		t.Fatalf("status after refused reload: %d %s", code, body)
	}
	for _, g := range []byte{1, 2, 3, 4} {
		if !gensSeen[g] {
			t.Errorf("no response saw version generation %d (seen %v)", g, gensSeen)
		}
	}
	if gensSeen[9] {
		t.Error("a response came from the corrupted version")
	}
	t.Logf("%d requests, zero failures", requests.Load())
	// Bad control input.
	if code, _, _ := control(addr, `{not json`); code != 400 {
		t.Errorf("bad JSON: %d, want 400", code)
	}
	if code, _, _ := control(addr, `{"cmd":"enable","version":"nope"}`); code != 500 {
		t.Errorf("enable unknown: %d, want 500", code)
	}
}

// TestMalformedFrameClosesOnlyItsConnection sends garbage on one connection
// and checks that another keeps working, and that limits are enforced.
func TestMalformedFrameClosesOnlyItsConnection(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	writePaddle(t, filepath.Join(dir, "in"), 1, []uint64{1, 2, 3}, func(k uint64) []byte { return pipeline.Value(k, 1, 16) })
	cube(t, "build", "--input", filepath.Join(dir, "in"), "--output", data, "--shards", "1", "--dict", "d")
	addr := startServer(t, data, 0, "--max-keys", "10", "--max-frame-size", "4096")
	good, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, _, err := good.Seek([]uint64{1}, false, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, garbage := range [][]byte{
		[]byte("PRPC\xff\xff\xff\xff\x00\x00\x00\x00"),                           // over --max-frame-size
		[]byte("PRPC\x00\x00\x00\x04\x00\x00\x00\x08garbage!"),                   // meta larger than body
		append([]byte("PRPC\x00\x00\x00\x03\x00\x00\x00\x03"), 0xff, 0xff, 0xff), // bad protobuf
	} {
		bad, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		bad.Write(garbage)
		bad.SetReadDeadline(time.Now().Add(3 * time.Second))
		if n, err := bad.Read(make([]byte, 100)); err == nil {
			t.Errorf("garbage %q: got %d bytes instead of a closed connection", garbage, n)
		}
		bad.Close()
	}
	vals, _, err := good.Seek([]uint64{1, 2, 99}, false, time.Now().Add(time.Second))
	if err != nil || len(vals) != 3 || vals[2].Status != proto.StatusMiss {
		t.Fatalf("good connection after garbage: %v %v", vals, err)
	}
	many := make([]uint64, 11)
	if _, _, err := good.Seek(many, false, time.Now().Add(time.Second)); err == nil || !strings.Contains(err.Error(), "max-keys") {
		t.Fatalf("11 keys with --max-keys 10: err = %v", err)
	}
	good.Service = "rec.mcube.Nope"
	if _, _, err := good.Seek([]uint64{1}, false, time.Now().Add(time.Second)); err == nil || !strings.Contains(err.Error(), "1001") {
		t.Fatalf("unknown service: err = %v", err)
	}
}

func TestHelp(t *testing.T) {
	for _, c := range []string{"build", "server", "seek", "bench", "version"} {
		out := cube(t, c, "--help")
		if !strings.Contains(out, "Usage: cube "+c) {
			t.Errorf("cube %s --help:\n%s", c, out)
		}
	}
	if out := cube(t, "help"); !strings.Contains(out, "Commands:") {
		t.Errorf("cube help:\n%s", out)
	}
	if out := cube(t, "help", "build"); !strings.Contains(out, "--shards N") {
		t.Errorf("cube help build:\n%s", out)
	}
	if err := exec.Command(cubeBin, "build", "--no-such-flag").Run(); err == nil {
		t.Error("unknown flag accepted")
	}
	if out := cube(t, "version"); !strings.HasPrefix(out, "cube ") {
		t.Errorf("cube version: %q", out)
	}
}

// TestBenchSmoke runs a tiny benchmark end to end: the servers start pinned,
// serve correct values in alternating runs and are stopped, the table has a
// column per system, and the two ratio lines come last.
func TestBenchSmoke(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (make deps)")
	}
	against, columns := "redis", []string{"cube (baidu_std)", "redis (MGET)"}
	if _, err := exec.LookPath("memcached"); err == nil {
		against, columns = "redis,memcached", append(columns, "memcached (get)")
	}
	out := cube(t, "bench", "--against", against, "--keys", "20000", "--value-size", "40", "--batch", "100", "--duration", "300ms", "--conns", "2", "--runs", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-2], "ratio keys_per_s=") || !strings.HasPrefix(lines[len(lines)-1], "ratio cpu_per_mkey=") {
		t.Fatalf("bench output does not end with the ratio lines:\n%s", out)
	}
	want := append([]string{"median [min-max] of 2 runs", "requests/s", "keys/s", "p50 latency", "p99 latency",
		"server CPU s/Mkey", "load generator CPU us/request", "in-process dictionary lookups", "against the best peer"}, columns...)
	if runtime.NumCPU() >= 2 {
		want = append(want, "servers on CPUs 1, load generator on CPUs 0 (taskset)", "io-threads 1")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("bench output lacks %q", w)
		}
	}
	t.Log("\n" + out)
}

// TestBenchScaleSmoke runs the scaling tables at their smallest: two sizes
// built and served from the file mapping and from huge-page memory, two
// shard counts rolled out and healed; every table and column is printed
// with its rows.
func TestBenchScaleSmoke(t *testing.T) {
	out := cube(t, "bench", "scale", "--sizes", "10000,20000", "--shards", "1,2", "--rollout-keys", "10000",
		"--rollouts", "1", "--duration", "300ms", "--conns", "2", "--heal-interval", "300ms", "--delta-base", "10000")
	for _, w := range []string{
		"build against input size", "records   input MB", "peak RSS MiB",
		"lookups against keys per shard", "keys/shard", "p99 ms", "memory lines/s", "dictionary B/key", "server RSS B/key", "listening s", "checked s", "GB/s", "in memory s", "file mapping", "huge-page copy",
		"rollout against shards", "total ms median [min-max]", "heal ms", "rollout 2 shards / 1 shards = ",
		"delta against full rebuild", "full rebuild", "layer", "shipped MB", "line->serving ms", "transfer RSS MiB",
		"ratio lookups_8_layers_vs_none=",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("bench scale output lacks %q", w)
		}
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "10000" || f[0] == "20000") {
			rows++
		}
	}
	if rows != 6 { // a build row and a lookup row per memory mode, for each size
		t.Errorf("%d size rows, want 6", rows)
	}
	t.Log("\n" + out)
}

// TestMaxConns checks the flags of connection slots: over --max-conns (and
// over --max-conns-per-client, all three from one client here), a new
// connection closes the longest-idle one and is served, while the others
// keep working.
func TestMaxConns(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	writePaddle(t, filepath.Join(dir, "in"), 1, []uint64{1}, func(k uint64) []byte { return pipeline.Value(k, 1, 16) })
	cube(t, "build", "--input", filepath.Join(dir, "in"), "--output", data, "--shards", "1", "--dict", "d")
	for _, flags := range [][]string{{"--max-conns", "2"}, {"--max-conns-per-client", "2"}} {
		addr := startServer(t, data, 0, flags...)
		seek := func(c *client.Conn) error {
			_, _, err := c.Seek([]uint64{1}, false, time.Now().Add(2*time.Second))
			return err
		}
		var conns []*client.Conn
		for i := 0; i < 3; i++ {
			c, err := client.Dial(addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := seek(c); err != nil {
				t.Fatalf("%v: connection %d: %v", flags, i, err)
			}
			conns = append(conns, c)
			time.Sleep(10 * time.Millisecond) // an order of idleness
		}
		if err := seek(conns[0]); err == nil {
			t.Fatalf("%v: the longest-idle connection still served after a third was admitted", flags)
		}
		if err := seek(conns[1]); err != nil {
			t.Fatalf("%v: the second connection: %v", flags, err)
		}
	}
}

func TestControlToken(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	writePaddle(t, filepath.Join(dir, "in"), 1, []uint64{1}, func(k uint64) []byte { return pipeline.Value(k, 1, 16) })
	cube(t, "build", "--input", filepath.Join(dir, "in"), "--output", data, "--shards", "1", "--dict", "d")
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	addr := startServer(t, data, 0, "--control-token-file", tok)
	if code, _, _ := control(addr, `{"cmd":"status"}`); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
	if code := cubetest.Status(t, "POST", "http://"+addr+"/ControlService/cmd", "s3cret", strings.NewReader(`{"cmd":"status"}`)); code != 200 {
		t.Fatalf("with token: %d", code)
	}
	// Seeks need no token.
	if hr := httpSeek(t, addr, []uint64{1}); len(hr.Values) != 1 || hr.Values[0].Status != 0 {
		t.Fatalf("seek: %+v", hr)
	}
}

func TestFloat32Format(t *testing.T) {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, 0x3f000000)     // 0.5
	binary.LittleEndian.PutUint32(b[4:], 0xbf800000) // -1
	if got := valueFormats["float32"](b); got != "0.5 -1" {
		t.Fatalf("float32 format: %q", got)
	}
	if got := valueFormats["float32"](b[:3]); !strings.Contains(got, "not float32s") {
		t.Fatalf("odd length: %q", got)
	}
}

// TestCommandsRefuseStrayArguments: a command that takes flags only refuses an argument
// after them (a mistyped subcommand, a flag without its dashes) with a usage error naming
// it, before doing anything; one with subcommands also names those.
func TestCommandsRefuseStrayArguments(t *testing.T) {
	var check func(prefix string, cs []command)
	check = func(prefix string, cs []command) {
		for _, c := range cs {
			name := strings.TrimSpace(prefix + " " + c.name)
			check(name, c.subs)
			if c.operands {
				continue
			}
			var stdout, stderr strings.Builder
			c.name = name
			err := c.call([]string{"stray"}, &stdout, &stderr)
			if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), `cube `+name+`: unexpected argument "stray": it takes flags only`) {
				t.Errorf("cube %s stray: err %v, stderr %q", name, err, stderr.String())
			}
			if len(c.subs) > 0 && !strings.Contains(stderr.String(), "or one of its commands first: "+c.subs[0].name) {
				t.Errorf("cube %s stray does not name its commands: %q", name, stderr.String())
			}
		}
	}
	check("", commands())
}
