package servingstandin

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/predict"
	cproto "github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest/ctrmodel"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest/inproc"
	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
)

// The test cube holds keys 1..keysInCub, and zeroKey with an all-zero embedding.
const (
	ctrWidth  = ctrmodel.Width
	keysInCub = 1000
	zeroKey   = 5000
)

// embedding is key k's row in the test cube.
func embedding(k uint64) []byte {
	b := make([]byte, 4*ctrWidth)
	for j := range ctrWidth {
		v := float32(0)
		if k != zeroKey {
			v = float32(math.Sin(float64(k*7+uint64(j)))) * 0.5
		}
		binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
	}
	return b
}

// startCube builds keys 1..keysInCub and zeroKey into two shards, serves them in-process, and
// returns the cube.conf of that table (the first) and a second table nobody serves.
func startCube(t *testing.T) []byte {
	t.Helper()
	var nodes []string
	for _, addr := range inproc.Serve(t, "test_dict", 2, func(w *seqfile.Writer) {
		for k := uint64(1); k <= keysInCub; k++ {
			w.Append(k, embedding(k))
		}
		w.Append(zeroKey, embedding(zeroKey))
	}) {
		nodes = append(nodes, fmt.Sprintf(`{"ipport_list":"list://%s"}`, addr))
	}
	return fmt.Appendf(nil, `[{"dict_name":"test_dict","shard":2,"dup":1,"timeout":2000,"type":"ipport_list","nodes":[%s]},`+
		`{"dict_name":"other","shard":1,"dup":1,"type":"ipport_list","nodes":[{"ipport_list":"list://127.0.0.1:1"}]}]`, strings.Join(nodes, ","))
}

// standin is a running stand-in with the CTR model.
type standin struct {
	addr     string // HOST:PORT
	modelDir string
	stderr   *cubetest.SyncBuffer // its goroutines write it while the test reads
}

// startStandin copies the real model into a serving directory (the fixture stays read-only),
// writes the configuration with servingconf, and runs the stand-in there until the test ends.
func startStandin(t *testing.T, cubeConf []byte) *standin {
	t.Helper()
	return startStandinWith(t, cubeConf, nil)
}

