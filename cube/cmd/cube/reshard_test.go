package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
)

// TestReshard: ctr_cube changes the transfer's --shards and --shard-replicas when shards
// change. Restarted so, the transfer rebuilds the served model in the new layout (keys move:
// shard = key % shards) and rolls it out; then every key is found through a cube.conf of the
// new shard count.
func TestReshard(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := startPipeline(t, 3, 1)
	publish(t, c, "1000", 1, "")
	v1 := served(t, c, "1000")

	// 3 -> 2 shards: drop shard 2's replicas from the transfer's flags.
	c.Transfer.Stop()
	c.Transfer.SetArgs(func(a []string) []string {
		a = swapFlag(a, "--shards", "2")
		var out []string
		for i := 0; i < len(a); i++ {
			if a[i] == "--shard-replicas" && i+1 < len(a) && strings.HasPrefix(a[i+1], "2=") {
				i++
				continue
			}
			out = append(out, a[i])
		}
		return out
	})
	if err := c.Transfer.Start(); err != nil {
		t.Fatal(err)
	}
	var v2 string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := c.Status(); err == nil && st.ServedVersion != v1 && st.ServedVersion != "" && st.InFlight == "" {
			v2 = st.ServedVersion
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v2 == "" {
		t.Fatal("the transfer did not roll the model out again in the 2-shard layout")
	}
	conf := c.Conf
	conf.Shard, conf.Nodes = 2, conf.Nodes[:2]
	cl, err := client.New(conf)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	keys := make([]uint64, 0, 3000)
	for k := uint64(0); k < 3000; k++ {
		keys = append(keys, k)
	}
	res, ver, _, err := cl.SeekConsistent(context.Background(), keys, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ver != v2 {
		t.Fatalf("answers from version %q, want %q", ver, v2)
	}
	for i, r := range res {
		if !r.Found() {
			t.Fatalf("key %d not found on shard %d after re-sharding", keys[i], keys[i]%2)
		}
	}
}
