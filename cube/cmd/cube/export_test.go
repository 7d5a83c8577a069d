package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// seekAll looks every key up through a fresh two-shard cube built from the
// version in root/data/<id>, and returns the values by key.
func seekAll(t *testing.T, root, id string, keys []uint64) map[uint64][]byte {
	t.Helper()
	dict := filepath.Join(t.TempDir(), "dict")
	cube(t, "build", "--input", filepath.Join(root, "data", id), "--output", dict, "--shards", "2", "--dict", "d")
	conf := client.DictConf{DictName: "d", Shard: 2, Dup: 1, Timeout: 2000, Type: "ipport_list"}
	for s := range 2 {
		conf.Nodes = append(conf.Nodes, client.Node{IPPortList: "list://" + startServer(t, dict, s)})
	}
	c, err := client.New(conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[uint64][]byte{}
	for i := 0; i < len(keys); i += 500 {
		batch := keys[i:min(i+500, len(keys))]
		res, _, err := c.Seek(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range res {
			if !r.Found() {
				t.Fatalf("key %d: not found", batch[j])
			}
			got[batch[j]] = r.Value
		}
	}
	return got
}

// The model-output step with no Paddle: a stand-in trainer saves its
// embedding as Paddle saves a persistable (SparseFeatFactors, FP32 [rows,10]),
// `cube export` publishes it, the cube serves every row bit for bit under its
// row index; a retraining publishes a second version beside the first.
func TestExportLoDTensorServesEveryRowBitForBit(t *testing.T) {
	const rows, width = 3000, 10
	root := filepath.Join(t.TempDir(), "model-out")
	models := t.TempDir()
	want := make([][]byte, rows)
	data := make([]byte, 0, rows*width*4)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range rows {
		for range width {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(rng.NormFloat64())))
		}
		want[i] = data[i*width*4 : (i+1)*width*4]
	}
	// NaN and infinities pass through as the bits they are.
	binary.LittleEndian.PutUint32(want[0][0:], 0x7fc00001)
	binary.LittleEndian.PutUint32(want[0][4:], math.Float32bits(float32(math.Inf(-1))))
	file := append(paddle.AppendLoDTensorHeader(nil, paddle.FP32, []int64{rows, width}, nil), data...)
	if err := os.WriteFile(filepath.Join(models, "SparseFeatFactors"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	out := cube(t, "export", "--format", "lodtensor", "--in", models, "--var", "SparseFeatFactors", "--out", root, "--id", "1000", "--part-bytes", "50000")
	if !strings.Contains(out, "3000 rows of 40 bytes in 4 part(s)") || !strings.Contains(out, `donefile/base.txt: {"id":"1000","key":"1000","input":"../data/1000"}`) {
		t.Fatalf("export said %q", out)
	}
	keys := make([]uint64, rows)
	for i := range keys {
		keys[i] = uint64(i)
	}
	got := seekAll(t, root, "1000", keys)
	for i, w := range want {
		if !bytes.Equal(got[uint64(i)], w) {
			t.Fatalf("row %d: served %x, saved %x", i, got[uint64(i)], w)
		}
	}
	// Retraining: a second version; the first stays where serving may read it.
	cube(t, "export", "--format", "lodtensor", "--in", filepath.Join(models, "SparseFeatFactors"), "--out", root, "--id", "2000")
	b, err := os.ReadFile(filepath.Join(root, "donefile", "base.txt"))
	if err != nil || string(b) != "{\"id\":\"1000\",\"key\":\"1000\",\"input\":\"../data/1000\"}\n{\"id\":\"2000\",\"key\":\"2000\",\"input\":\"../data/2000\"}\n" {
		t.Fatalf("donefile %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "data", "1000", "part-00000")); err != nil {
		t.Fatalf("the first version is gone: %v", err)
	}
}

// PaddleRec's real saved embedding (a SelectedRows of 3949 feasigns × 9)
// is served under its feasign ids, bit for bit.
func TestExportRealSelectedRows(t *testing.T) {
	path := cubetest.PaddleData(t, "paddlerec-cube/embedding.selectedrows")
	root := filepath.Join(t.TempDir(), "model-out")
	out := cube(t, "export", "--format", "selectedrows", "--in", path, "--out", root, "--id", "7")
	if !strings.Contains(out, "3949 rows of 36 bytes") {
		t.Fatalf("export said %q", out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := paddle.NewFile(path, bytes.NewReader(b), int64(len(b)))
	s, err := f.SelectedRows()
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]byte{}
	var keys []uint64
	rows := f.SelectedRowsRows(s)
	for {
		k, v, err := rows.Next()
		if err != nil {
			break
		}
		want[k] = bytes.Clone(v)
		keys = append(keys, k)
	}
	got := seekAll(t, root, "7", keys)
	for k, w := range want {
		if !bytes.Equal(got[k], w) {
			t.Fatalf("feasign %d: served %x, saved %x", k, got[k], w)
		}
	}
}

// A bad input publishes nothing: no data/<id>, no donefile line, no
// temporary folder left; and an id that is not newer is refused.
func TestExportPublishesNothingOnBadInput(t *testing.T) {
	root := filepath.Join(t.TempDir(), "model-out")
	dir := t.TempDir()
	good := append(paddle.AppendLoDTensorHeader(nil, paddle.FP32, []int64{4, 2}, nil), make([]byte, 32)...)
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)-3],
		"fp64":      append(paddle.AppendLoDTensorHeader(nil, paddle.FP64, []int64{4, 2}, nil), make([]byte, 64)...),
		"vector":    append(paddle.AppendLoDTensorHeader(nil, paddle.FP32, []int64{8}, nil), make([]byte, 32)...),
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		cmd := exec.Command(cubeBin, "export", "--format", "lodtensor", "--in", p, "--out", root, "--id", "5")
		msg, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(msg), "nothing was published") {
			t.Fatalf("%s: err %v, output %s", name, err, msg)
		}
		ents, _ := os.ReadDir(filepath.Join(root, "data"))
		if len(ents) != 0 {
			t.Fatalf("%s: data/ holds %v", name, ents)
		}
		if _, err := os.Stat(filepath.Join(root, "donefile", "base.txt")); err == nil {
			t.Fatalf("%s: a donefile was written", name)
		}
	}
	p := filepath.Join(dir, "good")
	os.WriteFile(p, good, 0o644)
	cube(t, "export", "--format", "lodtensor", "--in", p, "--out", root, "--id", "5")
	for _, id := range []string{"5", "4"} {
		msg, err := exec.Command(cubeBin, "export", "--format", "lodtensor", "--in", p, "--out", root, "--id", id).CombinedOutput()
		if err == nil {
			t.Fatalf("id %s published again: %s", id, msg)
		}
	}
	if msg, _ := exec.Command(cubeBin, "export", "--format", "lodtensor", "--in", p, "--out", root, "--id", "4").CombinedOutput(); !strings.Contains(string(msg), "a new version needs a larger id") {
		t.Fatalf("an older id: %s", msg)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "data"))
	if len(ents) != 1 || ents[0].Name() != "5" {
		t.Fatalf("data/ holds %v", ents)
	}
}

