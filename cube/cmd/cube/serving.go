package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/launch"
)

// runServing is the serving pod's command: Paddle Serving's C++ server without Python.
func runServing(fs flagSet, stdout, stderr io.Writer) error {
	var o launch.Options
	fs.StringVar(&o.ModelURL, "model-url", os.Getenv("MODEL_URL"), "`URL` of a .tar.gz of the serving model folder (default $MODEL_URL); a 404 means no model yet: the launcher waits. "+
		"With "+launch.IDPlaceholder+" in it, the launcher follows the cube: the model of the donefile id the cube serves, each new one put in place for the server's reload")
	fs.StringVar(&o.CubeStatus, "cube-status", os.Getenv("CUBE_STATUS_URL"), "the cube transfer's status `URL` (ctr_cube's transfer_url + /status; default $CUBE_STATUS_URL): which version the cube serves")
	fs.StringVar(&o.StatusListen, "status-listen", "", "`address` where GET /status answers the launcher's phase and the dense model's id (empty: none)")
	fs.IntVar(&o.ReloadIntervalSeconds, "reload-interval", int(launch.DefaultReloadInterval/time.Second), "the server's reload check in `seconds` (its -reload_interval_s): how soon a dense model put in place serves")
	fs.StringVar(&o.CubeConf, "cube-conf", os.Getenv("CUBE_CONF"), "cube.conf `file` (default $CUBE_CONF); empty serves without the cube")
	fs.StringVar(&o.Bin, "serving-bin", os.Getenv("SERVING_BIN"), "the Paddle Serving server `binary` (default $SERVING_BIN, else "+launch.DefaultServingBin+"); it is never downloaded")
	fs.StringVar(&o.Dir, "dir", "/serving", "the server's working `directory`: its configuration, the unpacked model and its logs go below it")
	fs.IntVar(&o.Port, "port", 8010, "`port` the server listens on")
	fs.IntVar(&o.Threads, "thread", 4, "server threads `N`")
	gpus := fs.String("gpu-ids", "", "comma-separated GPU `ids` for the engine; empty runs on the CPU")
	fs.DurationVar(&o.Poll, "poll", launch.DefaultPoll, "how often to ask for the first model, and (following the cube) which version the cube serves")
	fs.Int64Var(&o.MaxModelBytes, "max-model-bytes", launch.DefaultMaxModelBytes, "largest unpacked model in `bytes`")
	newLogger := logFlag(fs, logLevelHelp)
	if err := fs.parse(); err != nil {
		return err
	}
	if o.ModelURL == "" {
		return errors.New("--model-url (or $MODEL_URL) is required: the serving model's .tar.gz")
	}
	ids, err := launch.ParseGPUIDs(*gpus)
	if err != nil {
		return fmt.Errorf("--gpu-ids: %w", err)
	}
	o.GPUIDs = ids
	o.Log = newLogger(stderr)
	o.Stdout, o.Stderr = stdout, stderr
	var code int
	err = interruptible(func(ctx context.Context) (err error) {
		code, err = launch.Run(ctx, o)
		return err
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return exitStatus(code)
	}
	return nil
}
