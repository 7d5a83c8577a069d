package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The real node: kubelet, containerd and runc, a CNI bridge, CoreDNS and kube-proxy, beside
// the kwok nodes. Its names and addresses are fixed, so there is one per machine (see
// nodeLock). What it changes on the host, and how each change is undone, is in hoststate.go (the
// record of the host and restoreHost), hostnet.go (bridge and containment rules) and
// hostcleanup.go (processes, mounts, cgroups).
const (
	// NodeName is the real node's name. It carries NodeTaint, so only pods that tolerate it
	// (the project's own images) run there; everything else stays on the kwok nodes.
	NodeName = "ctr-real-node"
	// NodeTaintKey is the key of the real node's NoSchedule taint; NodeLabel is its label.
	NodeTaintKey = "ctr.elasticctr.io/real-node"
	NodeLabel    = "ctr.elasticctr.io/node=real"

	// ServiceCIDR is the cluster's Service range (kube-apiserver and kube-proxy).
	ServiceCIDR = "10.96.0.0/16"
	// PodCIDR is the real node's pod range, on bridge NodeBridge; NodeIP is the bridge's
	// own address: the node's InternalIP, where CoreDNS and the kubelet listen.
	PodCIDR    = "10.244.0.0/24"
	NodeIP     = "10.244.0.1"
	NodeBridge = "ctrnode0"
	// ClusterDomain is the DNS domain CoreDNS serves; it resolves nothing else.
	ClusterDomain = "cluster.local"
)

// The node's processes, in start order; they stop in reverse, before the control plane.
var nodeOrder = []string{"containerd", "coredns", "kube-proxy", "kubelet"}

// NodeOptions ask Up for the real node.
type NodeOptions struct {
	// Images are docker-archive or OCI tarballs (`make images` writes dist/image/cube-image.tar)
	// imported into the node's containerd before kubelet starts.
	Images []string
}

// RealNodeNamespace are the annotations that put every pod of a namespace on the real node:
// the PodNodeSelector and PodTolerationRestriction admission plugins (enabled in every
// environment) add the node selector and the toleration to each pod created there.
func RealNodeNamespace() map[string]string {
	return map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      NodeLabel,
		"scheduler.alpha.kubernetes.io/defaultTolerations": `[{"key":"` + NodeTaintKey + `","operator":"Exists","effect":"NoSchedule"}]`,
	}
}

// nodeDir holds everything of the node that can live in the environment's folder.
func (e *Env) nodeDir(parts ...string) string {
	return filepath.Join(append([]string{e.Dir, "node"}, parts...)...)
}

func (e *Env) containerdSocket() string { return e.nodeDir("containerd.sock") }