// Parameter-server text shards of both layouts become cube versions.
func TestExportParameterServerTables(t *testing.T) {
	common := t.TempDir()
	os.WriteFile(filepath.Join(common, "emb.block0.txt"), []byte("4\t1\t0\t1\t1,2,0,0,\n6\t1\t0\t1\t3,4,0,0,\n"), 0o644)
	os.WriteFile(filepath.Join(common, "emb.block0.meta"), []byte("param=emb\nshard_id=0\nrow_names=Param,Moment\nrow_dims=2,2\ncount=2\n"), 0o644)
	os.WriteFile(filepath.Join(common, "emb.block1.txt"), []byte("5\t1\t0\t1\t5,6,0,0,\n"), 0o644)
	os.WriteFile(filepath.Join(common, "emb.block1.meta"), []byte("row_names=Param,Moment\nrow_dims=2,2\n"), 0o644)
	root := filepath.Join(t.TempDir(), "out")
	cube(t, "export", "--format", "ps-table", "--in", common, "--out", root, "--id", "1")
	got := seekAll(t, root, "1", []uint64{4, 5, 6})
	for k, w := range map[uint64][]float32{4: {1, 2}, 5: {5, 6}, 6: {3, 4}} {
		if g := paddle.Float32s(got[k]); len(g) != 2 || g[0] != w[0] || g[1] != w[1] {
			t.Errorf("key %d: %v, want %v", k, g, w)
		}
	}

	memory := t.TempDir()
	os.WriteFile(filepath.Join(memory, "part-000-00000"), []byte("9 0 0 0 1 0 0.5 0.1\n10 0 0 0 1 0 0.25 0.1 7 8 0.3\n"), 0o644)
	msg, err := exec.Command(cubeBin, "export", "--format", "ps-table", "--in", memory, "--out", root, "--id", "2").CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "--embedx-dim") {
		t.Fatalf("memory table without its layout: %v %s", err, msg)
	}
	cube(t, "export", "--format", "ps-table", "--in", memory, "--out", root, "--id", "2", "--embedx-dim", "2")
	got = seekAll(t, root, "2", []uint64{9, 10})
	if g := paddle.Float32s(got[9]); g[0] != 0.5 || g[1] != 0 || g[2] != 0 {
		t.Errorf("key 9: %v", g)
	}
	if g := paddle.Float32s(got[10]); g[0] != 0.25 || g[1] != 7 || g[2] != 8 {
		t.Errorf("key 10: %v", g)
	}
}

