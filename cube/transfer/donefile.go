package transfer

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
)

// nextFromDonefile returns the rollout the donefile asks for (the one in
// flight, if that is it), or nil; see nextBase and nextPatch. A new base
// wins over patches.
func (t *Transfer) nextFromDonefile(ctx context.Context, st State) (*api.Rollout, error) {
	bases, err := t.readEntries(ctx, t.opts.Donefile)
	if err != nil {
		return nil, err
	}
	builtFor := t.builtFor(st.Served)
	w, ok, warn := nextBase(bases, st, builtFor, t.shards())
	if warn != "" {
		t.log.Warn(warn, "served", st.Served, "base_id", st.BaseID)
	}
	t.noteStale(bases, st)
	loc := t.opts.Donefile
	if !ok {
		if t.opts.Mode != "base_delta" || st.Served == "" {
			return nil, nil
		}
		loc = donefile.Sibling(t.opts.Donefile, "patch.txt")
		patches, err := t.readEntries(ctx, loc)
		if err != nil {
			return nil, err
		}
		if w, ok = nextPatch(patches, st); !ok {
			return nil, nil
		}
	}
	if w.is(st.InFlight) {
		return st.InFlight, nil
	}
	if w.Reshard {
		t.log.Info("re-sharding: rebuilding the served base for the new shard count", "served", st.Served,
			"built_for_shards", builtFor, "shards", t.shards())
	}
	r := &api.Rollout{ID: w.Entry.ID, Key: w.Entry.Key, Mode: w.Mode, Input: donefile.InputLocation(loc, w.Entry.Input),
		Phase: api.PhaseBuilding, Triggered: time.Now()}
	if w.Mode == "delta" {
		depend, _, _ := layout.ParseVersion(st.Served)
		r.Version, r.Base = t.newVersion(strconv.FormatInt(depend, 10), st), st.Served
	} else {
		r.Version = t.newVersion("", st)
	}
	return r, nil
}

// builtFor is the shard count version was built for; 0 if unknown.
func (t *Transfer) builtFor(version string) int {
	if version == "" {
		return 0
	}
	m, err := layout.ReadManifest(t.outputDir(), version)
	if err != nil {
		return 0
	}
	return m.ShardCount
}

// readEntries reads and parses one donefile, logging the lines it skips.
func (t *Transfer) readEntries(ctx context.Context, loc string) ([]donefile.Entry, error) {
	b, err := t.readDonefile(ctx, loc)
	if err != nil {
		return nil, err
	}
	es, warns := donefile.Parse(b)
	lines := make([]string, 0, len(warns))
	for _, w := range warns {
		lines = append(lines, fmt.Sprintf("%s line %d: %s", path.Base(loc), w.Line, w.Reason))
	}
	t.mu.Lock()
	before := t.unparsed[loc]
	t.unparsed[loc] = lines
	t.mu.Unlock()
	// Each line is logged and counted once, not at every poll.
	for i, w := range warns {
		if !slices.Contains(before, lines[i]) {
			t.log.Warn("donefile line skipped", "file", loc, "line", w.Line, "reason", w.Reason)
			t.m.donefileWarnings.Inc()
		}
	}
	return es, nil
}

// readDonefile reads one donefile within DonefileTimeout.
func (t *Transfer) readDonefile(ctx context.Context, loc string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.DonefileTimeout)
	defer cancel()
	b, err := donefile.Read(ctx, t.http, loc)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w (--donefile-timeout %s)", err, t.opts.DonefileTimeout)
	}
	return b, err
}

// newVersion names a version as Paddle's transfer does (§3.6): unix seconds
// at trigger time, "<depend>_<seconds>" for a delta; bumped past the served
// one and anything already on disk.
func (t *Transfer) newVersion(depend string, st State) string {
	ts := time.Now().Unix()
	if _, b, ok := layout.ParseVersion(st.Served); ok && ts <= b {
		ts = b + 1
	}
	for ; ; ts++ {
		v := strconv.FormatInt(ts, 10)
		if depend != "" {
			v = depend + "_" + v
		}
		if _, err := os.Stat(filepath.Join(t.outputDir(), v)); os.IsNotExist(err) {
			return v
		}
	}
}

// noteStale reports, once per line, a last base line that will not roll out (staleBase): in
// the log, in the donefile warnings metric and in /status until a line rolls out again.
func (t *Transfer) noteStale(bases []donefile.Entry, st State) {
	e, stale := staleBase(bases, st)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !stale {
		t.skipped = ""
		return
	}
	reason := staleReason(e, st)
	if reason == t.skipped {
		return
	}
	t.skipped = reason
	t.log.Warn("donefile line skipped", "id", e.ID, "served_base_id", st.BaseID, "reason", reason)
	t.m.donefileWarnings.Inc()
}
