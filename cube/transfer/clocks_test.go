package transfer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

// skewedAgent stands in for an agent whose clock is skew ahead of the real one: it reports
// that clock, and switches at a commit's instant by it (reporting that instant, as agents do).
func skewedAgent(t *testing.T, skew time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := api.AgentStatus{State: api.AgentIdle, NowUnixUs: time.Now().Add(skew).UnixMicro()}
		if r.URL.Path == api.AgentCommitPath {
			var req api.CommitRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			st.ServedVersion, st.SwitchedAtUnixUs = req.Version, req.AtUnixMs*1000
		}
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func near(got, want, tol time.Duration) bool { return got > want-tol && got < want+tol }

// TestClockOffsetsMeasured: every agent answer gives its replica's clock offset, shown in
// GET /status with its uncertainty.
func TestClockOffsetsMeasured(t *testing.T) {
	ahead, behind := skewedAgent(t, 3*time.Second), skewedAgent(t, -1500*time.Millisecond)
	tr := transferOver(t, [][]string{{ahead}, {behind}})
	st := tr.Status(context.Background())
	for i, want := range []time.Duration{3 * time.Second, -1500 * time.Millisecond} {
		r := st.Shards[i].Replicas[0]
		got := time.Duration(r.ClockOffsetUs) * time.Microsecond
		if !near(got, want, 50*time.Millisecond) || r.ClockUncertaintyUs <= 0 {
			t.Errorf("shard %d: offset %v ± %dµs, want about %v", i, got, r.ClockUncertaintyUs, want)
		}
	}
}

// TestCommitRefusedForAClockThatCannotHonourIt: before the decision, a replica whose clock
// is ahead by the switch delay or more (the instant would be past for it) or behind by more
// than api.MaxCommitAhead allows is refused by name with its offset; a few ms is not.
func TestCommitRefusedForAClockThatCannotHonourIt(t *testing.T) {
	for _, tc := range []struct {
		skew time.Duration
		ok   bool
	}{{5 * time.Millisecond, true}, {-2 * time.Second, true}, {time.Second, false}, {-6 * time.Second, false}} {
		addr := skewedAgent(t, tc.skew)
		tr := transferOver(t, [][]string{{addr}})
		rs := tr.replicas()
		if _, err := tr.call(context.Background(), rs[0], api.AgentStatusPath, nil); err != nil {
			t.Fatal(err)
		}
		err := tr.checkClocks(rs)
		if tc.ok != (err == nil) {
			t.Errorf("clock %v off, switch delay %v: %v", tc.skew, tr.opts.SwitchDelay, err)
		}
		if err != nil && (!strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "its clock is")) {
			t.Errorf("the refusal does not name the replica and its offset: %v", err)
		}
	}
}

// TestSwitchWindowOnTheTransferClock: two replicas switch at the same instant of their own
// clocks, 200 ms apart; both report that instant, so the window used to read 0 while clients
// saw two versions for 200 ms. It is now measured on the transfer's clock.
func TestSwitchWindowOnTheTransferClock(t *testing.T) {
	tr := transferOver(t, [][]string{{skewedAgent(t, 0)}, {skewedAgent(t, 200*time.Millisecond)}})
	r := &api.Rollout{Version: "1700000000", CommitAt: time.Now().Add(time.Second).UnixMilli()}
	var tm api.Timings
	if _, err := tr.commitAll(retry.WithLog(context.Background(), tr.log), r, &tm); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(tm.WindowUs) * time.Microsecond; !near(got, 200*time.Millisecond, 30*time.Millisecond) {
		t.Fatalf("window %v, want about 200ms", got)
	}
}
