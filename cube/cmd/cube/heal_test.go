package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// waitServing waits until the transfer's status, with replicas' answers asked for since
// the call, says version is served and every replica of every shard serves it.
func waitServing(t *testing.T, c *pipeline.Cluster, version string) api.Status {
	t.Helper()
	var st api.Status
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err = c.FreshStatus()
		if err == nil && st.ServedVersion == version && len(st.Lagging()) == 0 {
			return st
		}
	}
	t.Fatalf("version %s not served by every replica: %+v (err %v)", version, st.Shards, err)
	return st
}

// wipe kills a replica and removes its data, as a pod that comes back on
// another node, or with emptyDir storage, has lost it.
func wipe(t *testing.T, c *pipeline.Cluster, s, r int) {
	t.Helper()
	c.Servers[s][r].Kill()
	if err := os.RemoveAll(c.DataDir(s, r)); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasHeal: a replica that comes back empty (a restart with a wiped
// disk), a whole shard that does, and a replica added to a shard are brought
// to the decided version without a new model, and answer lookups from it.
// While a shard has no replica serving, the status says so: its served
// version is what the replicas report, not what the transfer decided.
func TestReplicasHeal(t *testing.T) {
	c := startPipeline(t, 2, 2)
	publish(t, c, "1000", 1, "")
	v := served(t, c, "1000")
	keys := []uint64{0, 1, 2, 3, 2998, 2999}

	t.Run("wiped replica", func(t *testing.T) {
		wipe(t, c, 1, 0)
		if err := c.Servers[1][0].Start(); err != nil {
			t.Fatal(err)
		}
		waitServing(t, c, v)
		// The healed replica itself answers shard 1's keys (odd ones).
		res := httpSeek(t, c.Servers[1][0].Addr, []uint64{1, 3, 2999})
		if len(res.Values) != 3 || res.Version == nil || *res.Version != v {
			t.Fatalf("healed replica answered %d values (version %v)", len(res.Values), res.Version)
		}
	})
	t.Run("dark shard", func(t *testing.T) {
		wipe(t, c, 0, 0)
		wipe(t, c, 0, 1)
		st, err := c.FreshStatus()
		if err != nil {
			t.Fatal(err)
		}
		lag := st.Lagging()
		if st.ServedVersion != "" || st.DecidedVersion != v || st.Shards[0].Serving != 0 || st.Shards[1].Serving != 2 || len(lag) != 1 || lag[0].Shard != 0 {
			t.Fatalf("with shard 0 down: served %q decided %q, serving %d/%d, lagging %+v; want \"\", %q, 0/2, shard 0",
				st.ServedVersion, st.DecidedVersion, st.Shards[0].Serving, st.Shards[1].Serving, lag, v)
		}
		for r := range 2 {
			if err := c.Servers[0][r].Start(); err != nil {
				t.Fatal(err)
			}
		}
		waitServing(t, c, v)
	})
	t.Run("replica added", func(t *testing.T) {
		if _, err := c.AddReplica(0); err != nil {
			t.Fatal(err)
		}
		st := waitServing(t, c, v)
		if len(st.Shards[0].Replicas) != 3 || st.Shards[0].Serving != 3 {
			t.Fatalf("shard 0: %d replicas, %d serving", len(st.Shards[0].Replicas), st.Shards[0].Serving)
		}
	})
	if g := lookupGens(t, c, keys); string(g) != strings.Repeat("\x01", len(keys)) {
		t.Fatalf("after healing: generations %v", g)
	}
	// The transfer was restarted by AddReplica: it counts the one heal since. The count
	// follows the switch the status shows, so it may lag that by a moment.
	var metrics string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if metrics = string(cubetest.Get(t, "http://"+c.Transfer.Addr+"/metrics")); strings.Contains(metrics, `cube_transfer_heals_total{result="healed"} 1`) {
			return
		}
	}
	t.Fatalf("metrics lack one healed replica:\n%s", grepLines(metrics, "cube_transfer_heal"))
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