// startNode brings the real node up: host network first (rules checked before any pod can
// exist), then containerd with the images, CoreDNS, kube-proxy and kubelet; it returns when
// the node is Ready and cluster DNS answers.
func (e *Env) startNode(ctx context.Context, bin *Binaries, c *client, opts NodeOptions, log io.Writer) error {
	if err := nodePrerequisites(); err != nil {
		return err
	}
	unlock, err := nodeLock(ctx, log)
	if err != nil {
		return err
	}
	defer unlock()
	if err := recoverHost(e.Dir, log); err != nil {
		return err
	}
	if err := saveHost(e.Dir, bin.KCP); err != nil {
		return err
	}
	if err := os.RemoveAll(e.nodeDir()); err != nil {
		return err
	}
	for _, d := range []string{"cni/net.d", "cni/ipam", "containerd", "kubelet", "coredns"} {
		if err := os.MkdirAll(e.nodeDir(d), 0o755); err != nil {
			return err
		}
	}

	step(log, "real node: bridge %s (%s), forwarding on the bridge only, containment rules", NodeBridge, PodCIDR)
	if err := setupHostNetwork(); err != nil {
		return err
	}
	if err := checkContainment(); err != nil {
		return fmt.Errorf("refusing to start pods: %w", err)
	}

	step(log, "real node: starting containerd (%s)", firstLine(output("containerd", "--version")))
	if err := e.writeNodeConfigs(); err != nil {
		return err
	}
	if err := e.spawn("containerd", "containerd", "--config", e.nodeDir("containerd.toml")); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, "containerd's socket", func() bool {
		return exec.CommandContext(ctx, "ctr", "--address", e.containerdSocket(), "version").Run() == nil
	}); err != nil {
		return fmt.Errorf("%w (see %s)", err, e.logPath("containerd"))
	}
	for _, img := range append([]string{bin.PauseImage}, opts.Images...) {
		step(log, "real node: importing image %s", img)
		out, err := exec.CommandContext(ctx, "ctr", "--address", e.containerdSocket(), "-n", "k8s.io",
			"images", "import", "--no-unpack=false", img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import image %s into the node's containerd: %w\n%s", img, err, out)
		}
	}

	step(log, "real node: starting CoreDNS %s on %s:53 (%s only), kube-proxy and kubelet %s", CoreDNSVersion, NodeIP, ClusterDomain, KubernetesVersion)
	if err := e.spawn("coredns", bin.CoreDNS, "-conf", e.nodeDir("Corefile")); err != nil {
		return err
	}
	if err := e.spawn("kube-proxy", bin.KCP, "kube-proxy", "--config", e.nodeDir("kube-proxy.yaml")); err != nil {
		return err
	}
	if err := c.allowKubeletClient(ctx); err != nil {
		return err
	}
	started := time.Now()
	if err := e.spawn("kubelet", bin.KCP, "kubelet",
		"--config", e.nodeDir("kubelet.yaml"),
		"--kubeconfig", e.Kubeconfig(),
		"--root-dir", e.nodeDir("kubelet"),
		"--hostname-override", NodeName,
		"--node-ip", NodeIP,
		"--node-labels", NodeLabel,
		"--v", "1"); err != nil {
		return err
	}
	if err := writeOwner(e.Dir); err != nil {
		return err
	}
	if err := c.waitNodeReady(ctx, 90*time.Second); err != nil {
		return fmt.Errorf("%w (see %s)", err, e.logPath("kubelet"))
	}
	e.NodeReady = time.Since(started).Round(100 * time.Millisecond)
	if err := waitFor(ctx, 30*time.Second, "cluster DNS", func() bool {
		_, err := clusterResolver().LookupHost(ctx, "kubernetes.default.svc."+ClusterDomain)
		return err == nil
	}); err != nil {
		return fmt.Errorf("%w (see %s)", err, e.logPath("coredns"))
	}
	step(log, "real node %s Ready %s after kubelet start", NodeName, e.NodeReady)
	return nil
}

// RecoverHost undoes what a real node left on this machine when its run was killed before it
// could stop (host.json in nodeStateDir keeps the host's state from before it started). It does
// nothing when no node ran, and refuses while that node still runs. A comparison of the host
// before and after a start must take its "before" after this.
func RecoverHost(ctx context.Context, log io.Writer) error {
	unlock, err := nodeLock(ctx, log)
	if err != nil {
		return err
	}
	defer unlock()
	return recoverHost("", log)
}

// recoverHost is RecoverHost with the node lock held; self is the environment about to start
// (its own leftovers are cleaned up even though its control plane may run).
func recoverHost(self string, log io.Writer) error {
	owner, ok := nodeOwner()
	if !ok {
		return nil
	}
	if owner != self && running(owner) {
		return fmt.Errorf("a real node already runs on this machine for the environment in %q: stop it first (testenv down -dir %s)", owner, owner)
	}
	step(log, "a previous real node (environment %s) was not stopped; cleaning up what it left", owner)
	if err := restoreHost(owner, log); err != nil {
		return fmt.Errorf("clean up the previous real node: %w", err)
	}
	return nil
}

