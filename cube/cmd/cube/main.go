// Command cube builds, serves and queries cube dictionaries, Paddle
// Serving's sparse-parameter store. Run "cube help" for the subcommands.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/server"
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
		{"model", "write a synthetic model as a trainer would (SequenceFiles + a donefile line): a smoke test without Paddle", runModel},
		{"seek", "look keys up through cube.conf or one server", runSeek},
		{"bench", "benchmark a cube server against Redis MGET and memcached multi-get, pinned; \"bench scale\" how costs grow, \"bench rollout\" rollouts under load, \"bench hostile\" latency under hostile connections, \"bench export\" the model-output step against table size", runBench},
		{"demo", "run the whole pipeline on this machine: data, file server, transfer, shards, lookups, a rollout under load", runDemo},
		{"version", "print the version", runVersion},
	}
}

func main() {
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
			switch {
			case err == nil || errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
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

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: cube <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n\nRun \"cube <command> --help\" for a command's flags.\n", "help", "show this help, or a command's with \"cube help <command>\"")
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

// inputFlags are how the builder reads its input, for both `cube build`
// and the builds of `cube transfer`.
func inputFlags(fs *flag.FlagSet, seq *seqfile.Options, allowEmpty *bool) {
	fs.BoolVar(&seq.KeyBigEndian, "key-big-endian", false, "decode 12-byte BytesWritable keys as big-endian (Java order) instead of little-endian")
	fs.IntVar(&seq.MaxRecord, "max-record", seqfile.DefaultMaxRecord, "largest record in `bytes`, as stored and once decompressed (also each key and value of a block)")
	fs.IntVar(&seq.MaxBlock, "max-block", seqfile.DefaultMaxBlock, "largest decompressed block of a block-compressed file in `bytes` (a build holds up to about twice this at once)")
	fs.BoolVar(allowEmpty, "allow-empty", false, "publish a model even if the input holds no record at all (every key would miss); refused by default")
}

func runBuild(args []string, stdout, stderr io.Writer) error {
	fs := flags("build", "--input DIR --output DIR --shards N --dict NAME [--base VERSION]", stdout, stderr)
	var o build.Options
	fs.StringVar(&o.Input, "input", "", "SequenceFile `file or directory` (part files, read recursively; names starting with . or _ are skipped)")
	fs.StringVar(&o.Output, "output", "", "`directory` of published versions; the new one appears there as <version>/ by rename")
	fs.IntVar(&o.Shards, "shards", 0, "number of shards `N`; a key goes to shard key % N")
	fs.StringVar(&o.Dict, "dict", "", "dictionary `name` (cube.conf dict_name)")
	fs.StringVar(&o.Base, "base", "", "make a delta: the base `VERSION` under --output that this input patches (upsert)")
	fs.StringVar(&o.Version, "version", "", "version name (default <unix seconds>, or <depend>_<unix seconds> for a delta)")
	inputFlags(fs, &o.Seq, &o.AllowEmpty)
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parse(fs, args); err != nil {
		return err
	}
	o.Log = logger(stderr, *logLevel)
	m, err := build.Build(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", m.Version)
	return nil
}

func runServer(args []string, stdout, stderr io.Writer) error {
	fs := flags("server", "--data DIR --shard I --listen HOST:PORT", stdout, stderr)
	var o server.Options
	fs.StringVar(&o.DataDir, "data", "", "`directory` of published versions; the newest complete one holding the shard is served")
	fs.IntVar(&o.Shard, "shard", 0, "shard index `I` to serve")
	listen := fs.String("listen", "127.0.0.1:8027", "`HOST:PORT` for baidu_std and HTTP")
	fs.IntVar(&o.MaxFrameSize, "max-frame-size", 64<<20, "largest baidu_std frame body in `bytes`")
	fs.IntVar(&o.MaxKeys, "max-keys", 0, "refuse seek requests with more keys (baidu_std: error 1003 EREQUEST, not retried by brpc; HTTP: 400); 0 = no limit, as Paddle's cube")
	fs.IntVar(&o.MaxConns, "max-conns", 10_000, "most concurrent client connections")
	fs.Int64Var(&o.MaxInflightBytes, "max-inflight-bytes", 256<<20, "most `bytes` of baidu_std frame bodies being read and served across all connections, beyond 16 KiB each; a frame over it closes its connection")
	fs.DurationVar(&o.HeaderTimeout, "header-timeout", 10*time.Second, "a new connection's first bytes and an HTTP request's header must arrive within this")
	fs.DurationVar(&o.ReadTimeout, "read-timeout", 30*time.Second, "a baidu_std frame (or an HTTP request with its body) must arrive within this once its first byte has")
	fs.DurationVar(&o.WriteTimeout, "write-timeout", 30*time.Second, "a response must be written within this")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", 5*time.Minute, "close a connection that sends no request for this long")
	fs.IntVar(&o.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest HTTP request header in `bytes`")
	fs.IntVar(&o.MaxValueSize, "max-value-size", 0, "answer values larger than this many `bytes` as misses (1024 = Paddle's cube; 0 = no limit)")
	fs.BoolVar(&o.InMemory, "in-memory", false, "copy dictionaries into huge-page-backed memory instead of serving them from a read-only file mapping")
	tokenFile := fs.String("control-token-file", "", "require \"Authorization: Bearer <token>\" on /ControlService/cmd and /agent/*, the token read from this `file` or from $CUBE_CONTROL_TOKEN (default: no auth on /ControlService/cmd, as Paddle's agent expects)")
	fs.BoolVar(&o.Agent, "agent", false, "enable the rollout agent (/agent/prepare, commit, abort, status) on the same port; needs a control token and --source-url")
	fs.StringVar(&o.SourceURL, "source-url", "", "the agent downloads only from URLs below this `URL` (the transfer's --public-url + /files/)")
	fs.Int64Var(&o.DiskReserve, "disk-reserve", 64<<20, "free `bytes` the agent keeps on --data beyond a download (refuses prepare otherwise)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this `file` until the server stops (for benchmarking)")
	if err := parse(fs, args); err != nil {
		return err
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	if o.DataDir == "" {
		return errors.New("--data is required")
	}
	tok, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	o.ControlToken = tok
	o.Log = logger(stderr, *logLevel)
	srv, err := server.New(o) // load problems are logged; an empty shard still serves
	if srv == nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	o.Log.Info("listening", "addr", ln.Addr().String(), "shard", o.Shard, "version", version)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		srv.Close()
		return err
	case <-ctx.Done():
	}
	o.Log.Info("shutting down: finishing requests in flight (at most 10s)")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	return err
}

// readToken reads the control token from file, else from
// $CUBE_CONTROL_TOKEN (a mounted Secret either way); "" if neither is set.
func readToken(file string) (string, error) { return readSecret(file, "CUBE_CONTROL_TOKEN") }

// readSecret reads a token from file, else from the environment variable
// env; "" if neither is set. An empty file is an error (a Secret mounted
// without its key), not "no token".
func readSecret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token file %q is empty", file)
		}
		return tok, nil
	}
	return strings.TrimSpace(os.Getenv(env)), nil
}

