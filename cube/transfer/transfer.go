// Package transfer watches a donefile, builds every new version into shard
// dictionaries, publishes them with sha256 manifests and rolls them out to
// every replica in two phases (prepare everywhere, then commit), so that all
// shards switch to a version together or none does.
package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/atomicfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/token"
	"golang.org/x/sync/singleflight"
)

// DefaultMaxLayers is the layers a patch may be served over before one is
// built in full (Options.MaxLayers).
const DefaultMaxLayers = 8

// DefaultHealInterval is how often, by default, every replica is asked
// what it serves (Options.HealInterval).
const DefaultHealInterval = 5 * time.Second

// Defaults of Options, used by New and by the transfer command's flags.
const (
	DefaultPoll             = time.Minute
	DefaultPrepareTimeout   = 10 * time.Minute
	DefaultStepTimeout      = 5 * time.Second
	DefaultConnectTimeout   = 5 * time.Second
	DefaultHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout      = 30 * time.Second
	DefaultDonefileTimeout  = 30 * time.Second
	DefaultInputTimeout     = 30 * time.Minute
	DefaultInputDiskReserve = 1 << 30
	DefaultBuildAttempts    = 3
	DefaultRetries          = 3
	DefaultBackoff          = 200 * time.Millisecond
	DefaultSwitchDelay      = 250 * time.Millisecond
	DefaultCommitTimeout    = 2 * time.Minute
	DefaultMaxRetryAfter    = 5 * time.Minute
)

// Options configure a Transfer. Zero durations take the documented defaults.
type Options struct {
	Donefile  string     // base.txt, a local path or http(s) URL; patch.txt is its sibling
	Dict      string     // dictionary name
	Replicas  [][]string // HOST:PORT of every replica, per shard: one list per shard, so the shard count
	Work      string     // state, downloaded input, built versions (served under /files/)
	PublicURL string     // how agents reach this transfer; shards are at PublicURL/files/<version>/
	Token     string     // bearer token for the agents (and POST /trigger)
	// TokenFile, if set, holds the token instead, read again when it changes
	// (a rotated Secret), the token it replaced still offered to agents that
	// refuse the new one and accepted on POST /trigger for api.ControlTokenGrace.
	TokenFile string
	Mode      string // "base" or "base_delta"
	// MaxLayers, in base_delta mode, builds each patch as a layer holding
	// only its keys, served over the version before it, while that version
	// has fewer than MaxLayers layers under it. Once the served version has
	// MaxLayers layers, the transfer merges them, between donefile lines: it
	// builds the served version in full under a new name and rolls it out
	// as any version (a patch that comes first is built in full instead).
	// 0: every patch in full. DefaultMaxLayers is the command's default.
	MaxLayers int
	// ServeVersion pins the cube to a kept version (State.kept: the decided one or the one
	// before it): the transfer rolls it out as any version (prepare everywhere, one switch
	// instant), heals replicas to it, and rolls no donefile line out while it is set. A
	// version that is not kept is reported (Status.PinError) and nothing changes. "" unpins:
	// the donefile's newest lines roll out again.
	ServeVersion string
	// Poll is the donefile polling interval. If 0, DefaultPoll.
	Poll time.Duration
	// PrepareTimeout bounds the prepare phase of one rollout (download,
	// verify, background load on every replica). If 0, DefaultPrepareTimeout.
	PrepareTimeout time.Duration
	// StepTimeout bounds one call to an agent. If 0, DefaultStepTimeout.
	StepTimeout time.Duration
	// ConnectTimeout bounds connecting (and a TLS handshake) to the donefile
	// server, the input server or an agent. If 0, DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for a response header once a request is
	// sent. If 0, DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout ends a request whose connection moves no byte for that
	// long (a server that accepts and never answers, or trickles). If 0, DefaultIdleTimeout.
	IdleTimeout time.Duration
	// DonefileTimeout bounds one read of base.txt or patch.txt. If 0, DefaultDonefileTimeout.
	DonefileTimeout time.Duration
	// InputTimeout bounds mirroring one version's input: every listing, file
	// and retry. If 0, DefaultInputTimeout.
	InputTimeout time.Duration
	// MaxInputBytes caps one version's mirrored input; a mirror that grows
	// past it, or a server that declares a larger file, fails the version.
	// If 0, half of what the work disk has free beyond InputDiskReserve at
	// the start of the mirror (the build then writes about as much again).
	MaxInputBytes int64
	// InputDiskReserve is what the default MaxInputBytes leaves free on the
	// work disk. If 0, DefaultInputDiskReserve.
	InputDiskReserve int64
	// BuildAttempts is how many times one version's build is tried before
	// the version is marked failed and the transfer waits for a newer
	// donefile line. If 0, DefaultBuildAttempts.
	BuildAttempts int
	// Seq is how the builds read the input (key order, record and block
	// limits); zero limits take seqfile's defaults.
	Seq seqfile.Options
	// AllowEmpty publishes a version whose input holds no record (every key
	// misses); if false such a version fails (build.ErrEmptyInput).
	AllowEmpty bool
	// Retries is the number of extra attempts of one call. If 0, DefaultRetries.
	Retries int
	// Backoff is the first pause between attempts, doubling. If 0, DefaultBackoff.
	Backoff time.Duration
	// SwitchDelay is how far ahead of "now" the commit instant is set, so
	// that every replica has the commit in hand before any switches: a
	// commit that arrives late makes its replica switch late. If 0, DefaultSwitchDelay
	// (100 ms was overrun by commits on a loaded 2-core machine).
	SwitchDelay time.Duration
	// CommitTimeout bounds the commit phase, from the switch instant: a replica that has
	// not switched by then is fenced (out of service until it serves the decided version)
	// and left to the heal pass, and the rollout is done, so later models move on. If 0,
	// DefaultCommitTimeout.
	CommitTimeout time.Duration
	// HealInterval is how often every replica is asked what it serves; one
	// that does not serve the decided version is prepared and switched to it
	// (see heal). If 0, DefaultHealInterval.
	HealInterval time.Duration
	// RetryAfter is the first pause before retrying a failed rollout,
	// doubling up to MaxRetryAfter. If 0, Poll.
	RetryAfter time.Duration
	// MaxRetryAfter caps that pause. If 0, DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	Log           *slog.Logger
}

