package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the real node changes on the host, and how it is undone. The host's state before the
// first change is saved in nodeStateDir (on /run: gone after a reboot, as is everything it
// describes), so a start after a crash, or a down, can put back exactly what was there.
const nodeStateDir = "/run/ctr-testenv-node"

// Chains of our own containment rules, in the mangle table: its FORWARD, INPUT and POSTROUTING
// hooks run before the filter and nat chains kube-proxy writes, whatever order those take (and
// mangle INPUT after nat PREROUTING, so a Service's or node port's DNAT to a pod has already
// turned such a packet into one that is forwarded, not delivered to the host).
const (
	chainForward = "CTR-NODE-FORWARD"
	chainInput   = "CTR-NODE-INPUT"
	chainEgress  = "CTR-NODE-EGRESS"
)

// containmentHooks are the built-in mangle chains whose first rule jumps to one of ours.
var containmentHooks = []struct{ builtin, chain string }{
	{"FORWARD", chainForward}, {"INPUT", chainInput}, {"POSTROUTING", chainEgress},
}

// savedSysctls are the sysctls the node changes (we, kubelet, kube-proxy) or that the
// containment depends on; their values before the start are put back on stop.
var savedSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// createdPaths are folders kubelet, containerd and CNI create outside the environment's folder
// whatever they are told; those that did not exist before are removed on stop.
var createdPaths = []string{"/var/lib/kubelet", "/var/lib/cni", "/run/containerd", "/run/netns"}

type hostState struct {
	KCP       string            // for kube-proxy --cleanup
	Sysctls   map[string]string // value before the start; "" if the key does not exist
	Existed   map[string]bool   // createdPaths that existed
	Netns     []string          // entries of /run/netns before the start
	NftTables []string          // "ip filter", ... before the start
}

func nodeLock(ctx context.Context, log io.Writer) (func(), error) {
	if err := os.MkdirAll(nodeStateDir, 0o700); err != nil {
		return nil, err
	}
	b := &Builder{Log: log}
	return b.lock(ctx, filepath.Join(nodeStateDir, "lock"), "the real node's start or stop")
}

// nodeOwner is the environment folder whose node runs (or ran and was not stopped).
func nodeOwner() (string, bool) {
	data, err := os.ReadFile(filepath.Join(nodeStateDir, "owner"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(data)), true
}

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(nodeStateDir, "owner"), []byte(dir+"\n"), 0o600)
}

// saveHost records the host's state unless a record from a start not yet undone exists (then
// that record is the state before it, and the one to restore).
func saveHost(dir, kcp string) error {
	path := filepath.Join(nodeStateDir, "host.json")
	if _, err := os.Stat(path); err == nil {
		return writeOwner(dir)
	}
	st := hostState{KCP: kcp, Sysctls: map[string]string{}, Existed: map[string]bool{}}
	for _, k := range savedSysctls {
		st.Sysctls[k] = readSysctl(k)
	}
	for _, p := range createdPaths {
		_, err := os.Stat(p)
		st.Existed[p] = err == nil
	}
	st.Netns = listDir("/run/netns")
	st.NftTables = nftTables()
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	return writeOwner(dir)
}

