// Package bench compares a cube server (over baidu_std) with Redis (MGET)
// on the same keys, values, batches and client connections.
package bench

import (
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

// Options configure a run. Zero values take the documented defaults.
type Options struct {
	Against   string        // only "redis"
	Keys      int           // distinct keys; if 0, 1,000,000
	ValueSize int           // bytes per value; if 0, 40
	Batch     int           // keys per request; if 0, 1,000
	Duration  time.Duration // per system; if 0, 10s
	Conns     int           // client connections; if 0, 8
	// CubeBinary is the cube executable started as "cube server" (a separate
	// process, like Redis). If empty, os.Executable().
	CubeBinary string
	// RedisServer is the redis-server executable; if empty, looked up in PATH.
	RedisServer string
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

// Result is one system's figures.
type Result struct {
	Name       string
	Requests   int64
	Keys       int64
	Elapsed    time.Duration
	P50, P99   time.Duration
	CPUSeconds float64 // server process user+system time during the run
	Errors     int64
	Mismatches int64
	ServerPID  int
}

// KeysPerSec is the throughput in keys.
func (r Result) KeysPerSec() float64 { return float64(r.Keys) / r.Elapsed.Seconds() }

// ReqPerSec is the throughput in requests.
func (r Result) ReqPerSec() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// CPUPerMKey is server CPU seconds per million keys.
func (r Result) CPUPerMKey() float64 { return r.CPUSeconds / (float64(r.Keys) / 1e6) }

func (o *Options) defaults() error {
	if o.Against == "" {
		o.Against = "redis"
	}
	if o.Against != "redis" {
		return fmt.Errorf("--against %q: only redis is supported", o.Against)
	}
	if o.Conns <= 0 {
		o.Conns = 8
	}
	if err := o.workload(1_000_000, 10*time.Second); err != nil {
		return err
	}
	if o.RedisServer == "" {
		p, err := exec.LookPath("redis-server")
		if err != nil {
			return errors.New("redis-server not found in PATH: run `make deps` (it calls cube/scripts/install-redis.sh, which installs Debian's redis-server)")
		}
		o.RedisServer = p
	}
	return nil
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

// Run prepares data, starts both servers on 127.0.0.1, drives them one after
// the other and prints the comparison to w.
func Run(ctx context.Context, o Options, w io.Writer) error {
	if err := o.defaults(); err != nil {
		return err
	}
	work, done, err := workDir(o.WorkDir, "cube-bench-")
	if err != nil {
		return err
	}
	defer done()
	fmt.Fprintf(w, "cube bench: %d keys x %d B values, batch %d, %d connections, %s per system, GOMAXPROCS %d\n",
		o.Keys, o.ValueSize, o.Batch, o.Conns, o.Duration, runtime.GOMAXPROCS(0))

	data := filepath.Join(work, "data")
	t0 := time.Now()
	version, err := prepare(work, data, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "prepared SequenceFile input and built version %s in %.1fs\n", version, time.Since(t0).Seconds())

	inproc, err := inProcessRate(filepath.Join(data, version, layout.ShardFile(0)), o)
	if err != nil {
		return err
	}

	cube, err := startCube(ctx, o, data)
	if err != nil {
		return err
	}
	defer cube.stop()
	cubeRes, err := drive(ctx, o, "cube (baidu_std)", cube.pid(), cubeWorker(cube.addr, o))
	if err != nil {
		return err
	}
	cube.stop()

	redis, err := startRedis(ctx, o, work)
	if err != nil {
		return err
	}
	defer redis.stop()
	t0 = time.Now()
	if err := loadRedis(redis.addr, o); err != nil {
		return err
	}
	fmt.Fprintf(w, "loaded %d keys into redis-server in %.1fs\n", o.Keys, time.Since(t0).Seconds())
	redisRes, err := drive(ctx, o, "redis (MGET)", redis.pid(), redisWorker(redis.addr, o))
	if err != nil {
		return err
	}
	redis.stop()

	report(w, o, cubeRes, redisRes, inproc)
	if cubeRes.Errors+cubeRes.Mismatches+redisRes.Errors+redisRes.Mismatches > 0 {
		return fmt.Errorf("errors or wrong values: cube %d/%d, redis %d/%d",
			cubeRes.Errors, cubeRes.Mismatches, redisRes.Errors, redisRes.Mismatches)
	}
	return nil
}

func report(w io.Writer, o Options, c, r Result, inproc float64) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\t\n", c.Name, r.Name)
	fmt.Fprintf(tw, "requests/s\t%.0f\t%.0f\t\n", c.ReqPerSec(), r.ReqPerSec())
	fmt.Fprintf(tw, "keys/s\t%.0f\t%.0f\t\n", c.KeysPerSec(), r.KeysPerSec())
	fmt.Fprintf(tw, "p50 latency\t%s\t%s\t\n", c.P50.Round(time.Microsecond), r.P50.Round(time.Microsecond))
	fmt.Fprintf(tw, "p99 latency\t%s\t%s\t\n", c.P99.Round(time.Microsecond), r.P99.Round(time.Microsecond))
	fmt.Fprintf(tw, "server CPU s\t%.2f\t%.2f\t\n", c.CPUSeconds, r.CPUSeconds)
	fmt.Fprintf(tw, "server CPU s/Mkey\t%.4f\t%.4f\t\n", c.CPUPerMKey(), r.CPUPerMKey())
	fmt.Fprintf(tw, "errors\t%d\t%d\t\n", c.Errors+c.Mismatches, r.Errors+r.Mismatches)
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "in-process dictionary lookups: %.0f keys/s (best of 3 x 1s, %d goroutines, LookupBatch of %d keys, values copied)\n", inproc, runtime.GOMAXPROCS(0), o.Batch)
	fmt.Fprintf(w, "cube RPC keys/s = %.1f%% of the in-process rate (client and server share the same %d CPUs)\n", 100*c.KeysPerSec()/inproc, runtime.NumCPU())
	fmt.Fprintf(w, "cube server keys per CPU-second = %.0f (in-process: %.0f per CPU-second)\n", 1e6/c.CPUPerMKey(), inproc/float64(runtime.GOMAXPROCS(0)))
	fmt.Fprintf(w, "ratio keys_per_s=%.2f\n", c.KeysPerSec()/r.KeysPerSec())
	fmt.Fprintf(w, "ratio cpu_per_mkey=%.3f\n", c.CPUPerMKey()/r.CPUPerMKey())
}

// prepare writes the keys as a Paddle-layout SequenceFile and builds one
// shard from it with the real builder.
func prepare(work, data string, o Options) (string, error) {
	in := filepath.Join(work, "input")
	if err := os.MkdirAll(in, 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(filepath.Join(in, "part-00000"))
	if err != nil {
		return "", err
	}
	sw, err := seqfile.NewWriter(f, [16]byte{'c', 'u', 'b', 'e', 'b', 'e', 'n', 'c', 'h'})
	if err != nil {
		f.Close()
		return "", err
	}
	v := make([]byte, o.ValueSize)
	for k := 0; k < o.Keys; k++ {
		if err := sw.Append(uint64(k), value(v, uint64(k))); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := sw.Close(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	m, err := build.Build(build.Options{Input: in, Output: data, Shards: 1, Dict: "bench", Log: o.Log})
	if err != nil {
		return "", err
	}
	return m.Version, nil
}

// inProcessRate measures batched lookups (LookupBatch, copying every value,
// as the server does) on the dictionary loaded as the server loads it, with
// GOMAXPROCS goroutines: the ceiling any RPC path can reach. It reports the
// best of three one-second rounds, so neighbours' noise lowers the RPC
// share rather than flattering it.
func inProcessRate(path string, o Options) (float64, error) {
	d, err := dict.Open(path, dict.Options{InMemory: o.InMemory})
	if err != nil {
		return 0, err
	}
	defer d.Close()
	best := 0.0
	for round := 0; round < 3; round++ {
		best = max(best, lookupRound(d, o, uint64(round)))
	}
	return best, nil
}

func lookupRound(d *dict.Dict, o Options, round uint64) float64 {
	var total atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	start := time.Now()
	for g := 0; g < runtime.GOMAXPROCS(0); g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, round))
			keys := make([]uint64, o.Batch)
			buf := make([]byte, 0, o.Batch*(o.ValueSize+8))
			n := int64(0)
			for time.Now().Before(deadline) {
				for i := range keys {
					keys[i] = rng.Uint64N(uint64(o.Keys))
				}
				buf = buf[:0]
				d.LookupBatch(keys, func(_ int, v []byte, _ bool) { buf = append(buf, v...) })
				n += int64(o.Batch)
			}
			total.Add(n)
		}(uint64(g))
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

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
				if v.Status != 0 || len(v.Value) != o.ValueSize || binary.LittleEndian.Uint64(v.Value) != keys[i] {
					bad++
				}
			}
			return bad, nil
		}, func() { c.Close() }, nil
	}
}

func redisWorker(addr string, o Options) worker {
	return func(int) (func([]uint64) (int, error), func(), error) {
		c, err := dialRedis(addr)
		if err != nil {
			return nil, nil, err
		}
		return func(keys []uint64) (int, error) {
			bad := 0
			err := c.mget(keys, func(i int, v []byte) {
				if len(v) != o.ValueSize || binary.LittleEndian.Uint64(v) != keys[i] {
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
	res.CPUSeconds = cpu1 - cpu0
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

func ioReadFull(r io.Reader, b []byte) (int, error) { return io.ReadFull(r, b) }
