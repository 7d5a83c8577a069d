package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
)

func startPipeline(t *testing.T, shards, replicas int, extraTransfer ...string) *pipeline.Cluster {
	t.Helper()
	c, err := pipeline.Start(pipeline.Options{Bin: cubeBin, Dir: t.TempDir(), Shards: shards, Replicas: replicas, Keys: 3000, ValueSize: 40,
		Poll: 50 * time.Millisecond, TransferArgs: extraTransfer})
	if c != nil {
		t.Cleanup(c.Close)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func publish(t *testing.T, c *pipeline.Cluster, id string, gen byte, patchOf string) {
	t.Helper()
	if err := c.Publish(id, gen, patchOf); err != nil {
		t.Fatal(err)
	}
}

func waitServed(t *testing.T, c *pipeline.Cluster, id string) string {
	t.Helper()
	rec, err := c.WaitServed(id, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Version
}

// lookupGen checks every key through the cube.conf client and returns the
// generation of key k's value.
func lookupGens(t *testing.T, c *pipeline.Cluster, keys []uint64) []byte {
	t.Helper()
	cl, err := client.New(c.Conf)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, _, _, err := cl.SeekConsistent(context.Background(), keys, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gens := make([]byte, len(keys))
	for i, r := range res {
		if !r.Found() {
			t.Fatalf("key %d missing", keys[i])
		}
		gens[i] = r.Value[8]
	}
	return gens
}

type loadRun struct {
	cancel context.CancelFunc
	done   chan *pipeline.LoadStats
}

func startLoad(t *testing.T, c *pipeline.Cluster) *loadRun {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loadRun{cancel: cancel, done: make(chan *pipeline.LoadStats, 1)}
	go func() {
		st, err := c.Load(ctx, 3, 64)
		if err != nil {
			t.Error(err)
		}
		l.done <- st
	}()
	time.Sleep(100 * time.Millisecond)
	return l
}

func (l *loadRun) stop(t *testing.T) *pipeline.LoadStats {
	t.Helper()
	l.cancel()
	st := <-l.done
	if st == nil {
		t.Fatal("no load stats")
	}
	t.Logf("load: %d requests, %d failed, %d mixed, %d first answers mixed (reconciled) %s", st.Requests, st.Failed, st.Mixed, st.FirstMixed, st.FirstErr)
	if st.Requests == 0 {
		t.Fatal("no requests made")
	}
	return st
}

// TestRolloutPipeline: builder → fileserver → transfer → 2 shards × 2
// replicas; a second version rolled out under load with no failed request
// and no response mixing versions; a delta on top; a transfer restart that
// redeploys nothing.
func TestRolloutPipeline(t *testing.T) {
	c := startPipeline(t, 2, 2)
	publish(t, c, "1000", 1, "")
	v1 := waitServed(t, c, "1000")
	if g := lookupGens(t, c, []uint64{0, 1, 2, 2999}); string(g) != "\x01\x01\x01\x01" {
		t.Fatalf("gens %v", g)
	}
	load := startLoad(t, c)
	publish(t, c, "2000", 2, "")
	v2 := waitServed(t, c, "2000")
	st := load.stop(t)
	if st.Failed != 0 || st.Mixed != 0 {
		t.Fatalf("failed=%d mixed=%d (%s)", st.Failed, st.Mixed, st.FirstErr)
	}
	if v2 <= v1 {
		t.Fatalf("versions %s then %s", v1, v2)
	}
	// A delta (patch.txt) of base 2000 patches every third key.
	publish(t, c, "2001", 3, "2000")
	v3 := waitServed(t, c, "2001")
	if g := lookupGens(t, c, []uint64{0, 1, 3, 4}); string(g) != "\x03\x02\x03\x02" {
		t.Fatalf("after delta %s gens %v", v3, g)
	}
	// Restart the transfer: it remembers what it served and redeploys nothing.
	before, _ := c.Status()
	c.Transfer.Kill()
	if err := c.Transfer.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	after, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if after.ServedVersion != v3 || after.InFlight != "" || len(after.History) != len(before.History) {
		t.Fatalf("after restart: served %q in flight %q history %d→%d", after.ServedVersion, after.InFlight, len(before.History), len(after.History))
	}
	if err := c.CheckReplicas(v3); err != nil {
		t.Fatal(err)
	}
}

// TestSeekUntilGen: seek --for --until-gen G ends, successfully, once a
// rollout to generation G has been seen through (every answer of G for
// pipeline.TakeOverFor after one of another), long before --for; with G
// served from the start it never sees a take-over and fails when --for
// passes; a generation outside 1-255, or without --for, is a usage error.
func TestSeekUntilGen(t *testing.T) {
	c := startPipeline(t, 2, 1)
	publish(t, c, "1000", 1, "")
	waitServed(t, c, "1000")
	b, _ := json.Marshal([]client.DictConf{c.Conf})
	conf := filepath.Join(t.TempDir(), "cube.conf")
	if err := os.WriteFile(conf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	seek := exec.Command(cubeBin, "seek", "--conf", conf, "--first", "3000", "--for", "2m", "--until-gen", "2")
	var out strings.Builder
	seek.Stdout, seek.Stderr = &out, &out
	start := time.Now()
	if err := seek.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	publish(t, c, "2000", 2, "")
	waitServed(t, c, "2000")
	if err := seek.Wait(); err != nil || !regexp.MustCompile(`generation 2 took over after [0-9.]+m?s`).MatchString(out.String()) || !strings.Contains(out.String(), " 0 failed, 0 mixing versions") {
		t.Fatalf("seek --until-gen 2 across a rollout to generation 2: err %v, output %s", err, out.String())
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("seek --until-gen 2 ran %s after generation 2 took over", took)
	}
	t.Log(out.String())
	b, err := exec.Command(cubeBin, "seek", "--conf", conf, "--first", "3000", "--for", "2s", "--until-gen", "2").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "generation 2 did not take over within 2s") {
		t.Fatalf("seek --until-gen 2 with generation 2 served throughout: err %v, output %s", err, b)
	}
	for _, args := range [][]string{{"--for", "1s", "--until-gen", "256"}, {"--until-gen", "2"}} {
		b, err := exec.Command(cubeBin, append([]string{"seek", "--conf", conf, "--first", "10"}, args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(b), "--until-gen takes a generation 1-255, with --for") {
			t.Fatalf("seek %v: err %v, output %s", args, err, b)
		}
	}
}
