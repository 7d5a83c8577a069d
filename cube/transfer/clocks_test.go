package transfer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

func near(got, want, tol time.Duration) bool { return got > want-tol && got < want+tol }

// TestClockOffsetsMeasured: every agent answer gives its replica's clock offset, shown in
// GET /status with its uncertainty.
func TestClockOffsetsMeasured(t *testing.T) {
	ahead, behind := (&fakeAgent{skew: 3 * time.Second}).start(t).addr, (&fakeAgent{skew: -1500 * time.Millisecond}).start(t).addr
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
		addr := (&fakeAgent{skew: tc.skew}).start(t).addr
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
	tr := transferOver(t, [][]string{{(&fakeAgent{skew: 0}).start(t).addr}, {(&fakeAgent{skew: 200 * time.Millisecond}).start(t).addr}})
	r := &api.Rollout{Version: "1700000000", CommitAt: time.Now().Add(time.Second).UnixMilli()}
	var tm api.Timings
	if _, err := tr.commitAll(retry.WithLog(context.Background(), tr.log), r, &tm); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(tm.WindowUs) * time.Microsecond; !near(got, 200*time.Millisecond, 30*time.Millisecond) {
		t.Fatalf("window %v, want about 200ms", got)
	}
}
