// Package servingstandin is the tests' stand-in for Paddle Serving 0.9.0's C++ server
// (the cube binary started as BinaryName): where Paddle's images cannot run, it keeps the rules that server
// keeps, as ../shared/reference/paddle-serving.md lists them, so that a launcher that breaks
// one fails here as it would on Paddle's image:
//   - its command line is gflags' (-name value, -name=value; an unknown flag exits 1);
//   - every configuration file is opened as path + "/" + file and parsed strictly (§1.6);
//   - the engine's reloadable_meta (the model's fluid_time_file) must exist (§1.7, step 2);
//   - cube.conf is opened at "./" + cube_config_path + "/cube.conf", whatever
//     cube_config_file says, and must be a JSON array with a valid entry, else the server logs
//     Paddle's messages and exits 255 (§1.7);
//   - a non-zero port in infer_service.prototxt wins over -port (§1.4);
//   - it prints "C++ Serving service started successfully!" once it listens, answers
//     GET /health with OK, and exits 0 on SIGTERM.
package servingstandin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// BinaryName is the name under which the cube binary is this stand-in (cube install links it
// so): SERVING_BIN points at a link of that name where a test runs the launcher against it.
const BinaryName = servingconf.StandinName

// Started is what the server prints on stdout once it serves.
const Started = "C++ Serving service started successfully!"

// ExitInitFailed is the status main's -1 becomes when initialisation fails.
const ExitInitFailed = 255

// flags are the server's flags that run_server passes (§1.4), with the binary's defaults.
type flags struct {
	modelToolkit                    bool
	inferPath, inferFile            string
	resourcePath, resourceFile      string
	workflowPath, workflowFile      string
	port, threads, reload, bthreads int
	maxConcurrency, maxBody         int
	precision                       string
	useCalib, prometheus            bool
	prometheusPort, cacheSize       int
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("serving", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.modelToolkit, "enable_model_toolkit", false, "")
	fs.StringVar(&f.inferPath, "inferservice_path", "./conf", "")
	fs.StringVar(&f.inferFile, "inferservice_file", "service.prototxt", "")
	fs.StringVar(&f.resourcePath, "resource_path", "./conf", "")
	fs.StringVar(&f.resourceFile, "resource_file", "resource.prototxt", "")
	fs.StringVar(&f.workflowPath, "workflow_path", "./conf", "")
	fs.StringVar(&f.workflowFile, "workflow_file", "workflow.prototxt", "")
	fs.IntVar(&f.port, "port", 8010, "")
	fs.IntVar(&f.threads, "num_threads", 0, "")
	fs.IntVar(&f.reload, "reload_interval_s", 10, "")
	fs.IntVar(&f.bthreads, "bthread_concurrency", 0, "")
	fs.IntVar(&f.maxConcurrency, "max_concurrency", 0, "")
	fs.IntVar(&f.maxBody, "max_body_size", 64<<20, "")
	fs.StringVar(&f.precision, "precision", "fp32", "")
	fs.BoolVar(&f.useCalib, "use_calib", false, "")
	fs.BoolVar(&f.prometheus, "enable_prometheus", false, "")
	fs.IntVar(&f.prometheusPort, "prometheus_port", 19393, "")
	fs.IntVar(&f.cacheSize, "request_cache_size", 0, "")
	fs.Bool("enable_cube", false, "") // defined by the binary, never read (§1.4)
	return f, fs.Parse(args)
}

// Main is the stand-in's main: its exit status. SIGTERM stops it (status 0).
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, args, stdout, stderr)
}

