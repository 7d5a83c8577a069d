package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// What the real node changes on the host, and how it is undone. The host's state before the
// first change is saved in nodeStateDir (on /run: gone after a reboot, as is everything it
// describes), so a start after a crash, or a down, can put back exactly what was there.
const nodeStateDir = "/run/ctr-testenv-node"

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