// stopNode stops the node's processes, kills what still runs in its pods, and undoes every
// change to the host. It does nothing when this environment has no node.
func (e *Env) stopNode(log io.Writer) error {
	owner, ok := nodeOwner()
	if !ok || owner != e.Dir {
		return nil
	}
	unlock, err := nodeLock(context.Background(), log)
	if err != nil {
		return err
	}
	defer unlock()
	return restoreHost(e.Dir, log)
}

// clusterResolver asks the node's CoreDNS directly, as a pod would.
func clusterResolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(NodeIP, "53"))
	}}
}

func (e *Env) writeNodeConfigs() error {
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.grpc.v1.introspection.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # Root cannot lower oom_score_adj on this machine; without this every sandbox fails.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`, e.nodeDir("containerd", "root"), e.nodeDir("containerd", "state"), e.containerdSocket(), e.nodeDir("containerd-ttrpc.sock"),
			e.nodeDir("containerd", "opt"), PauseImage, e.nodeDir("cni", "net.d")),

		// No gateway, no masquerade, no default route: a pod reaches its bridge neighbours,
		// the node's address and, through it, the Service range, and nothing else.
		"cni/net.d/10-ctr.conflist": fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "ctr-testenv",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": false,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q, "rangeStart": "10.244.0.10", "rangeEnd": "10.244.0.250"}]],
      "routes": [{"dst": %q, "gw": %q}]
    }
  }]
}
`, NodeBridge, e.nodeDir("cni", "ipam"), PodCIDR, ServiceCIDR, NodeIP),

		"Corefile": fmt.Sprintf(`%s:53 in-addr.arpa:53 {
    bind %s
    errors
    kubernetes %s in-addr.arpa {
        kubeconfig %s testenv
        pods insecure
    }
}
`, ClusterDomain, NodeIP, ClusterDomain, e.Kubeconfig()),

		"kube-proxy.yaml": fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: iptables
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: [%s/32]
# Zeroed: kube-proxy then changes no conntrack sysctl of the host.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  syncPeriod: 30s
  minSyncPeriod: 0s
`, e.Kubeconfig(), NodeName, NodeIP, PodCIDR, e.Ports.ProxyHealth, e.Ports.ProxyMetrics, NodeIP),

		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
# Pods never see the machine's resolver: only the cluster DNS on the bridge.
resolvConf: ""
clusterDNS: [%s]
clusterDomain: %s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
# Only the apiserver's client certificate (KubeletClientUser) gets in: no anonymous requests,
# no tokens (not even the admin's), and each request is authorized by the
# apiserver, where that user alone is bound to the kubelet API.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 5m0s, cacheUnauthorizedTTL: 30s}
registerWithTaints:
- {key: %s, value: "true", effect: NoSchedule}
maxPods: 60
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%", "nodefs.inodesFree": "1%%"}
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 0s
staticPodPath: ""
`, e.containerdSocket(), NodeIP, ClusterDomain, NodeIP, e.Ports.Kubelet, e.Ports.KubeletHealth,
			e.pkiPath("ca.crt"), NodeTaintKey),
	}
	for name, body := range files {
		if err := os.WriteFile(e.nodeDir(name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// waitNodeReady waits for the real node to report Ready.
func (c *client) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}, "the real node "+NodeName+" Ready")
}

// nodePrerequisites checks the programs the node runs are installed (`make deps` installs them).
func nodePrerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (it runs containerd and kubelet and changes the host's network)")
	}
	var missing []string
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "iptables-save", "ip6tables", "nft", "conntrack", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			missing = append(missing, "/usr/lib/cni/"+p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node needs %s: run make deps", strings.Join(missing, ", "))
	}
	return nil
}

func waitFor(ctx context.Context, timeout time.Duration, what string, ok func() bool) error {
	return poll(ctx, timeout, func() (bool, error) { return ok(), nil }, what)
}

func output(name string, args ...string) string {
	out, _ := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func pidOf(dir, name string) int {
	data, err := os.ReadFile(filepath.Join(dir, "pids", name))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}