func (o *Options) defaults() error {
	switch {
	case o.Donefile == "":
		return errors.New("transfer: donefile is required")
	case o.Dict == "":
		return errors.New("transfer: dict is required")
	case len(o.Replicas) < 1:
		return errors.New("transfer: the replicas of at least one shard are required")
	case o.Work == "":
		return errors.New("transfer: work directory is required")
	case o.PublicURL == "":
		return errors.New("transfer: public URL is required")
	case o.Token == "" && o.TokenFile == "":
		return errors.New("transfer: a control token is required (agents refuse calls without it)")
	}
	for i, r := range o.Replicas {
		if len(r) == 0 {
			return fmt.Errorf("transfer: shard %d has no replicas", i)
		}
	}
	if o.ServeVersion != "" && !layout.ValidVersion(o.ServeVersion) {
		return fmt.Errorf("transfer: serve version %q is not a version name (digits, or digits_digits, as the status's decided_version shows)", o.ServeVersion)
	}
	if o.Mode == "" {
		o.Mode = "base"
	}
	if o.Mode != "base" && o.Mode != "base_delta" {
		return fmt.Errorf("transfer: mode %q: want base or base_delta", o.Mode)
	}
	o.PublicURL = strings.TrimSuffix(o.PublicURL, "/")
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Poll, DefaultPoll)
	def(&o.PrepareTimeout, DefaultPrepareTimeout)
	def(&o.StepTimeout, DefaultStepTimeout)
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.HeaderTimeout, DefaultHeaderTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	def(&o.DonefileTimeout, DefaultDonefileTimeout)
	def(&o.InputTimeout, DefaultInputTimeout)
	def(&o.CommitTimeout, DefaultCommitTimeout)
	if o.InputDiskReserve <= 0 {
		o.InputDiskReserve = DefaultInputDiskReserve
	}
	if o.BuildAttempts <= 0 {
		o.BuildAttempts = DefaultBuildAttempts
	}
	def(&o.Backoff, DefaultBackoff)
	def(&o.SwitchDelay, DefaultSwitchDelay)
	def(&o.HealInterval, DefaultHealInterval)
	def(&o.RetryAfter, o.Poll)
	def(&o.MaxRetryAfter, DefaultMaxRetryAfter)
	if o.Retries <= 0 {
		o.Retries = DefaultRetries
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return nil
}

