package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/elasticctr/terraform-provider-ctr/cube/bench"
	"github.com/elasticctr/terraform-provider-ctr/cube/transfer"
)

// benchCommands are "cube bench <name>".
var benchCommands = []command{
	{name: "scale", synopsis: "[--sizes N,N,N] [--shards S,S,S] [--scale F] [--tables size,rollout]", run: runBenchScale},
	{name: "rollout", synopsis: "--shards S --replicas R --rollouts N [--keys K]", run: runBenchRollout},
	{name: "hostile", synopsis: "[--conns N] [--duration D] [-- SERVER FLAGS...]", run: runBenchHostile, operands: true},
	{name: "export", synopsis: "[--rows N,N,...] [--width W] [--work-dir DIR]", run: runBenchExport},
}

func runBench(fs flagSet, stdout, stderr io.Writer) error {
	var o bench.Options
	fs.StringVar(&o.Against, "against", strings.Join(bench.Peers, ","), "`peers`, comma-separated: redis (Debian's redis-server, MGET), memcached (Debian's memcached, multi-get); each started on 127.0.0.1 and stopped by PID")
	fs.IntVar(&o.Keys, "keys", 1_000_000, "distinct keys `N` loaded into both")
	fs.IntVar(&o.ValueSize, "value-size", 40, "value size in `bytes` (>= 8)")
	fs.IntVar(&o.Batch, "batch", 1000, "keys per request `K` (cube seek / Redis MGET)")
	fs.DurationVar(&o.Duration, "duration", 10e9, "measuring time `D` per system and run (after a warm-up of D/10, at most 2s)")
	fs.IntVar(&o.Runs, "runs", 5, "runs `R` per system, alternating between the systems; the table shows each figure's median and range")
	fs.IntVar(&o.Conns, "conns", bench.DefaultConns, "client connections `C`, one goroutine each, one request in flight on each")
	cpuFlags(fs, &o.ServerCPUs, &o.ClientCPUs, "every server")
	fs.StringVar(&o.RedisServer, "redis-server", "", "redis-server `path` (default: from PATH)")
	fs.StringVar(&o.MemcachedServer, "memcached", "", "memcached `path` (default: from PATH)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "keep generated data in this `directory` (default: a removed temp dir)")
	fs.BoolVar(&o.InMemory, "server-in-memory", false, "run the cube server with --in-memory (huge-page copy instead of the file mapping)")
	serverProfile := fs.String("server-cpuprofile", "", "pass --cpuprofile `file` to the cube server under test")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's CPU profile to this `file`")
	if err := fs.parse(); err != nil {
		return err
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	if *serverProfile != "" {
		o.ServerArgs = append(o.ServerArgs, "--cpuprofile", *serverProfile)
	}
	return interruptible(func(ctx context.Context) error { return bench.Run(ctx, o, stdout) })
}

// cpuFlags defines --server-cpus (the CPU list of servers) and --client-cpus (the load
// generator's), each defaulting to bench.DefaultPinning's, bench.NoPinning leaving it unpinned.
func cpuFlags(fs flagSet, server, client *string, servers string) {
	serverCPUs, clientCPUs := bench.DefaultPinning()
	unpinned := "; " + bench.NoPinning + " = unpinned"
	fs.StringVar(server, "server-cpus", serverCPUs, "CPU `list` (taskset -c) of "+servers+unpinned)
	fs.StringVar(client, "client-cpus", clientCPUs, "CPU `list` of the load generator (this process)"+unpinned)
}

func runBenchHostile(fs flagSet, stdout, stderr io.Writer) error {
	var o bench.HostileOptions
	fs.IntVar(&o.Conns, "conns", 2400, "hostile connections `N` held open (a quarter each: half-sent baidu_std headers, slowloris HTTP, idle keep-alives, 64 MiB-declared frames), and the slot-holding attack's size (the server's --max-conns unless given); lowered to fit RLIMIT_NOFILE")
	fs.IntVar(&o.Keys, "keys", 100_000, "distinct keys `N` in the dictionary")
	fs.IntVar(&o.ValueSize, "value-size", 40, "value size in `bytes` (>= 8)")
	fs.IntVar(&o.Batch, "batch", 1000, "keys per request `K` of the normal client")
	fs.DurationVar(&o.Duration, "duration", 5e9, "measuring time `D` of each phase (alone, with the hostile connections, under byte amplification with the default --heavy-cpu-share and with a quarter, under slot holding)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "keep generated data in this `directory` (default: a removed temp dir)")
	fs.StringVar(&o.CubeBinary, "server-binary", "", "run this cube `binary` as the server (default: this one), e.g. an older build to compare")
	if err := fs.parse(); err != nil {
		return err
	}
	o.ServerArgs = fs.Args() // after "--": extra "cube server" flags
	return interruptible(func(ctx context.Context) error { return bench.RunHostile(ctx, o, stdout) })
}

func runBenchScale(fs flagSet, stdout, stderr io.Writer) error {
	var o bench.ScaleOptions
	sizes := fs.String("sizes", joinInts(bench.DefaultScaleSizes()), "`records` built, and keys per shard served, one row each (a size is skipped when its dictionary does not fit three times in the available memory)")
	shards := fs.String("shards", "2,4,8,16", "shard `counts` of the rollout table")
	fs.IntVar(&o.RolloutKeys, "rollout-keys", 1_000_000, "keys `K` per version in the rollout table")
	fs.IntVar(&o.DeltaBase, "delta-base", bench.DefaultDeltaBase, "keys `K` of the delta table's base")
	fs.IntVar(&o.Replicas, "replicas", 2, "replicas `R` per shard in the rollout table")
	fs.IntVar(&o.Rollouts, "rollouts", 3, "rollouts `N` measured per shard count, after the first version")
	fs.DurationVar(&o.HealInterval, "heal-interval", transfer.DefaultHealInterval, "the transfer's --heal-interval in the rollout table (the heal column measures a replica restarted with an empty disk)")
	fs.Float64Var(&o.Scale, "scale", 1, "multiply --sizes and --rollout-keys by `F` (at least 10,000 each), for quick runs; make bench passes $BENCH_SCALE")
	fs.DurationVar(&o.Duration, "duration", 3e9, "measuring time `D` of the lookups per size (after a warm-up of D/10)")
	fs.IntVar(&o.Batch, "batch", 1000, "keys per lookup request `K`")
	fs.IntVar(&o.Conns, "conns", bench.DefaultConns, "client connections `C` of the lookups")
	cpuFlags(fs, &o.ServerCPUs, &o.ClientCPUs, "the builder and the server")
	memory := fs.String("memory", bench.MemoryMapped+","+bench.MemoryHugePages, "how each size is served and measured in-process: `modes` "+bench.MemoryMapped+" (the file mapping, cube server's default), "+bench.MemoryHugePages+" (a huge-page copy, --in-memory)")
	tables := fs.String("tables", "size,rollout,delta", "`tables` to print: size (build, and lookups, against the size), rollout (rollout and heal against shards), delta (patches of 1k/10k/100k keys over a 10M-key base, --scale'd, built in full and as layers)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "keep generated data in this `directory` (default: a removed temp dir); each size's files are removed once measured")
	if err := fs.parse(); err != nil {
		return err
	}
	var err error
	if o.Sizes, err = intList("--sizes", *sizes); err != nil {
		return err
	}
	if o.Shards, err = intList("--shards", *shards); err != nil {
		return err
	}
	o.Tables = strings.Split(*tables, ",")
	o.Memory = strings.Split(*memory, ",")
	return interruptible(func(ctx context.Context) error { return bench.RunScale(ctx, o, stdout) })
}

// joinInts is the comma-separated form intList parses.
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// intList parses a comma-separated list of positive integers.
func intList(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s %q: want positive integers, comma-separated", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}
