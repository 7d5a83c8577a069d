package servingconf

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// golden parses a real file of Paddle's into a fresh message of m's type.
func golden(t *testing.T, path string, m proto.Message) proto.Message {
	t.Helper()
	out := m.ProtoReflect().New().Interface()
	if err := ReadText(path, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFiles_MatchWhatServingGenerated: for the uci_housing model on a GPU, the files are the
// ones Paddle Serving's own prepare_server generated (workdir_9494), field for field. That
// workdir was written by a Serving that named its nodes general_reader_0 and so on; 0.9.0
// names them after their types, which Nodes overrides here.
func TestFiles_MatchWhatServingGenerated(t *testing.T) {
	dir := cubetest.PaddleData(t, "serving-uci-housing")
	model, err := ReadModelConf(filepath.Join(dir, "uci_housing_model"))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Workdir: "workdir_9494", ModelDir: "uci_housing_model", Port: 9494, Model: model, GPUIDs: []int32{0},
		Nodes: &[3]string{"general_reader_0", "general_infer_0", "general_response_0"}}
	files := o.Files()
	if len(files) != 5 {
		t.Fatalf("%d files, want the 5 of workdir_9494", len(files))
	}
	for name, m := range files {
		want := golden(t, filepath.Join(dir, "workdir_9494", name), m)
		if !proto.Equal(m, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, prototext.Format(m), prototext.Format(want))
		}
	}
}

// TestWrite_CTRWithCube: with a cube, the engine is GeneralDistKVInferOp_0, resource.prototxt
// names cube.conf in the workdir, and cube.conf is there under that name, byte for byte;
// every file reads back through the strict parser the binary and the stand-in use.
func TestWrite_CTRWithCube(t *testing.T) {
	dir := t.TempDir()
	conf := []byte(`[{"dict_name":"test_dict","shard":1,"dup":1,"timeout":200,"retry":3,"backup_request":100,"type":"ipport_list","nodes":[{"ipport_list":"list://127.0.0.1:8027"}]}]`)
	model := &servingpb.GeneralModelConfig{FeedVar: []*servingpb.FeedVar{{Name: proto.String("dense_input"), AliasName: proto.String("dense_input"), FeedType: proto.Int32(1), Shape: []int32{13}}}}
	o := Options{Workdir: "workdir", ModelDir: "/serving/model", Port: 9292, Threads: 4, Model: model, CubeConf: conf}
	if err := Write(dir, o); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "workdir", CubeConfFile))
	if err != nil || string(got) != string(conf) {
		t.Fatalf("cube.conf at ./workdir/cube.conf: %q, %v", got, err)
	}
	var res servingpb.ResourceConf
	if err := ReadText(filepath.Join(dir, "workdir", ResourceFile), &res); err != nil {
		t.Fatal(err)
	}
	if res.GetCubeConfigPath() != "workdir" || res.GetCubeConfigFile() != CubeConfFile || res.GetModelToolkitFile()[0] != "GeneralDistKVInferOp_0/model_toolkit.prototxt" {
		t.Errorf("resource.prototxt: %v", prototext.Format(&res))
	}
	for name, m := range o.Files() {
		back := m.ProtoReflect().New().Interface()
		if err := ReadText(filepath.Join(dir, "workdir", name), back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m, back) {
			t.Errorf("%s does not read back as written", name)
		}
	}
	var tk servingpb.ModelToolkitConf
	if err := ReadText(filepath.Join(dir, "workdir", "GeneralDistKVInferOp_0", ModelToolkitFile), &tk); err != nil {
		t.Fatal(err)
	}
	e := tk.GetEngines()[0]
	if e.GetReloadableMeta() != "/serving/model/fluid_time_file" || e.GetReloadableType() != "timestamp_ne" || !slices.Equal(e.GetGpuIds(), []int32{-1}) || e.GetUseGpu() {
		t.Errorf("engine on CPU: %v", prototext.Format(e))
	}
	if _, err := os.Stat(filepath.Join(dir, "workdir", "GeneralDistKVInferOp_0", TimestampFile)); err != nil {
		t.Errorf("the engine folder's fluid_time_file: %v", err)
	}
}

