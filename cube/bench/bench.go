// Package bench compares a cube server (over baidu_std) with its peers,
// Redis (MGET) and memcached (multi-get), on the same keys, values, batches,
// client connections and CPUs.
package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
)

// Peers are the systems cube bench can compare against, in the order they run.
var Peers = []string{"redis", "memcached"}

// DefaultConns is the load generator's connections, one request in flight
// on each. With 8, a server core idled whenever the load generator was
// descheduled for a moment (on the 2-core machine, 34-45% of the in-process
// rate against 52-56% with 16, and fewer CPU-seconds per key, as reads
// more often find the next request waiting); every system gets the same.
const DefaultConns = 16

// Options configure a run. Zero values take the documented defaults.
type Options struct {
	// Against names the peers, comma-separated, from Peers; if "", all.
	Against   string
	Keys      int           // distinct keys; if 0, 1,000,000
	ValueSize int           // bytes per value; if 0, 40
	Batch     int           // keys per request; if 0, 1,000
	Duration  time.Duration // per system and run; if 0, 10s
	Conns     int           // client connections; if 0, DefaultConns
	Runs      int           // runs per system, alternating between systems; if 0, 5
	// ServerCPUs is the CPU list (taskset's syntax) every server runs on, and
	// ClientCPUs the load generator's; NoPinning leaves a side unpinned. If
	// "", DefaultPinning's.
	ServerCPUs, ClientCPUs string
	// CubeBinary is the cube executable started as "cube server" (a separate
	// process, like the peers). If empty, os.Executable().
	CubeBinary string
	// RedisServer and MemcachedServer are the peers' executables; if empty,
	// looked up in PATH.
	RedisServer, MemcachedServer string
	// InMemory runs the server with --in-memory, and measures the in-process
	// rate on a dictionary loaded the same way.
	InMemory bool
	// ServerArgs are extra flags for "cube server" (e.g. --cpuprofile).
	ServerArgs []string
	// WorkDir holds the generated data; if empty, a temporary directory that
	// is removed afterwards.
	WorkDir string
	Log     *slog.Logger
}

// Result is one system's figures in one run.
type Result struct {
	Name       string
	Requests   int64
	Keys       int64
	Elapsed    time.Duration
	P50, P99   time.Duration
	CPUSeconds float64 // server process user+system time during the run
	// ClientCPUSeconds is the load generator's own user+system time during
	// the run: a slow client on one side shows here.
	ClientCPUSeconds float64
	Errors           int64
	Mismatches       int64
	ServerPID        int
}

// KeysPerSec is the throughput in keys.
func (r Result) KeysPerSec() float64 { return float64(r.Keys) / r.Elapsed.Seconds() }

// ReqPerSec is the throughput in requests.
func (r Result) ReqPerSec() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// CPUPerMKey is server CPU seconds per million keys.
func (r Result) CPUPerMKey() float64 { return r.CPUSeconds / (float64(r.Keys) / 1e6) }

// ClientCPUPerReq is the load generator's CPU microseconds per request.
func (r Result) ClientCPUPerReq() float64 { return 1e6 * r.ClientCPUSeconds / float64(r.Requests) }

func (o *Options) defaults() ([]string, error) {
	peers, err := parsePeers(o.Against)
	if err != nil {
		return nil, err
	}
	if o.Conns <= 0 {
		o.Conns = DefaultConns
	}
	if o.Runs <= 0 {
		o.Runs = 5
	}
	server, client := DefaultPinning()
	if o.ServerCPUs == "" {
		o.ServerCPUs = server
	}
	if o.ClientCPUs == "" {
		o.ClientCPUs = client
	}
	for _, l := range []string{o.ServerCPUs, o.ClientCPUs} {
		if _, err := parseCPUList(l); err != nil {
			return nil, err
		}
	}
	if err := o.workload(1_000_000, 10*time.Second); err != nil {
		return nil, err
	}
	for _, p := range peers {
		exe, name := &o.RedisServer, "redis-server"
		if p == "memcached" {
			exe, name = &o.MemcachedServer, "memcached"
		}
		if *exe == "" {
			if *exe, err = exec.LookPath(name); err != nil {
				return nil, fmt.Errorf("%s not found in PATH: run `make deps` (it calls cube/scripts/install-peers.sh, which installs Debian's redis-server and memcached)", name)
			}
		}
	}
	return peers, nil
}

