package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/infer"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/predict"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/cube/transfer"
)

// workspace is what the demo and the benchmarks that run processes run on: this binary (they
// start their processes from it) and a work directory, keep or else a temporary one (named
// prefix and a number) that cleanup removes.
func workspace(keep, prefix string) (bin, dir string, cleanup func(), err error) {
	if bin, err = os.Executable(); err != nil {
		return "", "", nil, fmt.Errorf("find the cube binary: %w", err)
	}
	if keep != "" {
		return bin, keep, func() {}, os.MkdirAll(keep, 0o755)
	}
	dir, err = os.MkdirTemp("", prefix)
	return bin, dir, func() { os.RemoveAll(dir) }, err
}

// parseWorkspace parses fs and then makes the workspace of its --work-dir flag, keep.
func parseWorkspace(fs flagSet, keep *string, prefix string) (bin, dir string, cleanup func(), err error) {
	if err := fs.parse(); err != nil {
		return "", "", nil, err
	}
	return workspace(*keep, prefix)
}

func runDemo(fs flagSet, stdout, stderr io.Writer) error {
	shards := fs.Int("shards", 2, "shards `S`")
	exported := fs.String("conf", "", "a Paddle Serving `cube.conf` (e.g. ctr_cube's cube_conf): take its dictionary and shard count, and look keys up through it, each shard's address rewritten to this machine's servers of that shard")
	replicas := fs.Int("replicas", 2, "replicas `R` per shard")
	keys := fs.Int("keys", 100_000, "keys `N` per version (40-byte values, as Paddle's demos)")
	keep := fs.String("work-dir", "", "keep everything (logs, data, state) in this `directory` (default: a removed temp dir)")
	bin, dir, cleanup, err := parseWorkspace(fs, keep, "cube-demo-")
	if err != nil {
		return err
	}
	defer cleanup()
	say := func(f string, a ...any) { fmt.Fprintf(stdout, "==> "+f+"\n", a...) }
	var conf0 *client.DictConf
	if *exported != "" {
		confs, err := client.LoadConf(*exported)
		if err != nil {
			return err
		}
		conf0 = &confs[0]
		*shards = conf0.Shard
		say("using %s: dictionary %q, %d shards", *exported, conf0.DictName, conf0.Shard)
	}
	say("work directory %s (process logs in logs/)", dir)
	dict := ""
	if conf0 != nil {
		dict = conf0.DictName
	}
	c, err := pipeline.Start(pipeline.Options{Bin: bin, Dir: dir, Shards: *shards, Replicas: *replicas, Dict: dict, Keys: *keys, ValueSize: 40,
		Poll: 200 * time.Millisecond, Progress: prefixed{stdout}})
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, "cube.conf")
	if err := c.WriteConf(conf); err != nil {
		return err
	}
	say("cube.conf for Paddle Serving written to %s", conf)

	id1 := strconv.FormatInt(time.Now().Unix(), 10)
	say("training writes version 1: %d keys × 40 B as Paddle SequenceFiles under %s/data/%s, then a line in donefile/base.txt", *keys, c.Root, id1)
	if err := c.Publish(id1, 1, ""); err != nil {
		return err
	}
	rec, err := c.WaitServed(id1, 5*time.Minute)
	if err != nil {
		return err
	}
	say("every replica serves version %s (%d ms: download %d, build %d, distribution %d, load %d, switch %d; window %d µs)",
		rec.Version, rec.TotalMs, rec.DownloadMs, rec.BuildMs, rec.DistribMs, rec.LoadMs, rec.SwitchMs, rec.WindowUs)
	if err := demoLookup(stdout, c); err != nil {
		return err
	}
	if conf0 != nil {
		if err := lookupThroughExported(stdout, *conf0, c); err != nil {
			return err
		}
	}
	say("starting a lookup load (4 clients × 100 keys, version_required) and publishing version 2")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *pipeline.LoadStats, 1)
	go func() { st, _ := c.Load(ctx, 4, 100); done <- st }()
	time.Sleep(500 * time.Millisecond)
	id2 := strconv.FormatInt(time.Now().Unix()+1, 10)
	if err := c.Publish(id2, 2, ""); err != nil {
		cancel()
		return err
	}
	rec, err = c.WaitServed(id2, 5*time.Minute)
	time.Sleep(300 * time.Millisecond)
	cancel()
	st := <-done
	if err != nil {
		return err
	}
	say("every replica serves version %s (%d ms: download %d, build %d, distribution %d, load %d, switch %d; window %d µs)",
		rec.Version, rec.TotalMs, rec.DownloadMs, rec.BuildMs, rec.DistribMs, rec.LoadMs, rec.SwitchMs, rec.WindowUs)
	say("load during the rollout: %d requests, %d failed, %d mixing versions (%d first answers disagreed and were re-asked)", st.Requests, st.Failed, st.Mixed, st.FirstMixed)
	if err := demoLookup(stdout, c); err != nil {
		return err
	}
	status, err := c.Status()
	if err == nil {
		for _, s := range status.Shards {
			for _, r := range s.Replicas {
				say("shard %d replica %s: serving %s (%s)", s.Shard, r.Addr, r.ServedVersion, r.State)
			}
		}
	}
	if st.Failed != 0 || st.Mixed != 0 {
		return errors.New("the rollout under load failed requests or mixed versions")
	}
	if err := demoPrediction(say, c, dir, uint64(*keys)); err != nil {
		return err
	}
	say("transfer status: curl http://%s/status   metrics: /metrics", c.Transfer.Addr)
	return nil
}

