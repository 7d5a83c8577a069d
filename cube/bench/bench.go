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
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
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
	if o.CubeBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.CubeBinary = exe
	}
	return nil
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
	t0 := time.Now()
	switch p {
	case "redis":
		threads := redisIOThreads(cores)
		pr, err := startRedis(ctx, o, work, threads)
		if err != nil {
			return nil, err
		}
		s := &system{name: "redis (MGET)", proc: pr, worker: peerWorker(func() (*redisConn, error) { return dialRedis(pr.addr) }, o)}
		if err := loadRedis(pr.addr, o); err != nil {
			return s, err
		}
		fmt.Fprintf(w, "redis: %s, io-threads %d (redis.conf: I/O threads only from 4 cores up); loaded %d keys in %.1fs\n",
			programVersion(o.RedisServer, "--version"), threads, o.Keys, time.Since(t0).Seconds())
		return s, nil
	default:
		pr, err := startMemcached(ctx, o, cores)
		if err != nil {
			return nil, err
		}
		s := &system{name: "memcached (get)", proc: pr, worker: peerWorker(func() (*memcachedConn, error) { return dialMemcached(pr.addr) }, o)}
		if err := loadMemcached(pr.addr, o); err != nil {
			return s, err
		}
		fmt.Fprintf(w, "memcached: %s, -t %d (one worker thread per core, as its manual advises), -m %d; loaded %d keys in %.1fs\n",
			programVersion(o.MemcachedServer, "-V"), memcachedThreads(cores), memcachedMemoryMB(o), o.Keys, time.Since(t0).Seconds())
		return s, nil
	}
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

// spread is a figure over runs: the median and the range.
type spread struct{ med, lo, hi float64 }

// spreadOfValues sorts v and returns its median and range.
func spreadOfValues(v []float64) spread {
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{m, v[0], v[len(v)-1]}
}

func (s spread) format(verb string, scale float64) string {
	f := func(x float64) string { return fmt.Sprintf(verb, x/scale) }
	return fmt.Sprintf("%s [%s-%s]", f(s.med), f(s.lo), f(s.hi))
}

// row is one line of the comparison: a label, a figure of a run, and how
// to print it.
type row struct {
	label string
	f     func(Result) float64
	verb  string
	scale float64
}

var rows = []row{
	{"requests/s", Result.ReqPerSec, "%.0f", 1},
	{"keys/s", Result.KeysPerSec, "%.2fM", 1e6},
	{"p50 latency", func(r Result) float64 { return r.P50.Seconds() }, "%.3fms", 1e-3},
	{"p99 latency", func(r Result) float64 { return r.P99.Seconds() }, "%.3fms", 1e-3},
	{"server CPU s/Mkey", Result.CPUPerMKey, "%.4f", 1},
	{"load generator CPU us/request", Result.ClientCPUPerReq, "%.1f", 1},
}

func report(w io.Writer, o Options, systems []*system, rates []float64, serverCPUs, clientCPUs []int) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "median [min-max] of %d runs\t", o.Runs)
	for _, s := range systems {
		fmt.Fprintf(tw, "%s\t", s.name)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t", r.label)
		for _, s := range systems {
			fmt.Fprintf(tw, "%s\t", spreadOf(s.runs, r.f).format(r.verb, r.scale))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "errors\t")
	for _, s := range systems {
		n := int64(0)
		for _, r := range s.runs {
			n += r.Errors + r.Mismatches
		}
		fmt.Fprintf(tw, "%d\t", n)
	}
	fmt.Fprintln(tw)
	_ = tw.Flush()
	fmt.Fprintln(w)

	c := systems[0]
	keys := spreadOf(c.runs, Result.KeysPerSec)
	cpu := spreadOf(c.runs, Result.CPUPerMKey)
	in := spreadOfValues(slices.Clone(rates))
	share := make([]float64, len(rates)) // each cube run against the in-process round just before it
	for i, r := range rates {
		share[i] = 100 * c.runs[i].KeysPerSec() / r
	}
	sh := spreadOfValues(share)
	cores := len(serverCPUs)
	if cores > 0 {
		fmt.Fprintf(w, "in-process dictionary lookups: %s keys/s on the %d server CPU(s) %s (one 1s round before each cube run, %d goroutine(s), LookupBatch of %d keys drawn beforehand, values copied)\n",
			in.format("%.2fM", 1e6), cores, cpuList(serverCPUs), cores, o.Batch)
		fmt.Fprintf(w, "cube RPC keys/s = %s of the in-process rate on the same server CPU(s) (each run against the round before it; load generator on CPUs %s)\n",
			sh.format("%.1f%%", 1), cpuList(clientCPUs))
	} else {
		cores = runtime.NumCPU()
		fmt.Fprintf(w, "in-process dictionary lookups: %s keys/s (one 1s round before each cube run, %d goroutines, LookupBatch of %d keys drawn beforehand, values copied)\n",
			in.format("%.2fM", 1e6), runtime.GOMAXPROCS(0), o.Batch)
		fmt.Fprintf(w, "cube RPC keys/s = %s of the in-process rate (each run against the round before it; client and server share the same %d CPUs)\n",
			sh.format("%.1f%%", 1), runtime.NumCPU())
	}
	fmt.Fprintf(w, "cube server keys per CPU-second = %.2fM (in-process: %.2fM per CPU-second)\n", 1/cpu.med, in.med/1e6/float64(cores))
	if len(systems) < 2 {
		return
	}
	// The best peer on each axis: the most keys/s, the least CPU per key.
	fast, lean := systems[1], systems[1]
	for _, s := range systems[2:] {
		if spreadOf(s.runs, Result.KeysPerSec).med > spreadOf(fast.runs, Result.KeysPerSec).med {
			fast = s
		}
		if spreadOf(s.runs, Result.CPUPerMKey).med < spreadOf(lean.runs, Result.CPUPerMKey).med {
			lean = s
		}
	}
	fmt.Fprintf(w, "ratios of medians, cube against the best peer: keys/s against %s, server CPU per key against %s\n", fast.name, lean.name)
	fmt.Fprintf(w, "ratio keys_per_s=%.2f\n", keys.med/spreadOf(fast.runs, Result.KeysPerSec).med)
	fmt.Fprintf(w, "ratio cpu_per_mkey=%.3f\n", cpu.med/spreadOf(lean.runs, Result.CPUPerMKey).med)
}

