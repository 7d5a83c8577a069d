package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// hostSnapshot describes what of the host the real node may touch: sysctls, links, addresses,
// routes, mounts, firewall rules (iptables of both families and the whole nftables ruleset),
// top-level cgroups and the folders kubelet and containerd create. Two snapshots taken before
// a start and after a stop must be equal.
func hostSnapshot() map[string]string {
	s := map[string]string{}
	keys := append([]string{}, savedSysctls...)
	for _, pattern := range []string{"net/ipv4/conf/all/*", "net/ipv4/conf/default/*", "net/bridge/*", "net/netfilter/nf_conntrack_max",
		"net/netfilter/nf_conntrack_tcp_timeout_*", "net/ipv6/conf/all/*"} {
		m, _ := filepath.Glob(filepath.Join("/proc/sys", pattern))
		for _, p := range m {
			keys = append(keys, strings.TrimPrefix(p, "/proc/sys/"))
		}
	}
	for _, k := range keys {
		s["sysctl "+k] = readSysctl(k)
	}
	// Link lines carry changing counters and ids only with -s/-d; addresses carry lifetimes
	// that count down, which the filter drops.
	s["links"] = output("ip", "-o", "link", "show")
	s["addresses"] = dropLines(output("ip", "-o", "addr", "show"), "valid_lft")
	s["routes"] = output("ip", "route", "show", "table", "all")
	s["rules"] = output("ip", "rule", "show")
	var points []string
	for _, m := range mounts() {
		points = append(points, m.fstype+" "+m.point)
	}
	sort.Strings(points)
	s["mounts"] = strings.Join(points, "\n")
	counters := regexp.MustCompile(`\[\d+:\d+\]`)
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, _ := exec.Command(cmd).Output()
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(l, "#") {
				lines = append(lines, counters.ReplaceAllString(l, ""))
			}
		}
		s[cmd] = strings.Join(lines, "\n")
	}
	s["nft ruleset"] = output("nft", "list", "ruleset")
	for _, root := range cgroupRoots() {
		var dirs []string
		for _, e := range listDir(root) {
			if fi, err := os.Stat(filepath.Join(root, e)); err == nil && fi.IsDir() {
				dirs = append(dirs, e)
			}
		}
		s["cgroups "+root] = strings.Join(dirs, " ")
	}
	for _, p := range createdPaths {
		_, err := os.Stat(p)
		s["exists "+p] = fmt.Sprint(err == nil)
	}
	return s
}

func dropLines(text, containing string) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, containing); i >= 0 {
			l = l[:i]
		}
		keep = append(keep, strings.TrimSpace(l))
	}
	return strings.Join(keep, "\n")
}

// diffSnapshots lists the entries that differ between two host snapshots.
func diffSnapshots(before, after map[string]string) []string {
	var diffs []string
	for k, v := range before {
		if after[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s:\n  before: %q\n  after:  %q", k, v, after[k]))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: new: %q", k, v))
		}
	}
	sort.Strings(diffs)
	return diffs
}