// parsePeers parses --against: names from Peers, comma-separated.
func parsePeers(s string) ([]string, error) {
	if s == "" {
		return Peers, nil
	}
	var peers []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(Peers, p) {
			return nil, fmt.Errorf("--against %q: peers are %s, comma-separated", s, strings.Join(Peers, ","))
		}
		if !slices.Contains(peers, p) {
			peers = append(peers, p)
		}
	}
	return peers, nil
}

// workload applies the defaults every benchmark of a cube server shares:
// keys (if 0) and measuring time (if 0) as given, 40-byte values, batches of
// 1,000 keys, a silent log, this binary as the server.
func (o *Options) workload(keys int, d time.Duration) error {
	if o.Keys <= 0 {
		o.Keys = keys
	}
	if o.ValueSize <= 0 {
		o.ValueSize = 40
	}
	if o.ValueSize < 8 {
		return errors.New("--value-size must be at least 8 (values carry their key for checking)")
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.Duration <= 0 {
		o.Duration = d
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return selfBinary(&o.CubeBinary)
}

// selfBinary fills an unset path to the cube binary with this executable: the cube binary
// runs its own benchmarks.
func selfBinary(path *string) error {
	if *path != "" {
		return nil
	}
	exe, err := os.Executable()
	*path = exe
	return err
}

// workDir returns dir, or else a new temporary directory that done removes.
func workDir(dir, prefix string) (work string, done func(), err error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	if work, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	return work, func() { _ = os.RemoveAll(work) }, nil
}

// value is the benchmark value of key k: the key, then filler.
func value(buf []byte, k uint64) []byte {
	binary.LittleEndian.PutUint64(buf, k)
	for i := 8; i < len(buf); i++ {
		buf[i] = byte(k) + byte(i)
	}
	return buf
}

// valueOK tells whether v is key k's benchmark value (by size and key).
func valueOK(v []byte, k uint64, size int) bool {
	return len(v) == size && binary.LittleEndian.Uint64(v) == k
}

// system is one server under test: its process, how to drive it, and its
// results run by run.
type system struct {
	name   string
	proc   *proc
	worker worker
	runs   []Result
}

// Run prepares data, measures the in-process lookup rate on the server
// CPUs, starts cube and every peer on 127.0.0.1 pinned to the server CPUs,
// drives them from this process pinned to the client CPUs in o.Runs rounds
// (each round drives every system in turn, the first one rotating), and
// prints the medians side by side.
func Run(ctx context.Context, o Options, w io.Writer) error {
	peers, err := o.defaults()
	if err != nil {
		return err
	}
	serverCPUs, _ := parseCPUList(o.ServerCPUs)
	clientCPUs, _ := parseCPUList(o.ClientCPUs)
	cores := len(serverCPUs)
	if cores == 0 {
		cores = runtime.NumCPU()
	}
	work, done, err := workDir(o.WorkDir, "cube-bench-")
	if err != nil {
		return err
	}
	defer done()
	fmt.Fprintf(w, "cube bench: %d keys x %d B values, batch %d, %d connections, %d alternating runs x %s per system\n",
		o.Keys, o.ValueSize, o.Batch, o.Conns, o.Runs, o.Duration)
	fmt.Fprintf(w, "machine: %d CPUs, %s; servers on CPUs %s, load generator on CPUs %s (taskset)\n",
		runtime.NumCPU(), cpuModel(), o.ServerCPUs, o.ClientCPUs)
	fmt.Fprintf(w, "at the start: %s\n", machineLoad())

	data := filepath.Join(work, "data")
	t0 := time.Now()
	version, err := prepare(work, data, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "prepared SequenceFile input and built version %s in %.1fs\n", version, time.Since(t0).Seconds())

	// The in-process rate is measured once a round, just before that round's
	// cube run, so that a neighbour's load weighs on both alike; a first
	// round pages the dictionary in.
	inproc, err := openInProcess(filepath.Join(data, version, layout.ShardFile(0)), o, serverCPUs)
	if err != nil {
		return err
	}
	defer inproc.Close()
	if _, err := inproc.measure(clientCPUs); err != nil {
		return err
	}
	defer func() { _ = pinSelf(nil) }()

	var systems []*system
	defer func() {
		for _, s := range systems {
			s.proc.stop()
		}
	}()
	cube, err := startCube(ctx, o, data)
	if err != nil {
		return err
	}
	systems = append(systems, &system{name: "cube (baidu_std)", proc: cube, worker: cubeWorker(cube.addr, o)})
	fmt.Fprintf(w, "cube server: pid %d, GOMAXPROCS %d (its CPUs)\n", cube.pid(), cores)
	for _, p := range peers {
		s, err := startPeer(ctx, w, p, o, work, cores)
		if s != nil {
			systems = append(systems, s)
		}
		if err != nil {
			return err
		}
	}
	var rates []float64 // in-process, one per round
	for run := 0; run < o.Runs; run++ {
		for j := range systems {
			s := systems[(run+j)%len(systems)]
			if s == systems[0] {
				rate, err := inproc.measure(clientCPUs)
				if err != nil {
					return err
				}
				rates = append(rates, rate)
			}
			res, err := drive(ctx, o, s.name, s.proc.pid(), s.worker)
			if err != nil {
				return err
			}
			s.runs = append(s.runs, res)
		}
	}
	for _, s := range systems {
		s.proc.stop()
	}
	fmt.Fprintf(w, "at the end: %s\n", machineLoad())
	report(w, o, systems, rates, serverCPUs, clientCPUs)
	var bad []string
	for _, s := range systems {
		var e, m int64
		for _, r := range s.runs {
			e, m = e+r.Errors, m+r.Mismatches
		}
		if e+m > 0 {
			bad = append(bad, fmt.Sprintf("%s %d errors, %d wrong values", s.name, e, m))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// startPeer starts peer p on the server CPUs and loads every key into it.
func startPeer(ctx context.Context, w io.Writer, p string, o Options, work string, cores int) (*system, error) {
	if p == "redis" {
		return redisServer(o, work, cores).start(ctx, o, w)
	}
	return memcachedServer(o, cores).start(ctx, o, w)
}

// programVersion is the first line a program prints for its version flag.
func programVersion(exe, flag string) string {
	out, err := exec.Command(exe, flag).Output()
	if err != nil {
		return "version unknown"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// prepare writes the keys as a Paddle-layout SequenceFile and builds one
// shard from it with the real builder.
func prepare(work, data string, o Options) (string, error) {
	in := filepath.Join(work, "input")
	if _, err := writeInput(in, o.Keys, o.ValueSize); err != nil {
		return "", err
	}
	m, err := build.Build(build.Options{Input: in, Output: data, Shards: 1, Dict: "bench", Log: o.Log})
	if err != nil {
		return "", err
	}
	return m.Version, nil
}

// writeInput writes keys 0..n-1 with their benchmark values as one
// Paddle-layout SequenceFile part in dir, and returns its size in bytes.
func writeInput(dir string, n, valueSize int) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(filepath.Join(dir, "part-00000"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	sw, err := seqfile.NewWriter(bw, [16]byte{'c', 'u', 'b', 'e', 'b', 'e', 'n', 'c', 'h'})
	if err != nil {
		return 0, err
	}
	v := make([]byte, valueSize)
	for k := 0; k < n; k++ {
		if err := sw.Append(uint64(k), value(v, uint64(k))); err != nil {
			return 0, err
		}
	}
	if err := sw.Close(); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Close()
}
