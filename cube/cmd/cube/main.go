// Command cube builds, serves and queries cube dictionaries, Paddle
// Serving's sparse-parameter store. Run "cube help" for the subcommands.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/elasticctr/terraform-provider-ctr/cube/servingstandin"
)

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"build", "turn SequenceFiles into shard dictionaries and publish a version", runBuild},
		{"server", "serve one shard over baidu_std and HTTP on one port", runServer},
		{"transfer", "watch a donefile, build, and roll versions out to every replica in two phases", runTransfer},
		{"fileserver", "serve a model-output directory over HTTP (listings, HEAD, Range)", runFileserver},
		{"export", "the model-output step: turn what Paddle saved (LoDTensor, combined params, SelectedRows, parameter-server table shards) into the cube's input and a donefile line, all or nothing", runExport},
		{"install", "copy this binary into a directory (a serving pod's init container: Paddle's image then runs DIR/cube serving)", runInstall},
		{"serving", "run Paddle Serving's server binary for the CTR model and the cube without Python: wait for the model, write the server's configuration, pass SIGTERM on, exit with its status", runServing},
		{"predict", "send sample lines (ElasticCTR's or raw Criteo) to Paddle Serving's GeneralModelService over baidu_std or HTTP and print each line's click probability", runPredict},
		{"model", "write a synthetic model as a trainer would (SequenceFiles + a donefile line): a smoke test without Paddle", runModel},
		{"seek", "look keys up through cube.conf or one server", runSeek},
		{"bench", "benchmark a cube server against Redis MGET and memcached multi-get, pinned; \"bench scale\" how costs grow, \"bench rollout\" rollouts under load, \"bench hostile\" latency under hostile connections, \"bench export\" the model-output step against table size", runBench},
		{"demo", "run the whole pipeline on this machine: data, file server, transfer, shards, lookups, a rollout under load", runDemo},
		{"version", "print the version", runVersion},
	}
}

func main() {
	// Started as servingstandin.BinaryName (a link to this binary where SERVING_BIN points),
	// it is the tests' stand-in for Paddle Serving's server, taking that binary's flags.
	if filepath.Base(os.Args[0]) == servingstandin.BinaryName {
		os.Exit(servingstandin.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(args[1:], stdout, stderr)
			var status exitStatus
			switch {
			case err == nil || errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			case errors.As(err, &status):
				return int(status)
			}
			fmt.Fprintf(stderr, "cube %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "cube: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

var errUsage = errors.New("usage")

// exitStatus ends a command with that status and no message of its own: the process it
// stands for (Paddle Serving's server) has said why.
type exitStatus int

func (e exitStatus) Error() string { return "exit status " + strconv.Itoa(int(e)) }

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: cube <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n\nRun \"cube <command> --help\" for a command's flags.\n", "help", "show this help, or a command's with \"cube help <command>\"")
	fmt.Fprintf(w, "\nStarted under the name %q (a link to it), the binary is a stand-in for Paddle Serving's\nserver that keeps its rules: the tests run it where Paddle's images cannot.\n", servingstandin.BinaryName)
}

// flags makes a FlagSet whose errors and help go to stderr/stdout.
func flags(name, synopsis string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("cube "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "Usage: cube %s %s\n", name, synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(stdout, "\nFlags:\n")
			fs.PrintDefaults()
		}
		fs.SetOutput(stderr)
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

func logger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flags("version", "", stdout, stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cube %s\n", version)
	return nil
}

var valueFormats = map[string]func([]byte) string{
	"base64": base64.StdEncoding.EncodeToString,
	"hex":    hex.EncodeToString,
	"float32": func(b []byte) string {
		if len(b)%4 != 0 {
			return "(" + strconv.Itoa(len(b)) + " bytes, not float32s) " + hex.EncodeToString(b)
		}
		parts := make([]string, len(b)/4)
		for i := range parts {
			parts[i] = strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))), 'g', -1, 32)
		}
		return strings.Join(parts, " ")
	},
}

// startCPUProfile writes a CPU profile to path until stop is called; an empty path profiles
// nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