// State is what the transfer remembers across restarts (<work>/state.json).
type State struct {
	Served   string `json:"served_version"`
	ServedID string `json:"served_id"` // donefile id of the served version
	BaseID   string `json:"base_id"`   // donefile id of the served base
	Previous string `json:"previous_version,omitempty"`
	// PreviousID and PreviousBaseID are Previous's donefile id and its base's id, so that a
	// pin can serve it again (Options.ServeVersion).
	PreviousID     string       `json:"previous_id,omitempty"`
	PreviousBaseID string       `json:"previous_base_id,omitempty"`
	InFlight       *api.Rollout `json:"in_flight,omitempty"`
	History        []api.Record `json:"history"`
	// Fenced are the replicas (address -> why) taken out of service because they could not
	// switch to the served version within CommitTimeout; the heal pass brings them back.
	Fenced map[string]string `json:"fenced,omitempty"`
}

// Transfer is the rollout controller.
type Transfer struct {
	opts  Options
	log   *slog.Logger
	http  *http.Client
	token *token.Token // Options.Token or TokenFile
	m     *metrics
	kick  chan struct{}
	build func(build.Options) (*layout.Manifest, error) // build.Build; tests replace it

	clockMu sync.Mutex
	clocks  map[string]clockReading // by replica address (clocks.go)

	viewMu     sync.Mutex
	view       *replicaAnswers    // the last fan-out of GET /status (replicaView)
	viewFlight singleflight.Group // the fan-out in flight

	mu    sync.Mutex
	state State
	// unparsed are the lines of each donefile read that do not parse (readEntries).
	unparsed map[string][]string
	// skipped says why the donefile's last line does not roll out (noteStale); "" when
	// nothing is skipped.
	skipped string
	// pinErr says why the pinned version cannot be served (stepPinned); "" when it can.
	pinErr string
	// mergeFailed is the served version whose layers failed to merge
	// (mergeRollout), so that the merge is not tried again every poll.
	mergeFailed string

	// switching is held by a rollout from its prepare phase to its end and
	// by heal: they never interleave (see heal).
	switching sync.Mutex
}

// New loads the persisted state from Work.
func New(opts Options) (*Transfer, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	t := &Transfer{opts: opts, log: opts.Log, http: newHTTPClient(opts.ConnectTimeout, opts.HeaderTimeout, opts.IdleTimeout),
		m: newMetrics(), kick: make(chan struct{}, 1), build: build.Build, token: token.Static(opts.Token), unparsed: map[string][]string{},
		clocks: map[string]clockReading{}}
	if opts.TokenFile != "" {
		tk, err := token.FromFile(opts.TokenFile, api.ControlTokenGrace)
		if err != nil {
			return nil, fmt.Errorf("transfer: control token: %w", err)
		}
		t.token = tk
	}
	for _, d := range []string{opts.Work, t.outputDir(), t.inputDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(t.statePath())
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &t.state); err != nil {
			return nil, fmt.Errorf("transfer: state %q: %w", t.statePath(), err)
		}
	case !os.IsNotExist(err):
		return nil, err
	}
	// Builds interrupted by a crash leave temporary directories behind, and
	// inputs of versions no longer in flight may be left from before one.
	removeGlob(filepath.Join(t.outputDir(), ".tmp-*"))
	t.gcInputs(t.state.InFlight)
	t.m.served(t.state.Served)
	t.log.Info("transfer state loaded", "served_version", t.state.Served, "in_flight", inFlightVersion(t.state.InFlight))
	return t, nil
}

func inFlightVersion(r *api.Rollout) string {
	if r == nil {
		return ""
	}
	return r.Version
}

