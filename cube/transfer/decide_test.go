package transfer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
)

func entries(ids ...string) []donefile.Entry {
	var es []donefile.Entry
	for _, id := range ids {
		es = append(es, donefile.Entry{ID: id, Key: id, Input: "in/" + id})
	}
	return es
}

func patches(base string, ids ...string) []donefile.Entry {
	var es []donefile.Entry
	for _, id := range ids {
		es = append(es, donefile.Entry{ID: id, Key: base, Input: "patch/" + id})
	}
	return es
}

func TestNextBase(t *testing.T) {
	served := State{Served: "1700000000", ServedID: "2000", BaseID: "2000"}
	for _, c := range []struct {
		name              string
		bases             []donefile.Entry
		st                State
		builtFor, shards  int
		want              string // entry id, "" for none
		reshard, warnings bool
	}{
		{"first base", entries("1000"), State{}, 0, 2, "1000", false, false},
		{"the newest base only", entries("1000", "2000", "3000"), State{}, 0, 2, "3000", false, false},
		{"nothing newer", entries("1000", "2000"), served, 2, 2, "", false, false},
		{"a newer base", entries("2000", "3000"), served, 2, 2, "3000", false, false},
		{"numeric, not lexical", entries("900", "10000"), State{Served: "v", BaseID: "9000"}, 2, 2, "10000", false, false},
		{"re-shard rebuilds the served base", entries("1000", "2000"), served, 2, 3, "2000", true, false},
		{"re-shard wins over a newer base", entries("2000", "3000"), served, 2, 3, "2000", true, false},
		{"unknown layout: no re-shard", entries("2000"), served, 0, 3, "", false, false},
		{"served base gone: warn, then newer", entries("3000"), served, 2, 3, "3000", false, true},
		{"served base gone, nothing newer", entries("1000"), served, 2, 3, "", false, true},
		{"empty donefile", nil, served, 2, 2, "", false, false},
	} {
		w, ok, warn := nextBase(c.bases, c.st, c.builtFor, c.shards)
		got := ""
		if ok {
			got = w.Entry.ID
		}
		if got != c.want || w.Reshard != c.reshard || (warn != "") != c.warnings || (ok && w.Mode != "base") {
			t.Errorf("%s: got %q reshard=%v mode=%q warn=%q; want %q reshard=%v warn=%v", c.name, got, w.Reshard, w.Mode, warn, c.want, c.reshard, c.warnings)
		}
	}
}

func TestNextPatch(t *testing.T) {
	st := State{Served: "1700000000", ServedID: "2001", BaseID: "2000"}
	failed := st
	failed.InFlight = &api.Rollout{ID: "2002", Mode: "delta", Phase: api.PhaseFailed}
	building := st
	building.InFlight = &api.Rollout{ID: "2002", Mode: "delta", Phase: api.PhaseBuilding}
	for _, c := range []struct {
		name    string
		patches []donefile.Entry
		st      State
		want    string
	}{
		{"the first newer patch of the served base", patches("2000", "2001", "2002", "2003"), st, "2002"},
		{"patches of another base are ignored", append(patches("1000", "2005"), patches("2000", "2003")...), st, "2003"},
		{"nothing newer", patches("2000", "2000", "2001"), st, ""},
		{"a failed patch is passed over", patches("2000", "2002", "2003"), failed, "2003"},
		{"only the failed one", patches("2000", "2002"), failed, ""},
		{"the one in flight resumes", patches("2000", "2002", "2003"), building, "2002"},
	} {
		w, ok := nextPatch(c.patches, c.st)
		got := ""
		if ok {
			got = w.Entry.ID
		}
		if got != c.want || (ok && w.Mode != "delta") {
			t.Errorf("%s: got %q (mode %q), want %q", c.name, got, w.Mode, c.want)
		}
		if ok && c.st.InFlight != nil && w.is(c.st.InFlight) != (c.st.InFlight.ID == got) {
			t.Errorf("%s: is(in flight) = %v", c.name, w.is(c.st.InFlight))
		}
	}
}

func TestRetryDelay(t *testing.T) {
	for _, c := range []struct {
		attempts int
		want     time.Duration
	}{{0, time.Second}, {1, 2 * time.Second}, {3, 8 * time.Second}, {9, 5 * time.Minute}, {1000, 5 * time.Minute}} {
		if got := retryDelay(c.attempts, time.Second, 5*time.Minute); got != c.want {
			t.Errorf("retryDelay(%d) = %s, want %s", c.attempts, got, c.want)
		}
	}
}

