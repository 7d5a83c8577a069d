package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the pods leave on the host and restoreHost (hoststate.go) removes: processes in the
// kubepods cgroups, containerd's shims, mounts and the cgroups themselves.

// cgroupRoots are the hierarchies' mount points (cgroup v1 controllers and the unified one).
func cgroupRoots() []string {
	var roots []string
	for _, m := range mounts() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			roots = append(roots, m.point)
		}
	}
	return roots
}

// killPods SIGKILLs every process in the kubepods cgroups until none is left (bounded).
func killPods() error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := 0
		for _, root := range cgroupRoots() {
			_ = filepath.WalkDir(filepath.Join(root, "kubepods"), func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						n++
					}
				}
				return nil
			})
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still in the kubepods cgroups", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killShims SIGKILLs the containerd shims that serve our containerd (their command line
// names its socket); they outlive containerd by design.
func killShims(socket string) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && slices.Contains(args, socket) {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			return fmt.Errorf("containerd shim pid %d still running", pid)
		}
	}
	return nil
}

type mount struct{ point, fstype string }

func mounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// unmountUnder lazily unmounts every mount at or below the given paths, deepest first.
func unmountUnder(paths []string) error {
	var points []string
	for _, m := range mounts() {
		for _, p := range paths {
			if m.point == p || strings.HasPrefix(m.point, p+"/") {
				points = append(points, m.point)
				break
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the kubepods cgroups kubelet made in every hierarchy, deepest first.
func removeCgroups() error {
	var errs []error
	for _, root := range cgroupRoots() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(root, "kubepods"), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
