// Package procstat reads memory figures from /proc: a process's (/proc/<pid>/status: VmRSS,
// the resident set; VmHWM, its peak), which the benchmarks report and the process tests bound,
// and the machine's (/proc/meminfo: MemAvailable), which decides the sizes a benchmark can run.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// KiB is the field of /proc/<pid>/status named field ("VmRSS", "VmHWM"), in KiB.
func KiB(pid int, field string) (int64, error) {
	return fieldKiB(fmt.Sprintf("/proc/%d/status", pid), field)
}

// MemAvailable is the memory the kernel estimates can be had without
// swapping, in bytes.
func MemAvailable() (int64, error) {
	kib, err := fieldKiB("/proc/meminfo", "MemAvailable")
	return kib << 10, err
}

// fieldKiB reads the "<field>: <n> kB" line of file.
func fieldKiB(file, field string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, file)
}
