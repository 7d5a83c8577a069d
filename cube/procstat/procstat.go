// Package procstat reads a process's memory figures from /proc/<pid>/status: what the
// benchmarks report and the process tests bound (VmRSS, the resident set; VmHWM, its peak).
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// KiB is the field of /proc/<pid>/status named field ("VmRSS", "VmHWM"), in KiB.
func KiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
