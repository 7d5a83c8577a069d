package api

import "time"

// StatusPath is the transfer's status document (Status), GET on its --listen port.
const StatusPath = "/status"

// Phases of a rollout in flight, persisted so that a restart resumes it.
const (
	PhaseBuilding   = "building"
	PhasePreparing  = "preparing"
	PhaseCommitting = "committing" // decided: only ever rolls forward
	// PhaseFailed: the version cannot be built (its build failed or panicked
	// BuildAttempts times, or its input is over MaxInputBytes). It is not
	// tried again; the transfer waits for a newer donefile line.
	PhaseFailed = "failed"
)

// Rollout is a version in flight.
type Rollout struct {
	ID        string    `json:"id"`   // donefile id
	Key       string    `json:"key"`  // donefile key (the base's id)
	Mode      string    `json:"mode"` // base or delta
	Input     string    `json:"input"`
	Version   string    `json:"version"` // cube version name, fixed when triggered
	Base      string    `json:"base,omitempty"`
	Phase     string    `json:"phase"`
	Triggered time.Time `json:"triggered"`
	Attempts  int       `json:"attempts"`
	// BuildAttempts counts builds started, saved before each one begins, so
	// that a build that takes the process down (out of memory) is counted too
	// and a restart does not loop on it.
	BuildAttempts int       `json:"build_attempts,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
	NextTry       time.Time `json:"next_try"`
	// CommitAt is the instant every replica switches (Unix ms), fixed with the decision to
	// commit and persisted with it: a transfer that restarts mid-commit sends the same
	// instant, so replicas told before and after the crash still switch together.
	CommitAt int64 `json:"commit_at,omitempty"`
}

// Record is one finished rollout attempt.
type Record struct {
	ID       string    `json:"id"`
	Version  string    `json:"version"`
	Mode     string    `json:"mode"`
	Result   string    `json:"result"` // served, aborted
	Error    string    `json:"error,omitempty"`
	Finished time.Time `json:"finished"`
	Timings
}

// Timings split a rollout's duration, in milliseconds.
type Timings struct {
	TotalMs    int64 `json:"total_ms"`    // donefile line seen → every replica serving
	DownloadMs int64 `json:"download_ms"` // input download
	BuildMs    int64 `json:"build_ms"`
	DistribMs  int64 `json:"distribution_ms"` // agents downloading + verifying shards (slowest replica)
	LoadMs     int64 `json:"load_ms"`         // agents mapping + checksumming (slowest replica)
	PrepareMs  int64 `json:"prepare_ms"`      // the whole prepare phase
	SwitchMs   int64 `json:"switch_ms"`       // the commit phase
	WindowUs   int64 `json:"window_us"`       // first to last replica switching, on the transfer's clock (each replica's switch corrected by its clock offset)
}

// ReplicaStatus is one replica in GET /status.
type ReplicaStatus struct {
	Addr          string `json:"addr"`
	ServedVersion string `json:"served_version"`
	State         string `json:"state"` // the agent's state, or "unreachable"
	Version       string `json:"version,omitempty"`
	Error         string `json:"error,omitempty"`
	// ClockOffsetUs is how far the replica's clock is ahead of the transfer's (negative:
	// behind), from its last answer's time (AgentStatus.NowUnixUs) against the middle of
	// the call; ClockUncertaintyUs is half that call's round trip. Both 0 until measured.
	ClockOffsetUs      int64 `json:"clock_offset_us"`
	ClockUncertaintyUs int64 `json:"clock_uncertainty_us,omitempty"`
}

// ShardStatus is one shard in GET /status.
type ShardStatus struct {
	Shard int `json:"shard"`
	// Serving counts the replicas that serve the Status's ServedVersion.
	Serving  int             `json:"serving"`
	Replicas []ReplicaStatus `json:"replicas"`
}

// MaxSkippedLines bounds Status.SkippedLines.
const MaxSkippedLines = 10

// Status is the reply of GET /status.
type Status struct {
	Dict string `json:"dict"`
	// ServedVersion is what the replicas report (see Summarize): the
	// version that at least one replica of every shard serves, so that
	// every key can be answered from it; "" when there is none.
	ServedVersion string `json:"served_version"`
	// DecidedVersion is the version the transfer last rolled out to every
	// replica: the one it prepares and switches replicas that do not serve
	// it to (a restart with an empty disk, a new replica).
	DecidedVersion string `json:"decided_version"`
	InFlight       string `json:"in_flight"`
	Phase          string `json:"phase,omitempty"`
	// Error says why the last version failed for good (phase "failed"; then
	// InFlight is empty and Rollout says which version it was).
	Error string `json:"error,omitempty"`
	// Skipped says why the donefile's last line is not rolled out, when it is not the
	// served one (its id is not above the served one's); "" otherwise.
	Skipped string `json:"skipped,omitempty"`
	// SkippedLines are the donefiles' lines that do not parse (garbage, a partial line,
	// an id that is not a number), each "<file> line <n>: <reason>", at most
	// MaxSkippedLines of them; none are rolled out.
	SkippedLines []string `json:"skipped_lines,omitempty"`
	// Pinned is the version the transfer is pinned to (`cube transfer --serve-version`,
	// ctr_cube's serve_version): it rolls that version out, heals replicas to it, and rolls no
	// donefile line out until the pin is removed; "" when not pinned.
	Pinned string `json:"pinned,omitempty"`
	// PinError says why the pinned version cannot be served (it is not kept); the cube
	// keeps serving what it served.
	PinError string `json:"pin_error,omitempty"`
	// Kept are the versions a pin may name: the decided one and the one before it, which
	// the transfer and every replica keep on disk.
	Kept    []string `json:"kept_versions,omitempty"`
	Rollout *Rollout `json:"rollout,omitempty"`
	// RepliesAsOf is when the transfer began asking the replicas for Shards: answers are
	// shared by the requests of about a second (the endpoint is open to every pod).
	RepliesAsOf time.Time     `json:"replies_as_of"`
	Shards      []ShardStatus `json:"shards"`
	History     []Record      `json:"history"`
}

// ServedID is the donefile id of the served version, from its history record; "" when no
// version is served, or the history does not name it.
func (s Status) ServedID() string {
	if s.ServedVersion == "" {
		return ""
	}
	for i := len(s.History) - 1; i >= 0; i-- {
		if r := s.History[i]; r.Version == s.ServedVersion && r.Result == "served" {
			return r.ID
		}
	}
	return ""
}

// Summarize sets ServedVersion and every shard's Serving from what the
// replicas report. Of the versions that at least one replica of every shard
// serves, it picks the decided one; failing that (the transfer lost its
// state), the one most replicas serve, then the newer name. Serving counts
// the replicas that serve the Reference version.
func (s *Status) Summarize() {
	counts := map[string][]int{} // version → replicas serving it, per shard
	for i, sh := range s.Shards {
		for _, r := range sh.Replicas {
			if r.ServedVersion == "" {
				continue
			}
			if counts[r.ServedVersion] == nil {
				counts[r.ServedVersion] = make([]int, len(s.Shards))
			}
			counts[r.ServedVersion][i]++
		}
	}
	best, bestN := "", 0
	for v, c := range counts {
		n := 0
		for _, k := range c {
			if k == 0 {
				n = -1
				break
			}
			n += k
		}
		switch {
		case n < 0, best == s.DecidedVersion && best != "":
		case v == s.DecidedVersion, n > bestN, n == bestN && v > best:
			best, bestN = v, n
		}
	}
	s.ServedVersion = best
	ref := s.Reference()
	for i := range s.Shards {
		s.Shards[i].Serving = 0
		if counts[ref] != nil {
			s.Shards[i].Serving = counts[ref][i]
		}
	}
}

// Reference is the version each shard's Serving counts: ServedVersion, or,
// while no version is served on every shard, DecidedVersion.
func (s Status) Reference() string {
	if s.ServedVersion != "" {
		return s.ServedVersion
	}
	return s.DecidedVersion
}

// Lagging returns the shards where some replica does not serve the
// Reference version (every shard when there is none).
func (s Status) Lagging() []ShardStatus {
	var out []ShardStatus
	for _, sh := range s.Shards {
		if s.Reference() == "" || sh.Serving < len(sh.Replicas) {
			out = append(out, sh)
		}
	}
	return out
}
