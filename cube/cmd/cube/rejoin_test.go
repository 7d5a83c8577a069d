package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/server"
)

// TestReplicaThatMissedTheCommitRejoinsWithinOneHealPass: one replica cannot commit (its
// VERSION file cannot be replaced, as on a volume turned read-only) while its siblings switch;
// the commit's next retry is a minute away. Once the fault is gone, the replica serves the
// decided version within one heal pass, not at that retry: before, the heal pass stood aside
// for the whole commit phase, and the replica served the old version beside siblings that
// served the new one until the retry, minutes later.
func TestReplicaThatMissedTheCommitRejoinsWithinOneHealPass(t *testing.T) {
	const heal = 200 * time.Millisecond
	c := startPipeline(t, 2, 2, "--step-timeout", "1s", "--retries", "1", "--backoff", "50ms",
		"--retry-after", "1m", "--max-retry-after", "1m", "--heal-interval", heal.String())
	publish(t, c, "1000", 1, "")
	v1 := served(t, c, "1000")

	const s, r = 1, 1
	blocker := filepath.Join(c.DataDir(s, r), server.CurrentFile)
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o755); err != nil { // a rename cannot replace it
		t.Fatal(err)
	}
	publish(t, c, "2000", 2, "")
	var v2 string
	waitStatus(t, c, "a commit that failed on one replica", func(st api.Status) bool {
		if st.Phase != api.PhaseCommitting || st.Rollout == nil || st.Rollout.Attempts == 0 {
			return false
		}
		v2 = st.InFlight
		return true
	})
	st, err := c.FreshStatus()
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Shards[s].Replicas[r].ServedVersion; got != v1 {
		t.Fatalf("the replica that cannot commit serves %q, want %q", got, v1)
	}

	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	cleared := time.Now()
	st = waitStatus(t, c, "the replica serving the decided version", func(st api.Status) bool {
		return st.Shards[s].Replicas[r].ServedVersion == v2
	})
	took := time.Since(cleared)
	t.Logf("rejoined %s after the fault cleared (heal interval %s; the commit's retry was a minute away)", took, heal)
	if took > 10*time.Second {
		t.Fatalf("took %s", took)
	}
}