func runSeek(args []string, stdout, stderr io.Writer) error {
	fs := flags("seek", "(--conf cube.conf [--dict NAME] | --addr HOST:PORT) [--first N] [--check G] KEY...", stdout, stderr)
	conf := fs.String("conf", "", "Paddle Serving `cube.conf` to route keys by key % shard")
	dict := fs.String("dict", "", "dict_name in --conf (default: the first entry)")
	addr := fs.String("addr", "", "ask the one server at `HOST:PORT` (all keys)")
	timeout := fs.Duration("timeout", 3*time.Second, "overall timeout")
	format := fs.String("format", "base64", "value format: base64, hex, or float32 (little-endian floats, as Paddle's embeddings)")
	first := fs.Int("first", 0, "also look up keys 0..`N`-1")
	check := fs.Int("check", 0, "check every value is what `cube model --gen G` wrote for its key; print only the keys that are not, and a summary (exit 1 if any)")
	forDur := fs.Duration("for", 0, "instead: look random keys of 0..--first-1 up for this `duration` (e.g. during a rollout), checking every key is found with a well-formed `cube model` value and no response mixes versions; print a summary (exit 1 on any failure)")
	ready := fs.Duration("ready-within", time.Minute, "with --for (and with --conf when given): before the clock starts, or before a one-shot lookup, wait up to this `duration` until cube.conf's names resolve and every shard answers once (a cube whose Services just appeared may not be in the cluster DNS yet); not counted as failures")
	workers := fs.Int("workers", 4, "with --for: concurrent lookups")
	batch := fs.Int("batch", 100, "with --for: keys per lookup")
	valueSize := fs.Int("value-size", pipeline.DefaultValueSize, "with --for: `bytes` per value (cube model --value-size)")
	dns := fs.String("dns", "", "resolve cube.conf's names with the DNS server at `HOST:PORT` (a cluster's DNS, from outside its pods) instead of the system's")
	domain := fs.String("dns-domain", "cluster.local", "with --dns: the cluster `domain` appended to names that lack it, as a pod's search path does (cube.conf names are like shard.namespace.svc)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dns != "" {
		client.LookupHost = clusterLookup(resolverAt(*dns), *domain)
	}
	if (*conf == "") == (*addr == "") {
		fmt.Fprintln(stderr, "exactly one of --conf and --addr is required")
		return errUsage
	}
	if *forDur > 0 {
		return seekFor(stdout, *conf, *dict, *addr, *first, *forDur, *ready, *workers, *batch, *valueSize, *timeout)
	}
	var keys []uint64
	for k := range *first {
		keys = append(keys, uint64(k))
	}
	for _, a := range fs.Args() {
		k, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return fmt.Errorf("key %q: not a uint64", a)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		fmt.Fprintln(stderr, "no keys given")
		return errUsage
	}
	render, ok := valueFormats[*format]
	if !ok {
		fmt.Fprintf(stderr, "--format %q: want base64, hex or float32\n", *format)
		return errUsage
	}
	dc, err := seekConf(*conf, *dict, *addr, *timeout)
	if err != nil {
		return err
	}
	readyGiven := false
	fs.Visit(func(f *flag.Flag) { readyGiven = readyGiven || f.Name == "ready-within" })
	if readyGiven && *conf != "" {
		took, err := waitAnswering(dc, dc.Shard, *ready)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "# every shard answers (after %.1fs)\n", took.Seconds())
	}
	cl, err := client.New(dc)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, ver, err := cl.Seek(ctx, keys)
	fmt.Fprintf(stdout, "# version %s\n", ver)
	if *check > 0 {
		return checkValues(stdout, keys, res, byte(*check), err)
	}
	for i, r := range res {
		switch {
		case r.Failed:
			fmt.Fprintf(stdout, "%d\tFAILED\n", keys[i])
		case r.Status == proto.StatusMiss:
			fmt.Fprintf(stdout, "%d\tMISS\n", keys[i])
		default:
			fmt.Fprintf(stdout, "%d\t%s\n", keys[i], render(r.Value))
		}
	}
	return err
}

