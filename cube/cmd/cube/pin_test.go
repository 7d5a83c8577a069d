package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
)

// restartTransfer restarts the transfer with its own arguments and extra ones (none: as
// started), as ctr_cube's serve_version does by changing the transfer's pod.
func restartTransfer(t *testing.T, c *pipeline.Cluster, own []string, extra ...string) {
	t.Helper()
	c.Transfer.Kill()
	c.Transfer.SetArgs(func([]string) []string { return append(slices.Clone(own), extra...) })
	if err := c.Transfer.Start(); err != nil {
		t.Fatal(err)
	}
}

// TestRollbackPin: a rollback to the version before the served one (--serve-version, what
// ctr_cube's serve_version renders) switches every replica at one instant under load, holds
// against the heal pass and a newer donefile line, refuses a version that is not kept, and
// unpinning rolls the newest line out.
func TestRollbackPin(t *testing.T) {
	c := startPipeline(t, 2, 2)
	var own []string
	c.Transfer.SetArgs(func(a []string) []string { own = slices.Clone(a); return a })
	publish(t, c, "1000", 1, "")
	v1 := served(t, c, "1000")
	publish(t, c, "2000", 2, "")
	v2 := served(t, c, "2000")
	keys := []uint64{0, 1, 2, 3, 2998, 2999}
	if st, _ := c.FreshStatus(); !slices.Equal(st.Kept, []string{v2, v1}) || st.Pinned != "" {
		t.Fatalf("kept %v pinned %q; want [%s %s] and none", st.Kept, st.Pinned, v2, v1)
	}

	load := startLoad(t, c)
	restartTransfer(t, c, own, "--serve-version", v1)
	waitServing(t, c, v1)
	if ls := load.stop(t); ls.Failed != 0 || ls.Mixed != 0 {
		t.Fatalf("rollback under load: failed=%d mixed=%d (%s); want every request answered from one version", ls.Failed, ls.Mixed, ls.FirstErr)
	}
	if g := lookupGens(t, c, keys); string(g) != strings.Repeat("\x01", len(keys)) {
		t.Fatalf("after the rollback: generations %v, want 1", g)
	}
	st, _ := c.FreshStatus()
	if st.Pinned != v1 || st.DecidedVersion != v1 || !slices.Equal(st.Kept, []string{v1, v2}) {
		t.Fatalf("pinned %q decided %q kept %v; want %s, %s, [%s %s]", st.Pinned, st.DecidedVersion, st.Kept, v1, v1, v1, v2)
	}

	// The heal pass keeps the pin: a replica back with an empty disk gets v1, not v2.
	wipe(t, c, 1, 0)
	if err := c.Servers[1][0].Start(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, c, v1)
	// A newer donefile line waits while pinned.
	publish(t, c, "3000", 3, "")
	time.Sleep(time.Second) // 20 polls
	if st, _ := c.FreshStatus(); st.DecidedVersion != v1 || st.InFlight != "" || len(st.Lagging()) != 0 {
		t.Fatalf("pinned, with a newer line: decided %q in flight %q lagging %v; want %s and nothing in flight", st.DecidedVersion, st.InFlight, st.Lagging(), v1)
	}

	// A version that is not kept is refused, saying what is kept; the cube keeps serving.
	restartTransfer(t, c, own, "--serve-version", "1000000000")
	st = waitStatus(t, c, "pin error", func(st api.Status) bool { return st.PinError != "" })
	if !strings.Contains(st.PinError, "not kept") || !strings.Contains(st.PinError, v2) || st.DecidedVersion != v1 {
		t.Fatalf("pin error %q decided %q; want it to name the kept versions and %s still decided", st.PinError, st.DecidedVersion, v1)
	}
	if err := c.CheckReplicas(v1); err != nil {
		t.Fatal(err)
	}

	// Unpinned, the newest line rolls out.
	restartTransfer(t, c, own)
	served(t, c, "3000")
	if g := lookupGens(t, c, keys); string(g) != strings.Repeat("\x03", len(keys)) {
		t.Fatalf("after unpinning: generations %v, want 3", g)
	}
}
