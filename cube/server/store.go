package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
)

// version is one loaded dictionary. refs counts the store's slot (current or
// background) plus every request using it; the mapping is released when the
// count reaches zero, so a swap never pulls a dictionary from under a
// request.
type version struct {
	name string
	d    *dict.Stack // the version's shard, with the layers under it
	refs atomic.Int64
}

func newVersion(name string, d *dict.Stack) *version {
	v := &version{name: name, d: d}
	v.refs.Store(1)
	return v
}

func (v *version) release() {
	if v.refs.Add(-1) == 0 {
		_ = v.d.Close()
	}
}

// store holds the current and the background dictionary, as Paddle's cube
// server does (bg_load_*, bg_switch, bg_unload, enable).
type store struct {
	dataDir  string
	shard    int
	inMemory bool

	cur atomic.Pointer[version]

	// pending is a version that becomes current at a wall-clock instant
	// (see schedule). Until the agent installs it in cur, every request that
	// arrives at or after the instant is served from it, so the switch
	// happens at the instant itself, not whenever a goroutine wakes up:
	// replicas given the same instant switch together, to within their
	// clocks' skew.
	pending atomic.Pointer[scheduled]

	// mu serialises control commands; Paddle's server answers 500 when a
	// command arrives while another runs, so callers use TryLock.
	mu      sync.Mutex
	bg      atomic.Pointer[version] // written with mu held
	loading atomic.Bool

	onChange func() // called with mu held after cur or bg changed
	// warm, if set, is called by open on every version that passed its
	// checks, before it can be served; an error refuses the version.
	warm func(*version) error
}

// scheduled is a version due to become current at atUnixNano. It holds a
// reference of its own, which moves to the cur slot when it is installed.
type scheduled struct {
	v          *version
	atUnixNano int64
}

func (p *scheduled) due(now time.Time) bool { return p != nil && now.UnixNano() >= p.atUnixNano }

// acquire returns the version that serves a request arriving now, with a
// reference held, or nil if no dictionary is loaded (every key is then a
// miss): the scheduled version once its instant has come, else the current
// one.
//
// The race: between loading a slot and taking the reference, a control
// command may swap the slot and drop the old version's last reference,
// unmapping it. Taking the reference with a CAS that refuses a count of zero
// closes the window: a count never climbs back from zero, so a request that
// loses the race simply loads the slots again and finds the new version.
//
// The switch instant: pending is read before cur. Installing a scheduled
// version stores cur before clearing pending, so a request that finds
// pending already cleared finds the new version in cur; a request that reads
// pending before its instant arrived before the switch, and the old version
// is its right answer. No request that arrives after the instant is served
// the old version.
func (s *store) acquire() *version {
	for {
		if p := s.pending.Load(); p.due(time.Now()) {
			if tryRef(p.v) {
				return p.v
			}
			continue
		}
		v := s.cur.Load()
		if v == nil {
			return nil
		}
		if tryRef(v) {
			return v
		}
	}
}

// acquireFrom takes a reference on the version in slot, or returns nil.
func (s *store) acquireFrom(slot *atomic.Pointer[version]) *version {
	for {
		v := slot.Load()
		if v == nil || tryRef(v) {
			return v
		}
	}
}

func tryRef(v *version) bool {
	n := v.refs.Load()
	return n > 0 && v.refs.CompareAndSwap(n, n+1)
}

// versionNames reports the version serving requests now (a scheduled one
// once due) and the background one.
func (s *store) versionNames() (cur, bg string) {
	if p := s.pending.Load(); p.due(time.Now()) {
		cur = p.v.name
	} else if v := s.cur.Load(); v != nil {
		cur = v.name
	}
	if v := s.bg.Load(); v != nil {
		bg = v.name
	}
	return cur, bg
}

// schedule makes the background version name current at the instant at: from
// then on every request is served from it (see acquire). The caller installs
// it with settle once the instant has passed; an instant already past takes
// effect at once. Scheduling the version already scheduled (a retried
// commit) keeps the first instant, which it returns. mu held.
func (s *store) schedule(name string, at time.Time) (time.Time, error) {
	s.settle()
	if p := s.pending.Load(); p != nil {
		if p.v.name == name {
			return time.Unix(0, p.atUnixNano), nil
		}
		return time.Time{}, fmt.Errorf("a switch to %q is already scheduled", p.v.name)
	}
	bg := s.bg.Load()
	if bg == nil || bg.name != name {
		return time.Time{}, fmt.Errorf("version %q is not loaded in the background", name)
	}
	if !tryRef(bg) {
		return time.Time{}, fmt.Errorf("version %q is being unloaded", name)
	}
	s.pending.Store(&scheduled{v: bg, atUnixNano: at.UnixNano()})
	s.settle()
	return at, nil
}

// unschedule drops a scheduled switch whose instant has not come (an abort).
// It reports whether there was one. mu held.
func (s *store) unschedule(name string) bool {
	p := s.pending.Load()
	if p == nil || p.v.name != name || p.due(time.Now()) {
		return false
	}
	s.pending.Store(nil)
	p.v.release()
	return true
}