// clusterLookup resolves a name with r, completing it with the cluster domain first, as a
// pod's search path would ("shard.ns.svc" is "shard.ns.svc.cluster.local").
func clusterLookup(r *net.Resolver, domain string) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, host string) ([]string, error) {
		if domain != "" && net.ParseIP(host) == nil && !strings.HasSuffix(strings.TrimSuffix(host, "."), "."+domain) {
			if addrs, err := r.LookupHost(ctx, strings.TrimSuffix(host, ".")+"."+domain+"."); err == nil {
				return addrs, nil
			}
		}
		return r.LookupHost(ctx, host)
	}
}

// resolverAt is a resolver that asks only the DNS server at addr.
func resolverAt(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// seekConf is the dictionary seek asks: dict (or the first) of the cube.conf at conf, or the
// one server at addr.
func seekConf(conf, dict, addr string, timeout time.Duration) (client.DictConf, error) {
	if conf == "" {
		return client.DictConf{DictName: "direct", Shard: 1, Type: "ipport_list", Timeout: int(timeout.Milliseconds()), Nodes: []client.Node{{IPPortList: addr}}}, nil
	}
	confs, err := client.LoadConf(conf)
	if err != nil {
		return client.DictConf{}, err
	}
	for _, c := range confs {
		if dict == "" || c.DictName == dict {
			return c, nil
		}
	}
	return client.DictConf{}, fmt.Errorf("dict %q not in %s", dict, conf)
}

// seekFor is seek --for: lookups of random keys through the dictionary for d, then a summary.
func seekFor(stdout io.Writer, conf, dict, addr string, keys int, d, ready time.Duration, workers, batch, valueSize int, timeout time.Duration) error {
	if keys < 1 {
		return errors.New("--for needs --first N: the keys 0..N-1 to look up")
	}
	dc, err := seekConf(conf, dict, addr, timeout)
	if err != nil {
		return err
	}
	took, err := waitAnswering(dc, keys, ready)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "every shard answers (after %s); looking up for %s\n", took.Round(time.Millisecond), d)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	st, err := pipeline.Loader{Conf: dc, Keys: keys, ValueSize: valueSize}.Run(ctx, workers, batch)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d lookups of %d keys in %s: %d failed, %d mixing versions (%d first answers disagreed and were re-asked)\n",
		st.Requests, batch, d, st.Failed, st.Mixed, st.FirstMixed)
	if st.Failed > 0 || st.Mixed > 0 {
		return fmt.Errorf("%d failed lookups, %d mixing versions; first failure: %s", st.Failed, st.Mixed, st.FirstErr)
	}
	return nil
}

