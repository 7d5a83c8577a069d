package transfer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
)

// buildVersion downloads the input and builds r.Version, unless a complete
// build of it is already published (a restart after the build).
func (t *Transfer) buildVersion(ctx context.Context, r *api.Rollout, tm *api.Timings) error {
	if _, err := layout.ReadManifest(t.outputDir(), r.Version); err == nil {
		return nil
	}
	if r.BuildAttempts >= t.opts.BuildAttempts {
		return &brokenError{final: true, err: fmt.Errorf("%d builds started and none finished (the last one took the process down?); last error: %q",
			r.BuildAttempts, r.LastError)}
	}
	ds := time.Now()
	in, n, err := t.mirrorInput(ctx, r)
	if err != nil {
		return err
	}
	tm.DownloadMs = time.Since(ds).Milliseconds()
	// Counted before it runs: a build that kills the process is counted too.
	r.BuildAttempts++
	if err := t.update(func(s *State) {
		if s.InFlight != nil && s.InFlight.Version == r.Version {
			s.InFlight.BuildAttempts = r.BuildAttempts
		}
	}); err != nil {
		return err
	}
	bs := time.Now()
	m, err := t.safeBuild(build.Options{Input: in, Output: t.outputDir(), Shards: t.shards(), Dict: t.opts.Dict,
		Base: r.Base, Layered: t.layered(r.Base), Version: r.Version, Seq: t.opts.Seq, AllowEmpty: t.opts.AllowEmpty, Log: t.log})
	if err != nil {
		return &brokenError{err: fmt.Errorf("build: %w", err)}
	}
	tm.BuildMs = time.Since(bs).Milliseconds()
	t.log.Info("version built and published", "version", m.Version, "records", m.Records, "input_bytes", n, "layered", m.Layered, "download_ms", tm.DownloadMs, "build_ms", tm.BuildMs)
	return nil
}

// layered reports whether a patch of base is built as a layer over it:
// while base has fewer than MaxLayers layers under it.
func (t *Transfer) layered(base string) bool {
	if base == "" || t.opts.MaxLayers <= 0 {
		return false
	}
	chain, err := layers.Chain(t.outputDir(), base)
	return err == nil && len(chain) <= t.opts.MaxLayers
}

// mergeRollout returns the rollout of the served version merged in full,
// built here, once the served version has MaxLayers layers under it; nil
// when it has fewer, or its merge failed before (logged; the next patch is
// then built in full).
func (t *Transfer) mergeRollout(st State) *api.Rollout {
	if t.opts.MaxLayers <= 0 || st.Served == "" {
		return nil
	}
	chain, err := layers.Chain(t.outputDir(), st.Served)
	if err != nil || len(chain)-1 < t.opts.MaxLayers || t.mergeFailed == st.Served {
		return nil
	}
	m, err := layout.ReadManifest(t.outputDir(), st.Served)
	if err != nil {
		return nil
	}
	empty := filepath.Join(t.inputDir(), ".merge")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.log.Error("merge layers", "err", err)
		return nil
	}
	defer os.RemoveAll(empty)
	start := time.Now()
	version := t.newVersion(m.Depend, st)
	t.log.Info("merging the served version's layers", "served", st.Served, "layers", len(chain)-1, "version", version)
	if _, err := t.safeBuild(build.Options{Input: empty, Output: t.outputDir(), Shards: t.shards(), Dict: t.opts.Dict,
		Base: st.Served, Version: version, AllowEmpty: true, Log: t.log}); err != nil {
		t.mergeFailed = st.Served
		t.log.Error("merge layers: the build failed; the next patch is built in full", "served", st.Served, "err", err)
		return nil
	}
	t.log.Info("layers merged", "version", version, "build_ms", time.Since(start).Milliseconds())
	return &api.Rollout{ID: st.ServedID, Key: st.BaseID, Mode: "delta", Version: version, Base: st.Served,
		Phase: api.PhasePreparing, Triggered: time.Now()}
}

