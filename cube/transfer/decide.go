package transfer

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
)

// The transfer's decisions, as pure functions of what it has read: the
// donefiles' entries, its persisted state, the agents' reports. The I/O
// around them (reading, building, calling agents) is in transfer.go,
// rollout.go and heal.go.

// wanted is a version the donefile asks for.
type wanted struct {
	Entry   donefile.Entry
	Mode    string // "base" or "delta"
	Reshard bool   // the served base again, for a new shard count
}

// is reports whether the in-flight rollout r is w, so that it resumes
// rather than starts over.
func (w wanted) is(r *api.Rollout) bool {
	return r != nil && r.ID == w.Entry.ID && r.Mode == w.Mode
}

// nextBase decides from base.txt. When the served version was built for
// another shard count (builtFor, 0 if unknown, differs from shards: the
// transfer restarted with a new --shards), the served base is rebuilt for
// the new layout: keys move between shards, so every shard needs new
// files (in base_delta mode its patches are applied again afterwards, one
// by one). Otherwise the newest base newer than the served one. If the
// served base has left the donefile, a re-shard cannot happen; warn says so.
func nextBase(bases []donefile.Entry, st State, builtFor, shards int) (w wanted, ok bool, warn string) {
	if st.Served != "" && builtFor != 0 && builtFor != shards {
		for _, e := range bases {
			if e.ID == st.BaseID {
				return wanted{Entry: e, Mode: "base", Reshard: true}, true, ""
			}
		}
		warn = "re-sharding: the served base is no longer in the donefile; new shards stay empty until the next version"
	}
	if last, found := donefile.Last(bases); found && newer(last.ID, st.BaseID) {
		return wanted{Entry: last, Mode: "base"}, true, warn
	}
	return wanted{}, false, warn
}

// staleBase is the donefile's last base line when it will not roll out although it is not the
// served base: its id is not above the served base's (ids must grow). One id written in
// milliseconds among ids in seconds stops every later line this way, so it must be said.
func staleBase(bases []donefile.Entry, st State) (donefile.Entry, bool) {
	last, found := donefile.Last(bases)
	if !found || st.BaseID == "" || last.ID == st.BaseID || newer(last.ID, st.BaseID) {
		return donefile.Entry{}, false
	}
	return last, true
}

// staleReason says why a stale base line does not roll out.
func staleReason(e donefile.Entry, st State) string {
	return fmt.Sprintf("donefile line id %q is not above the served base's id %q, so it is not rolled out: ids must grow "+
		"(an id written once in milliseconds among ids in seconds stops every later line; remove that line and write ids that grow)", e.ID, st.BaseID)
}

// nextPatch decides from patch.txt (base_delta mode, a version served): the
// first patch of the served base newer than the served version. A patch
// that failed for good is passed over: a newer one (on the served version)
// goes ahead of it.
func nextPatch(patches []donefile.Entry, st State) (wanted, bool) {
	for _, p := range patches {
		if p.Key != st.BaseID || !newer(p.ID, st.ServedID) {
			continue
		}
		w := wanted{Entry: p, Mode: "delta"}
		if w.is(st.InFlight) && st.InFlight.Phase == api.PhaseFailed {
			continue
		}
		return w, true
	}
	return wanted{}, false
}

// newer compares donefile ids as numbers; anything is newer than "".
func newer(id, than string) bool {
	a, _ := strconv.ParseUint(id, 10, 63)
	b, _ := strconv.ParseUint(than, 10, 63)
	return than == "" || a > b
}

// retryDelay is the pause before retrying a rollout that failed attempts
// times: first, doubling, at most limit.
func retryDelay(attempts int, first, limit time.Duration) time.Duration {
	return min(first<<min(attempts, 10), limit)
}

// givesUp reports whether a failed rollout ends its version for good: the
// version itself cannot be built (brokenError), for good at once (final: an
// input over the size cap) or once builds has reached the attempts allowed.
// Anything else (a replica down, a download cut) is retried.
func givesUp(err error, builds, allowed int) bool {
	var broken *brokenError
	return errors.As(err, &broken) && (broken.final || builds >= allowed)
}

// brokenError is a failure that says the version itself cannot be built:
// trying the same input again is bounded (BuildAttempts), or pointless
// (final: the input is over the size cap).
type brokenError struct {
	err   error
	final bool
}

func (b *brokenError) Error() string { return b.err.Error() }
func (b *brokenError) Unwrap() error { return b.err }

// healTargets returns the replicas that answered and do not serve the
// decided version, and how many did not answer. reports[i] is rs[i]'s
// agent status; errs[i] its error.
func healTargets(decided string, rs []replica, reports []api.AgentStatus, errs []error) (behind []replica, unreachable int) {
	for i, rp := range rs {
		switch {
		case errs[i] != nil:
			unreachable++
		case reports[i].ServedVersion != decided:
			behind = append(behind, rp)
		}
	}
	return behind, unreachable
}

// healTarget is the version heal brings replicas to: the decided one. Once a commit is
// decided and its switch instant has passed, that is the version being committed: the
// replicas that switched serve it, so one that did not (it restarted, or did not answer in
// time) is switched at the next heal pass, rather than at the commit's next retry minutes
// later while it serves the old version beside siblings that serve the new one. Before the
// instant no replica may switch: "" (no heal).
func healTarget(st State, now time.Time) string {
	if r := st.InFlight; r != nil && r.Phase == api.PhaseCommitting {
		if r.CommitAt == 0 || now.Before(time.UnixMilli(r.CommitAt)) {
			return ""
		}
		return r.Version
	}
	return st.Served
}

// canHeal reports whether heal may run: there is a version to heal to (healTarget), built for
// the current shard count (otherwise the re-shard rollout reaches every replica).
func canHeal(target string, builtFor, shards int) bool {
	return target != "" && builtFor == shards
}

// kept are the versions a pin may name: the decided one and the one before it, the two
// that gc leaves in the output and every agent keeps on disk (the one before only when the
// state knows its donefile ids: a state saved before pins existed does not).
func kept(st State) []string {
	var vs []string
	if st.Served != "" {
		vs = append(vs, st.Served)
	}
	if st.Previous != "" && st.PreviousID != "" {
		vs = append(vs, st.Previous)
	}
	return vs
}

// pinnedRollout is the rollout that serves the pinned version again: the version before the
// served one, already built (its output is kept), so it starts at the prepare phase and
// switches every replica at one instant as any rollout does. ok is false when pin is the
// served version (nothing to do). A version that is not kept is an error that says which are.
func pinnedRollout(st State, pin string, now time.Time) (r *api.Rollout, ok bool, err error) {
	switch {
	case pin == st.Served:
		return nil, false, nil
	case pin != st.Previous || st.PreviousID == "":
		return nil, false, fmt.Errorf("serve_version %q is not kept: the cube keeps the served version and the one before it (%q); "+
			"the cube keeps serving %q", pin, kept(st), st.Served)
	}
	r = &api.Rollout{ID: st.PreviousID, Key: st.PreviousBaseID, Mode: "base", Version: pin, Phase: api.PhasePreparing, Triggered: now}
	if st.PreviousBaseID != st.PreviousID {
		r.Mode = "delta"
	}
	return r, true, nil
}
