package transfer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

// healLoop runs heal every HealInterval until ctx ends.
func (t *Transfer) healLoop(ctx context.Context) {
	tick := time.NewTicker(t.opts.HealInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.heal(ctx)
		}
	}
}

// heal brings every replica that does not serve the decided version (one
// restarted with an empty disk, rescheduled to another node, or just added)
// to it without waiting for a new model: prepare, then switch at once.
//
// It holds t.switching, as a rollout does from its prepare phase to its
// end, so the two never interleave: a replica is never healed to a version
// that its siblings are about to leave, and a rollout never finds a replica
// half-healed. While a decision is unfinished (phase committing, between the
// commit's attempts), the version every replica must reach is the new one:
// heal brings replicas to it once its instant has passed (healTarget).
func (t *Transfer) heal(ctx context.Context) {
	t.switching.Lock()
	defer t.switching.Unlock()
	st := t.snapshot()
	target := healTarget(st, time.Now())
	if !canHeal(target, t.builtFor(target), t.shards()) {
		return
	}
	rs := t.replicas()
	reports, errs := t.askAll(ctx, rs, t.opts.StepTimeout)
	var wg sync.WaitGroup
	behind, unreachable := healTargets(target, rs, reports, errs)
	serves := map[replica]string{}
	for i, rp := range rs {
		serves[rp] = reports[i].ServedVersion
	}
	n := len(rs)
	t.m.replicas.WithLabelValues("serving").Set(float64(n - len(behind) - unreachable))
	t.m.replicas.WithLabelValues("behind").Set(float64(len(behind)))
	t.m.replicas.WithLabelValues("unreachable").Set(float64(unreachable))
	for _, rp := range behind {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := t.healOne(ctx, rp, target)
			log := t.log.With("replica", rp.addr, "shard", rp.shard, "served", serves[rp], "version", target)
			if err != nil {
				if ctx.Err() == nil {
					t.m.heals.WithLabelValues("failed").Inc()
					log.Warn("replica does not serve the decided version and could not be healed; trying again", "err", err,
						"retry_in", t.opts.HealInterval.String())
				}
				return
			}
			t.m.heals.WithLabelValues("healed").Inc()
			log.Info("replica healed: it serves the decided version again", "duration_ms", time.Since(start).Milliseconds())
			t.unfence(rp)
		}()
	}
	wg.Wait()
}

// healOne prepares version on rp and switches it at once (it serves an
// older version or nothing: there is no instant to agree on).
func (t *Transfer) healOne(ctx context.Context, rp replica, version string) error {
	var discard api.Timings
	if err := t.prepare(ctx, version, []replica{rp}, &discard); err != nil {
		return err
	}
	return retry.Do(ctx, t.opts.Retries, t.opts.Backoff, func() error {
		st, err := t.call(ctx, rp, api.AgentCommitPath, api.CommitRequest{Version: version})
		if err == nil && st.ServedVersion != version {
			err = fmt.Errorf("replica %s shard %d: serves %q after commit", rp.addr, rp.shard, st.ServedVersion)
		}
		return err
	})
}

// unfence forgets that rp was fenced: it serves the decided version again (its agent
// lifted the fence itself at the commit).
func (t *Transfer) unfence(rp replica) {
	if _, ok := t.snapshot().Fenced[rp.addr]; !ok {
		return
	}
	if err := t.update(func(s *State) { delete(s.Fenced, rp.addr) }); err != nil {
		t.log.Error("persist", "err", err)
	}
}