// cpuList prints cpus as taskset's list.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, ",")
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

// inProcess measures batched lookups (LookupBatch, copying every value, as
// the server does) on the dictionary loaded as the server loads it: the
// ceiling any RPC path can reach. With server CPUs given, each round runs
// pinned to them with one goroutine per CPU (what the server has); without,
// on every CPU with GOMAXPROCS goroutines.
type inProcess struct {
	d     *dict.Dict
	o     Options
	cpus  []int // the server CPUs; nil: unpinned
	round uint64
}

// It opens the file as the server does, verification included: that pass
// touches every record, so the mapping's pages are in place before the
// first round, as they are in the server.
func openInProcess(path string, o Options, serverCPUs []int) (*inProcess, error) {
	d, err := dict.Open(path, dict.Options{InMemory: o.InMemory})
	if err != nil {
		return nil, err
	}
	return &inProcess{d: d, o: o, cpus: serverCPUs}, nil
}

func (p *inProcess) Close() error { return p.d.Close() }

// measure runs one one-second round and leaves this process pinned to back
// (nil: every CPU).
func (p *inProcess) measure(back []int) (float64, error) {
	if len(p.cpus) > 0 {
		if err := pinSelf(p.cpus); err != nil {
			return 0, err
		}
	}
	p.round++
	rate := lookupRound(p.d, p.o, p.round)
	if len(p.cpus) > 0 || len(back) > 0 {
		if err := pinSelf(back); err != nil {
			return 0, err
		}
	}
	return rate, nil
}

// inProcessRate is the median of three rounds after a warm-up round.
func inProcessRate(path string, o Options, serverCPUs []int) (float64, error) {
	p, err := openInProcess(path, o, serverCPUs)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	rates := make([]float64, 4)
	for i := range rates {
		if rates[i], err = p.measure(nil); err != nil {
			return 0, err
		}
	}
	return spreadOfValues(rates[1:]).med, nil
}

// lookupRound runs LookupBatch for one second on every GOMAXPROCS and returns
// keys/s. The random keys are drawn before the clock starts (a ring of
// inProcessKeys per goroutine, reused batch after batch), so the rate is of
// lookups and copies alone.
func lookupRound(d *dict.Dict, o Options, round uint64) float64 {
	procs := runtime.GOMAXPROCS(0)
	rings := make([][]uint64, procs)
	for g := range rings {
		rng := rand.New(rand.NewPCG(uint64(g), round))
		rings[g] = make([]uint64, max(inProcessKeys/o.Batch, 1)*o.Batch)
		for i := range rings[g] {
			rings[g][i] = rng.Uint64N(uint64(o.Keys))
		}
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	start := time.Now()
	for _, ring := range rings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, o.Batch*(o.ValueSize+8))
			n := int64(0)
			for off := 0; time.Now().Before(deadline); off = (off + o.Batch) % len(ring) {
				buf = buf[:0]
				d.LookupBatch(ring[off:off+o.Batch], func(_ int, v []byte, _ bool) { buf = append(buf, v...) })
				n += int64(o.Batch)
			}
			total.Add(n)
		}()
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// inProcessKeys is about the keys in each in-process ring: 8 MiB of keys,
// far more distinct keys than a cache holds lines.
const inProcessKeys = 1 << 20

// worker issues one request of keys and checks the values; it returns the
// number of wrong values.
type worker func(conn int) (func(keys []uint64) (int, error), func(), error)