// demoModel is the demo's dense network over the cube's 40-byte values (10 floats).
var demoModel = pipeline.DemoModelOf(10)

// demoPrediction publishes a version with embeddings and its serving model, starts Paddle
// Serving beside the pipeline (cube serving with the stand-in of Paddle's server), and asks
// it for one click probability, which it checks against the model run here.
func demoPrediction(say func(string, ...any), c *pipeline.Cluster, dir string, n uint64) error {
	model := filepath.Join(dir, "serving-model")
	if err := pipeline.WriteDemoModel(model, demoModel); err != nil {
		return err
	}
	id := strconv.FormatInt(time.Now().Unix()+2, 10)
	say("training writes version 3: embeddings (10 floats per key) and its serving model (%s: %d slots, a hidden layer of %d, softmax) as serving/%s.tar.gz",
		model, demoModel.Slots, demoModel.Hidden, id)
	if err := c.PublishModel(pipeline.Model{ID: id, Gen: 3, Embedding: true, ServingModel: model}); err != nil {
		return err
	}
	if _, err := c.WaitServed(id, 5*time.Minute); err != nil {
		return err
	}
	s, err := c.StartServing()
	if err != nil {
		return err
	}
	defer s.Stop()
	conf, err := servingconf.ReadModelConf(model)
	if err != nil {
		return err
	}
	keys := [][]uint64{{42 % n}, {7 % n, 1009 % n}, {31337 % n}} // keys the version holds
	req, err := predict.Request(conf, keys, nil, pipeline.DemoAlias)
	if err != nil {
		return err
	}
	cl := predict.NewClient(s.Addr, 5*time.Second)
	defer cl.Close()
	var got []float32
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := cl.Predict(context.Background(), req)
		if err == nil {
			if got, err = predict.Probabilities(resp); err != nil {
				return err
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the serving did not answer: %w (see %s)", err, s.LogFile())
		}
		time.Sleep(100 * time.Millisecond)
	}
	m, err := infer.Load(model)
	if err != nil {
		return err
	}
	in := map[string]infer.Input{}
	for i, ks := range keys {
		var data []float32
		for _, k := range ks {
			data = append(data, pipeline.Embedding(k, 3, demoModel.Width)...)
		}
		in[conf.GetFeedVar()[i].GetName()] = infer.Input{Data: data, Dims: []int64{int64(len(ks)), int64(demoModel.Width)}, LoD: []int64{0, int64(len(ks))}}
	}
	out, err := m.Run(in)
	if err != nil {
		return err
	}
	want := out[pipeline.DemoFetch].Data[1]
	say("prediction through Paddle Serving (the stand-in of its server, started by cube serving) on %s, slots %v: click probability %.6f (the model run here: %.6f)",
		s.Addr, keys, got[0], want)
	if got[0] != want {
		return fmt.Errorf("serving answered %v, the model %v", got[0], want)
	}
	return nil
}

type prefixed struct{ w io.Writer }

func (p prefixed) Write(b []byte) (int, error) {
	fmt.Fprintf(p.w, "    %s", b)
	return len(b), nil
}

func demoLookup(w io.Writer, c *pipeline.Cluster) error {
	cl, err := client.New(c.Conf)
	if err != nil {
		return err
	}
	defer cl.Close()
	keys := []uint64{0, 1, 2, 3, 42}
	res, ver, _, err := cl.SeekConsistent(context.Background(), keys, time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "==> lookups through cube.conf (version %s):\n", ver)
	for i, r := range res {
		fmt.Fprintf(w, "    key %-3d shard %d  %s\n", keys[i], api.ShardOf(keys[i], c.Conf.Shard), valueFormats["hex"](r.Value))
	}
	return nil
}