func TestGivesUp(t *testing.T) {
	build := &brokenError{err: errors.New("build: bad input")}
	for _, c := range []struct {
		name            string
		err             error
		builds, allowed int
		want            bool
	}{
		{"a replica down is retried", errors.New("replica x: connection refused"), 5, 3, false},
		{"a build error, attempts left", build, 1, 3, false},
		{"a build error, attempts used", build, 3, 3, true},
		{"wrapped", fmt.Errorf("rollout: %w", build), 3, 3, true},
		{"over the size cap: at once", &brokenError{err: errors.New("too large"), final: true}, 0, 3, true},
	} {
		if got := givesUp(c.err, c.builds, c.allowed); got != c.want {
			t.Errorf("%s: givesUp = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHealDecisions(t *testing.T) {
	rs := []replica{{0, "a"}, {0, "b"}, {1, "c"}, {1, "d"}}
	reports := []api.AgentStatus{{ServedVersion: "2"}, {ServedVersion: ""}, {ServedVersion: "1"}, {}}
	errs := []error{nil, nil, nil, errors.New("refused")}
	behind, unreachable := healTargets("2", rs, reports, errs)
	if len(behind) != 2 || behind[0].addr != "b" || behind[1].addr != "c" || unreachable != 1 {
		t.Fatalf("behind %v unreachable %d; want b, c and 1", behind, unreachable)
	}
	now := time.UnixMilli(1700000000000)
	committing := func(at time.Time) *api.Rollout {
		return &api.Rollout{Version: "3", Phase: api.PhaseCommitting, CommitAt: at.UnixMilli()}
	}
	for _, c := range []struct {
		name             string
		st               State
		builtFor, shards int
		target           string
		want             bool
	}{
		{"nothing rolled out", State{}, 0, 2, "", false},
		{"served, same layout", State{Served: "2"}, 2, 2, "2", true},
		{"built for another layout: the re-shard does it", State{Served: "2"}, 3, 2, "2", false},
		{"a build in flight", State{Served: "2", InFlight: &api.Rollout{Phase: api.PhaseBuilding}}, 2, 2, "2", true},
		{"a prepare that failed, waiting to retry", State{Served: "2", InFlight: &api.Rollout{Phase: api.PhasePreparing}}, 2, 2, "2", true},
		{"a decided commit past its instant: to the new version", State{Served: "2", InFlight: committing(now.Add(-time.Second))}, 2, 2, "3", true},
		{"a decided commit before its instant: none may switch", State{Served: "2", InFlight: committing(now.Add(time.Second))}, 2, 2, "", false},
		{"a decided commit with no instant (older state)", State{Served: "2", InFlight: &api.Rollout{Version: "3", Phase: api.PhaseCommitting}}, 2, 2, "", false},
	} {
		target := healTarget(c.st, now)
		if got := canHeal(target, c.builtFor, c.shards); target != c.target || got != c.want {
			t.Errorf("%s: target %q, canHeal = %v; want %q, %v", c.name, target, got, c.target, c.want)
		}
	}
}

// TestStaleBase: the last base line is reported when it will not roll out although it is not
// the served base: an id not above the served one (written in milliseconds once, then in
// seconds; or not a number at all).
func TestStaleBase(t *testing.T) {
	served := State{Served: "v", BaseID: "1700000000000"}
	for _, c := range []struct {
		name  string
		bases []donefile.Entry
		st    State
		stale bool
	}{
		{"seconds after milliseconds", entries("1700000000000", "1700003600"), served, true},
		{"not a number", entries("1700000000000", "next"), served, true},
		{"the served line itself", entries("1700000000000"), served, false},
		{"a newer line rolls out", entries("1700000000000", "1700000003600"), served, false},
		{"nothing served yet", entries("1000"), State{}, false},
		{"empty donefile", nil, served, false},
	} {
		e, stale := staleBase(c.bases, c.st)
		if stale != c.stale {
			t.Errorf("%s: stale=%v, want %v", c.name, stale, c.stale)
		}
		if stale && !strings.Contains(staleReason(e, c.st), e.ID) {
			t.Errorf("%s: the reason does not name the line: %s", c.name, staleReason(e, c.st))
		}
	}
}

func TestPinnedRollout(t *testing.T) {
	now := time.Unix(1700000500, 0)
	base := State{Served: "1700000200", ServedID: "2000", BaseID: "2000", Previous: "1700000100", PreviousID: "1000", PreviousBaseID: "1000"}
	if r, ok, err := pinnedRollout(base, "1700000200", now); ok || err != nil || r != nil {
		t.Fatalf("pin on the served version: %v %v %v; want nothing to do", r, ok, err)
	}
	r, ok, err := pinnedRollout(base, "1700000100", now)
	if !ok || err != nil {
		t.Fatalf("pin on the previous version: %v %v", ok, err)
	}
	want := api.Rollout{ID: "1000", Key: "1000", Mode: "base", Version: "1700000100", Phase: api.PhasePreparing, Triggered: now}
	if *r != want {
		t.Fatalf("rollout %+v, want %+v (built already: it starts at prepare)", *r, want)
	}
	delta := base
	delta.Previous, delta.PreviousID, delta.PreviousBaseID = "1700000100_1700000150", "1500", "1000"
	if r, _, _ := pinnedRollout(delta, delta.Previous, now); r.Mode != "delta" || r.Key != "1000" || r.ID != "1500" {
		t.Fatalf("pin on a patched version: %+v, want mode delta of base 1000", *r)
	}
	for name, st := range map[string]State{
		"older than kept":        base,
		"state from before pins": {Served: "1700000200", ServedID: "2000", BaseID: "2000", Previous: "1700000050"},
	} {
		_, ok, err := pinnedRollout(st, "1700000050", now)
		if ok || err == nil || !strings.Contains(err.Error(), "not kept") || !strings.Contains(err.Error(), st.Served) {
			t.Errorf("%s: ok %v err %v; want an error naming what is kept and served", name, ok, err)
		}
	}
	if got := kept(base); !slices.Equal(got, []string{"1700000200", "1700000100"}) {
		t.Errorf("kept %v", got)
	}
	if got := kept(State{Served: "1700000200", Previous: "1700000100"}); !slices.Equal(got, []string{"1700000200"}) {
		t.Errorf("kept without the previous version's ids: %v; want only the served one", got)
	}
}
