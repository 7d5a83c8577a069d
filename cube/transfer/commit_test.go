package transfer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

func committingTransfer(t *testing.T, replicas [][]string) *Transfer {
	t.Helper()
	tr := newTestTransfer(t, Options{Replicas: replicas, CommitTimeout: 300 * time.Millisecond, Retries: 1, Backoff: time.Millisecond,
		RetryAfter: 20 * time.Millisecond, MaxRetryAfter: 20 * time.Millisecond, StepTimeout: time.Second})
	r := &api.Rollout{ID: "1700000000", Version: "1700000000", Mode: "base", Phase: api.PhaseCommitting, CommitAt: time.Now().Add(50 * time.Millisecond).UnixMilli()}
	if err := tr.update(func(s *State) { s.InFlight = r }); err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestCommitPhaseIsBounded: a replica that cannot commit no longer freezes the cube on
// two versions: after CommitTimeout, with every shard served by a replica that switched,
// the stuck one is fenced (out of service until it serves the decided version), named in
// /status, and the rollout is done, so the next model can go. Before, the transfer retried
// that commit for ever, reading no donefile and healing nothing meanwhile.
func TestCommitPhaseIsBounded(t *testing.T) {
	ok, stuck := (&fakeAgent{}).start(t), (&fakeAgent{failing: true}).start(t)
	tr := committingTransfer(t, [][]string{{ok.addr, stuck.addr}})
	ctx := retry.WithLog(context.Background(), tr.log)
	deadline := time.Now().Add(10 * time.Second)
	for tr.snapshot().Served != "1700000000" {
		if time.Now().After(deadline) {
			t.Fatalf("still committing after 10 s: %+v", tr.snapshot().InFlight)
		}
		tr.step(ctx)
		time.Sleep(5 * time.Millisecond)
	}
	if tr.snapshot().InFlight != nil {
		t.Fatal("the rollout is still in flight")
	}
	if stuck.fenced.Load() == 0 || ok.fenced.Load() != 0 {
		t.Fatalf("fences sent: stuck replica %d, the one that switched %d", stuck.fenced.Load(), ok.fenced.Load())
	}
	st := tr.Status(ctx)
	r := st.Shards[0].Replicas[1]
	if r.State != "fenced" || !strings.Contains(r.Error, "could not switch to 1700000000 within --commit-timeout") {
		t.Fatalf("the stuck replica in /status: %+v", r)
	}
}

// TestCommitPhaseWaitsWhileAShardHasNoSwitchedReplica: when every replica of a shard is
// stuck, fencing them would leave that shard's keys unserved: the commit goes on.
func TestCommitPhaseWaitsWhileAShardHasNoSwitchedReplica(t *testing.T) {
	ok, stuck := (&fakeAgent{}).start(t), (&fakeAgent{failing: true}).start(t)
	tr := committingTransfer(t, [][]string{{ok.addr}, {stuck.addr}})
	ctx := retry.WithLog(context.Background(), tr.log)
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		tr.step(ctx)
	}
	if in := tr.snapshot().InFlight; in == nil || in.Phase != api.PhaseCommitting || stuck.fenced.Load() != 0 {
		t.Fatalf("in flight %+v, fences %d: want still committing, nothing fenced", in, stuck.fenced.Load())
	}
}
