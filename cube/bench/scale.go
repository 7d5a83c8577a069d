package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/procstat"
	"github.com/elasticctr/terraform-provider-ctr/cube/transfer"
)

// ScaleOptions configure RunScale. Zero values take the documented defaults.
type ScaleOptions struct {
	// Sizes are the records built and then served as one shard; if nil,
	// 1M, 10M and 50M.
	Sizes []int
	// Shards are the shard counts of the rollout table; if nil, 2, 4, 8, 16.
	Shards []int
	// RolloutKeys is the keys per version of the rollout table; if 0, 1M.
	RolloutKeys int
	// Replicas per shard in the rollout table; if 0, 2.
	Replicas int
	// Rollouts measured per shard count, after the first version; if 0, 3.
	Rollouts int
	// HealInterval is the transfer's --heal-interval; if 0, its default.
	HealInterval time.Duration
	// Scale multiplies Sizes and RolloutKeys, for quick runs (make bench's
	// BENCH_SCALE); if 0, 1. No size goes below 10,000.
	Scale float64
	// DeltaBase is the keys of the delta table's base; if 0,
	// DefaultDeltaBase. Scale applies to it.
	DeltaBase int
	// Duration of the lookups measured per size; if 0, 3s.
	Duration time.Duration
	// Batch and Conns of the lookups; if 0, 1,000 keys and DefaultConns.
	Batch, Conns int
	// Memory lists how each size is served (and measured in-process):
	// MemoryMapped, the file mapping (cube server's default), and
	// MemoryHugePages, a copy in huge-page memory (--in-memory); if nil, both.
	Memory []string
	// ServerCPUs (builder and server) and ClientCPUs (load generator), as in
	// Options.
	ServerCPUs, ClientCPUs string
	// CubeBinary is run as "cube build", "cube server" and the rollout's
	// processes; if empty, os.Executable().
	CubeBinary string
	// WorkDir holds the generated data; if empty, a temporary directory.
	WorkDir string
	// Tables selects "size" (build and lookups against the size),
	// "rollout" (rollout and heal against shards) and "delta" (patches as
	// full rebuilds and as layers); if nil, all.
	Tables []string
}

// The memory modes of ScaleOptions.Memory.
const (
	MemoryMapped    = "mapped"
	MemoryHugePages = "in-memory"
)

// DefaultScaleSizes are the keys per shard of the size tables: 100M only
// where memory allows (see fitsInMemory).
func DefaultScaleSizes() []int { return []int{1_000_000, 10_000_000, 50_000_000, 100_000_000} }

// valueSize is the value size of every scaling table: Paddle's demos use
// 40-byte values (10 float32).
const valueSize = 40

