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

// A command is one of cube's subcommands: "cube <name> [flags]".
type command struct {
	name     string
	summary  string // its line in "cube help"
	synopsis string // what follows "Usage: cube <name>" in its help
	// run declares the command's flags on fs (named "cube <name>"), parses them and runs.
	run func(fs flagSet, stdout, stderr io.Writer) error
	// subs are the commands "cube <name> <sub>" runs instead, with flags of their own.
	subs []command
	// operands: the command takes arguments after its flags (keys, a file, server flags
	// after "--"); any other command refuses them.
	operands bool
}

// call runs c, or the sub that args name, with the rest of args.
func (c command) call(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		if sub, ok := find(c.subs, args[0]); ok {
			sub.name = c.name + " " + sub.name
			return sub.call(args[1:], stdout, stderr)
		}
	}
	return c.run(flagSet{flags(c.name, c.synopsis, stdout, stderr), args, c}, stdout, stderr)
}

// find returns the command of cs called name.
func find(cs []command, name string) (command, bool) {
	for _, c := range cs {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commands() []command {
	return []command{
		{name: "build", summary: "turn SequenceFiles into shard dictionaries and publish a version",
			synopsis: "--input DIR --output DIR --shards N --dict NAME [--base VERSION]", run: runBuild},
		{name: "server", summary: "serve one shard over baidu_std and HTTP on one port",
			synopsis: "--data DIR --shard I --listen HOST:PORT", run: runServer},
		{name: "transfer", summary: "watch a donefile, build, and roll versions out to every replica in two phases",
			synopsis: "--donefile URL --dict NAME --shard-replicas I=HOST:PORT,... --work DIR --listen HOST:PORT --control-token-file FILE --public-url URL", run: runTransfer},
		{name: "fileserver", summary: "serve a model-output directory over HTTP (listings, HEAD, Range)",
			synopsis: "--root DIR --listen HOST:PORT [--upload --upload-token-file FILE | --upload --upload-insecure]", run: runFileserver},
		{name: "export", summary: "the model-output step: turn what Paddle saved (LoDTensor, combined params, SelectedRows, parameter-server table shards) into the cube's input and a donefile line, all or nothing",
			synopsis: "--format F --in PATH --out DIR [--var NAME] [--program FILE] [--id ID] [--patch-of BASE_ID] [--watch]", run: runExport},
		{name: "install", summary: "copy this binary into a directory (a serving pod's init container: Paddle's image then runs DIR/cube serving)",
			synopsis: "DIR", run: runInstall, operands: true},
		{name: "serving", summary: "run Paddle Serving's server binary for the CTR model and the cube without Python: wait for the model, write the server's configuration, pass SIGTERM on, exit with its status",
			synopsis: "--model-url URL [--cube-conf FILE] [--port N]", run: runServing},
		{name: "predict", summary: "send sample lines (ElasticCTR's or raw Criteo) to Paddle Serving's GeneralModelService over baidu_std or HTTP and print each line's click probability",
			synopsis: "--addr ADDR --conf FILE [--format elasticctr --slots FILE | --format criteo] [FILE]", run: runPredict, operands: true},
		{name: "model", summary: "write a synthetic model as a trainer would (SequenceFiles + a donefile line): a smoke test without Paddle",
			synopsis: "--out DIR [--id ID] [--keys N] [--value-size B] [--gen G] [--patch-of BASE_ID]", run: runModel},
		{name: "seek", summary: "look keys up through cube.conf or one server",
			synopsis: "(--conf cube.conf [--dict NAME] | --addr HOST:PORT) [--first N] [--check G] KEY...", run: runSeek, operands: true},
		{name: "bench", summary: "benchmark a cube server against Redis MGET and memcached multi-get, pinned; \"bench scale\" how costs grow, \"bench rollout\" rollouts under load, \"bench hostile\" latency under hostile connections, \"bench export\" the model-output step against table size",
			synopsis: "--against redis,memcached --keys N --value-size B --batch K --duration D --runs R", run: runBench, subs: benchCommands},
		{name: "demo", summary: "run the whole pipeline on this machine: data, file server, transfer, shards, lookups, a rollout under load",
			synopsis: "[--shards S --replicas R --keys N] [--conf cube.conf]", run: runDemo},
		{name: "version", summary: "print the version",
			synopsis: "", run: runVersion},
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
	if c, ok := find(commands(), args[0]); ok {
		err := c.call(args[1:], stdout, stderr)
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

// flagSet is a command's flags, which it declares, and the arguments they are parsed from.
type flagSet struct {
	*flag.FlagSet
	args []string
	cmd  command
}

// parse parses the command's arguments; a bad one is errUsage (the FlagSet has said why),
// and so is an argument after the flags of a command that takes none.
func (fs flagSet) parse() error {
	if err := fs.Parse(fs.args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 && !fs.cmd.operands {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q: it takes flags only", fs.Name(), fs.Arg(0))
		if len(fs.cmd.subs) > 0 {
			names := make([]string, len(fs.cmd.subs))
			for i, sub := range fs.cmd.subs {
				names[i] = sub.name
			}
			fmt.Fprintf(fs.Output(), ", or one of its commands first: %s", strings.Join(names, ", "))
		}
		fmt.Fprintln(fs.Output())
		return errUsage
	}
	return nil
}

// logLevelHelp is --log-level's help where the whole command logs.
const logLevelHelp = "log level: debug, info, warn, error"

// logFlag declares --log-level (default info); the logger it makes writes JSON lines to w
// at that level.
func logFlag(fs flagSet, help string) (newLogger func(w io.Writer) *slog.Logger) {
	level := fs.String("log-level", "info", help)
	return func(w io.Writer) *slog.Logger {
		var l slog.Level
		_ = l.UnmarshalText([]byte(*level))
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
	}
}

func runVersion(fs flagSet, stdout, stderr io.Writer) error {
	if err := fs.parse(); err != nil {
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
