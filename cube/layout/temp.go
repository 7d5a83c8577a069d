package layout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// TempPrefix starts the name of every directory under root that is not (yet)
// a version: builds in progress, and the agent's downloads.
const TempPrefix = ".tmp-"

// buildTemp matches the names CreateTemp gives (os.MkdirTemp's suffix is
// decimal); RemoveStale touches nothing else, such as the agent's
// ".tmp-<version>-agent" downloads in a server's data directory.
var buildTemp = regexp.MustCompile(`^\.tmp-.+-[0-9]+$`)

// TempDir is a build in progress: <root>/.tmp-<version>-<random>, locked
// (flock) for as long as it is open, so that RemoveStale can tell a live
// build from one that was killed: the kernel drops the lock of a dead
// process, whatever killed it.
type TempDir struct {
	Path string
	lock *os.File
}

// CreateTemp creates and locks a build directory for version under root.
//
// The race it closes: between os.MkdirTemp and flock the directory exists
// unlocked, and a RemoveStale running in another build at that instant
// would take it for a dead build's and delete it. Both therefore hold an
// exclusive flock on root itself while they create-and-lock or scan, which
// is brief (no files are written or removed under it).
func CreateTemp(root, version string) (*TempDir, error) {
	unlock, err := lockRoot(root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	path, err := os.MkdirTemp(root, TempPrefix+version+"-")
	if err != nil {
		return nil, fmt.Errorf("create build dir in %q: %w", root, err)
	}
	f, err := tryLock(path)
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("lock build dir %q: %w", path, err)
	}
	// MkdirTemp makes it 0700; a published version is read by servers that
	// may run as another user.
	if err := os.Chmod(path, 0o755); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, err
	}
	return &TempDir{Path: path, lock: f}, nil
}

// Close releases the lock: after the directory was renamed into place, or
// removed.
func (t *TempDir) Close() error { return t.lock.Close() }

// RemoveStale removes the build directories under root that no live build
// holds (left by builds that were killed), and returns their paths. Those of
// builds still running, in this process or another, are locked and kept.
// Age or a PID in the name could not tell them apart as surely: a slow
// build looks old, and PIDs are reused and differ between containers that
// share a volume.
func RemoveStale(root string) ([]string, error) {
	stale, err := lockStale(root)
	var removed []string
	for _, t := range stale {
		// We hold its lock, so no other RemoveStale removes it at the same
		// time; no build can be using it.
		if rerr := os.RemoveAll(t.Path); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove stale build dir: %w", rerr))
		} else {
			removed = append(removed, t.Path)
		}
		t.Close()
	}
	return removed, err
}

// lockStale locks, under root's lock, every build directory nobody holds.
// The removal happens after root's lock is released, so that a long
// RemoveAll does not hold up other builds starting.
func lockStale(root string) ([]*TempDir, error) {
	unlock, err := lockRoot(root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", root, err)
	}
	var stale []*TempDir
	for _, e := range ents {
		if !e.IsDir() || !buildTemp.MatchString(e.Name()) {
			continue
		}
		p := filepath.Join(root, e.Name())
		if f, err := tryLock(p); err == nil {
			stale = append(stale, &TempDir{Path: p, lock: f})
		}
	}
	return stale, nil
}

// lockRoot takes root's exclusive lock, waiting for it.
func lockRoot(root string) (unlock func(), err error) {
	f, err := os.Open(root)
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %q: %w", root, err)
	}
	return func() { f.Close() }, nil
}

// tryLock opens a directory and takes its exclusive lock without waiting.
func tryLock(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
