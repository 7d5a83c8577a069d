package main

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
)

// faultArgs make the transfer give up quickly, so that each fault is seen
// to abort and then to heal within seconds.
var faultArgs = []string{"--prepare-timeout", "2s", "--step-timeout", "400ms", "--retries", "1", "--backoff", "50ms",
	"--retry-after", "200ms", "--max-retry-after", "1s", "--switch-delay", "30ms"}

// served waits for id and checks every replica serves it.
func served(t *testing.T, c *pipeline.Cluster, id string) string {
	t.Helper()
	v := waitServed(t, c, id)
	if err := c.CheckReplicas(v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitFailed waits until the transfer has recorded at least n failed
// attempts of id, then checks no replica serves anything but want.
func waitFailed(t *testing.T, c *pipeline.Cluster, id string, n int, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := c.Status()
		if err == nil {
			count := 0
			for _, h := range st.History {
				if h.ID == id && h.Result == "failed" {
					count++
				}
			}
			if count >= n {
				if st.ServedVersion != want {
					t.Fatalf("transfer serves %q, want %q", st.ServedVersion, want)
				}
				if err := c.CheckReplicas(want); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %d failed attempts of %s recorded", n, id)
}

func waitPhase(t *testing.T, c *pipeline.Cluster, phase string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := c.Status(); err == nil && st.Phase == phase {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("transfer never reached phase %q", phase)
}

// TestFaults drives one cluster (2 shards × 2 replicas) through faults,
// one version each. After each: no replica serves a version that did not
// commit everywhere, the previous version keeps serving (lookups under load
// never fail), and once the fault is gone the rollout completes by itself.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process fault tests")
	}
	c := startPipeline(t, 2, 2, faultArgs...)
	publish(t, c, "1000", 1, "")
	cur := served(t, c, "1000")
	load := startLoad(t, c)
	defer func() {
		st := load.stop(t)
		if st.Failed != 0 || st.Mixed != 0 {
			t.Errorf("lookups during faults: failed=%d mixed=%d (%s)", st.Failed, st.Mixed, st.FirstErr)
		}
	}()
	id := 1000
	next := func() string { id += 1000; return strconv.Itoa(id) }

	t.Run("replica never answers", func(t *testing.T) {
		v := next()
		c.Servers[1][1].Pause()
		publish(t, c, v, 2, "")
		waitFailed(t, c, v, 1, cur)
		c.Servers[1][1].Resume()
		cur = served(t, c, v)
	})
	t.Run("kill -9 replica during prepare", func(t *testing.T) {
		v := next()
		c.Servers[0][0].Pause() // hold the prepare phase open
		publish(t, c, v, 3, "")
		waitPhase(t, c, "preparing")
		c.Servers[0][0].Kill()
		waitFailed(t, c, v, 1, cur)
		if err := c.Servers[0][0].Start(); err != nil {
			t.Fatal(err)
		}
		cur = served(t, c, v)
	})
	t.Run("kill -9 transfer during prepare", func(t *testing.T) {
		v := next()
		c.Servers[0][1].Pause()
		publish(t, c, v, 4, "")
		waitPhase(t, c, "preparing")
		c.Transfer.Kill()
		if err := c.CheckReplicasDirect(cur); err != nil {
			t.Fatal(err)
		}
		c.Servers[0][1].Resume()
		if err := c.Transfer.Start(); err != nil {
			t.Fatal(err)
		}
		cur = served(t, c, v)
	})
	t.Run("kill -9 file server", func(t *testing.T) {
		v := next()
		c.FileServer.Kill()
		publish(t, c, v, 5, "") // written to disk; nobody can read it yet
		time.Sleep(300 * time.Millisecond)
		if err := c.CheckReplicas(cur); err != nil {
			t.Fatal(err)
		}
		if err := c.FileServer.Start(); err != nil {
			t.Fatal(err)
		}
		cur = served(t, c, v)
	})
	t.Run("donefile names a missing input", func(t *testing.T) {
		v := next()
		// Hide the input before the transfer can read it: the transfer is stopped
		// while the version is published and its input renamed away (the line
		// stays), so that it finds the line first when it runs again.
		c.Transfer.Pause()
		publish(t, c, v, 6, "")
		dir := filepath.Join(c.Root, "data", v)
		hidden := dir + ".hidden"
		err := os.Rename(dir, hidden)
		c.Transfer.Resume()
		if err != nil {
			t.Fatal(err)
		}
		waitFailed(t, c, v, 1, cur)
		os.Rename(hidden, dir)
		cur = served(t, c, v)
	})
	t.Run("wrong token on a replica", func(t *testing.T) {
		v := next()
		p := c.Servers[1][0]
		bad := filepath.Join(t.TempDir(), "bad-token")
		os.WriteFile(bad, []byte("not-the-token\n"), 0o600)
		p.Stop()
		p.SetArgs(func(a []string) []string { return swapFlag(a, "--control-token-file", bad) })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		publish(t, c, v, 7, "")
		waitFailed(t, c, v, 1, cur)
		p.Stop()
		p.SetArgs(func(a []string) []string { return swapFlag(a, "--control-token-file", c.TokenFile) })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		cur = served(t, c, v)
	})
	t.Run("full disk on a replica", func(t *testing.T) {
		v := next()
		p := c.Servers[0][1]
		p.Stop()
		p.SetArgs(func(a []string) []string { return append(a, "--disk-reserve", "4611686018427387904") })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		publish(t, c, v, 8, "")
		waitFailed(t, c, v, 1, cur)
		p.Stop()
		p.SetArgs(func(a []string) []string { return a[:len(a)-2] })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		cur = served(t, c, v)
	})
	t.Run("kill -9 transfer while downloading and building", func(t *testing.T) {
		v := next()
		publish(t, c, v, 12, "")
		// Kill the moment a rollout is in flight: that is the download-and-build phase.
		phase := ""
		for deadline := time.Now().Add(10 * time.Second); phase == "" && time.Now().Before(deadline); {
			if st, err := c.Status(); err == nil && st.Phase != "" {
				phase = st.Phase
				c.Transfer.Kill()
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if phase == "" {
			t.Fatal("the rollout never started")
		}
		if err := c.CheckReplicasDirect(cur); err != nil && phase != "committing" {
			t.Fatal(err)
		}
		if err := c.Transfer.Start(); err != nil { // resumes the persisted rollout
			t.Fatal(err)
		}
		cur = served(t, c, v)
		if phase != "building" {
			t.Skipf("the kill landed in phase %s, not building (the build was faster than the poll); healed all the same", phase)
		}
	})
	t.Run("corrupted shard on the way to a replica", func(t *testing.T) {
		v := next()
		c.Servers[0][0].Pause() // hold the prepare phase open until the shard is corrupted
		publish(t, c, v, 9, "")
		waitPhase(t, c, "preparing")
		// The transfer published shard 0 with its sha256; flip bytes in the copy it serves.
		files, _ := filepath.Glob(filepath.Join(c.Dir, "transfer", "output", "*", "shard-0.cube"))
		if len(files) == 0 {
			t.Fatal("no published shard-0.cube under the transfer's output")
		}
		sort.Strings(files)
		f := files[len(files)-1]
		good, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]byte(nil), good...)
		for i := len(bad) / 2; i < len(bad)/2+64 && i < len(bad); i++ {
			bad[i] ^= 0xff
		}
		if err := os.WriteFile(f, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		c.Servers[0][0].Resume()
		waitFailed(t, c, v, 1, cur) // sha256 refused it; everyone still serves cur
		if err := os.WriteFile(f, good, 0o644); err != nil {
			t.Fatal(err)
		}
		cur = served(t, c, v)
	})
	// The commit phase: the decision to switch is saved before any commit is sent, so a
	// death now must end with every replica on the new version, never a split.
	slowSwitch := func(t *testing.T, d string) {
		c.Transfer.Stop()
		c.Transfer.SetArgs(func(a []string) []string { return swapFlag(a, "--switch-delay", d) })
		if err := c.Transfer.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("kill -9 transfer during commit", func(t *testing.T) {
		v := next()
		slowSwitch(t, "1500ms") // commits are sent for an instant 1.5 s ahead
		publish(t, c, v, 10, "")
		waitPhase(t, c, "committing")
		c.Transfer.Kill()
		slowSwitch(t, "30ms") // restarted: it finds the saved decision and finishes it
		cur = served(t, c, v)
	})
	t.Run("kill -9 replica during commit", func(t *testing.T) {
		v := next()
		slowSwitch(t, "1500ms")
		publish(t, c, v, 11, "")
		waitPhase(t, c, "committing")
		c.Servers[1][0].Kill()
		time.Sleep(200 * time.Millisecond)
		if err := c.Servers[1][0].Start(); err != nil {
			t.Fatal(err)
		}
		cur = served(t, c, v)
		slowSwitch(t, "30ms")
	})
}

func swapFlag(args []string, name, val string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == name && i+1 < len(out) {
			out[i+1] = val
		}
	}
	return out
}
