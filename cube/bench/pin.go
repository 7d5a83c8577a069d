package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NoPinning is the CPU list that leaves a process where the scheduler puts it.
const NoPinning = "none"

// DefaultPinning returns the CPU lists the benchmark pins servers and the
// load generator to: on a machine of two or more CPUs, the servers on CPU 1
// and the load generator on CPU 0, so neither takes cycles from the other;
// on one CPU, no pinning.
func DefaultPinning() (server, client string) {
	if runtime.NumCPU() < 2 {
		return NoPinning, NoPinning
	}
	return "1", "0"
}

// parseCPUList parses a taskset-style CPU list ("1", "0-3", "0,2"); "" or
// NoPinning is nil.
func parseCPUList(s string) ([]int, error) {
	if s == "" || s == NoPinning {
		return nil, nil
	}
	var cpus []int
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= 1024 {
			return nil, fmt.Errorf("CPU list %q: want numbers and ranges such as 1, 0-3 or 0,2", s)
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}

// pinSelf binds every thread of this process to cpus (threads started later
// inherit the binding from the thread that starts them) and sets GOMAXPROCS
// to their number. nil cpus restores every CPU and the default GOMAXPROCS.
func pinSelf(cpus []int) error {
	var set unix.CPUSet
	if len(cpus) == 0 {
		for c := 0; c < runtime.NumCPU(); c++ {
			set.Set(c)
		}
	}
	for _, c := range cpus {
		set.Set(c)
	}
	// A thread the runtime starts while we walk the list may have copied the
	// old mask: walk again until a pass finds no thread it had not pinned.
	pinned := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || pinned[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pin thread %d to CPUs %v: %w", tid, cpus, err)
			}
			pinned[tid] = true
			fresh++
		}
		if fresh == 0 {
			break
		}
	}
	runtime.GOMAXPROCS(set.Count())
	return nil
}

// pinned returns argv prefixed with taskset so that the program runs on
// cpus (taskset execs it: the PID stays the program's).
func pinned(cpus string, argv ...string) []string {
	if c, _ := parseCPUList(cpus); len(c) == 0 {
		return argv
	}
	return append([]string{"taskset", "-c", cpus}, argv...)
}

// redisIOThreads is what redis.conf recommends for a server of n cores:
// I/O threads only from 4 cores up ("if you have a 4 cores boxes, try to
// use 2 or 3 I/O threads, if you have a 8 cores, try to use 6 threads"),
// always leaving a core spare; below that, 1 (threading off).
func redisIOThreads(n int) int {
	if n < 4 {
		return 1
	}
	return n - max(1, n/4)
}

// memcachedThreads is what memcached's manual recommends: worker threads up
// to the number of cores ("it is typically not useful to set this higher
// than the number of CPU cores").
func memcachedThreads(n int) int { return max(1, n) }

// cpuModel is /proc/cpuinfo's first "model name", or "unknown".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// machineLoad describes how busy the machine is: the load averages and,
// where the kernel reports pressure stall information, the share of the
// last minute some task waited for a CPU. Figures taken on a busy machine
// say so next to themselves.
func machineLoad() string {
	s := "load average unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			s = "load average " + strings.Join(f[:3], " ")
		}
	}
	if b, err := os.ReadFile("/proc/pressure/cpu"); err == nil {
		for _, f := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) {
			if v, ok := strings.CutPrefix(f, "avg60="); ok {
				s += ", CPU pressure " + v + "% (share of the last minute some task waited for a CPU)"
			}
		}
	}
	return s
}