// waitAnswering waits up to within until the names of dc resolve and one lookup of a key
// of every shard (keys 0..shards-1 of the first keys) succeeds, and says how long it took.
func waitAnswering(dc client.DictConf, keys int, within time.Duration) (time.Duration, error) {
	start := time.Now()
	probe := make([]uint64, min(keys, max(dc.Shard, 1)))
	for i := range probe {
		probe[i] = uint64(i)
	}
	for {
		err := func() error {
			cl, err := client.New(dc)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, _, err = cl.Seek(ctx, probe)
			return err
		}()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start)+time.Second > within {
			return 0, fmt.Errorf("the cube did not answer within %s (--ready-within): %w", within, err)
		}
		time.Sleep(time.Second)
	}
}

// checkValues reports every key whose value is not what `cube model --gen
// gen` wrote, and fails if there is one.
func checkValues(w io.Writer, keys []uint64, res []client.Result, gen byte, seekErr error) error {
	bad := 0
	for i, r := range res {
		var why string
		switch {
		case r.Failed:
			why = "FAILED"
		case !r.Found():
			why = "MISS"
		case !bytes.Equal(r.Value, pipeline.Value(keys[i], gen, len(r.Value))):
			why = "WRONG " + hex.EncodeToString(r.Value)
		default:
			continue
		}
		bad++
		fmt.Fprintf(w, "%d\t%s\n", keys[i], why)
	}
	if bad > 0 || seekErr != nil {
		return errors.Join(fmt.Errorf("%d of %d keys do not hold generation %d", bad, len(keys), gen), seekErr)
	}
	fmt.Fprintf(w, "checked %d keys: every value is generation %d's\n", len(keys), gen)
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
