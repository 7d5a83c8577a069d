package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
)

// TestLayeredRollout: in base_delta mode with --max-layers 2, patches roll out as layers (each
// holding only its keys, shipped alone) under load with no failed or mixed request; a replica
// back with an empty disk heals to a layered version (fetching the base and the layer); once
// the served version has two layers, the transfer merges them into a full version and rolls it
// out between donefile lines; a rollback pins the layered version before it; the next patch
// is a layer over the merged version.
func TestLayeredRollout(t *testing.T) {
	c := startPipeline(t, 2, 2, "--max-layers", "2")
	var own []string
	c.Transfer.SetArgs(func(a []string) []string { own = slices.Clone(a); return a })
	out := filepath.Join(c.Dir, "transfer", "output")
	manifest := func(v string) *layout.Manifest {
		t.Helper()
		m, err := layout.ReadManifest(out, v)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	keysOf := func(m *layout.Manifest) uint64 { return m.Shards[0].Count + m.Shards[1].Count }
	keys := []uint64{0, 1, 2, 3, 2997, 2998, 2999}
	gens := func(want ...byte) {
		t.Helper()
		if g := lookupGens(t, c, keys); string(g) != string(want) {
			t.Fatalf("generations %v, want %v", g, want)
		}
	}
	publish(t, c, "1000", 1, "")
	base := served(t, c, "1000")

	load := startLoad(t, c)
	publish(t, c, "1001", 2, "1000")
	l1 := served(t, c, "1001")
	// A patch holds every third key.
	gens(2, 1, 1, 2, 2, 1, 1)
	if m := manifest(l1); !m.Layered || keysOf(m) != 1000 {
		t.Fatalf("%s: layered %v, %d keys; want a layer of its patch's 1000 keys", l1, m.Layered, keysOf(m))
	}
	for s := range 2 {
		for r := range 2 {
			if chain, err := layers.Chain(c.DataDir(s, r), l1); err != nil || !slices.Equal(chain, []string{l1, base}) {
				t.Fatalf("replica %d/%d: chain of %s on its disk: %v %v", s, r, l1, chain, err)
			}
		}
	}

	// Heal: an empty disk fetches the base and the layer.
	wipe(t, c, 0, 1)
	if err := c.Servers[0][1].Start(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, c, l1)
	if err := c.CheckReplicasDirect(l1); err != nil {
		t.Fatal(err)
	}

	// A second layer; then the merge, with no new line.
	publish(t, c, "1002", 3, "1000")
	// Two records of id 1002: the layer, then the merge.
	var of1002 []string
	st := waitStatus(t, c, "patch 1002 as a layer, then merged", func(st api.Status) bool {
		of1002 = nil
		for _, h := range st.History {
			if h.ID == "1002" && h.Result == "served" {
				of1002 = append(of1002, h.Version)
			}
		}
		return len(of1002) == 2 && st.ServedVersion == of1002[1] && st.InFlight == "" && len(st.Lagging()) == 0
	})
	l2, merged := of1002[0], st.ServedVersion
	if chain, err := layers.Chain(out, l2); err != nil || !slices.Equal(chain, []string{l2, l1, base}) {
		t.Fatalf("chain of %s: %v %v", l2, chain, err)
	}
	if ls := load.stop(t); ls.Failed != 0 || ls.Mixed != 0 {
		t.Fatalf("layered rollouts and the merge under load: failed=%d mixed=%d (%s)", ls.Failed, ls.Mixed, ls.FirstErr)
	}
	if m := manifest(merged); m.Layered || keysOf(m) != 3000 {
		t.Fatalf("%s: layered %v, %d keys; want the merge, a full version of 3000 keys", merged, m.Layered, keysOf(m))
	}
	gens(3, 1, 1, 3, 3, 1, 1)

	// Rollback to the layered version before the merge.
	restartTransfer(t, c, own, "--serve-version", l2)
	waitServing(t, c, l2)
	if err := c.CheckReplicasDirect(l2); err != nil {
		t.Fatal(err)
	}
	gens(3, 1, 1, 3, 3, 1, 1)
	restartTransfer(t, c, own, "--serve-version", merged)
	waitServing(t, c, merged)
	restartTransfer(t, c, own)

	// The next patch is a layer over the merged version.
	publish(t, c, "1003", 4, "1000")
	l3 := served(t, c, "1003")
	if chain, err := layers.Chain(out, l3); err != nil || !slices.Equal(chain, []string{l3, merged}) {
		t.Fatalf("chain of %s: %v %v", l3, chain, err)
	}
	gens(4, 1, 1, 4, 4, 1, 1)
	// What no kept version is served over is gone from the replicas.
	ents, _ := os.ReadDir(c.DataDir(1, 0))
	var dirs []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	slices.Sort(dirs)
	if want := []string{merged, l3}; !slices.Equal(dirs, want) {
		t.Fatalf("replica 1/0 holds %v, want %v (served and previous)", dirs, want)
	}
}
