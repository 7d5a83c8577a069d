package servingstandin

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// workdir writes a serving working directory with servingconf below dir, its model in
// dir/model, and returns the options it used.
func workdir(t *testing.T, dir string, cube bool) servingconf.Options {
	t.Helper()
	o := servingconf.Options{Workdir: "workdir", ModelDir: "model", Port: 1, Threads: 1,
		Model: &servingpb.GeneralModelConfig{FeedVar: []*servingpb.FeedVar{{Name: proto.String("x")}}}}
	if cube {
		o.CubeConf = []byte(`[{"dict_name":"d","shard":1,"type":"ipport_list","nodes":[{"ipport_list":"list://127.0.0.1:1"}]}]`)
	}
	if err := os.MkdirAll(filepath.Join(dir, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model", servingconf.TimestampFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := servingconf.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// initFrom runs the server's initialisation from cwd with the command line of o.
func initFrom(t *testing.T, cwd string, o servingconf.Options) (*server, string, error) {
	t.Helper()
	t.Chdir(cwd)
	var stderr bytes.Buffer
	f, err := parseFlags(servingconf.Command("serving", o)[1:], &stderr)
	if err != nil {
		t.Fatal(err)
	}
	s, err := initialize(f, func(format string, a ...any) { stderr.WriteString(strings.TrimSpace(fmt.Sprintf(format, a...)) + "\n") })
	return s, stderr.String(), err
}

// TestInit_TheConfigurationServingconfWrites: what servingconf writes initialises, from the
// directory the server runs in, with the cube.
func TestInit_TheConfigurationServingconfWrites(t *testing.T) {
	dir := t.TempDir()
	o := workdir(t, dir, true)
	s, log, err := initFrom(t, dir, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if s.port != 1 || len(s.cubeConf) != 1 || s.engine.GetName() != "GeneralDistKVInferOp_0" {
		t.Errorf("port %d, %d dicts, engine %s", s.port, len(s.cubeConf), s.engine.GetName())
	}
}

// TestInit_CubeConfIsOpenedBelowTheWorkingDirectory: the server opens "./" + cube_config_path
// + "/cube.conf". The old launcher ran it from /serving with the absolute workdir
// /serving/workdir, so it looked for /serving/serving/workdir/cube.conf: here, run from any
// folder but the root, an absolute cube_config_path fails as it did, with exit 255's messages.
func TestInit_CubeConfIsOpenedBelowTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	o := workdir(t, dir, true)
	abs := filepath.Join(dir, "workdir")
	res := filepath.Join(abs, servingconf.ResourceFile)
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	// What prepare_server writes for workdir="/abs/workdir": every path absolute.
	if err := os.WriteFile(res, []byte(strings.ReplaceAll(string(b), `"workdir"`, `"`+abs+`"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Workdir = abs
	_, log, err := initFrom(t, dir, o)
	if err == nil || !strings.Contains(log, "open conf file [./"+abs+"/cube.conf]") || !strings.Contains(log, "cube init error") {
		t.Fatalf("%v\n%s", err, log)
	}
}

// TestInit_NoTimestampFileFailsTheEngine: the engine stats the model's fluid_time_file at
// start; without it initialisation fails.
func TestInit_NoTimestampFileFailsTheEngine(t *testing.T) {
	dir := t.TempDir()
	o := workdir(t, dir, false)
	if err := os.Remove(filepath.Join(dir, "model", servingconf.TimestampFile)); err != nil {
		t.Fatal(err)
	}
	_, log, err := initFrom(t, dir, o)
	if err == nil || !strings.Contains(log, "Failed stat config file") {
		t.Fatalf("%v\n%s", err, log)
	}
}

// TestMain_UnknownFlagExits1: gflags refuses a flag the binary does not define.
func TestMain_UnknownFlagExits1(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"-no_such_flag=1"}, &out, &out); code != 1 {
		t.Fatalf("status %d\n%s", code, out.String())
	}
}