func (o *ScaleOptions) defaults() error {
	if o.Scale <= 0 {
		o.Scale = 1
	}
	scale := func(n int) int { return max(10_000, int(float64(n)*o.Scale)) }
	if o.Sizes == nil {
		o.Sizes = DefaultScaleSizes()
	}
	for i := range o.Sizes {
		o.Sizes[i] = scale(o.Sizes[i])
	}
	if o.Shards == nil {
		o.Shards = []int{2, 4, 8, 16}
	}
	o.RolloutKeys = scale(cmp.Or(o.RolloutKeys, 1_000_000))
	o.DeltaBase = scale(cmp.Or(o.DeltaBase, DefaultDeltaBase))
	o.Replicas = cmp.Or(o.Replicas, 2)
	o.Rollouts = cmp.Or(o.Rollouts, 3)
	if o.HealInterval <= 0 {
		o.HealInterval = transfer.DefaultHealInterval
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	o.Batch = cmp.Or(o.Batch, 1000)
	o.Conns = cmp.Or(o.Conns, DefaultConns)
	server, client := DefaultPinning()
	o.ServerCPUs = cmp.Or(o.ServerCPUs, server)
	o.ClientCPUs = cmp.Or(o.ClientCPUs, client)
	for _, l := range []string{o.ServerCPUs, o.ClientCPUs} {
		if _, err := parseCPUList(l); err != nil {
			return err
		}
	}
	if o.Memory == nil {
		o.Memory = []string{MemoryMapped, MemoryHugePages}
	}
	for _, m := range o.Memory {
		if m != MemoryMapped && m != MemoryHugePages {
			return fmt.Errorf("memory %q: the modes are %s and %s", m, MemoryMapped, MemoryHugePages)
		}
	}
	if o.Tables == nil {
		o.Tables = []string{"size", "rollout", "delta"}
	}
	for _, t := range o.Tables {
		if t != "size" && t != "rollout" && t != "delta" {
			return fmt.Errorf("table %q: the tables are size, rollout and delta", t)
		}
	}
	return selfBinary(&o.CubeBinary)
}

// RunScale prints how the costs grow: build time and memory against the
// input size, lookup rate and latency against the keys per shard, and
// rollout and heal time against the shard count.
func RunScale(ctx context.Context, o ScaleOptions, w io.Writer) error {
	if err := o.defaults(); err != nil {
		return err
	}
	work, done, err := workDir(o.WorkDir, "cube-bench-scale-")
	if err != nil {
		return err
	}
	defer done()
	fmt.Fprintf(w, "cube bench scale: %d-byte values; machine: %d CPUs, %s; builder and server on CPUs %s, load generator on CPUs %s (taskset)\n",
		valueSize, runtime.NumCPU(), cpuModel(), o.ServerCPUs, o.ClientCPUs)
	fmt.Fprintf(w, "at the start: %s\n", machineLoad())
	defer func() { fmt.Fprintf(w, "at the end: %s\n", machineLoad()) }()
	if slices.Contains(o.Tables, "size") {
		if err := sizeTables(ctx, o, work, w); err != nil {
			return err
		}
	}
	if slices.Contains(o.Tables, "rollout") {
		if err := rolloutTable(o, work, w); err != nil {
			return err
		}
	}
	if slices.Contains(o.Tables, "delta") {
		if err := deltaTable(o, work, w); err != nil {
			return fmt.Errorf("delta table: %w", err)
		}
	}
	return nil
}

// sizeRow is what one size measured: its build, then its lookups in each
// memory mode.
type sizeRow struct {
	n                    int
	inputBytes, dictSize int64
	buildWall            time.Duration
	buildCPU             float64
	buildRSSKiB          int64
	serves               []serveRow
}

// serveRow is one size served in one memory mode.
type serveRow struct {
	inMemory     bool
	lookups      Result
	inproc       besideMemory
	serverRSSKiB int64
	serverOpen   time.Duration // from start to listening: map or copy
	checked      time.Duration // from start to every block checked against its checksum
	copied       time.Duration // in memory: from start to serving the huge-page copy
}

func (r serveRow) mode() string {
	if r.inMemory {
		return "huge-page copy"
	}
	return "file mapping"
}

func sizeTables(ctx context.Context, o ScaleOptions, work string, w io.Writer) error {
	serverCPUs, _ := parseCPUList(o.ServerCPUs)
	clientCPUs, _ := parseCPUList(o.ClientCPUs)
	var rows []sizeRow
	for _, n := range o.Sizes {
		if ok, why := fitsInMemory(n); !ok {
			fmt.Fprintf(w, "size %d: skipped: %s\n", n, why)
			continue
		}
		row, err := measureSize(ctx, o, filepath.Join(work, fmt.Sprint(n)), n, serverCPUs, clientCPUs, w)
		if err != nil {
			return fmt.Errorf("%d keys: %w", n, err)
		}
		rows = append(rows, row)
	}
	fmt.Fprintf(w, "\nbuild against input size: cube build, 1 shard, pinned to CPUs %s; peak RSS is the builder's (VmHWM, sampled every 10 ms)\n", o.ServerCPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "records\tinput MB\tseconds\tMB/s\tCPU s\tpeak RSS MiB\tdictionary MiB\tpeak RSS / dictionary\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.0f\t%.2f\t%.0f\t%.0f\t%.2f\t\n", r.n, float64(r.inputBytes)/1e6, r.buildWall.Seconds(),
			float64(r.inputBytes)/1e6/r.buildWall.Seconds(), r.buildCPU, float64(r.buildRSSKiB)/1024, float64(r.dictSize)/(1<<20),
			float64(r.buildRSSKiB<<10)/float64(r.dictSize))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nlookups against keys per shard: cube server on CPUs %s, load generator on CPUs %s, batch %d random keys, %d connections, %s each, once every block is checked;"+
		" memory: the file mapping (4 KiB pages of the page cache) or a huge-page copy (--in-memory);"+
		" in-process: LookupBatch on the server CPUs, median of %d rounds of %s; memory lines/s: random 64-byte lines one server CPU reads from anonymous memory of the dictionary's size in the mode's pages (4 KiB for the file mapping), %d prefetched at a time as LookupBatch does, the most any lookup path reads here, median [range] of rounds taken in turn with the in-process ones (the memory of a VM swings with its host);"+
		" listening: server start to serving from the file mapping; checked: server start to every block checked against its checksum (cube_dict_unchecked_bytes 0), serving nothing unchecked before; GB/s: dictionary bytes / checked;"+
		" in memory: server start to serving the huge-page copy (cube_dict_bytes_in_memory), the file mapping serving until then\n",
		o.ServerCPUs, o.ClientCPUs, o.Batch, o.Conns, o.Duration, besideMemoryRounds, min(time.Second, o.Duration), dict.BatchGroup)
	tw = tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "keys/shard\tmemory\tkeys/s\tp50 ms\tp99 ms\tin-process keys/s\tmemory lines/s\tdictionary B/key\tserver RSS B/key\tlistening s\tchecked s\tGB/s\tin memory s\terrors\t")
	for _, r := range rows {
		for _, v := range r.serves {
			l := v.lookups
			copied := "-"
			if v.inMemory {
				copied = fmt.Sprintf("%.2f", v.copied.Seconds())
			}
			fmt.Fprintf(tw, "%d\t%s\t%.2fM\t%.3f\t%.3f\t%.2fM\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%s\t%d\t\n", r.n, v.mode(), l.KeysPerSec()/1e6, ms(l.P50), ms(l.P99),
				v.inproc.lookups.med/1e6, v.inproc.memory.format("%.1fM", 1e6), float64(r.dictSize)/float64(r.n), float64(v.serverRSSKiB<<10)/float64(r.n), v.serverOpen.Seconds(),
				v.checked.Seconds(), float64(r.dictSize)/1e9/v.checked.Seconds(), copied, l.Errors+l.Mismatches)
		}
	}
	_ = tw.Flush()
	lookupRatios(rows, w)
	for _, r := range rows {
		for _, v := range r.serves {
			if v.lookups.Errors+v.lookups.Mismatches > 0 {
				return fmt.Errorf("%d keys, %s: %d errors, %d wrong values", r.n, v.mode(), v.lookups.Errors, v.lookups.Mismatches)
			}
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// lookupRatios prints how the lookup rate at 50M keys per shard compares
// with 1M, over RPC and in-process, in each memory mode measured at both
// (the huge-page copy first: the mode meant for large shards); then how the
// memory's own rate compares (the bound of any lookup path), and how the
// in-process lookups compare in units of what the memory allowed in the
// same rounds: 1 is as flat as the memory.
func lookupRatios(rows []sizeRow, w io.Writer) {
	at := func(n int, inMemory bool) (serveRow, bool) {
		for _, r := range rows {
			if r.n != n {
				continue
			}
			for _, v := range r.serves {
				if v.inMemory == inMemory {
					return v, true
				}
			}
		}
		return serveRow{}, false
	}
	for _, inMemory := range []bool{true, false} {
		small, ok1 := at(1_000_000, inMemory)
		large, ok2 := at(50_000_000, inMemory)
		if !ok1 || !ok2 {
			continue
		}
		suffix := ""
		if !inMemory {
			suffix = "_mapped"
		}
		fmt.Fprintf(w, "ratio lookups_50m_vs_1m%s=%.2f\n", suffix, large.lookups.KeysPerSec()/small.lookups.KeysPerSec())
		fmt.Fprintf(w, "ratio lookups_inprocess_50m_vs_1m%s=%.2f\n", suffix, large.inproc.lookups.med/small.inproc.lookups.med)
		fmt.Fprintf(w, "ratio memory_50m_vs_1m%s=%.2f\n", suffix, large.inproc.memory.med/small.inproc.memory.med)
		fmt.Fprintf(w, "ratio lookups_per_line_50m_vs_1m%s=%.2f\n", suffix, large.inproc.perLine/small.inproc.perLine)
	}
}

// fitsInMemory reports whether a size's dictionary (about 61 bytes a key)
// fits three times in the memory available now: in the page cache, in the
// in-process measurement's copy beside the memory measure's region of the
// same size (inProcessBesideMemory), and later the server's huge-page copy.
func fitsInMemory(n int) (bool, string) {
	need := int64(n) * 61 * 3
	avail, err := procstat.MemAvailable()
	if err != nil {
		return false, err.Error()
	}
	if avail < need {
		return false, fmt.Sprintf("needs about %.1f GiB of memory, %.1f GiB available", float64(need)/(1<<30), float64(avail)/(1<<30))
	}
	return true, ""
}

// measureSize writes n records, builds them as a child process, then in each
// memory mode measures in-process lookups, serves the dictionary and drives
// lookups; dir is removed afterwards (the largest size takes gigabytes).
func measureSize(ctx context.Context, o ScaleOptions, dir string, n int, serverCPUs, clientCPUs []int, w io.Writer) (sizeRow, error) {
	row := sizeRow{n: n}
	defer os.RemoveAll(dir)
	in, data := filepath.Join(dir, "input"), filepath.Join(dir, "data")
	var err error
	t0 := time.Now()
	if row.inputBytes, err = writeInput(in, n, valueSize); err != nil {
		return row, err
	}
	fmt.Fprintf(w, "size %d: input written in %.1fs; ", n, time.Since(t0).Seconds())
	argv := pinned(o.ServerCPUs, o.CubeBinary, "build", "--input", in, "--output", data, "--shards", "1", "--dict", "bench", "--log-level", "warn")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	var stdout strings.Builder
	cmd.Stdout = &stdout
	start := time.Now()
	if row.buildRSSKiB, err = RunPeakRSS(cmd); err != nil {
		return row, fmt.Errorf("cube build: %w", err)
	}
	row.buildWall = time.Since(start)
	out := stdout.String()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		row.buildCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	shard := filepath.Join(data, strings.TrimSpace(out), layout.ShardFile(0))
	st, err := os.Stat(shard)
	if err != nil {
		return row, err
	}
	row.dictSize = st.Size()
	fmt.Fprintf(w, "built in %.1fs", row.buildWall.Seconds())
	if err := os.RemoveAll(in); err != nil {
		return row, err
	}
	for _, inMemory := range []bool{false, true} {
		if !inMemory && !slices.Contains(o.Memory, MemoryMapped) || inMemory && !slices.Contains(o.Memory, MemoryHugePages) {
			continue
		}
		v, err := serveSize(ctx, o, data, shard, n, inMemory, serverCPUs, clientCPUs)
		if err != nil {
			return row, fmt.Errorf("%s: %w", v.mode(), err)
		}
		fmt.Fprintf(w, "; %s: server listening after %.1fs, every block checked after %.1fs", v.mode(), v.serverOpen.Seconds(), v.checked.Seconds())
		if inMemory {
			fmt.Fprintf(w, ", serving its huge-page copy after %.1fs", v.copied.Seconds())
		}
		row.serves = append(row.serves, v)
	}
	fmt.Fprintln(w)
	return row, nil
}

// serveSize measures one size in one memory mode: in-process, then a
// server driven by the load generator.
func serveSize(ctx context.Context, o ScaleOptions, data, shard string, n int, inMemory bool, serverCPUs, clientCPUs []int) (serveRow, error) {
	v := serveRow{inMemory: inMemory}
	bo := Options{Keys: n, ValueSize: valueSize, Batch: o.Batch, Duration: o.Duration, Conns: o.Conns,
		ServerCPUs: o.ServerCPUs, CubeBinary: o.CubeBinary, InMemory: inMemory}
	if err := bo.workload(n, o.Duration); err != nil {
		return v, err
	}
	var err error
	if v.inproc, err = inProcessBesideMemory(shard, bo, serverCPUs); err != nil {
		return v, err
	}
	if len(clientCPUs) > 0 {
		if err := pinSelf(clientCPUs); err != nil {
			return v, err
		}
		defer func() { _ = pinSelf(nil) }()
	}
	t0 := time.Now()
	srv, err := startCube(ctx, bo, data)
	if err != nil {
		return v, err
	}
	defer srv.stop()
	v.serverOpen = time.Since(t0)
	if err := waitGauge(ctx, srv.addr, "cube_dict_unchecked_bytes", func(n float64) bool { return n == 0 }); err != nil {
		return v, err
	}
	v.checked = time.Since(t0)
	if inMemory {
		st, err := os.Stat(shard)
		if err != nil {
			return v, err
		}
		if err := waitGauge(ctx, srv.addr, "cube_dict_bytes_in_memory", func(n float64) bool { return n >= float64(st.Size()) }); err != nil {
			return v, err
		}
		v.copied = time.Since(t0)
	}
	if v.lookups, err = drive(ctx, bo, "cube", srv.pid(), cubeWorker(srv.addr, bo)); err != nil {
		return v, err
	}
	v.serverRSSKiB, err = procstat.KiB(srv.pid(), "VmRSS")
	return v, err
}

// rolloutRow is one shard count's rollouts.
type rolloutRow struct {
	shards int
	recs   []rolloutRec
	heal   time.Duration
}

// rolloutRec is one rollout: the transfer's record and the benchmark's own
// clock from appending the donefile line to every replica serving.
type rolloutRec struct {
	total, download, build, distrib, load, switchMs, wall float64
}

func rolloutTable(o ScaleOptions, work string, w io.Writer) error {
	var rows []rolloutRow
	for _, s := range o.Shards {
		row, err := measureRollouts(o, filepath.Join(work, fmt.Sprintf("rollout-%d", s)), s)
		if err != nil {
			return fmt.Errorf("%d shards: %w", s, err)
		}
		rows = append(rows, row)
	}
	fmt.Fprintf(w, "\nrollout against shards: donefile line -> every replica serving; %d replicas per shard, %d keys x %d B per version, %d rollouts each after the first version; file server, transfer and servers are real processes on all CPUs (unpinned)\n",
		o.Replicas, o.RolloutKeys, valueSize, o.Rollouts)
	fmt.Fprintf(w, "heal: one replica killed, its disk emptied, restarted; time until the transfer reports it serving the decided version again (--heal-interval %s: a pass finds it, then prepares and switches it)\n", o.HealInterval)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "shards\tservers\ttotal ms median [min-max]\tdownload\tbuild\tdistribution\tload\tswitch\tline->serving ms\theal ms\t\n")
	med := func(recs []rolloutRec, f func(rolloutRec) float64) float64 { return spreadOf(recs, f).med }
	for _, r := range rows {
		t := spreadOf(r.recs, func(x rolloutRec) float64 { return x.total })
		fmt.Fprintf(tw, "%d\t%d\t%.0f [%.0f-%.0f]\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", r.shards, r.shards*o.Replicas, t.med, t.lo, t.hi,
			med(r.recs, func(x rolloutRec) float64 { return x.download }), med(r.recs, func(x rolloutRec) float64 { return x.build }),
			med(r.recs, func(x rolloutRec) float64 { return x.distrib }), med(r.recs, func(x rolloutRec) float64 { return x.load }),
			med(r.recs, func(x rolloutRec) float64 { return x.switchMs }), med(r.recs, func(x rolloutRec) float64 { return x.wall }),
			ms(r.heal))
	}
	_ = tw.Flush()
	if len(rows) > 1 {
		first, last := rows[0], rows[len(rows)-1]
		f := func(x rolloutRec) float64 { return x.total }
		fmt.Fprintf(w, "rollout %d shards / %d shards = %.2fx (median total)\n", last.shards, first.shards,
			spreadOf(last.recs, f).med/spreadOf(first.recs, f).med)
	}
	return nil
}

func measureRollouts(o ScaleOptions, dir string, shards int) (rolloutRow, error) {
	row := rolloutRow{shards: shards}
	defer os.RemoveAll(dir)
	c, err := pipeline.Start(pipeline.Options{Bin: o.CubeBinary, Dir: dir, Shards: shards, Replicas: o.Replicas,
		Keys: o.RolloutKeys, ValueSize: valueSize, Poll: 50 * time.Millisecond, HealInterval: o.HealInterval})
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return row, err
	}
	base := time.Now().Unix()
	for i := 0; i <= o.Rollouts; i++ {
		id := fmt.Sprint(base + int64(i))
		start := time.Now()
		if err := c.Publish(id, byte(i+1), ""); err != nil {
			return row, err
		}
		rec, err := c.WaitServed(id, 10*time.Minute)
		if err != nil {
			return row, err
		}
		if i == 0 {
			continue // the first version also starts every server's first load
		}
		row.recs = append(row.recs, rolloutRec{float64(rec.TotalMs), float64(rec.DownloadMs), float64(rec.BuildMs),
			float64(rec.DistribMs), float64(rec.LoadMs), float64(rec.SwitchMs), ms(time.Since(start))})
	}
	row.heal, err = c.TimeToHeal(shards-1, o.Replicas-1, 10*time.Minute)
	return row, err
}

// spreadOf is the spread of f over xs.
func spreadOf[T any](xs []T, f func(T) float64) spread {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return spreadOfValues(v)
}
