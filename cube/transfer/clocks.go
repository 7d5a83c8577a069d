package transfer

import (
	"fmt"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
)

// Replicas switch at one instant of their own clocks, so a replica whose clock is off
// switches off the instant by as much. Every agent answer carries the agent's clock
// (AgentStatus.NowUnixUs); the transfer takes the middle of the call as the moment it was
// read, which gives the replica's offset within half the round trip. The offsets are
// reported (GET /status, the cube_transfer_clock_offset_seconds gauge), correct the switch
// window to the one clients see, and refuse a commit instant a replica cannot honour.

// clockReading is a replica's measured offset: of its recent answers, the one with the
// shortest round trip (a slow answer says little about the clock), kept for clockKeep.
type clockReading struct {
	offset, uncertainty time.Duration
	at                  time.Time
}

// clockKeep is how long a precise reading stands against less precise ones.
const clockKeep = 30 * time.Second

// noteClock records the offset an answer sent between sent and received shows.
func (t *Transfer) noteClock(r replica, st api.AgentStatus, sent, received time.Time) {
	if st.NowUnixUs == 0 {
		return // an agent that does not report its clock
	}
	rtt := received.Sub(sent)
	mid := sent.Add(rtt / 2)
	c := clockReading{offset: time.UnixMicro(st.NowUnixUs).Sub(mid), uncertainty: rtt / 2, at: received}
	t.clockMu.Lock()
	old, ok := t.clocks[r.addr]
	keep := ok && old.uncertainty < c.uncertainty && received.Sub(old.at) < clockKeep
	if !keep {
		t.clocks[r.addr] = c
	}
	t.clockMu.Unlock()
	if !keep {
		t.m.clockOffset.WithLabelValues(r.addr).Set(c.offset.Seconds())
	}
}

// clock is r's last reading; ok false if none.
func (t *Transfer) clock(r replica) (clockReading, bool) {
	t.clockMu.Lock()
	defer t.clockMu.Unlock()
	c, ok := t.clocks[r.addr]
	return c, ok
}

// checkClocks refuses, before the decision, a rollout that a replica could not switch at
// its instant: the instant, SwitchDelay ahead on the transfer's clock, must be ahead on the
// replica's (its clock not ahead by the delay or more) and at most api.MaxCommitAhead ahead
// (its clock not that far behind). The error names each replica and
// its offset; the rollout is tried again later, and the current version keeps serving.
func (t *Transfer) checkClocks(rs []replica) error {
	var bad []string
	for _, r := range rs {
		c, ok := t.clock(r)
		if !ok {
			continue
		}
		ahead := t.opts.SwitchDelay - c.offset // the instant, on the replica's clock, from now
		if ahead <= 0 || ahead > api.MaxCommitAhead {
			bad = append(bad, fmt.Sprintf("replica %s shard %d: its clock is %v off the transfer's (±%v), so the switch instant %v ahead would be %v ahead of it (it must be in (0, %v])",
				r.addr, r.shard, c.offset.Round(time.Microsecond), c.uncertainty.Round(time.Microsecond), t.opts.SwitchDelay, ahead.Round(time.Microsecond), api.MaxCommitAhead))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("clocks too far apart to switch at one instant: %v; fix the nodes' time sync", bad)
	}
	return nil
}

// windowOnTransferClock is the switch window clients see: each replica's reported switch
// time (on its clock) corrected by its offset, first to last.
func (t *Transfer) windowOnTransferClock(switched map[replica]int64) int64 {
	var lo, hi int64
	first := true
	for r, us := range switched {
		// An offset within its uncertainty is no offset anyone can tell from 0 (replicas on
		// one host): correcting by it would only add the measurement's noise.
		if c, ok := t.clock(r); ok && c.offset.Abs() > c.uncertainty {
			us -= c.offset.Microseconds()
		}
		if first {
			lo, hi, first = us, us, false
		}
		lo, hi = min(lo, us), max(hi, us)
	}
	return hi - lo
}