func cubeWorker(addr string, o Options) worker {
	return func(int) (func([]uint64) (int, error), func(), error) {
		c, err := client.Dial(addr, time.Second)
		if err != nil {
			return nil, nil, err
		}
		return func(keys []uint64) (int, error) {
			vals, _, err := c.Seek(keys, false, time.Now().Add(10*time.Second))
			if err != nil {
				return 0, err
			}
			bad := 0
			for i, v := range vals {
				if v.Status != 0 || !valueOK(v.Value, keys[i], o.ValueSize) {
					bad++
				}
			}
			return bad, nil
		}, func() { c.Close() }, nil
	}
}

// mgetConn is a peer's connection: a multi-key get, each value handed to fn by index.
type mgetConn interface {
	mget(keys []uint64, fn func(i int, v []byte)) error
	Close() error
}

// peerWorker drives a peer (Redis MGET, memcached multi-get) over connections dial opens,
// counting the values that are not what the key holds.
func peerWorker[C mgetConn](dial func() (C, error), o Options) worker {
	return func(int) (func([]uint64) (int, error), func(), error) {
		c, err := dial()
		if err != nil {
			return nil, nil, err
		}
		return func(keys []uint64) (int, error) {
			bad := 0
			err := c.mget(keys, func(i int, v []byte) {
				if !valueOK(v, keys[i], o.ValueSize) {
					bad++
				}
			})
			return bad, err
		}, func() { c.Close() }, nil
	}
}

// drive runs o.Conns connections against one server for o.Duration.
func drive(ctx context.Context, o Options, name string, pid int, newWorker worker) (Result, error) {
	res := Result{Name: name, ServerPID: pid}
	type connStats struct {
		lat              []time.Duration
		reqs, keys, errs int64
		bad              int64
	}
	stats := make([]connStats, o.Conns)
	workers := make([]func([]uint64) (int, error), o.Conns)
	for i := range workers {
		wk, closeFn, err := newWorker(i)
		if err != nil {
			return res, fmt.Errorf("%s: connect: %w", name, err)
		}
		defer closeFn()
		workers[i] = wk
	}
	// Warm up (page in the dictionary, grow buffers) for a tenth of the run.
	warm := min(o.Duration/10, 2*time.Second)
	runFor(ctx, workers, o, warm, nil)
	cpu0, err := processCPU(pid)
	if err != nil {
		return res, err
	}
	self0, err := processCPU(os.Getpid())
	if err != nil {
		return res, err
	}
	start := time.Now()
	runFor(ctx, workers, o, o.Duration, func(i int, lat time.Duration, keys int, bad int, err error) {
		s := &stats[i]
		if err != nil {
			s.errs++
			return
		}
		s.reqs++
		s.keys += int64(keys)
		s.bad += int64(bad)
		s.lat = append(s.lat, lat)
	})
	res.Elapsed = time.Since(start)
	cpu1, err := processCPU(pid)
	if err != nil {
		return res, err
	}
	self1, err := processCPU(os.Getpid())
	if err != nil {
		return res, err
	}
	res.CPUSeconds = cpu1 - cpu0
	res.ClientCPUSeconds = self1 - self0
	var all []time.Duration
	for _, s := range stats {
		res.Requests += s.reqs
		res.Keys += s.keys
		res.Errors += s.errs
		res.Mismatches += s.bad
		all = append(all, s.lat...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		res.P50 = all[len(all)*50/100]
		res.P99 = all[min(len(all)-1, len(all)*99/100)]
	}
	return res, nil
}

func runFor(ctx context.Context, workers []func([]uint64) (int, error), o Options, d time.Duration,
	record func(i int, lat time.Duration, keys, bad int, err error)) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, wk := range workers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(d)))
			keys := make([]uint64, o.Batch)
			errs := 0
			for ctx.Err() == nil && time.Now().Before(deadline) && errs < 10 {
				for j := range keys {
					keys[j] = rng.Uint64N(uint64(o.Keys))
				}
				t := time.Now()
				bad, err := wk(keys)
				if err != nil {
					errs++
				}
				if record != nil {
					record(i, time.Since(t), len(keys), bad, err)
				}
			}
		}(i)
	}
	wg.Wait()
}

// loadRedis writes every key with pipelined MSETs of 1,000 keys.
func loadRedis(addr string, o Options) error {
	c, err := dialRedis(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, o.ValueSize)
	keys := make([]uint64, 0, 1000)
	pending := 0
	flush := func() error {
		if err := c.bw.Flush(); err != nil {
			return err
		}
		for ; pending > 0; pending-- {
			if err := c.simple(); err != nil {
				return err
			}
		}
		return nil
	}
	for k := 0; k < o.Keys; k++ {
		keys = append(keys, uint64(k))
		if len(keys) == cap(keys) || k == o.Keys-1 {
			c.mset(keys, func(k uint64) []byte { return value(buf, k) })
			keys = keys[:0]
			if pending++; pending == 16 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}
