// Package servingconf writes the working directory Paddle Serving 0.9.0's C++ server reads,
// as the Python API's prepare_server does (../shared/reference/paddle-serving.md §1.2), and
// builds the command line its run_server would run (§1.4), so that the serving pod needs no
// Python: the launcher (cube serving launch) writes these files and runs the binary itself.
//
// Every file is the protobuf text format of a message of package servingpb; the binary
// rejects what its schema does not know, and so do the tests' stand-in and ReadWorkdir.
package servingconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
)

// The names prepare_server and the binary use.
const (
	ServiceName      = "GeneralModelService"
	WorkflowName     = "workflow1"
	InferServiceFile = "infer_service.prototxt"
	WorkflowFile     = "workflow.prototxt"
	ResourceFile     = "resource.prototxt"
	GeneralModelFile = "general_model.prototxt"
	ModelToolkitFile = "model_toolkit.prototxt"
	CubeConfFile     = "cube.conf" // the binary opens this name, whatever the source was called
	TimestampFile    = "fluid_time_file"
	ModelConfFile    = "serving_server_conf.prototxt" // in the model directory
	// StandinName is the name under which the cube binary is the tests' stand-in of the
	// server binary (cube/servingstandin).
	StandinName       = "paddle-serving-standin"
	EngineType        = "PADDLE_INFER"
	ReloadOnAnyChange = "timestamp_ne"
)

// The op types of the CTR workflow: read the request, look the int64 inputs up in the cube
// and infer, write the response. Without a cube, GeneralInferOp replaces the middle one.
const (
	ReaderOp   = "GeneralReaderOp"
	DistKVOp   = "GeneralDistKVInferOp"
	InferOp    = "GeneralInferOp"
	ResponseOp = "GeneralResponseOp"
)

// Options describe one serving working directory.
type Options struct {
	// Workdir is where the files go. The binary opens cube.conf at "./" + Workdir +
	// "/cube.conf" (§1.6), so with a cube Workdir must be relative to the binary's working
	// directory; CheckWorkdir says so.
	Workdir string
	// ModelDir holds the model (its serving_server_conf.prototxt and the dense program and
	// parameters) and the fluid_time_file whose mtime triggers a reload.
	ModelDir string
	Port     int
	Threads  int
	// CubeConf is the cube.conf document (ctr_cube's cube_conf); nil serves without a cube.
	CubeConf []byte
	// Model is the model's serving_server_conf (ReadModelConf), reprinted as the engine's
	// general_model.prototxt.
	Model *servingpb.GeneralModelConfig
	// CombinedModel: the model's parameters are one file (__params__ or *.pdiparams).
	CombinedModel bool
	// GPUIDs are the engine's GPUs; empty is CPU (gpu_ids -1).
	GPUIDs []int32
	// Nodes overrides the node names of the three ops (default: "<type>_0", as 0.9.0's
	// OpMaker names them); older Serving versions named them differently.
	Nodes *[3]string
	// ReloadIntervalSeconds is how often the binary checks fluid_time_file (default 10).
	ReloadIntervalSeconds int
}

// engineOp is the middle op's type.
func (o Options) engineOp() string {
	if o.CubeConf != nil {
		return DistKVOp
	}
	return InferOp
}

// nodes are the names of the reader, engine and response nodes.
func (o Options) nodes() [3]string {
	if o.Nodes != nil {
		return *o.Nodes
	}
	return [3]string{ReaderOp + "_0", o.engineOp() + "_0", ResponseOp + "_0"}
}

// CheckWorkdir refuses a working directory the binary cannot find cube.conf in: one that
// is absolute or leaves the binary's working directory.
func (o Options) CheckWorkdir() error {
	if o.CubeConf == nil {
		return nil
	}
	if filepath.IsAbs(o.Workdir) || !filepath.IsLocal(o.Workdir) {
		return fmt.Errorf("workdir %q: with a cube it must be a relative path below the server's working directory: the server opens \"./\" + workdir + \"/cube.conf\"", o.Workdir)
	}
	return nil
}