// startStandinWith is startStandin with a change to the model's copy before the start.
func startStandinWith(t *testing.T, cubeConf []byte, change func(model string)) *standin {
	t.Helper()
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	ctrmodel.ServingModel(t, model)
	if change != nil {
		change(model)
	}
	if err := os.WriteFile(filepath.Join(model, servingconf.TimestampFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := loopback.Port()
	if err != nil {
		t.Fatal(err)
	}
	o := servingconf.Options{Workdir: "workdir", ModelDir: "model", Port: port, Threads: 2, CubeConf: cubeConf, Model: ctrmodel.ModelConf(),
		ReloadIntervalSeconds: 1}
	if err := servingconf.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	s := &standin{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), modelDir: model, stderr: &cubetest.SyncBuffer{}}
	var stdout cubetest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, servingconf.Command("serving", o)[1:], &stdout, s.stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("the stand-in exited %d; stderr:\n%s", code, s.stderr)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), Started) {
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in did not start; stderr:\n%s", s.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// sample is one prediction's input: a slot's keys, and the dense values.
func sample(i int) ([][]uint64, []float32) {
	keys := make([][]uint64, ctrmodel.Slots)
	for s := range keys {
		for j := range 1 + (i+s)%3 {
			keys[s] = append(keys[s], uint64(1+(i*31+s*7+j)%keysInCub))
		}
	}
	dense := make([]float32, ctrmodel.Dense)
	for j := range dense {
		dense[j] = float32((i+j)%5) / 5
	}
	return keys, dense
}

func request(t *testing.T, keys [][]uint64, dense []float32) *servingpb.Request {
	t.Helper()
	req, err := predict.Request(ctrmodel.ModelConf(), keys, dense, ctrmodel.Alias)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func probability(t *testing.T, c *predict.Client, req *servingpb.Request) float32 {
	t.Helper()
	resp, err := c.Predict(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.Probabilities(resp)
	if err != nil || len(p) != 1 {
		t.Fatalf("probabilities %v, %v", p, err)
	}
	if resp.GetOutputs()[0].GetEngineName() != EngineName {
		t.Errorf("engine_name %q", resp.GetOutputs()[0].GetEngineName())
	}
	return p[0]
}

// TestPredict_BothTransportsOneAnswer: the same samples over baidu_std (gzipped responses,
// which the client must unzip) and over HTTP give the same click probabilities, each a real
// softmax output in (0, 1), and different samples give different ones.
func TestPredict_BothTransportsOneAnswer(t *testing.T) {
	s := startStandin(t, startCube(t))
	rpc, web := predict.NewClient(s.addr, 5*time.Second), predict.NewClient("http://"+s.addr, 5*time.Second)
	defer rpc.Close()
	seen := map[float32]bool{}
	for i := range 20 {
		keys, dense := sample(i)
		a, b := probability(t, rpc, request(t, keys, dense)), probability(t, web, request(t, keys, dense))
		if a != b {
			t.Fatalf("sample %d: baidu_std %v, HTTP %v", i, a, b)
		}
		if !(a > 0 && a < 1) {
			t.Fatalf("sample %d: probability %v", i, a)
		}
		seen[a] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 samples gave %d distinct probabilities: the embeddings do not reach the model", len(seen))
	}
}

// TestPredict_BaiduStdResponsesAreGzipped reads a raw baidu_std answer: compress_type 2.
func TestPredict_BaiduStdResponsesAreGzipped(t *testing.T) {
	s := startStandin(t, startCube(t))
	keys, dense := sample(1)
	body, _ := proto.Marshal(request(t, keys, dense))
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta := cproto.RpcMeta{HasRequest: true, Service: []byte(serviceFull), Method: []byte("inference"), CorrelationID: 1}
	if _, err := c.Write(cproto.AppendFrame(nil, &meta, body)); err != nil {
		t.Fatal(err)
	}
	var f cproto.Frame
	if _, err := cproto.ReadFrame(bufio.NewReader(c), nil, 64<<20, &f); err != nil {
		t.Fatal(err)
	}
	if f.Meta.CompressType != compressGzip || f.Meta.ErrorCode != 0 {
		t.Fatalf("compress_type %d, error %d %s: every response is gzip (2)", f.Meta.CompressType, f.Meta.ErrorCode, f.Meta.ErrorText)
	}
}

// TestPredict_RulesOfTheOp: what GeneralDistKVInferOp requires of a request, refused as a
// failed workflow (HTTP 500, [E-5000]); a missed key that is not the first gives a zero row.
func TestPredict_RulesOfTheOp(t *testing.T) {
	s := startStandin(t, startCube(t))
	web := predict.NewClient("http://"+s.addr, 5*time.Second)
	keys, dense := sample(3)
	for name, mutate := range map[string]func(*servingpb.Request){
		"keys without lod": func(r *servingpb.Request) { r.Tensor[1].Lod = nil },
		"shape and keys disagree": func(r *servingpb.Request) {
			r.Tensor[1].Shape = []int32{int32(len(r.Tensor[1].Int64Data) + 1)}
		},
		"lod past the keys": func(r *servingpb.Request) { r.Tensor[1].Lod = []int32{0, int32(len(r.Tensor[1].Int64Data) + 1)} },
		// Request tensor i is feed_var[i]: keys sent first are named dense_input.
		"dense sent last": func(r *servingpb.Request) { r.Tensor = append(r.Tensor[1:], r.Tensor[0]) },
		// The op sizes every embedding from the first unique key.
		"first key missing": func(r *servingpb.Request) { r.Tensor[1].Int64Data[0] = keysInCub + 1 },
		"an unknown elem_type": func(r *servingpb.Request) {
			r.Tensor[0].ElemType = proto.Int32(3)
		},
	} {
		req := request(t, keys, dense)
		mutate(req)
		_, err := web.Predict(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "[E-5000]InferService inference failed!") {
			t.Errorf("%s: %v, want Paddle's failed workflow", name, err)
		}
	}
	// A missed key (not the first) is a zero row: the same answer as a key whose embedding is
	// all zeros.
	missing, zero := request(t, keys, dense), request(t, keys, dense)
	missing.Tensor[5].Int64Data[0], zero.Tensor[5].Int64Data[0] = keysInCub+7, zeroKey
	if a, b := probability(t, web, missing), probability(t, web, zero); a != b {
		t.Errorf("a missed key gave %v, a zero embedding %v", a, b)
	}
	if p := probability(t, web, request(t, keys, dense)); p == probability(t, web, zero) {
		t.Errorf("zeroing one embedding did not change the prediction (%v): the test proves nothing", p)
	}
}

// TestPredict_ReloadsOnTheTimestamp: new dense weights reach the engine only when the model's
// fluid_time_file mtime changes (timestamp_ne), within the reload interval, with no restart.
func TestPredict_ReloadsOnTheTimestamp(t *testing.T) {
	s := startStandin(t, startCube(t))
	web := predict.NewClient("http://"+s.addr, 5*time.Second)
	keys, dense := sample(2)
	before := probability(t, web, request(t, keys, dense))
	// fc_3.b_0 is the last bias [no click, click]: shift the click side.
	b := filepath.Join(s.modelDir, "fc_3.b_0")
	data, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(data[len(data)-4:], math.Float32bits(3))
	if err := os.WriteFile(b, data, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // two reload checks: the files changed, the timestamp did not
	if p := probability(t, web, request(t, keys, dense)); p != before {
		t.Fatalf("the model changed without its timestamp: %v → %v", before, p)
	}
	stamp := time.Now().Add(5 * time.Second)
	if err := os.Chtimes(filepath.Join(s.modelDir, servingconf.TimestampFile), stamp, stamp); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for probability(t, web, request(t, keys, dense)) == before {
		if time.Now().After(deadline) {
			t.Fatalf("the timestamp moved, the model did not reload; stderr:\n%s", s.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(s.stderr.String(), "Begin reload framework...") {
		t.Error("no reload logged")
	}
}

// TestPredict_NoModelFailsEveryRequest: a model the engine cannot load leaves the server
// listening, and every request fails (§1.7).
func TestPredict_NoModelFailsEveryRequest(t *testing.T) {
	s := startStandinWith(t, startCube(t), func(model string) { os.Remove(filepath.Join(model, "fc_1.w_0")) })
	web := predict.NewClient("http://"+s.addr, 5*time.Second)
	keys, dense := sample(0)
	if _, err := web.Predict(context.Background(), request(t, keys, dense)); err == nil {
		t.Fatal("a server without its model answered")
	}
	if b := cubetest.Get(t, "http://"+s.addr+"/health"); string(b) != "OK" {
		t.Errorf("/health %q", b)
	}
}