// run is Main until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return 1
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "E "+format+"\n", a...) }
	srv, err := initialize(f, logf)
	if err != nil {
		logf("%v", err)
		return ExitInitFailed
	}
	// Paddle's server listens on every address; the stand-in, on loopback unless the pod it
	// runs in says otherwise (SERVING_STANDIN_LISTEN_HOST="" in a pod's own network).
	host, ok := os.LookupEnv("SERVING_STANDIN_LISTEN_HOST")
	if !ok {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(srv.port)))
	if err != nil {
		logf("listen on port %d: %v", srv.port, err)
		return ExitInitFailed
	}
	var cube *client.Client
	if len(srv.cubeConf) > 0 {
		// Only the first table of cube.conf is ever looked up (§4.4).
		if cube, err = client.New(srv.cubeConf[0]); err != nil {
			logf("cube init error: %v", err)
			return ExitInitFailed
		}
		defer cube.Close()
	}
	e := newEngine(srv.engine, srv.model, cube, logf)
	go e.reloadLoop(ctx, time.Duration(max(1, f.reload))*time.Second)
	fmt.Fprintln(stdout, Started)
	if err := newTransport(e, f.maxBody, logf).serve(ctx, ln); err != nil {
		logf("serve: %v", err)
		return 1
	}
	return 0
}

// server is what initialisation found.
type server struct {
	port     int
	engine   *servingpb.EngineDesc
	model    *servingpb.GeneralModelConfig
	cubeConf []api.DictConf // nil without a cube
}

// initialize reads the configuration in the binary's order (§1.7).
func initialize(f flags, logf func(string, ...any)) (*server, error) {
	var res servingpb.ResourceConf
	if err := readText(f.resourcePath, f.resourceFile, &res); err != nil {
		return nil, err
	}
	if len(res.GetModelToolkitPath()) != 1 || len(res.GetModelToolkitFile()) != 1 || len(res.GetGeneralModelPath()) != 1 || len(res.GetGeneralModelFile()) != 1 {
		return nil, errors.New("resource.prototxt must name one model toolkit and one general model")
	}
	var tk servingpb.ModelToolkitConf
	if err := readText(res.GetModelToolkitPath()[0], res.GetModelToolkitFile()[0], &tk); err != nil {
		return nil, err
	}
	if len(tk.GetEngines()) == 0 {
		return nil, errors.New("model_toolkit: no engines")
	}
	s := &server{port: f.port, engine: tk.GetEngines()[0]}
	// Resource::initialize: each engine stats its reloadable_meta.
	for _, e := range tk.GetEngines() {
		if _, err := os.Stat(e.GetReloadableMeta()); err != nil {
			logf("Failed stat config file: %s", e.GetReloadableMeta())
			return nil, fmt.Errorf("engine %s failed to initialize", e.GetName())
		}
		if _, err := os.Stat(e.GetModelDir()); err != nil {
			return nil, fmt.Errorf("engine %s: model_dir %s: %v", e.GetName(), e.GetModelDir(), err)
		}
	}
	var wf servingpb.WorkflowConf
	if err := readText(f.workflowPath, f.workflowFile, &wf); err != nil {
		return nil, err
	}
	var is servingpb.InferServiceConf
	if err := readText(f.inferPath, f.inferFile, &is); err != nil {
		return nil, err
	}
	if is.GetPort() != 0 {
		s.port = int(is.GetPort())
	}
	// general_model_initialize: the cube first, then the model's feeds and fetches.
	if res.CubeConfigPath != nil {
		path := "./" + res.GetCubeConfigPath() + "/cube.conf"
		b, err := os.ReadFile(path)
		if err != nil {
			logf("open conf file [%s]", path)
			logf("cube init error")
			logf("Failed to initialize general model conf")
			return nil, fmt.Errorf("cube.conf: %w", err)
		}
		confs, err := api.ParseConf(b)
		if err != nil || len(confs) == 0 {
			logf("json schema error: %v", err)
			logf("no valid cube")
			logf("cube init error")
			logf("Failed to initialize general model conf")
			return nil, errors.New("cube.conf has no valid dict")
		}
		s.cubeConf = confs
	}
	s.model = &servingpb.GeneralModelConfig{}
	if err := readText(res.GetGeneralModelPath()[0], res.GetGeneralModelFile()[0], s.model); err != nil {
		logf("Failed to initialize general model conf")
		return nil, err
	}
	return s, nil
}

// readText opens path + "/" + file, as the server's configure parser does, and parses it
// strictly.
func readText(dir, file string, m proto.Message) error {
	return servingconf.ReadText(filepath.Clean(dir+"/"+file), m)
}
