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

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
)

// version is one loaded dictionary. refs counts the store's slot (current or
// background) plus every request using it; the mapping is released when the
// count reaches zero, so a swap never pulls a dictionary from under a
// request.
type version struct {
	name string
	d    *dict.Dict
	refs atomic.Int64
}

func newVersion(name string, d *dict.Dict) *version {
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

	// mu serialises control commands; Paddle's server answers 500 when a
	// command arrives while another runs, so callers use TryLock.
	mu      sync.Mutex
	bg      atomic.Pointer[version] // written with mu held
	loading atomic.Bool

	onChange func() // called with mu held after cur or bg changed
}

// acquire returns the current version with a reference held, or nil if no
// dictionary is loaded (every key is then a miss).
//
// The race: between cur.Load and taking the reference, a control command may
// swap cur and drop the old version's last reference, unmapping it. Taking
// the reference with a CAS that refuses a count of zero closes the window:
// a count never climbs back from zero, so a request that loses the race
// simply loads cur again and finds the new version.
func (s *store) acquire() *version {
	for {
		v := s.cur.Load()
		if v == nil {
			return nil
		}
		n := v.refs.Load()
		if n > 0 && v.refs.CompareAndSwap(n, n+1) {
			return v
		}
	}
}

func (s *store) versionNames() (cur, bg string) {
	if v := s.cur.Load(); v != nil {
		cur = v.name
	}
	if v := s.bg.Load(); v != nil {
		bg = v.name
	}
	return cur, bg
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
	path := filepath.Join(s.dataDir, name, layout.ShardFile(s.shard))
	d, err := dict.Open(path, dict.Options{InMemory: s.inMemory})
	if err != nil {
		return nil, err
	}
	return newVersion(name, d), nil
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

func (s *store) bgLoad(versionPath string) error {
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
	if old := s.bg.Swap(nil); old != nil {
		old.release()
		s.changed()
	}
}

func (s *store) enable(name string) error {
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
	s.bgUnload()
	if old := s.cur.Swap(nil); old != nil {
		old.release()
	}
}