// --watch, the model-output step beside a trainer: every new save is published once it has
// settled, as a new version; a broken save publishes nothing and stops nothing; a restart
// does not publish the same save again.
func TestExportWatchPublishesEachSettledSave(t *testing.T) {
	dir := t.TempDir()
	models, root := filepath.Join(dir, "models"), filepath.Join(dir, "out")
	os.MkdirAll(models, 0o755)
	start := func() *exec.Cmd {
		cmd := exec.Command(cubeBin, "export", "--watch", "--format", "lodtensor", "--in", models, "--var", "SparseFeatFactors",
			"--out", root, "--interval", "150ms", "--log-level", "debug")
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("export --watch log:\n%s", logs.String())
			}
		})
		return cmd
	}
	lines := func() []string {
		b, _ := os.ReadFile(filepath.Join(root, "donefile", "base.txt"))
		return strings.Fields(string(b))
	}
	waitLines := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if l := lines(); len(l) >= n {
				return l
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("donefile has %d lines after 20s, want %d", len(lines()), n)
		return nil
	}
	w := start()
	cube(t, "model", "--format", "lodtensor", "--out", filepath.Join(models, "pass-0"), "--keys", "2000", "--gen", "3")
	first := waitLines(1)
	var e struct{ ID string }
	json.Unmarshal([]byte(first[0]), &e)
	keys := make([]uint64, 2000)
	for i := range keys {
		keys[i] = uint64(i)
	}
	for k, v := range seekAll(t, root, e.ID, keys) {
		if !bytes.Equal(v, pipeline.Value(k, 3, pipeline.DefaultValueSize)) {
			t.Fatalf("key %d: %x is not generation 3's row", k, v)
		}
	}
	// A broken save (cut short, as a trainer killed mid-write leaves it) publishes nothing.
	broken := filepath.Join(models, "pass-1")
	os.MkdirAll(broken, 0o755)
	good, _ := os.ReadFile(filepath.Join(models, "pass-0", "SparseFeatFactors"))
	os.WriteFile(filepath.Join(broken, "SparseFeatFactors"), good[:len(good)/2], 0o644)
	time.Sleep(time.Second)
	if l := lines(); len(l) != 1 {
		t.Fatalf("a broken save was published: %v", l)
	}
	// The next good save is.
	time.Sleep(10 * time.Millisecond)
	cube(t, "model", "--format", "lodtensor", "--out", filepath.Join(models, "pass-2"), "--keys", "2000", "--gen", "5")
	second := waitLines(2)
	json.Unmarshal([]byte(second[1]), &e)
	if got := seekAll(t, root, e.ID, keys[:10]); !bytes.Equal(got[7], pipeline.Value(7, 5, pipeline.DefaultValueSize)) {
		t.Fatalf("second version: key 7 = %x", got[7])
	}
	// A restart publishes nothing it published before.
	_ = w.Process.Signal(os.Interrupt)
	_ = w.Wait()
	start()
	time.Sleep(time.Second)
	if l := lines(); len(l) != 2 {
		t.Fatalf("after a restart the donefile has %d lines: %v", len(l), l)
	}
}