// setupHostNetwork creates the bridge and puts the containment rules in place. Host-wide
// forwarding stays off; the bridge alone forwards (Service DNAT needs bridge to bridge).
func setupHostNetwork() error {
	if v := readSysctl("net/ipv4/ip_forward"); v != "0" {
		return fmt.Errorf("net.ipv4.ip_forward is %q on this host: the real node only runs where host-wide forwarding is off", v)
	}
	if v := readSysctl("net/ipv6/conf/all/forwarding"); v != "0" {
		return fmt.Errorf("net.ipv6.conf.all.forwarding is %q on this host: the real node only runs where it is off", v)
	}
	_ = run("ip", "link", "del", NodeBridge) // left by a crash that restoreHost could not finish
	steps := [][]string{
		{"ip", "link", "add", NodeBridge, "type", "bridge"},
		{"sysctl", "-qw", "net.ipv6.conf." + NodeBridge + ".disable_ipv6=1"},
		{"ip", "addr", "add", NodeIP + "/24", "dev", NodeBridge},
		{"ip", "link", "set", NodeBridge, "up"},
		// Replies between pods on the bridge pass conntrack, so a Service's DNAT is undone.
		{"sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"},
		{"sysctl", "-qw", "net.ipv4.conf." + NodeBridge + ".forwarding=1"},
	}
	for _, rule := range containmentRules() {
		steps = append(steps, append([]string{"iptables", "-w", "-t", "mangle"}, rule...))
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// containmentRules are the rules, in order, that keep the node's traffic on this machine:
//   - nothing is forwarded from the bridge to another interface, or to the bridge from one;
//   - what arrives on the bridge for the host itself is dropped, but for DNS to CoreDNS and
//     the replies to connections the host opened (kubelet's probes, tests dialling a pod): a
//     pod reaches neither the kubelet's port nor any other listener on the node's address.
//     No pod the project renders or the tests start needs more from the host: Services and
//     node ports are DNATed to pods before this hook, and none of them uses the Kubernetes
//     API (the kubernetes Service's endpoint, on 127.0.0.1, is dropped here too). The last
//     rule's counter is HostDropped;
//   - nothing with a pod address as source, or a pod or Service address as destination,
//     leaves by an interface other than the bridge (or loopback). The first, counting-only,
//     rule of the egress chain is the witness: if it ever counts, something tried to leave.
func containmentRules() [][]string {
	comment := func(c string) []string { return []string{"-m", "comment", "--comment", "ctr testenv: " + c} }
	notBridge := []string{"!", "-o", NodeBridge}
	return [][]string{
		{"-N", chainForward},
		append([]string{"-A", chainForward, "-i", NodeBridge, "!", "-o", NodeBridge}, append(comment("pods reach only the bridge"), "-j", "DROP")...),
		append([]string{"-A", chainForward, "!", "-i", NodeBridge, "-o", NodeBridge}, append(comment("nothing is forwarded to pods"), "-j", "DROP")...),
		{"-I", "FORWARD", "1", "-j", chainForward},
		{"-N", chainInput},
		append([]string{"-A", chainInput, "-i", NodeBridge, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED"}, append(comment("replies to connections the host opened"), "-j", "RETURN")...),
		append([]string{"-A", chainInput, "-i", NodeBridge, "-d", NodeIP, "-p", "udp", "--dport", "53"}, append(comment("cluster DNS"), "-j", "RETURN")...),
		append([]string{"-A", chainInput, "-i", NodeBridge, "-d", NodeIP, "-p", "tcp", "--dport", "53"}, append(comment("cluster DNS"), "-j", "RETURN")...),
		append([]string{"-A", chainInput, "-i", NodeBridge}, append(comment("pods reach the host for DNS only"), "-j", "DROP")...),
		{"-I", "INPUT", "1", "-j", chainInput},
		{"-N", chainEgress},
		append([]string{"-A", chainEgress, "-o", "lo"}, append(comment("loopback"), "-j", "RETURN")...),
		append(append([]string{"-A", chainEgress, "-s", PodCIDR}, notBridge...), comment("witness: pod traffic leaving the bridge")...),
		append(append([]string{"-A", chainEgress, "-s", PodCIDR}, notBridge...), append(comment("pod traffic leaves by the bridge only"), "-j", "DROP")...),
		append(append([]string{"-A", chainEgress, "-d", PodCIDR}, notBridge...), append(comment("pod addresses are on the bridge only"), "-j", "DROP")...),
		append(append([]string{"-A", chainEgress, "-d", ServiceCIDR}, notBridge...), append(comment("Service addresses are on the bridge only"), "-j", "DROP")...),
		{"-I", "POSTROUTING", "1", "-j", chainEgress},
	}
}

// checkContainment verifies what setupHostNetwork did is in place, before any pod starts.
func checkContainment() error {
	for _, hook := range containmentHooks {
		out, err := exec.Command("iptables", "-w", "-t", "mangle", "-S", hook.builtin).Output()
		if err != nil {
			return fmt.Errorf("read mangle %s: %w", hook.builtin, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < 2 || lines[1] != "-A "+hook.builtin+" -j "+hook.chain {
			return fmt.Errorf("the first rule of mangle %s is not the jump to %s:\n%s", hook.builtin, hook.chain, out)
		}
	}
	want := 0
	for _, r := range containmentRules() {
		if r[0] == "-A" {
			want++
		}
	}
	got := 0
	for _, hook := range containmentHooks {
		chain := hook.chain
		out, err := exec.Command("iptables", "-w", "-t", "mangle", "-S", chain).Output()
		if err != nil {
			return fmt.Errorf("read mangle %s: %w", chain, err)
		}
		got += strings.Count(string(out), "-A "+chain+" ")
	}
	if got != want {
		return fmt.Errorf("%d containment rules in place, want %d", got, want)
	}
	if v := readSysctl("net/ipv4/ip_forward"); v != "0" {
		return fmt.Errorf("net.ipv4.ip_forward is %q", v)
	}
	return nil
}

// ContainmentCounters are the packet counts of the containment rules: Dropped counts what
// the forward rules dropped (a pod's packet for elsewhere), HostDropped what the input rule
// dropped (a pod's packet for the host other than DNS), Escaping what reached an outgoing
// interface other than the bridge with a pod source (the witness; it must stay 0).
type ContainmentCounters struct{ Dropped, HostDropped, Escaping int64 }

// ReadContainmentCounters reads the counters of the running node's containment rules.
func ReadContainmentCounters() (ContainmentCounters, error) {
	var c ContainmentCounters
	fwd, err := chainCounts(chainForward)
	if err != nil {
		return c, err
	}
	input, err := chainCounts(chainInput)
	if err != nil {
		return c, err
	}
	egress, err := chainCounts(chainEgress)
	if err != nil {
		return c, err
	}
	if len(fwd) < 1 || len(input) < 1 || len(egress) < 2 {
		return c, fmt.Errorf("containment chains are not in place (%d forward, %d input, %d egress rules)", len(fwd), len(input), len(egress))
	}
	c.Dropped = fwd[0]
	c.HostDropped = input[len(input)-1]
	c.Escaping = egress[1]
	return c, nil
}

// chainCounts returns the packet counter of every rule of a mangle chain, in order.
func chainCounts(chain string) ([]int64, error) {
	out, err := exec.Command("iptables", "-w", "-t", "mangle", "-L", chain, "-v", "-x", "-n").Output()
	if err != nil {
		return nil, fmt.Errorf("read mangle %s: %w", chain, err)
	}
	var counts []int64
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i < 2 { // "Chain ..." and the column header
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("mangle %s: %q: %w", chain, line, err)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// restoreHost stops the node of the environment in dir and undoes every change it made to the
// host. Every step is idempotent and runs even if an earlier one failed, so a second call
// after a partial failure finishes the job.
func restoreHost(dir string, log io.Writer) error {
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var st hostState
	data, err := os.ReadFile(filepath.Join(nodeStateDir, "host.json"))
	if err != nil {
		return fmt.Errorf("no record of the host before the real node started (%s): %w", nodeStateDir, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(nodeStateDir, "host.json"), err)
	}

	for i := len(nodeOrder) - 1; i >= 0; i-- {
		name := nodeOrder[i]
		if pid := pidOf(dir, name); pid > 0 && alive(pid) {
			step(log, "stopping %s (pid %d)", name, pid)
			keep(stop(pid))
		}
		_ = os.Remove(filepath.Join(dir, "pids", name))
	}
	step(log, "real node: killing what still runs in its pods and containerd's shims")
	keep(killPods())
	keep(killShims(filepath.Join(dir, "node", "containerd.sock")))

	if st.KCP != "" {
		// Removes every chain and rule kube-proxy (any mode) wrote.
		_ = exec.Command(st.KCP, "kube-proxy", "--cleanup").Run()
	}
	step(log, "real node: unmounting, removing cgroups, the bridge and firewall chains, restoring sysctls")
	keep(unmountUnder(append([]string{filepath.Join(dir, "node")}, newPaths(st)...)))
	keep(removeCgroups())
	keep(removeChains("iptables"))
	keep(removeChains("ip6tables"))
	keep(deleteNewTables(st.NftTables))
	if _, err := os.Stat("/sys/class/net/" + NodeBridge); err == nil {
		keep(run("ip", "link", "del", NodeBridge))
	}
	for _, k := range savedSysctls {
		if v := st.Sysctls[k]; v != "" && readSysctl(k) != v {
			keep(os.WriteFile(filepath.Join("/proc/sys", k), []byte(v+"\n"), 0o644))
		}
	}
	for _, p := range newPaths(st) {
		keep(os.RemoveAll(p))
	}
	keep(os.RemoveAll(filepath.Join(dir, "node")))
	if len(errs) > 0 {
		return fmt.Errorf("undo the real node's changes (run testenv down again to retry): %w", errors.Join(errs...))
	}
	_ = os.Remove(filepath.Join(nodeStateDir, "owner"))
	return os.Remove(filepath.Join(nodeStateDir, "host.json"))
}

// newPaths are the created paths that did not exist before, and the network namespaces
// containerd created since.
func newPaths(st hostState) []string {
	var out []string
	for _, p := range createdPaths {
		if !st.Existed[p] {
			out = append(out, p)
		}
	}
	if st.Existed["/run/netns"] {
		for _, n := range listDir("/run/netns") {
			if !slices.Contains(st.Netns, n) && strings.HasPrefix(n, "cni-") {
				out = append(out, filepath.Join("/run/netns", n))
			}
		}
	}
	return out
}

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

// removeChains deletes every rule that jumps to, and every chain named, KUBE-* or CTR-NODE-*
// in every table of one family (iptables or ip6tables).
func removeChains(cmd string) error {
	ours := func(name string) bool {
		return strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CTR-NODE-")
	}
	var errs []error
	for _, table := range []string{"filter", "nat", "mangle", "raw", "security"} {
		out, err := exec.Command(cmd, "-w", "-t", table, "-S").Output()
		if err != nil {
			continue // the table does not exist in this family
		}
		var chains []string
		for _, line := range strings.Split(string(out), "\n") {
			args := splitRule(line)
			switch {
			case len(args) >= 2 && args[0] == "-N" && ours(args[1]):
				chains = append(chains, args[1])
			case len(args) >= 2 && args[0] == "-A" && !ours(args[1]):
				if j := slices.Index(args, "-j"); j >= 0 && j+1 < len(args) && ours(args[j+1]) {
					args[0] = "-D"
					if err := run(cmd, append([]string{"-w", "-t", table}, args...)...); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
		for _, op := range []string{"-F", "-X"} {
			for _, c := range chains {
				if err := run(cmd, "-w", "-t", table, op, c); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// splitRule splits one line of `iptables -S` into arguments (double quotes group words).
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		args = append(args, cur.String())
	}
	return args
}

// deleteNewTables deletes the nftables tables not in before: iptables-nft creates the tables
// of a family when it first writes a rule there, and never removes them.
func deleteNewTables(before []string) error {
	var errs []error
	for _, t := range nftTables() {
		if !slices.Contains(before, t) {
			if err := run("nft", append([]string{"delete", "table"}, strings.Fields(t)...)...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// nftTables lists the nftables tables ("ip filter", "ip6 nat", ...).
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables
}

func readSysctl(key string) string {
	data, err := os.ReadFile(filepath.Join("/proc/sys", key))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func listDir(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
