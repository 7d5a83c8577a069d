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

// TestLayeredRollout: in base_delta mode with --max-layers 2, two patches roll out as layers
// (each holding only its keys, shipped alone), under load with no failed or mixed request; a
// replica back with an empty disk heals to the layered version (fetching the base and every
// layer); a rollback pins the version before, a layer too, and every replica switches to it;
// the third patch is built in full, merging the layers.
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
	publish(t, c, "1002", 3, "1000")
	l2 := served(t, c, "1002")
	if ls := load.stop(t); ls.Failed != 0 || ls.Mixed != 0 {
		t.Fatalf("layered rollouts under load: failed=%d mixed=%d (%s)", ls.Failed, ls.Mixed, ls.FirstErr)
	}
	// A patch holds every third key.
	gens(3, 1, 1, 3, 3, 1, 1)
	for _, v := range []string{l1, l2} {
		m := manifest(v)
		if !m.Layered {
			t.Fatalf("%s is not a layer", v)
		}
		if n := m.Shards[0].Count + m.Shards[1].Count; n != 1000 {
			t.Fatalf("layer %s holds %d keys, want its patch's 1000", v, n)
		}
	}
	if chain, err := layers.Chain(out, l2); err != nil || !slices.Equal(chain, []string{l2, l1, base}) {
		t.Fatalf("chain of %s: %v %v", l2, chain, err)
	}
	for s := range 2 {
		for r := range 2 {
			if chain, err := layers.Chain(c.DataDir(s, r), l2); err != nil || len(chain) != 3 {
				t.Fatalf("replica %d/%d: chain of %s on its disk: %v %v", s, r, l2, chain, err)
			}
		}
	}

	// Heal: an empty disk fetches the base and both layers.
	wipe(t, c, 0, 1)
	if err := c.Servers[0][1].Start(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, c, l2)
	if err := c.CheckReplicasDirect(l2); err != nil {
		t.Fatal(err)
	}
	gens(3, 1, 1, 3, 3, 1, 1)

	// Rollback to the version before, itself a layer.
	restartTransfer(t, c, own, "--serve-version", l1)
	waitServing(t, c, l1)
	gens(2, 1, 1, 2, 2, 1, 1)
	// Unpinned, patch 1002 rolls out again (a new build, layered over l1).
	restartTransfer(t, c, own)
	again := waitStatus(t, c, "patch 1002 served again", func(st api.Status) bool {
		return st.ServedVersion != l1 && st.ServedVersion != "" && st.InFlight == ""
	}).ServedVersion
	waitServing(t, c, again)
	gens(3, 1, 1, 3, 3, 1, 1)
	if chain, err := layers.Chain(out, again); err != nil || !slices.Equal(chain, []string{again, l1, base}) {
		t.Fatalf("chain of %s: %v %v", again, chain, err)
	}

	// Two layers under it: the next patch is built in full.
	publish(t, c, "1003", 4, "1000")
	full := served(t, c, "1003")
	if m := manifest(full); m.Layered || m.Shards[0].Count+m.Shards[1].Count != 3000 {
		t.Fatalf("%s: layered %v, %d keys; want a full version of 3000 keys", full, m.Layered, m.Shards[0].Count+m.Shards[1].Count)
	}
	gens(4, 1, 1, 4, 4, 1, 1)
	// Old versions go once nothing served is layered over them.
	st, err := c.FreshStatus()
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(c.DataDir(1, 0))
	var dirs []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	t.Logf("kept %v; replica 1/0 holds %v", st.Kept, dirs)
	if slices.Contains(dirs, base) && !slices.Contains(st.Kept, again) {
		t.Fatalf("replica 1/0 keeps the base %s that nothing kept is layered over", base)
	}
}