// --serving-model publishes the dense model with the sparse table under the same id
// (serving/<id>/ beside data/<id>/); a serving model that cannot be copied publishes nothing.
func TestExportServingModelCarriesTheVersionID(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "out")
	save := filepath.Join(dir, "pass-0")
	cube(t, "model", "--format", "lodtensor", "--out", save, "--keys", "10")
	model := filepath.Join(save, "serving_model")
	os.MkdirAll(filepath.Join(model, "sub"), 0o755)
	os.WriteFile(filepath.Join(model, "__model__"), []byte("program"), 0o644)
	os.WriteFile(filepath.Join(model, "sub", "fc_0.w_0"), []byte("weights"), 0o644)
	cube(t, "export", "--format", "lodtensor", "--in", save, "--var", "SparseFeatFactors", "--out", root, "--id", "42", "--serving-model", model)
	archived := tarFiles(t, filepath.Join(root, "serving", "42.tar.gz"))
	for rel, want := range map[string]string{"__model__": "program", "sub/fc_0.w_0": "weights"} {
		if b, err := os.ReadFile(filepath.Join(root, "serving", "42", rel)); err != nil || string(b) != want {
			t.Errorf("serving/42/%s: %q %v", rel, b, err)
		}
		if archived["model/"+rel] != want {
			t.Errorf("serving/42.tar.gz: model/%s is %q", rel, archived["model/"+rel])
		}
	}
	os.Symlink("/etc/passwd", filepath.Join(model, "link"))
	msg, err := exec.Command(cubeBin, "export", "--format", "lodtensor", "--in", save, "--var", "SparseFeatFactors", "--out", root, "--id", "43", "--serving-model", model).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "not a regular file") {
		t.Fatalf("a serving model with a symlink: %v %s", err, msg)
	}
	for _, d := range []string{"serving", "data"} {
		ents, _ := os.ReadDir(filepath.Join(root, d))
		want := map[string]int{"data": 1, "serving": 2}[d] // serving/42 and serving/42.tar.gz
		if len(ents) != want || ents[0].Name() != "42" {
			t.Errorf("%s/ holds %v after a failed export", d, ents)
		}
	}
}

// `cube bench export` prints a row per size and its ratio lines (the figures are make
// bench's; this keeps the command from breaking unseen).
func TestBenchExportSmoke(t *testing.T) {
	out := cube(t, "bench", "export", "--rows", "2000,5000", "--width", "9")
	for _, w := range []string{"rows           input MB", "peak RSS MiB", "ratio export_rss_5k_vs_2k=", "ratio export_rows_per_s_5k_vs_2k="} {
		if !strings.Contains(out, w) {
			t.Errorf("bench export output lacks %q:\n%s", w, out)
		}
	}
	for _, n := range []string{"2000 ", "5000 "} {
		if !strings.Contains(out, "\n"+n) {
			t.Errorf("no row for %s rows:\n%s", n, out)
		}
	}
}

// Every format the provider may render has its help line, and the help shows it.
func TestExportFormatsHaveHelp(t *testing.T) {
	if len(exportFormatHelp) != len(api.ExportFormats) {
		t.Errorf("help for %d formats, api.ExportFormats has %d", len(exportFormatHelp), len(api.ExportFormats))
	}
	out := cube(t, "export", "--help")
	for _, f := range api.ExportFormats {
		if exportFormatHelp[f] == "" || !strings.Contains(out, f+": "+exportFormatHelp[f]) {
			t.Errorf("format %s has no help line in cube export --help:\n%s", f, out)
		}
	}
}

// tarFiles reads a .tar.gz: each regular file's name and content.
func tarFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}