// Files are the messages of the working directory by their path below Workdir.
func (o Options) Files() map[string]proto.Message {
	n := o.nodes()
	engine := n[1]
	gpus := o.GPUIDs
	if len(gpus) == 0 {
		gpus = []int32{-1}
	}
	res := &servingpb.ResourceConf{
		ModelToolkitPath: []string{o.Workdir}, ModelToolkitFile: []string{engine + "/" + ModelToolkitFile},
		GeneralModelPath: []string{o.Workdir}, GeneralModelFile: []string{engine + "/" + GeneralModelFile},
	}
	if o.CubeConf != nil {
		res.CubeConfigPath, res.CubeConfigFile = proto.String(o.Workdir), proto.String(CubeConfFile)
	}
	dep := func(name string) []*servingpb.DAGNodeDependency {
		return []*servingpb.DAGNodeDependency{{Name: proto.String(name), Mode: proto.String("RO")}}
	}
	return map[string]proto.Message{
		InferServiceFile: &servingpb.InferServiceConf{Port: proto.Uint32(uint32(o.Port)),
			Services: []*servingpb.InferService{{Name: proto.String(ServiceName), Workflows: []string{WorkflowName}}}},
		WorkflowFile: &servingpb.WorkflowConf{Workflows: []*servingpb.Workflow{{
			Name: proto.String(WorkflowName), WorkflowType: proto.String("Sequence"),
			Nodes: []*servingpb.DAGNode{
				{Name: proto.String(n[0]), Type: proto.String(ReaderOp)},
				{Name: proto.String(n[1]), Type: proto.String(o.engineOp()), Dependencies: dep(n[0])},
				{Name: proto.String(n[2]), Type: proto.String(ResponseOp), Dependencies: dep(n[1])},
			},
		}}},
		ResourceFile:                    res,
		engine + "/" + GeneralModelFile: o.Model,
		engine + "/" + ModelToolkitFile: &servingpb.ModelToolkitConf{Engines: []*servingpb.EngineDesc{{
			Name: proto.String(engine), Type: proto.String(EngineType),
			ReloadableMeta: proto.String(filepath.Join(o.ModelDir, TimestampFile)), ReloadableType: proto.String(ReloadOnAnyChange),
			ModelDir: proto.String(o.ModelDir), GpuIds: gpus,
			EnableMemoryOptimization: proto.Bool(len(o.GPUIDs) > 0), EnableIrOptimization: proto.Bool(false),
			UseTrt: proto.Bool(false), UseLite: proto.Bool(false), UseXpu: proto.Bool(false), UseGpu: proto.Bool(len(o.GPUIDs) > 0),
			CombinedModel: proto.Bool(o.CombinedModel), GpuMultiStream: proto.Bool(false),
			RuntimeThreadNum: proto.Int32(0), BatchInferSize: proto.Int32(32), EnableOverrun: proto.Bool(false), AllowSplitRequest: proto.Bool(true),
		}}},
	}
}

// textFormat is how the files are printed: multi-line, fields in number order.
var textFormat = prototext.MarshalOptions{Multiline: true, Indent: "  "}

// Write writes the working directory below dir, the server's working directory: every file
// of Files, cube.conf, and an empty fluid_time_file in the engine's folder, each file
// published atomically.
func Write(dir string, o Options) error {
	if err := o.CheckWorkdir(); err != nil {
		return err
	}
	if o.Model == nil {
		return fmt.Errorf("no model configuration (%s)", ModelConfFile)
	}
	work := filepath.Join(dir, o.Workdir)
	engineDir := filepath.Join(work, o.nodes()[1])
	if err := os.MkdirAll(engineDir, 0o755); err != nil {
		return err
	}
	for name, m := range o.Files() {
		b, err := textFormat.Marshal(m)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := atomicfile.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			return err
		}
	}
	if o.CubeConf != nil {
		if err := atomicfile.WriteFile(filepath.Join(work, CubeConfFile), o.CubeConf, 0o644); err != nil {
			return err
		}
	}
	return atomicfile.WriteFile(filepath.Join(engineDir, TimestampFile), nil, 0o644)
}

// Command is the command line run_server runs (§1.4): the binary bin serving the working
// directory, reloading a changed model every ReloadIntervalSeconds.
func Command(bin string, o Options) []string {
	threads, reload := strconv.Itoa(max(o.Threads, 1)), strconv.Itoa(o.ReloadIntervalSeconds)
	if o.ReloadIntervalSeconds <= 0 {
		reload = "10"
	}
	return []string{bin, "-enable_model_toolkit",
		"-inferservice_path", o.Workdir, "-inferservice_file", InferServiceFile,
		"-max_concurrency", "0", "-num_threads", threads, "-port", strconv.Itoa(o.Port),
		"-precision", "fp32", "-use_calib=False", "-reload_interval_s", reload,
		"-resource_path", o.Workdir, "-resource_file", ResourceFile,
		"-workflow_path", o.Workdir, "-workflow_file", WorkflowFile,
		"-bthread_concurrency", threads, "-max_body_size", "67108864"}
}

// ReadModelConf reads a model directory's serving_server_conf.prototxt.
func ReadModelConf(modelDir string) (*servingpb.GeneralModelConfig, error) {
	var m servingpb.GeneralModelConfig
	return &m, ReadText(filepath.Join(modelDir, ModelConfFile), &m)
}

// maxConfBytes bounds a configuration file read (the largest real one is a few KiB).
const maxConfBytes = 1 << 20

// ReadText parses a text-format configuration file into m, refusing unknown fields, as the
// server binary does.
func ReadText(path string, m proto.Message) error {
	b, err := bounded.ReadFile(path, maxConfBytes)
	if err != nil {
		return err
	}
	if err := prototext.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