// shards is the shard count: one list of replicas per shard.
func (t *Transfer) shards() int { return len(t.opts.Replicas) }

func (t *Transfer) statePath() string { return filepath.Join(t.opts.Work, "state.json") }
func (t *Transfer) outputDir() string { return filepath.Join(t.opts.Work, "output") }
func (t *Transfer) inputDir() string  { return filepath.Join(t.opts.Work, "input") }

// decide persists the commit decision with the instant every replica will
// switch at, SwitchDelay ahead. A replica whose commit arrives after the
// instant switches late, and while it does a client can be answered the new
// version by one replica and then the old one by its sibling; so if saving
// the state (an fsync) ate half the delay, the instant is moved and saved
// again before any replica has heard of it.
func (t *Transfer) decide(log *slog.Logger, r *api.Rollout) error {
	for attempt := 1; ; attempt++ {
		r.CommitAt = time.Now().Add(t.opts.SwitchDelay).UnixMilli()
		if err := t.update(func(s *State) { s.InFlight = r }); err != nil {
			return err
		}
		left := time.Until(time.UnixMilli(r.CommitAt))
		if left >= t.opts.SwitchDelay/2 || attempt == 3 {
			return nil
		}
		log.Warn("saving the commit decision was slow; moving the switch instant", "left_ms", left.Milliseconds(), "attempt", attempt)
	}
}

// save persists the state atomically; mu held.
func (t *Transfer) save() error {
	if len(t.state.History) > 100 {
		t.state.History = t.state.History[len(t.state.History)-100:]
	}
	if err := atomicfile.WriteJSON(t.statePath(), t.state, 0o644); err != nil {
		return fmt.Errorf("save transfer state: %w", err)
	}
	return nil
}

func (t *Transfer) snapshot() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state
	if s.InFlight != nil {
		r := *s.InFlight
		s.InFlight = &r
	}
	s.History = append([]api.Record(nil), s.History...)
	s.Fenced = maps.Clone(s.Fenced)
	return s
}

// update changes the state under mu and persists it.
func (t *Transfer) update(f func(s *State)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.state)
	return t.save()
}

// Trigger makes Run poll now.
func (t *Transfer) Trigger() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Run polls the donefile and rolls versions out until ctx ends.
func (t *Transfer) Run(ctx context.Context) {
	ctx = retry.WithLog(ctx, t.log)
	go t.healLoop(ctx)
	for {
		t.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.opts.Poll):
		case <-t.kick:
		}
	}
}

// step does one round: resume or start a rollout.
func (t *Transfer) step(ctx context.Context) {
	st := t.snapshot()
	r := st.InFlight
	if r != nil && r.Phase == api.PhaseCommitting {
		// Decided: finish it. Nothing in the donefile can change a decision,
		// so it is not read: a donefile server that hangs must not hold up
		// a switch that replicas may already have been told about.
		if !time.Now().Before(r.NextTry) {
			t.rollout(ctx, r)
		}
		return
	}
	if t.opts.ServeVersion != "" {
		t.stepPinned(ctx, st)
		return
	}
	next, err := t.nextFromDonefile(ctx, st)
	if err != nil {
		t.log.Warn("donefile not readable; keeping the current version", "donefile", t.opts.Donefile, "err", err)
	}
	switch {
	case next != nil && (r == nil || next.ID != r.ID || next.Mode != r.Mode):
		if r != nil {
			t.log.Info("newer version in the donefile supersedes the one in flight", "old", r.Version, "old_phase", r.Phase, "new_id", next.ID)
			if r.Phase != api.PhaseBuilding && r.Phase != api.PhaseFailed { // no replica has been asked for it otherwise
				t.abortAll(ctx, r.Version)
			}
			t.dropInput(r)
		}
		if err := t.update(func(s *State) { s.InFlight = next }); err != nil {
			t.log.Error("persist", "err", err)
			return
		}
		r = next
		t.log.Info("new version triggered", "id", r.ID, "key", r.Key, "mode", r.Mode, "version", r.Version, "input", r.Input)
	case r == nil || r.Phase == api.PhaseFailed:
		// Nothing new (a failed version waits for a newer line): time to
		// merge the served version's layers, if they grew.
		if r = t.mergeRollout(st); r == nil {
			return
		}
		if err := t.update(func(s *State) { s.InFlight = r }); err != nil {
			t.log.Error("persist", "err", err)
			return
		}
	}
	if time.Now().Before(r.NextTry) {
		return
	}
	t.rollout(ctx, r)
}