// TestCheckWorkdir_CubeNeedsARelativeWorkdir: the binary opens "./" + workdir + "/cube.conf",
// so an absolute workdir (the old launcher's /serving/workdir) would be looked for under the
// server's working directory, and a workdir that leaves it is refused too.
func TestCheckWorkdir_CubeNeedsARelativeWorkdir(t *testing.T) {
	for _, w := range []string{"/serving/workdir", "../workdir", "a/../../b"} {
		err := Options{Workdir: w, CubeConf: []byte("[]")}.CheckWorkdir()
		if err == nil || !strings.Contains(err.Error(), `"./" + workdir + "/cube.conf"`) {
			t.Errorf("workdir %q: %v", w, err)
		}
	}
	for _, w := range []string{"workdir", "a/b"} {
		if err := (Options{Workdir: w, CubeConf: []byte("[]")}).CheckWorkdir(); err != nil {
			t.Errorf("workdir %q: %v", w, err)
		}
	}
	if err := (Options{Workdir: "/abs"}).CheckWorkdir(); err != nil {
		t.Errorf("without a cube the workdir may be absolute: %v", err)
	}
}

// TestCommand_IsRunServers: the command line is the one run_server builds (§1.4), with the
// binary first.
func TestCommand_IsRunServers(t *testing.T) {
	got := strings.Join(Command("/usr/local/serving_bin/serving", Options{Workdir: "workdir", Port: 9292, Threads: 4}), " ")
	want := "/usr/local/serving_bin/serving -enable_model_toolkit -inferservice_path workdir -inferservice_file infer_service.prototxt " +
		"-max_concurrency 0 -num_threads 4 -port 9292 -precision fp32 -use_calib=False -reload_interval_s 10 -resource_path workdir " +
		"-resource_file resource.prototxt -workflow_path workdir -workflow_file workflow.prototxt -bthread_concurrency 4 -max_body_size 67108864"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestModelConf_RealFiles: the model configurations Paddle ships read with the strict
// parser, and their binary forms decode to the same messages (the LAC pair differs upstream).
func TestModelConf_RealFiles(t *testing.T) {
	for _, c := range []struct {
		dir    string
		feeds  int
		stream bool
	}{
		{"serving-uci-housing/uci_housing_model", 1, true},
		{"edl-mnist-model/mnist_model", 1, true},
	} {
		dir := cubetest.PaddleData(t, c.dir)
		m, err := ReadModelConf(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.GetFeedVar()) != c.feeds {
			t.Errorf("%s: %d feeds", c.dir, len(m.GetFeedVar()))
		}
		b, err := os.ReadFile(filepath.Join(dir, "serving_server_conf.stream.prototxt"))
		if err != nil {
			t.Fatal(err)
		}
		var bin servingpb.GeneralModelConfig
		if err := proto.Unmarshal(b, &bin); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m, &bin) {
			t.Errorf("%s: text and binary differ", c.dir)
		}
	}
	criteo := golden(t, cubetest.PaddleData(t, "serving-sparse-criteo/work_dir1/general_model.prototxt"), &servingpb.GeneralModelConfig{}).(*servingpb.GeneralModelConfig)
	if len(criteo.GetFeedVar()) != 26 || criteo.GetFetchVar()[0].GetAliasName() != "prob" {
		t.Errorf("sparse criteo: %d feeds, fetch %v", len(criteo.GetFeedVar()), criteo.GetFetchVar())
	}
	lac := golden(t, cubetest.PaddleData(t, "serving-lac-conf/serving_client_conf.prototxt"), &servingpb.GeneralModelConfig{}).(*servingpb.GeneralModelConfig)
	if !lac.GetFeedVar()[0].GetIsLodTensor() {
		t.Error("lac: the feed is a LoD tensor")
	}
}
