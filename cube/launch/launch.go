// Package launch runs Paddle Serving 0.9.0's C++ server in a pod without Python or a shell
// (cube serving): it waits for the model, unpacks it, writes the server's working directory
// (servingconf) with cube.conf where the binary opens it, and runs the binary as its child:
// SIGTERM reaches the server, and the launcher exits with the server's status.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// DefaultServingBin is where Paddle Serving's runtime images keep the server binary; the
// images export SERVING_BIN only in /root/.bashrc, which no container command reads.
const DefaultServingBin = "/usr/local/serving_bin/serving"

// Options are one launch.
type Options struct {
	Bin string // the server binary (SERVING_BIN), DefaultServingBin if empty
	// ModelURL is a .tar.gz of the serving model folder. With IDPlaceholder in it, the
	// launcher follows the cube: CubeStatus is then required.
	ModelURL string
	// CubeStatus is the cube's transfer's status URL (ctr_cube's transfer_url + /status).
	CubeStatus string
	// StatusListen, if set, is where GET /status answers the launcher's State.
	StatusListen string
	// ReloadIntervalSeconds is the server's reload check (its -reload_interval_s; 0: its
	// default, 10 s).
	ReloadIntervalSeconds int
	// Dir is the server's working directory: the workdir ("workdir"), the unpacked models
	// ("models") and the server's log/ go below it.
	Dir      string
	CubeConf string // path of cube.conf; empty serves without the cube
	Port     int
	Threads  int
	GPUIDs   []int32
	// Poll is how often the launcher asks for a first model, and for the cube's version.
	Poll          time.Duration
	MaxModelBytes int64
	HTTP          *http.Client
	Log           *slog.Logger
	Stdout        io.Writer // the server's output
	Stderr        io.Writer
}

// Defaults of cube serving's flags. Following the cube, a new version's dense model serves
// within DefaultPoll + DefaultReloadInterval (plus its download and load) of the cube serving
// it; each poll is one GET of the transfer's /status, which asks every replica.
const (
	DefaultPoll           = 3 * time.Second
	DefaultReloadInterval = 2 * time.Second
)

// ParseGPUIDs parses a comma-separated list of GPU ids ("0,1"); empty is none (the CPU).
func ParseGPUIDs(s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%q is not a GPU id", f)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// The folders below Dir.
const (
	Workdir   = "workdir"
	modelsDir = "models"
)

// Run waits for the first model, writes the working directory and runs the server until it
// exits or ctx ends (then the server gets SIGTERM and Run waits for it). Following the cube,
// it puts each served version's dense model in place while the server runs. It returns the
// server's exit status: 128+N when a signal N ended it, ExitRestart when a new model needs
// a new server.
func Run(ctx context.Context, o Options) (int, error) {
	if o.Bin == "" {
		o.Bin = DefaultServingBin
	}
	if _, err := os.Stat(o.Bin); err != nil {
		return 1, fmt.Errorf("the Paddle Serving binary %s: %w (set SERVING_BIN to the image's server binary; nothing is downloaded)", o.Bin, err)
	}
	if o.follows() && o.CubeStatus == "" {
		return 1, fmt.Errorf("the model URL has %s: the cube's status URL is required to know which version to fetch", IDPlaceholder)
	}
	var cubeConf []byte
	if o.CubeConf != "" {
		b, err := os.ReadFile(o.CubeConf)
		if err != nil {
			return 1, fmt.Errorf("cube.conf: %w", err)
		}
		cubeConf = b
	}
	st := &status{}
	if o.StatusListen != "" {
		stop, err := serveStatus(o.StatusListen, st)
		if err != nil {
			return 1, err
		}
		defer stop()
	}
	client := o.HTTP
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Minute}
	}
	url, id := o.ModelURL, ""
	if o.follows() {
		st.set(State{Phase: PhaseWaitingForCube})
		var err error
		if id, err = waitForServedID(ctx, o, client); err != nil {
			return 1, err
		}
		url = o.modelURL(id)
	}
	st.set(State{Phase: PhaseWaitingForModel, ModelID: id})
	model, err := waitForModel(ctx, o, client, url)
	if err != nil {
		return 1, err
	}
	conf, err := servingconf.ReadModelConf(model)
	if err != nil {
		return 1, err
	}
	rel, err := filepath.Rel(o.Dir, model)
	if err != nil {
		return 1, err
	}
	so := servingconf.Options{Workdir: Workdir, ModelDir: rel, Port: o.Port, Threads: o.Threads, CubeConf: cubeConf,
		Model: conf, CombinedModel: combined(model), GPUIDs: o.GPUIDs, ReloadIntervalSeconds: o.ReloadIntervalSeconds}
	if err := servingconf.Write(o.Dir, so); err != nil {
		return 1, fmt.Errorf("write the server's configuration: %w", err)
	}
	if err := touch(filepath.Join(model, servingconf.TimestampFile)); err != nil {
		return 1, err
	}
	st.set(State{Phase: PhaseServing, ModelID: id, Since: time.Now()})
	sctx, stopServer := context.WithCancel(ctx)
	defer stopServer()
	followed := make(chan error, 1)
	if o.follows() {
		go func() {
			err := follow(sctx, o, client, model, id, st)
			followed <- err
			if err != nil {
				o.Log.Error("stopping Paddle Serving", "err", err)
				stopServer()
			}
		}()
	}
	code, err := runServer(sctx, o, servingconf.Command(o.Bin, so))
	stopServer()
	if o.follows() {
		if ferr := <-followed; ferr != nil && ctx.Err() == nil {
			if errors.Is(ferr, errRestart) {
				return ExitRestart, nil
			}
			return 1, ferr
		}
	}
	if err == nil && code != 0 {
		o.Log.Error("Paddle Serving exited; its own log above says why", "status", code)
	}
	return code, err
}

