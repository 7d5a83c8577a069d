package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

func runSeek(fs flagSet, stdout, stderr io.Writer) error {
	conf := fs.String("conf", "", "Paddle Serving `cube.conf` to route keys by key % shard")
	dict := fs.String("dict", "", "dict_name in --conf (default: the first entry)")
	addr := fs.String("addr", "", "ask the one server at `HOST:PORT` (all keys)")
	timeout := fs.Duration("timeout", 3*time.Second, "overall timeout")
	format := fs.String("format", "base64", "value format: base64, hex, or float32 (little-endian floats, as Paddle's embeddings)")
	first := fs.Int("first", 0, "also look up keys 0..`N`-1")
	check := fs.Int("check", 0, "check every value is what `cube model --gen G` (either layout, --embedding or not) wrote for its key; print only the keys that are not, and a summary (exit 1 if any)")
	forDur := fs.Duration("for", 0, "instead: look random keys of 0..--first-1 up for this `duration` (e.g. during a rollout), checking every key is found with a well-formed `cube model` value and no response mixes versions; print a summary (exit 1 on any failure)")
	ready := fs.Duration("ready-within", time.Minute, "with --for (and with --conf when given): before the clock starts, or before a one-shot lookup, wait up to this `duration` until cube.conf's names resolve and every shard answers once (a cube whose Services just appeared may not be in the cluster DNS yet); not counted as failures")
	untilGen := fs.Uint("until-gen", 0, fmt.Sprintf("with --for: end early, successfully, once every answer for %s has been of `generation` G (cube model --gen, 1-255) after one of another: a rollout to it seen through; exit 1 if --for passes first", pipeline.TakeOverFor))
	workers := fs.Int("workers", 4, "with --for: concurrent lookups")
	batch := fs.Int("batch", 100, "with --for: keys per lookup")
	valueSize := fs.Int("value-size", pipeline.DefaultValueSize, "with --for: `bytes` per value (cube model --value-size)")
	dns := fs.String("dns", "", "resolve cube.conf's names with the DNS server at `HOST:PORT` (a cluster's DNS, from outside its pods) instead of the system's")
	domain := fs.String("dns-domain", "cluster.local", "with --dns: the cluster `domain` appended to names that lack it, as a pod's search path does (cube.conf names are like shard.namespace.svc)")
	if err := fs.parse(); err != nil {
		return err
	}
	if *dns != "" {
		client.LookupHost = clusterLookup(resolverAt(*dns), *domain)
	}
	if (*conf == "") == (*addr == "") {
		fmt.Fprintln(stderr, "exactly one of --conf and --addr is required")
		return errUsage
	}
	if *untilGen > 255 || *untilGen > 0 && *forDur == 0 {
		fmt.Fprintln(stderr, "--until-gen takes a generation 1-255, with --for")
		return errUsage
	}
	if *forDur > 0 {
		load := pipeline.Loader{Keys: *first, ValueSize: *valueSize, UntilGen: byte(*untilGen)}
		return seekFor(stdout, *conf, *dict, *addr, load, *forDur, *ready, *workers, *batch, *timeout)
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
func seekFor(stdout io.Writer, conf, dict, addr string, load pipeline.Loader, d, ready time.Duration, workers, batch int, timeout time.Duration) error {
	keys := load.Keys
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
	fmt.Fprintf(stdout, "every shard answers (after %s); looking up for up to %s\n", took.Round(time.Millisecond), d)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	load.Conf = dc
	start := time.Now()
	st, err := load.Run(ctx, workers, batch)
	if err != nil {
		return err
	}
	ran := time.Since(start).Round(time.Millisecond)
	fmt.Fprintf(stdout, "%d lookups of %d keys in %s: %d failed, %d mixing versions (%d first answers disagreed and were re-asked)\n",
		st.Requests, batch, ran, st.Failed, st.Mixed, st.FirstMixed)
	if st.Failed > 0 || st.Mixed > 0 {
		return fmt.Errorf("%d failed lookups, %d mixing versions; first failure: %s", st.Failed, st.Mixed, st.FirstErr)
	}
	if load.UntilGen != 0 {
		if st.TookOver == 0 {
			return fmt.Errorf("generation %d did not take over within %s (--for): every answer was of it from the start, or of another to the end", load.UntilGen, d)
		}
		fmt.Fprintf(stdout, "generation %d took over after %s, and every answer for %s since was of it\n", load.UntilGen, st.TookOver.Round(time.Millisecond), pipeline.TakeOverFor)
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

func isGen(key uint64, value []byte, gen byte) bool {
	g, ok := pipeline.GenOf(key, value)
	return ok && g == gen
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
		case !isGen(keys[i], r.Value, gen):
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