// stepPinned serves the pinned version (Options.ServeVersion) instead of the donefile's:
// a rollout not yet decided is aborted, the pinned version rolled out if it is not the
// served one, and nothing else. Heal keeps every replica on it, as on any decided version.
func (t *Transfer) stepPinned(ctx context.Context, st State) {
	pin, r := t.opts.ServeVersion, st.InFlight
	if r != nil && r.Version == pin {
		if !time.Now().Before(r.NextTry) {
			t.rollout(ctx, r)
		}
		return
	}
	next, ok, err := pinnedRollout(st, pin, time.Now())
	t.mu.Lock()
	changed := t.pinErr != errString(err)
	t.pinErr = errString(err)
	t.mu.Unlock()
	if err != nil && changed {
		t.log.Error("pinned version cannot be served; keeping the served version", "err", err)
	}
	if r != nil { // a donefile version that was on its way: the pin goes first
		t.log.Info("the pin supersedes the version in flight", "old", r.Version, "old_phase", r.Phase, "pinned", pin)
		if r.Phase != api.PhaseBuilding && r.Phase != api.PhaseFailed {
			t.abortAll(ctx, r.Version)
		}
		t.dropInput(r)
	}
	if r == nil && !ok {
		return
	}
	if err := t.update(func(s *State) { s.InFlight = next }); err != nil {
		t.log.Error("persist", "err", err)
		return
	}
	if ok {
		t.log.Info("rolling the pinned version out", "version", pin, "served", st.Served)
		t.rollout(ctx, next)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// rollout drives r through build, prepare and commit, and records the
// outcome. Failures before the commit decision abort everywhere and retry
// the whole rollout later with backoff.
func (t *Transfer) rollout(ctx context.Context, r *api.Rollout) {
	log := t.log.With("version", r.Version, "id", r.ID, "mode", r.Mode)
	var tm api.Timings
	start := time.Now()
	var err error
	var fencedNow []replica // the replicas fenced by this rollout's commit
	if r.Phase == api.PhaseBuilding {
		if err = t.buildVersion(ctx, r, &tm); err == nil {
			r.Phase = api.PhasePreparing
			err = t.update(func(s *State) { s.InFlight = r })
		}
	}
	if err == nil {
		t.switching.Lock()
		defer t.switching.Unlock()
	}
	if err == nil && r.Phase == api.PhasePreparing {
		t.m.phase.Set(1)
		ps := time.Now()
		err = t.prepareAll(ctx, r, &tm)
		tm.PrepareMs = time.Since(ps).Milliseconds()
		if err != nil {
			log.Error("prepare failed; aborting everywhere, the current version keeps serving", "err", err)
			t.abortAll(ctx, r.Version)
		} else {
			// The decision point: once persisted, the rollout only moves forward.
			r.Phase = api.PhaseCommitting
			err = t.decide(log, r)
		}
	}
	if err == nil && r.Phase == api.PhaseCommitting {
		t.m.phase.Set(2)
		cs := time.Now()
		var stuck map[replica]error
		stuck, err = t.commitAll(ctx, r, &tm)
		fencedNow = slices.Collect(maps.Keys(stuck))
		tm.SwitchMs = time.Since(cs).Milliseconds()
		// The commit phase is bounded: once every shard has a replica that switched and
		// CommitTimeout has passed since the instant, the ones that did not are fenced and
		// healed later, and the rollout is done, so later models are not held up.
		if err != nil && ctx.Err() == nil && r.CommitAt > 0 && time.Since(time.UnixMilli(r.CommitAt)) > t.opts.CommitTimeout && t.everyShardSwitched(stuck) {
			t.fence(ctx, r.Version, stuck)
			log.Warn("commit phase over its timeout: the replicas that did not switch are out of service until healed", "fenced", len(stuck))
			err = nil
		}
	}
	t.m.phase.Set(0)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down; the persisted phase resumes on restart
		}
		t.m.rollouts.WithLabelValues("failed").Inc()
		t.failed(log, r, err, tm)
		return
	}
	tm.TotalMs = time.Since(r.Triggered).Milliseconds()
	if r.Attempts > 0 || tm.BuildMs == 0 {
		tm.TotalMs = time.Since(start).Milliseconds() // resumed: the first attempt's wait is not ours
	}
	// Every replica serves it; if saving that fails, a restart finds the rollout still in
	// phase committing and re-commits, which replicas already serving it accept at once.
	if uerr := t.update(func(s *State) {
		if s.Served != r.Version {
			s.Previous, s.PreviousID, s.PreviousBaseID = s.Served, s.ServedID, s.BaseID
		}
		s.Served, s.ServedID = r.Version, r.ID
		if r.Mode == "base" {
			s.BaseID = r.ID
		} else {
			s.BaseID = r.Key // a patch's key is its base's id
		}
		s.InFlight = nil
		s.History = append(s.History, api.Record{ID: r.ID, Version: r.Version, Mode: r.Mode, Result: "served", Finished: time.Now(), Timings: tm})
		for addr := range s.Fenced { // a replica that switched now is in service again
			if !slices.ContainsFunc(fencedNow, func(rp replica) bool { return rp.addr == addr }) {
				delete(s.Fenced, addr)
			}
		}
	}); uerr != nil {
		log.Error("could not save that the version is served", "err", uerr)
	}
	t.m.rollouts.WithLabelValues("served").Inc()
	t.m.served(r.Version)
	t.m.window.Set(float64(tm.WindowUs) / 1e6)
	t.m.duration.Set(float64(tm.TotalMs) / 1e3)
	log.Info("version served by every replica", "total_ms", tm.TotalMs, "download_ms", tm.DownloadMs, "build_ms", tm.BuildMs,
		"distribution_ms", tm.DistribMs, "load_ms", tm.LoadMs, "switch_ms", tm.SwitchMs, "window_us", tm.WindowUs)
	t.gc()
}