// serveStatus answers GET /status with the launcher's State on addr until stop.
func serveStatus(addr string, st *status) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("status listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+api.LauncherStatusPath, st)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { srv.Close() }, nil
}

func (o Options) poll() time.Duration {
	if o.Poll <= 0 {
		return DefaultPoll
	}
	return o.Poll
}

func (o Options) maxModelBytes() int64 {
	if o.MaxModelBytes <= 0 {
		return DefaultMaxModelBytes
	}
	return o.MaxModelBytes
}

// waitForModel fetches the model at url, asking again every Poll while there is none yet.
func waitForModel(ctx context.Context, o Options, client *http.Client, url string) (string, error) {
	started := time.Now()
	for attempt := 1; ; attempt++ {
		model, err := FetchModel(ctx, client, url, filepath.Join(o.Dir, modelsDir), o.maxModelBytes())
		switch {
		case err == nil:
			o.Log.Info("model unpacked", "url", url, "dir", model)
			return model, nil
		case errors.Is(err, ErrNoModel):
			if attempt == 1 || attempt%6 == 0 {
				o.Log.Info("waiting for the first model: the server starts once the trainer has published one", "url", url, "waited", time.Since(started).Round(time.Second).String())
			}
		default:
			o.Log.Warn("could not fetch the model; trying again", "url", url, "err", err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(o.poll()):
		}
	}
}

// combined says whether the model's parameters are one file (what the engine's
// combined_model means): a *.pdiparams, __params__ or params file beside the program.
func combined(model string) bool {
	entries, _ := os.ReadDir(model)
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && (filepath.Ext(n) == ".pdiparams" || n == "__params__" || n == "params") {
			return true
		}
	}
	return false
}

// runServer runs the command in Dir, passes ctx's end on as SIGTERM, and returns its status.
func runServer(ctx context.Context, o Options, argv []string) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = o.Dir, o.Stdout, o.Stderr
	o.Log.Info("starting Paddle Serving", "cmd", argv, "dir", o.Dir)
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		o.Log.Info("stopping Paddle Serving (SIGTERM)")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err = <-done
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	default:
		return 1, err
	}
}

// touch creates path or moves its mtime to now.
func touch(path string) error {
	now := time.Now()
	if err := os.Chtimes(path, now, now); err == nil {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return f.Close()
}
