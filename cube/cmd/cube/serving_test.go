package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/launch"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/infer"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/servingpb"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/predict"
	"github.com/elasticctr/terraform-provider-ctr/cube/samples"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest/ctrmodel"
)

// servingSparseDim is the embedding table of the serving tests: keys 0..N-1, every Criteo
// feature's key (hash % N) among them.
const servingSparseDim = 100003

// denseVariant writes the real CTR model at dir with the click side of its last bias moved
// by shift: another dense model of the same network (shift 0: the model as saved).
func denseVariant(t *testing.T, dir string, shift float32) *infer.Model {
	t.Helper()
	ctrmodel.ServingModel(t, dir)
	if shift != 0 {
		ctrmodel.ShiftClickBias(t, dir, shift)
	}
	m, err := infer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func criteoSamples(t *testing.T) (string, []samples.Sample) {
	t.Helper()
	path := filepath.Join(cubetest.PaddleData(t, "serving-ctr-model"), "criteo_test_data.txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []samples.Sample
	if err := samples.Each(samples.Criteo{}, f, servingSparseDim, func(_ int, s samples.Sample) error { out = append(out, s); return nil }); err != nil {
		t.Fatal(err)
	}
	return path, out
}

func launcherState(addr string) (launch.State, error) {
	var st launch.State
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// TestServing_FollowsTheCube is the serving half end to end on loopback, every part a real
// process: the trainer stand-in publishes a version (embeddings for every key, and the real
// CTR model as serving/<id>.tar.gz) to the file server; the transfer rolls it out to 2 shards
// × 2 replicas; `cube serving` waits for it, fetches that version's dense model and starts the
// stand-in of Paddle's server, which looks embeddings up through cube.conf; `cube predict`
// sends Serving's 1,000 Criteo demo lines and prints the click probabilities this process
// computes with the same model and embeddings. Then three more versions, each with new
// embeddings and new dense weights, roll out while one client predicts without pause: the
// dense model is never ahead of the embeddings, answers combine versions (the new embeddings
// with the old dense model, or for an instant the shards' two versions) for no longer than
// the bound (the launcher's poll + the server's reload check + 2 s to fetch and load), and
// the server never restarts.
func TestServing_FollowsTheCube(t *testing.T) {
	path, lines := criteoSamples(t)
	dir := t.TempDir()
	models := make([]*infer.Model, 4)
	for i := range models {
		models[i] = denseVariant(t, filepath.Join(dir, "dense", strconv.Itoa(i)), float32(i))
	}
	c, err := pipeline.Start(pipeline.Options{Bin: cubeBin, Dir: filepath.Join(dir, "cluster"), Shards: 2, Replicas: 2,
		Keys: servingSparseDim, ValueSize: 4 * ctrmodel.Width, Embedding: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.StartServing()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if st, err := launcherState(s.Proc.Addr); err != nil || st.Phase != launch.PhaseWaitingForCube {
		t.Fatalf("before any version the launcher is %+v (%v), want %s", st, err, launch.PhaseWaitingForCube)
	}
	if err := c.PublishServing("1000", 1, "", filepath.Join(dir, "dense", "0")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := launcherState(s.Proc.Addr)
		if err == nil && st.Phase == launch.PhaseServing && st.ModelID == "1000" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher did not serve version 1000: %+v %v; its log:\n%s", st, err, readLog(s.LogFile()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	conf := filepath.Join(dir, "dense", "0", servingconf.ModelConfFile)
	client := predict.NewClient(s.Addr, 5*time.Second)
	defer client.Close()
	waitAnswers(t, client, lines[0], s)

	for _, addr := range []string{s.Addr, "http://" + s.Addr} {
		out := cube(t, "predict", "--addr", addr, "--conf", conf, "--format", "criteo", "--sparse-dim", strconv.Itoa(servingSparseDim), path)
		got := strings.Fields(out)
		if len(got) != len(lines) {
			t.Fatalf("cube predict --addr %s printed %d probabilities for %d lines", addr, len(got), len(lines))
		}
		for i, smp := range lines {
			want, err := ctrmodel.Probability(models[0], smp, 1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := strconv.ParseFloat(got[i], 64)
			if err != nil || math.Abs(p-float64(want)) > 1e-6 {
				t.Fatalf("line %d over %s: %s, want %.6f", i+1, addr, got[i], want)
			}
		}
	}

	// --for repeats the lines: a steady load, each answer after its time.
	one := filepath.Join(dir, "one.txt")
	first, _, _ := strings.Cut(readLog(path), "\n")
	if err := os.WriteFile(one, []byte(first+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steady := strings.Split(strings.TrimSpace(cube(t, "predict", "--addr", s.Addr, "--conf", conf, "--format", "criteo", "--sparse-dim",
		strconv.Itoa(servingSparseDim), "--for", "300ms", "--every", "10ms", "--timestamps", one)), "\n")
	want0, _ := ctrmodel.Probability(models[0], lines[0], 1)
	for _, l := range steady {
		ms, p, ok := strings.Cut(l, " ")
		if at, err := strconv.ParseInt(ms, 10, 64); !ok || err != nil || time.Since(time.UnixMilli(at)) > time.Minute || p != fmt.Sprintf("%.6f", want0) {
			t.Fatalf("cube predict --for --timestamps printed %q", l)
		}
	}
	if len(steady) < 5 {
		t.Errorf("cube predict --for 300ms --every 10ms sent %d predictions", len(steady))
	}

	bound := s.ReloadInterval + 200*time.Millisecond + 2*time.Second
	var toNew, mixed []time.Duration
	for v := 1; v < len(models); v++ {
		id, gen := strconv.Itoa(1000*(v+1)), byte(v+1)
		p := func(dense int, g byte) float32 {
			x, err := ctrmodel.Probability(models[dense], lines[0], g)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		old, next, mix, ahead := p(v-1, gen-1), p(v, gen), p(v-1, gen), p(v, gen-1)
		if len(slices.Compact([]float32{old, next, mix, ahead})) != 4 || old == mix || next == ahead {
			t.Fatalf("version %s: the four combinations do not tell apart: %v %v %v %v", id, old, next, mix, ahead)
		}
		published := time.Now()
		if err := c.PublishServing(id, gen, "", filepath.Join(dir, "dense", strconv.Itoa(v))); err != nil {
			t.Fatal(err)
		}
		lineAt := time.Now()
		var firstMixed, firstNew time.Time
		others := 0
		for firstNew.IsZero() {
			if time.Since(lineAt) > 60*time.Second {
				t.Fatalf("version %s did not serve in 60 s; launcher log:\n%s", id, readLog(s.LogFile()))
			}
			got := probability(t, client, lines[0])
			now := time.Now()
			switch got {
			case old:
			case next:
				firstNew = now
				if firstMixed.IsZero() {
					firstMixed = now
				}
			case ahead:
				t.Fatalf("version %s: the dense model of the new version met the old embeddings", id)
			default:
				// The new embeddings with the old dense model (mix), or, for the instant the
				// shards switch, one shard's embeddings of each version.
				if got != mix {
					others++
				}
				if firstMixed.IsZero() {
					firstMixed = now
				}
			}
		}
		toNew = append(toNew, firstNew.Sub(lineAt))
		mixed = append(mixed, firstNew.Sub(firstMixed))
		t.Logf("version %s: written in %s; line → new dense and sparse %s; versions combined for %s (%d answers mixed the shards' versions)",
			id, lineAt.Sub(published).Round(time.Millisecond), firstNew.Sub(lineAt).Round(time.Millisecond), firstNew.Sub(firstMixed).Round(time.Millisecond), others)
		if w := firstNew.Sub(firstMixed); w > bound {
			t.Errorf("version %s: predictions combined versions for %s, more than the bound %s", id, w, bound)
		}
	}
	if st, err := launcherState(s.Proc.Addr); err != nil || st.ModelID != strconv.Itoa(1000*len(models)) {
		t.Errorf("after the last version the launcher reports %+v (%v)", st, err)
	}
	if n := strings.Count(readLog(s.LogFile()), servingStarted); n != 1 {
		t.Errorf("the server started %d times, want once (every version reloaded in place)", n)
	}
	slices.Sort(toNew)
	slices.Sort(mixed)
	t.Logf("donefile line → dense and sparse both serve the new version: p50 %s, max %s; versions combined for at most %s (bound %s)",
		toNew[len(toNew)/2].Round(time.Millisecond), toNew[len(toNew)-1].Round(time.Millisecond), mixed[len(mixed)-1].Round(time.Millisecond), bound)
}

// servingStarted is what Paddle's server (the stand-in) prints once it listens.
const servingStarted = "C++ Serving service started successfully!"

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func request(t *testing.T, smp samples.Sample) *servingpb.Request {
	t.Helper()
	req, err := predict.Request(ctrmodel.ModelConf(), smp.Keys, smp.Dense, ctrmodel.Alias)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func probability(t *testing.T, c *predict.Client, smp samples.Sample) float32 {
	t.Helper()
	resp, err := c.Predict(context.Background(), request(t, smp))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := predict.Probabilities(resp)
	if err != nil || len(ps) != 1 {
		t.Fatalf("%v %v", ps, err)
	}
	return ps[0]
}

// waitAnswers waits until the server answers (it starts once the model is in place).
func waitAnswers(t *testing.T, c *predict.Client, smp samples.Sample, s *pipeline.Serving) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Predict(context.Background(), request(t, smp))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v; its log:\n%s", s, err, readLog(s.LogFile()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