// settle installs a scheduled version whose instant has passed: it becomes
// cur (taking the schedule's reference), leaves the background slot, and the
// version it replaces is released. Requests already holding the old version
// keep it mapped until they finish. mu held.
func (s *store) settle() {
	p := s.pending.Load()
	if !p.due(time.Now()) {
		return
	}
	old := s.cur.Swap(p.v)
	s.pending.Store(nil) // after cur: see acquire
	if s.bg.Load() == p.v {
		s.bg.Store(nil)
		p.v.release()
	}
	if old != nil {
		old.release()
	}
	s.changed()
}

// scheduledFor reports the version and instant of a switch not yet due.
func (s *store) scheduledFor() (string, time.Time, bool) {
	p := s.pending.Load()
	if p == nil || p.due(time.Now()) {
		return "", time.Time{}, false
	}
	return p.v.name, time.Unix(0, p.atUnixNano), true
}

// open maps and verifies shard s.shard of a version. A file failing its
// checksums is refused here, before it can replace anything.
func (s *store) open(name string) (*version, error) {
	// Only published versions: a name as the builder gives them (no
	// ".tmp-*" build in progress, no path) whose directory is complete.
	if _, _, ok := layout.ParseVersion(name); !ok || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("bad version %q: not a published version name (<unix seconds> or <depend>_<unix seconds>)", name)
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, name, layout.ManifestName)); err != nil {
		return nil, fmt.Errorf("version %q is not published (no %s): %w", name, layout.ManifestName, err)
	}
	d, err := layers.Open(s.dataDir, name, s.shard, dict.Options{InMemory: s.inMemory, VerifyOnTouch: true})
	if err != nil {
		return nil, err
	}
	v := newVersion(name, d)
	if s.warm != nil {
		if err := s.warm(v); err != nil {
			v.release()
			return nil, err
		}
	}
	return v, nil
}

// loadNewest loads, at startup, the version named by CurrentFile (the last
// one the agent committed) or else the newest complete version, falling back
// to older ones if it is damaged.
func (s *store) loadNewest() (string, error) {
	vs, err := layout.Versions(s.dataDir)
	if err != nil {
		return "", err
	}
	if want, at, previous := readCurrentFile(s.dataDir); want != "" {
		if at > 0 && slices.Contains(vs, previous) {
			// Committed, but the switch instant has not come: serve the
			// previous version until then (the server schedules the switch).
			want = previous
		}
		if slices.Contains(vs, want) {
			vs = append(slices.DeleteFunc(vs, func(v string) bool { return v == want }), want)
		}
	}
	var errs []error
	for i := len(vs) - 1; i >= 0; i-- {
		v, err := s.open(vs[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.mu.Lock()
		s.setCurrent(v)
		s.mu.Unlock()
		return v.name, errors.Join(errs...)
	}
	return "", errors.Join(errs...)
}

// setCurrent installs v as current and releases the previous one. mu held.
func (s *store) setCurrent(v *version) {
	if old := s.cur.Swap(v); old != nil {
		old.release()
	}
	s.changed()
}

func (s *store) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// The control commands below are called with mu held.

// busy refuses commands that would change what is served while a switch is
// scheduled but not yet due; a due one is installed first.
func (s *store) busy() error {
	s.settle()
	if name, at, ok := s.scheduledFor(); ok {
		return fmt.Errorf("a switch to %q is scheduled at %s", name, at.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func (s *store) bgLoad(versionPath string) error {
	s.settle()
	name := strings.TrimPrefix(versionPath, "/")
	s.loading.Store(true)
	defer s.loading.Store(false)
	v, err := s.open(name)
	if err != nil {
		return err
	}
	if old := s.bg.Swap(v); old != nil {
		old.release()
	}
	s.changed()
	return nil
}

func (s *store) bgSwitch() error {
	if err := s.busy(); err != nil {
		return err
	}
	bg := s.bg.Load()
	if bg == nil {
		return errors.New("no background dictionary loaded")
	}
	// The old current becomes the background one: its slot reference moves
	// with it, so in-flight requests keep it mapped either way.
	s.bg.Store(s.cur.Swap(bg))
	s.changed()
	return nil
}

func (s *store) bgUnload() {
	s.settle()
	if old := s.bg.Swap(nil); old != nil {
		old.release()
		s.changed()
	}
}

func (s *store) enable(name string) error {
	if err := s.busy(); err != nil {
		return err
	}
	cur, bg := s.versionNames()
	switch {
	case name == "":
		return errors.New("enable: version is required")
	case name == cur:
		return nil
	case name == bg:
		return s.bgSwitch()
	}
	return fmt.Errorf("enable: version %q is neither current (%q) nor background (%q)", name, cur, bg)
}

func (s *store) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pending.Swap(nil); p != nil {
		p.v.release()
	}
	s.bgUnload()
	if old := s.cur.Swap(nil); old != nil {
		old.release()
	}
}
