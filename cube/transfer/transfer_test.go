package transfer

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

// newTestTransfer is the transfer of o, with what o leaves empty filled in: a donefile and
// a work folder in a temporary folder, dictionary "d", a public URL on a closed port, and
// token "t" unless o names a token file.
func newTestTransfer(t *testing.T, o Options) *Transfer {
	t.Helper()
	dir := t.TempDir()
	o.Donefile = cmp.Or(o.Donefile, filepath.Join(dir, "base.txt"))
	o.Work = cmp.Or(o.Work, filepath.Join(dir, "work"))
	o.Dict = cmp.Or(o.Dict, "d")
	o.PublicURL = cmp.Or(o.PublicURL, "http://127.0.0.1:1")
	if o.TokenFile == "" {
		o.Token = cmp.Or(o.Token, "t")
	}
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// testTransfer is a transfer over a local donefile whose replica is a
// closed port: enough to drive the build phase.
func testTransfer(t *testing.T, work, donefile string) *Transfer {
	t.Helper()
	return newTestTransfer(t, Options{Donefile: donefile, Replicas: [][]string{{"127.0.0.1:1"}}, Work: work,
		Poll: time.Millisecond, RetryAfter: time.Millisecond, MaxRetryAfter: 5 * time.Millisecond, BuildAttempts: 2,
		StepTimeout: 200 * time.Millisecond})
}

func appendLine(t *testing.T, donefile, line string) {
	t.Helper()
	f, err := os.OpenFile(donefile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// stepUntil runs rounds of the transfer until cond holds (at most 10 s).
func stepUntil(t *testing.T, tr *Transfer, cond func(State) bool) {
	t.Helper()
	ctx := retry.WithLog(context.Background(), tr.log)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		tr.step(ctx)
		if cond(tr.snapshot()) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("condition not reached; state %+v", tr.snapshot().InFlight)
}

// TestBuildPanicFailsTheVersion: a build that panics is recovered, counted,
// and after BuildAttempts the version is marked failed with the reason; it
// is not built again (not even after a restart) until a newer line appears.
func TestBuildPanicFailsTheVersion(t *testing.T) {
	dir := t.TempDir()
	work, donefile := filepath.Join(dir, "work"), filepath.Join(dir, "base.txt")
	os.MkdirAll(filepath.Join(dir, "in"), 0o755)
	appendLine(t, donefile, `{"id":"1000","key":"1000","input":"in"}`)

	tr := testTransfer(t, work, donefile)
	var calls atomic.Int32
	tr.build = func(build.Options) (*layout.Manifest, error) {
		calls.Add(1)
		var s []int
		_ = s[calls.Load()] // an index out of range: a runtime panic inside the build call
		return nil, nil
	}
	stepUntil(t, tr, func(s State) bool { return s.InFlight != nil && s.InFlight.Phase == api.PhaseFailed })
	r := tr.snapshot().InFlight
	if calls.Load() != 2 || r.BuildAttempts != 2 {
		t.Fatalf("builds run %d, counted %d; want 2 (--build-attempts)", calls.Load(), r.BuildAttempts)
	}
	if !strings.Contains(r.LastError, "panic: runtime error: index out of range") || !strings.Contains(r.LastError, "transfer_test.go") {
		t.Fatalf("last error %q: want the panic and where it happened", r.LastError)
	}
	if st := tr.Status(context.Background()); st.Phase != api.PhaseFailed || !strings.Contains(st.Error, "panic") {
		t.Fatalf("status phase %q error %q", st.Phase, st.Error)
	}
	for range 20 {
		tr.step(context.Background())
	}
	if calls.Load() != 2 {
		t.Fatalf("a failed version was built again (%d builds)", calls.Load())
	}

	// Restarted, it remembers the failure and builds nothing.
	tr2 := testTransfer(t, work, donefile)
	tr2.build = func(o build.Options) (*layout.Manifest, error) {
		calls.Add(1)
		return nil, errors.New("a build error, not a panic")
	}
	for range 20 {
		tr2.step(context.Background())
	}
	if calls.Load() != 2 {
		t.Fatalf("restarted transfer rebuilt the failed version (%d builds)", calls.Load())
	}
	// A newer line is tried; a plain build error fails it the same way.
	appendLine(t, donefile, `{"id":"2000","key":"2000","input":"in"}`)
	stepUntil(t, tr2, func(s State) bool {
		return s.InFlight != nil && s.InFlight.ID == "2000" && s.InFlight.Phase == api.PhaseFailed
	})
	if calls.Load() != 4 || !strings.Contains(tr2.snapshot().InFlight.LastError, "a build error") {
		t.Fatalf("builds %d, state %+v", calls.Load(), tr2.snapshot().InFlight)
	}
}

// TestBuildThatKilledTheProcessIsNotRerun: a build counted as started but
// never finished (the process died in it, BuildAttempts times) marks the
// version failed at the next start without building.
func TestBuildThatKilledTheProcessIsNotRerun(t *testing.T) {
	dir := t.TempDir()
	work, donefile := filepath.Join(dir, "work"), filepath.Join(dir, "base.txt")
	os.MkdirAll(filepath.Join(dir, "in"), 0o755)
	appendLine(t, donefile, `{"id":"1000","key":"1000","input":"in"}`)
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "state.json"), []byte(`{"in_flight":{"id":"1000","key":"1000","mode":"base","input":"`+
		filepath.Join(dir, "in")+`","version":"1700000000","phase":"building","build_attempts":2}}`), 0o644)
	tr := testTransfer(t, work, donefile)
	tr.build = func(build.Options) (*layout.Manifest, error) {
		t.Fatal("built again")
		return nil, nil
	}
	stepUntil(t, tr, func(s State) bool { return s.InFlight != nil && s.InFlight.Phase == api.PhaseFailed })
	if e := tr.snapshot().InFlight.LastError; !strings.Contains(e, "none finished") {
		t.Fatalf("last error %q", e)
	}
}

// TestEmptyInputRefusedUnlessAllowed: a version whose input holds no record
// fails with the builder's reason; with AllowEmpty the same input is built
// (and goes on to be prepared).
func TestEmptyInputRefusedUnlessAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		dir := t.TempDir()
		work, donefile := filepath.Join(dir, "work"), filepath.Join(dir, "base.txt")
		os.MkdirAll(filepath.Join(dir, "in"), 0o755)
		appendLine(t, donefile, `{"id":"1000","key":"1000","input":"in"}`)
		tr := testTransfer(t, work, donefile)
		tr.opts.AllowEmpty = allow
		if !allow {
			stepUntil(t, tr, func(s State) bool { return s.InFlight != nil && s.InFlight.Phase == api.PhaseFailed })
			if e := tr.snapshot().InFlight.LastError; !strings.Contains(e, build.ErrEmptyInput.Error()) {
				t.Fatalf("last error %q, want the empty-input refusal", e)
			}
			continue
		}
		stepUntil(t, tr, func(s State) bool { return s.InFlight != nil && s.InFlight.Phase == api.PhasePreparing })
		if _, err := layout.ReadManifest(tr.outputDir(), tr.snapshot().InFlight.Version); err != nil {
			t.Fatalf("allowed empty input was not published: %v", err)
		}
	}
}

