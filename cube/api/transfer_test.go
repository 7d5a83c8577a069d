package api

import (
	"slices"
	"testing"
)

func shards(versions ...[]string) []ShardStatus {
	var out []ShardStatus
	for i, vs := range versions {
		sh := ShardStatus{Shard: i}
		for _, v := range vs {
			sh.Replicas = append(sh.Replicas, ReplicaStatus{Addr: "r", ServedVersion: v})
		}
		out = append(out, sh)
	}
	return out
}

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		name    string
		decided string
		shards  []ShardStatus
		served  string
		serving []int
		lagging int
	}{
		{"all serve the decided version", "2", shards([]string{"2", "2"}, []string{"2", "2"}), "2", []int{2, 2}, 0},
		{"a wiped replica", "2", shards([]string{"2", ""}, []string{"2", "2"}), "2", []int{1, 2}, 1},
		{"a dark shard", "2", shards([]string{"2", "2"}, []string{"", ""}), "", []int{2, 0}, 1},
		{"a replica behind", "2", shards([]string{"1", "2"}, []string{"2", "1"}), "2", []int{1, 1}, 2},
		{"decided wins over a majority", "2", shards([]string{"1", "2"}, []string{"1", "2"}, []string{"2", "1", "1"}), "2", []int{1, 1, 1}, 3},
		{"decided not on every shard", "2", shards([]string{"1", "2"}, []string{"1", "1"}), "1", []int{1, 2}, 1},
		{"no decision: the most served", "", shards([]string{"1", "2"}, []string{"1", "2"}, []string{"2", "1", "1"}), "1", []int{1, 1, 2}, 3},
		{"no decision, a tie: the newer", "", shards([]string{"1", "2"}, []string{"1", "2"}), "2", []int{1, 1}, 2},
		{"nothing served", "", shards([]string{"", ""}), "", []int{0}, 1},
	} {
		st := Status{DecidedVersion: c.decided, Shards: c.shards}
		st.Summarize()
		var serving []int
		for _, sh := range st.Shards {
			serving = append(serving, sh.Serving)
		}
		if st.ServedVersion != c.served || !slices.Equal(serving, c.serving) || len(st.Lagging()) != c.lagging {
			t.Errorf("%s: served %q serving %v lagging %d; want %q %v %d", c.name, st.ServedVersion, serving, len(st.Lagging()), c.served, c.serving, c.lagging)
		}
	}
}