func runBenchRollout(fs flagSet, stdout, stderr io.Writer) error {
	shards := fs.Int("shards", 4, "shards `S`")
	replicas := fs.Int("replicas", 2, "replicas `R` per shard")
	rollouts := fs.Int("rollouts", 20, "consecutive rollouts `N` under load")
	keys := fs.Int("keys", 100_000, "keys per version (40-byte values)")
	workers := fs.Int("clients", 2, "concurrent lookup clients of each kind (SeekConsistent, and fanning out as Paddle's cube-api)")
	batch := fs.Int("batch", 100, "keys per lookup")
	keep := fs.String("work-dir", "", "keep everything in this `directory` (default: a removed temp dir)")
	heal := fs.Duration("heal-interval", transfer.DefaultHealInterval, "the transfer's --heal-interval; after the rollouts one replica is restarted with an empty disk and the time until it serves again is measured")
	bin, dir, cleanup, err := parseWorkspace(fs, keep, "cube-demo-")
	if err != nil {
		return err
	}
	defer cleanup()
	c, err := pipeline.Start(pipeline.Options{Bin: bin, Dir: dir, Shards: *shards, Replicas: *replicas, Keys: *keys, ValueSize: 40,
		Poll: 50 * time.Millisecond, HealInterval: *heal})
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	base := time.Now().Unix()
	if err := c.Publish(strconv.FormatInt(base, 10), 1, ""); err != nil {
		return err
	}
	if _, err := c.WaitServed(strconv.FormatInt(base, 10), 10*time.Minute); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *pipeline.LoadStats, 1)
	go func() { st, _ := c.Load(ctx, *workers, *batch); done <- st }()
	paddleDone := make(chan *pipeline.PaddleStats, 1)
	go func() { st, _ := c.LoadPaddle(ctx, *workers, *batch); paddleDone <- st }()
	fmt.Fprintf(stdout, "%-4s %-12s %9s %9s %9s %9s %9s %9s %10s\n", "n", "version", "total_ms", "download", "build", "distrib", "load", "switch", "window_us")
	var maxWindow int64
	for i := 1; i <= *rollouts; i++ {
		id := strconv.FormatInt(base+int64(i), 10)
		if err := c.Publish(id, byte(i+1), ""); err != nil {
			return err
		}
		rec, err := c.WaitServed(id, 10*time.Minute)
		if err != nil {
			return err
		}
		maxWindow = max(maxWindow, rec.WindowUs)
		fmt.Fprintf(stdout, "%-4d %-12s %9d %9d %9d %9d %9d %9d %10d\n", i, rec.Version, rec.TotalMs, rec.DownloadMs, rec.BuildMs, rec.DistribMs, rec.LoadMs, rec.SwitchMs, rec.WindowUs)
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	st, ps := <-done, <-paddleDone
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(stdout, "replicas' switch instants: largest spread %s ms (the transfer's view)\n", ms(time.Duration(maxWindow)*time.Microsecond))
	fmt.Fprintf(stdout, "SeekConsistent client: %d requests of %d keys, %d failed, %d mixed, %d first answers disagreed (re-asked) %s\n",
		st.Requests, *batch, st.Failed, st.Mixed, st.FirstMixed, st.FirstErr)
	fmt.Fprintf(stdout, "Paddle-like client (fan-out, replicas in turn, no re-asks): %d requests of %d keys, %d failed, %d mixed batches, %d flip-backs, window p50 %s / p99 %s / max %s ms %s\n",
		ps.Requests, *batch, ps.Failed, ps.Mixed, ps.FlipBacks, ms(pipeline.Percentile(ps.Windows, 50)), ms(pipeline.Percentile(ps.Windows, 99)), ms(ps.MaxWindow()), ps.FirstErr)
	fmt.Fprintf(stdout, "latency: steady p50 %s / p99 %s ms; first request after a switch p50 %s / max %s ms (%d)\n",
		ms(pipeline.Percentile(ps.Steady, 50)), ms(pipeline.Percentile(ps.Steady, 99)), ms(pipeline.Percentile(ps.FirstAfterSwitch, 50)), ms(pipeline.Percentile(ps.FirstAfterSwitch, 100)), len(ps.FirstAfterSwitch))
	healed, err := c.TimeToHeal(*shards-1, *replicas-1, 10*time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "heal: a replica restarted with an empty disk served the decided version again after %s ms (--heal-interval %s; a pass finds it, then prepares and switches it)\n",
		ms(healed), *heal)
	fmt.Fprintf(stdout, "rollout failed=%d mixed=%d window_ms=%s heal_ms=%s\n", ps.Failed+st.Failed, ps.Mixed, ms(ps.MaxWindow()), ms(healed))
	return nil
}

// lookupThroughExported looks keys up through an exported cube.conf (ctr_cube's cube_conf),
// each shard's node rewritten to the replicas of that shard running here: the stable
// in-cluster names are what changes, the dictionary, shard count and order are proven.
func lookupThroughExported(w io.Writer, exported client.DictConf, c *pipeline.Cluster) error {
	if len(exported.Nodes) != len(c.Conf.Nodes) {
		return fmt.Errorf("the exported cube.conf has %d shard nodes, this machine %d", len(exported.Nodes), len(c.Conf.Nodes))
	}
	for i := range exported.Nodes {
		fmt.Fprintf(w, "    shard %d: %s -> %s\n", i, exported.Nodes[i].IPPortList, c.Conf.Nodes[i].IPPortList)
		exported.Nodes[i] = c.Conf.Nodes[i]
	}
	cl, err := client.New(exported)
	if err != nil {
		return err
	}
	defer cl.Close()
	keys := []uint64{0, 1, 2, 3, 42, 99_999}
	res, ver, _, err := cl.SeekConsistent(context.Background(), keys, time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "==> lookups through the exported cube.conf, dict %q (version %s):\n", exported.DictName, ver)
	for i, r := range res {
		status := valueFormats["hex"](r.Value)
		if !r.Found() {
			status = "MISS"
		}
		fmt.Fprintf(w, "    key %-6d shard %d  %s\n", keys[i], api.ShardOf(keys[i], exported.Shard), status)
	}
	return nil
}