// TestStaleDonefileLineIsReported: a donefile line whose id is not above the served base's
// (one id in milliseconds, then one in seconds) is not rolled out, and says so in /status and
// the warnings metric, once; a line that rolls out again clears it.
func TestStaleDonefileLineIsReported(t *testing.T) {
	dir := t.TempDir()
	done := filepath.Join(dir, "base.txt")
	appendLine(t, done, `{"id":"1700000003600","key":"1700000003600","input":"in"}`)
	tr := testTransfer(t, filepath.Join(dir, "work"), done)
	tr.state.Served, tr.state.BaseID, tr.state.ServedID = "v", "1700000003600", "1700000003600"
	appendLine(t, done, `{"id":"1700007200","key":"1700007200","input":"in"}`)
	ctx := retry.WithLog(context.Background(), tr.log)
	for range 3 {
		if r, err := tr.nextFromDonefile(ctx, tr.snapshot()); err != nil || r != nil {
			t.Fatalf("a stale line was taken for a rollout: %+v %v", r, err)
		}
	}
	st := tr.Status(ctx)
	if !strings.Contains(st.Skipped, `"1700007200" is not above the served base's id "1700000003600"`) {
		t.Errorf("status skipped: %q", st.Skipped)
	}
	if n := counterValue(t, tr, "cube_transfer_donefile_warnings_total"); n != 1 {
		t.Errorf("donefile warnings %v, want 1 (once per line)", n)
	}
	appendLine(t, done, `{"id":"1700000007200","key":"1700000007200","input":"in"}`)
	if r, err := tr.nextFromDonefile(ctx, tr.snapshot()); err != nil || r == nil || r.ID != "1700000007200" {
		t.Fatalf("the next growing id did not roll out: %+v %v", r, err)
	}
	if st := tr.Status(ctx); st.Skipped != "" {
		t.Errorf("still skipped: %q", st.Skipped)
	}
}

// counterValue is a counter of the transfer's metrics, as /metrics would show it.
func counterValue(t *testing.T, tr *Transfer, name string) float64 {
	t.Helper()
	families, err := tr.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestUnparsedDonefileLinesAreReported: lines that do not parse are in /status (as well as
// in the log and the warnings metric, once each, not at every poll), so that a plan can say
// why a model the trainer thinks it published never rolls out.
func TestUnparsedDonefileLinesAreReported(t *testing.T) {
	dir := t.TempDir()
	done := filepath.Join(dir, "base.txt")
	appendLine(t, done, `{"id":"1700000000","key":"1700000000","input":"in"}`)
	appendLine(t, done, `{"id":"17000000x0","key":"1","input":"in"}`)
	appendLine(t, done, `garbage`)
	tr := testTransfer(t, filepath.Join(dir, "work"), done)
	ctx := retry.WithLog(context.Background(), tr.log)
	for range 3 {
		if _, err := tr.readEntries(ctx, done); err != nil {
			t.Fatal(err)
		}
	}
	st := tr.Status(ctx)
	if len(st.SkippedLines) != 2 || !strings.HasPrefix(st.SkippedLines[0], "base.txt line 2: ") || !strings.HasPrefix(st.SkippedLines[1], "base.txt line 3: ") {
		t.Fatalf("skipped lines: %q", st.SkippedLines)
	}
	if n := counterValue(t, tr, "cube_transfer_donefile_warnings_total"); n != 2 {
		t.Errorf("donefile warnings %v after three polls, want 2 (once per line)", n)
	}
	for range 20 {
		appendLine(t, done, `{"id":`)
	}
	if _, err := tr.readEntries(ctx, done); err != nil {
		t.Fatal(err)
	}
	st = tr.Status(ctx)
	if len(st.SkippedLines) != api.MaxSkippedLines || !strings.Contains(st.SkippedLines[api.MaxSkippedLines-1], "and 13 more lines") {
		t.Fatalf("22 skipped lines shown as %q", st.SkippedLines)
	}
}
