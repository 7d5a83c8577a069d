package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// The host network of the real node: the bridge and the containment rules that setupHostNetwork
// puts in place and checkContainment verifies, their counters, and the removal of every
// firewall chain and nftables table the node left (restoreHost, hoststate.go).

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