// mirrorInput fetches r's input within InputTimeout.
func (t *Transfer) mirrorInput(ctx context.Context, r *api.Rollout) (string, int64, error) {
	ictx, cancel := context.WithTimeout(ctx, t.opts.InputTimeout)
	defer cancel()
	in, n, err := t.fetchInput(ictx, r.Input, filepath.Join(t.inputDir(), r.ID))
	switch {
	case err == nil:
		return in, n, nil
	case ictx.Err() != nil && ctx.Err() == nil:
		return "", 0, fmt.Errorf("download input: %w (--input-timeout %s)", err, t.opts.InputTimeout)
	default:
		return "", 0, fmt.Errorf("download input: %w", err)
	}
}

// safeBuild runs the build and turns a panic into an error. Input is
// hostile by assumption, and a parser that panics on it (compressed
// SequenceFiles go through a third-party library) must fail this version,
// not kill the transfer, which would then panic again on every restart.
func (t *Transfer) safeBuild(o build.Options) (m *layout.Manifest, err error) {
	defer func() {
		if p := recover(); p != nil {
			frames := stackSummary(debug.Stack())
			t.log.Error("build panicked", "version", o.Version, "panic", fmt.Sprint(p), "stack", frames)
			at := ""
			if len(frames) > 0 {
				at = " at " + frames[0]
			}
			m, err = nil, fmt.Errorf("panic: %v%s", p, at)
		}
	}()
	return t.build(o)
}

// stackSummary returns the frames of a debug.Stack below the panic, as
// "function (file:line)", at most 8: enough to find the culprit in a log
// line without a multi-kilobyte dump.
func stackSummary(stack []byte) []string {
	lines := strings.Split(string(stack), "\n")
	var out []string
	below := false
	for i := 0; i+1 < len(lines) && len(out) < 8; i++ {
		fn := lines[i]
		if fn == "" || strings.HasPrefix(fn, "\t") || strings.HasPrefix(fn, "goroutine ") {
			continue
		}
		if strings.HasPrefix(fn, "panic(") {
			below = true
			continue
		}
		if !below {
			continue
		}
		loc := strings.TrimSpace(lines[i+1])
		if j := strings.LastIndex(loc, " +0x"); j > 0 {
			loc = loc[:j]
		}
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j]
		}
		out = append(out, fmt.Sprintf("%s (%s)", fn, filepath.Base(loc)))
	}
	return out
}

// dropInput removes what a version that will not be rolled out left on the
// work disk, its mirrored input and any partial build, so that the next
// version has the room.
func (t *Transfer) dropInput(r *api.Rollout) {
	removeGlob(filepath.Join(t.outputDir(), ".tmp-"+r.Version+"-*"))
	if err := os.RemoveAll(filepath.Join(t.inputDir(), r.ID)); err != nil {
		t.log.Warn("could not remove the input of a dropped version", "version", r.Version, "err", err)
	}
}

func removeGlob(pattern string) {
	ps, _ := filepath.Glob(pattern)
	for _, p := range ps {
		_ = os.RemoveAll(p) // best effort; New removes leftovers again
	}
}

// gc keeps the served and previous versions' builds (deltas are built on
// the served one) and drops the rest, and the downloaded inputs.
func (t *Transfer) gc() {
	st := t.snapshot()
	keep := map[string]bool{}
	for _, v := range []string{st.Served, st.Previous, inFlightVersion(st.InFlight)} {
		keep[v] = true
		if chain, err := layers.Chain(t.outputDir(), v); err == nil { // the layers it is served over
			for _, l := range chain {
				keep[l] = true
			}
		}
	}
	vs, _ := layout.Versions(t.outputDir())
	for _, v := range vs {
		if !keep[v] {
			os.RemoveAll(filepath.Join(t.outputDir(), v))
		}
	}
	t.gcInputs(st.InFlight)
}

// gcInputs removes every mirrored input but that of r, the rollout in
// flight (nil: none), unless r has failed.
func (t *Transfer) gcInputs(r *api.Rollout) {
	ents, _ := os.ReadDir(t.inputDir())
	for _, e := range ents {
		if r == nil || r.Phase == api.PhaseFailed || e.Name() != r.ID {
			_ = os.RemoveAll(filepath.Join(t.inputDir(), e.Name()))
		}
	}
}