// failed records a failed attempt of r. A version that cannot be built
// (brokenError: over the size cap, or its build failed BuildAttempts times)
// is marked failed for good and its files removed; anything else (a replica
// down, a download cut) is retried after a pause that doubles each time.
func (t *Transfer) failed(log *slog.Logger, r *api.Rollout, err error, tm api.Timings) {
	final := givesUp(err, r.BuildAttempts, t.opts.BuildAttempts)
	delay := retryDelay(r.Attempts, t.opts.RetryAfter, t.opts.MaxRetryAfter)
	attempt := r.Attempts + 1
	// If this save fails the in-memory state still holds the retry time; a restart then
	// retries at once, which is safe: the persisted phase says where to resume.
	if uerr := t.update(func(s *State) {
		if s.InFlight != nil && s.InFlight.Version == r.Version {
			s.InFlight.Attempts++
			attempt = s.InFlight.Attempts
			s.InFlight.LastError = err.Error()
			s.InFlight.NextTry = time.Now().Add(delay)
			s.InFlight.Phase = r.Phase
			s.InFlight.BuildAttempts = r.BuildAttempts
			if final {
				s.InFlight.Phase = api.PhaseFailed
			}
		}
		s.History = append(s.History, api.Record{ID: r.ID, Version: r.Version, Mode: r.Mode, Result: "failed", Error: err.Error(), Finished: time.Now(), Timings: tm})
	}); uerr != nil {
		log.Error("could not save the failed attempt", "err", uerr)
	}
	if final {
		t.dropInput(r)
		log.Error("version failed and will not be tried again; waiting for a newer donefile line", "err", err,
			"attempt", attempt, "build_attempts", r.BuildAttempts)
		return
	}
	log.Error("rollout failed; will retry", "err", err, "attempt", attempt, "retry_in", delay.String(), "phase", r.Phase)
}
