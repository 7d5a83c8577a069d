package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// status is a transfer status as the transfer writes it: its decision and what each
// replica of each shard reports serving.
func status(decided string, shards ...[]string) api.Status {
	st := api.Status{DecidedVersion: decided}
	for i, vs := range shards {
		sh := api.ShardStatus{Shard: i}
		for r, v := range vs {
			sh.Replicas = append(sh.Replicas, api.ReplicaStatus{Addr: "replica-" + string(rune('a'+r)), ServedVersion: v, State: "idle"})
		}
		st.Shards = append(st.Shards, sh)
	}
	st.Summarize()
	return st
}

func TestServingValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		st      api.Status
		served  string
		serving string
		warn    []string // fragments of the warning; none: no warning
	}{
		{"every replica serves", status("v2", []string{"v2", "v2"}, []string{"v2", "v2"}), "v2", "[2,2]", nil},
		{"no model yet", status("", []string{"", ""}), "", "[0]", nil},
		{"a wiped replica", status("v2", []string{"v2", ""}, []string{"v2", "v2"}), "v2", "[1,2]",
			[]string{`shard 0: 1 of 2 replicas serve "v2"`, `replica-b serves "" (idle)`, "switches such replicas by itself"}},
		{"a dark shard", status("v2", []string{"v2", "v2"}, []string{"", ""}), "", "[2,0]",
			[]string{`shard 1: 0 of 2 replicas serve "v2"`, "no replica serving it fails every lookup"}},
	} {
		served, serving, warn := servingValues(c.st)
		if served != types.StringValue(c.served) || serving.String() != c.serving {
			t.Errorf("%s: served %s serving %s; want %q %s", c.name, served, serving, c.served, c.serving)
		}
		if (warn == "") != (len(c.warn) == 0) {
			t.Errorf("%s: warning %q", c.name, warn)
		}
		for _, f := range c.warn {
			if !strings.Contains(warn, f) {
				t.Errorf("%s: warning %q lacks %q", c.name, warn, f)
			}
		}
	}
}

// TestDonefileWarnings: the plan warns of a last line whose id does not grow and of lines
// that do not parse, naming them.
func TestDonefileWarnings(t *testing.T) {
	c := stack.Cube{Name: "cube", Namespace: "ads"}
	if d := donefileWarnings(c, api.Status{}); len(d) != 0 {
		t.Fatalf("warnings with nothing skipped: %v", d)
	}
	d := donefileWarnings(c, api.Status{Skipped: "id not above", SkippedLines: []string{"base.txt line 2: not JSON", "patch.txt line 1: no id"}})
	if len(d) != 2 || d[0].Summary() != "Cube Skips A Donefile Line" || d[1].Summary() != "Cube Skips Donefile Lines" ||
		!strings.Contains(d[1].Detail(), "base.txt line 2: not JSON; patch.txt line 1: no id") {
		t.Fatalf("warnings: %v", d)
	}
}
