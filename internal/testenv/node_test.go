package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodeTestEnv turns on TestRealNode: it starts the machine's one real node, so it runs as its
// own step of scripts/test.sh (as root, before the shared environment starts), given the cube
// image tarball in CubeImageEnv.
const (
	NodeTestEnv  = "CTR_TESTENV_NODE_TEST"
	CubeImageEnv = "CTR_TESTENV_CUBE_IMAGE"
)

// TestRealNode starts an environment with the real node and checks, in pods of the project's
// image: a pod runs and reaches another through its Service's cluster DNS name and ClusterIP;
// its log comes through the apiserver while the kubelet refuses anonymous requests; pods reach
// neither the kubelet nor a listener on the node's address (only its DNS); a hostNetwork pod
// is refused;
// with kube-proxy stopped, a pod's connection to a ClusterIP is dropped by the containment rule
// (its counter rises) and nothing reaches an outgoing interface; and the stop leaves the host
// as it was (sysctls, links, addresses, routes, mounts, firewall, cgroups, folders).
func TestRealNode(t *testing.T) {
	if os.Getenv(NodeTestEnv) == "" {
		t.Skipf("set %s=1 and %s to run: starts the machine's one real node (scripts/test.sh runs it as its own step)", NodeTestEnv, CubeImageEnv)
	}
	cubeTar := os.Getenv(CubeImageEnv)
	names, err := imageNames(cubeTar)
	if err != nil || len(names) == 0 {
		t.Fatalf("%s=%q: %v (names %v)", CubeImageEnv, cubeTar, err, names)
	}
	image := names[0]

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := (&Builder{RepoRoot: root, Cache: cache, Log: tlog{t}}).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A run killed before it stopped (a CI job cut short) leaves kubelet's sysctls and the
	// record of the host before it; the "before" must be the host that record restores.
	if err := RecoverHost(ctx, tlog{t}); err != nil {
		t.Fatal(err)
	}
	before := hostSnapshot()
	dir := t.TempDir()
	env, err := Up(ctx, dir, bin, tlog{t}, &NodeOptions{Images: []string{cubeTar}})
	if err != nil {
		_ = Down(dir, tlog{t})
		t.Fatal(err)
	}
	downed := false
	defer func() {
		if !downed {
			_ = Down(dir, tlog{t})
		}
	}()
	t.Logf("real node Ready %s after kubelet start", env.NodeReady)
	c, err := newClient(env.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("pods reach a Service by its cluster DNS name", func(t *testing.T) {
		created := time.Now()
		server := probePod("probe-server", image, "server", "--data", "/data", "--listen", "0.0.0.0:8027")
		server.Labels = map[string]string{"app": "probe-server"}
		server.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8027)}},
			PeriodSeconds: 1,
		}
		mustCreatePod(ctx, t, c, server)
		mustCreateService(ctx, t, c, "probe-server")
		if err := c.waitPod(ctx, "probe-server", 2*time.Minute, podReady); err != nil {
			t.Fatal(err)
		}
		t.Logf("pod create to Ready on the real node: %s", time.Since(created).Round(100*time.Millisecond))
		addr := "probe-server.default.svc." + ClusterDomain + ":8027"
		mustCreatePod(ctx, t, c, probePod("probe-client", image, "seek", "--addr", addr, "--timeout", "20s", "1"))
		if err := c.waitPod(ctx, "probe-client", 2*time.Minute, podDone); err != nil {
			t.Fatal(err)
		}
		if phase := c.podPhase(ctx, "probe-client"); phase != corev1.PodSucceeded {
			t.Fatalf("cube seek --addr %s from a pod: %s\n%s", addr, phase, c.podLog(ctx, "probe-client"))
		}
	})

	t.Run("the apiserver fetches a pod's log from the kubelet", func(t *testing.T) {
		// As kubectl logs does: through the apiserver, which presents its kubelet client
		// certificate to the kubelet (anonymous requests are refused, below).
		data, err := c.cs.CoreV1().Pods("default").GetLogs("probe-client", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("GetLogs of probe-client through the apiserver: %v", err)
		}
		if !strings.Contains(string(data), "# version") {
			t.Errorf("log of probe-client has no \"# version\" line of cube seek:\n%s", data)
		}
	})

	t.Run("the kubelet refuses anonymous requests and admits the apiserver", func(t *testing.T) {
		url := fmt.Sprintf("https://%s/pods", net.JoinHostPort(NodeIP, strconv.Itoa(env.Ports.Kubelet)))
		if code := kubeletStatus(t, url, nil, ""); code != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s from the host: HTTP %d, want %d", url, code, http.StatusUnauthorized)
		}
		// Not even the apiserver's admin token: the kubelet takes no tokens at all.
		if code := kubeletStatus(t, url, nil, adminToken); code != http.StatusUnauthorized {
			t.Errorf("GET %s with the admin's bearer token: HTTP %d, want %d", url, code, http.StatusUnauthorized)
		}
		cert, err := tls.LoadX509KeyPair(env.pkiPath(kubeletClientCert+".crt"), env.pkiPath(kubeletClientCert+".key"))
		if err != nil {
			t.Fatal(err)
		}
		if code := kubeletStatus(t, url, &cert, ""); code != http.StatusOK {
			t.Errorf("GET %s as %s (the apiserver's client certificate): HTTP %d, want %d", url, KubeletClientUser, code, http.StatusOK)
		}
	})

	t.Run("pods reach the host for DNS only", func(t *testing.T) {
		// DNS itself: the first subtest's client found its server by the Service's cluster
		// DNS name, asking CoreDNS on the node's address through these rules.
		ln, err := net.Listen("tcp", net.JoinHostPort(NodeIP, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var accepted atomic.Int64
		go func() { // an echo server; it ends when ln is closed
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				go func() { defer conn.Close(); _, _ = io.Copy(conn, conn) }()
			}
		}()
		before, err := ReadContainmentCounters()
		if err != nil {
			t.Fatal(err)
		}
		targets := map[string]string{
			"probe-host-listener": ln.Addr().String(),
			"probe-kubelet":       net.JoinHostPort(NodeIP, strconv.Itoa(env.Ports.Kubelet)),
		}
		for name, addr := range targets {
			mustCreatePod(ctx, t, c, probePod(name, image, "seek", "--addr", addr, "--timeout", "5s", "1"))
		}
		for name, addr := range targets {
			if err := c.waitPod(ctx, name, 2*time.Minute, podDone); err != nil {
				t.Fatal(err)
			}
			if phase := c.podPhase(ctx, name); phase != corev1.PodFailed {
				t.Errorf("cube seek --addr %s (the host) from a pod: %s, want Failed\n%s", addr, phase, c.podLog(ctx, name))
			} else {
				t.Logf("%s: cube seek --addr %s failed: %s", name, addr, strings.TrimSpace(c.podLog(ctx, name)))
			}
		}
		after, err := ReadContainmentCounters()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("containment counters before %+v, after %+v", before, after)
		if n := accepted.Load(); n != 0 {
			t.Errorf("the listener on the node's address %s accepted %d connections from pods, want 0", ln.Addr(), n)
		}
		if after.HostDropped <= before.HostDropped {
			t.Errorf("the input drop rule counted nothing (%d -> %d): the pods' connections to the host were not dropped by it", before.HostDropped, after.HostDropped)
		}
		if after.Escaping != 0 {
			t.Errorf("%d packets with a pod source reached an interface other than the bridge", after.Escaping)
		}
	})

	t.Run("a hostNetwork pod is refused", func(t *testing.T) {
		err := c.createHostNetworkPod(ctx, "probe-host-network")
		if err == nil {
			t.Fatal("a hostNetwork pod was created, want it refused")
		}
		if !strings.Contains(err.Error(), HostNetworkRefusal) {
			t.Errorf("creating a hostNetwork pod: %v, want the refusal %q", err, HostNetworkRefusal)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("without kube-proxy a ClusterIP connection is dropped and nothing leaves", func(t *testing.T) {
		if pid := pidOf(env.Dir, "kube-proxy"); pid == 0 || stop(pid) != nil {
			t.Fatalf("stop kube-proxy (pid %d)", pid)
		}
		// A Service created now has no DNAT rule: its ClusterIP is routed like any other
		// address, towards the default route, and must not get there.
		svc := mustCreateService(ctx, t, c, "unproxied")
		before, err := ReadContainmentCounters()
		if err != nil {
			t.Fatal(err)
		}
		addr := svc.Spec.ClusterIP + ":8027"
		mustCreatePod(ctx, t, c, probePod("probe-unproxied", image, "seek", "--addr", addr, "--timeout", "5s", "1"))
		if err := c.waitPod(ctx, "probe-unproxied", 2*time.Minute, podDone); err != nil {
			t.Fatal(err)
		}
		after, err := ReadContainmentCounters()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("containment counters before %+v, after %+v", before, after)
		if phase := c.podPhase(ctx, "probe-unproxied"); phase != corev1.PodFailed {
			t.Errorf("cube seek --addr %s (no kube-proxy) from a pod: %s, want Failed\n%s", addr, phase, c.podLog(ctx, "probe-unproxied"))
		}
		if after.Dropped <= before.Dropped {
			t.Errorf("the forward drop rule counted nothing (%d -> %d): the connection was not dropped by it", before.Dropped, after.Dropped)
		}
		if after.Escaping != 0 {
			t.Errorf("%d packets with a pod source reached an interface other than the bridge", after.Escaping)
		}
	})

	// A crash: every process of the environment killed, nothing undone, the pods' containers
	// still running under their shims. The next start must clean up what was left, and its
	// stop must then leave the host as it was before the first start.
	for _, name := range append(append([]string{}, order...), nodeOrder...) {
		if pid := pidOf(dir, name); pid > 0 && alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	downed = true
	dir2 := t.TempDir()
	if _, err := Up(ctx, dir2, bin, tlog{t}, &NodeOptions{}); err != nil {
		_ = Down(dir2, tlog{t})
		t.Fatalf("start after a crash: %v", err)
	}
	if err := Down(dir2, tlog{t}); err != nil {
		t.Fatalf("down: %v", err)
	}
	_ = Down(dir, io.Discard) // the crashed environment's pid files
	if diffs := diffSnapshots(before, hostSnapshot()); len(diffs) > 0 {
		t.Errorf("the host is not as it was before the real node started:\n%s", strings.Join(diffs, "\n"))
	}
}

// TestRecoverHostAfterACrash leaves what a node run killed mid-way leaves (the record of the
// host, an owner whose processes are gone, a sysctl changed as kubelet changes it) and checks
// RecoverHost puts the sysctl back and forgets the run; a second call does nothing.
func TestRecoverHostAfterACrash(t *testing.T) {
	if os.Getenv(NodeTestEnv) == "" {
		t.Skipf("set %s=1 to run (changes kernel/panic briefly, as root)", NodeTestEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := RecoverHost(ctx, tlog{t}); err != nil {
		t.Fatal(err)
	}
	const key = "kernel/panic"
	orig := readSysctl(key)
	if orig == "" {
		t.Skipf("no %s here", key)
	}
	crashed := t.TempDir() // no pid files: its processes are gone
	unlock, err := nodeLock(ctx, tlog{t})
	if err != nil {
		t.Fatal(err)
	}
	err = saveHost(crashed, "")
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	changed := orig + "7"
	if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(changed+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join("/proc/sys", key), []byte(orig+"\n"), 0o644) })
	if got := readSysctl(key); got != changed {
		t.Fatalf("%s = %q after writing %q", key, got, changed)
	}

	if err := RecoverHost(ctx, tlog{t}); err != nil {
		t.Fatal(err)
	}
	if got := readSysctl(key); got != orig {
		t.Errorf("%s = %q after RecoverHost, want %q as before the crashed run", key, got, orig)
	}
	if owner, ok := nodeOwner(); ok {
		t.Errorf("RecoverHost left the crashed run as the node's owner: %s", owner)
	}
	if _, err := os.Stat(filepath.Join(nodeStateDir, "host.json")); !os.IsNotExist(err) {
		t.Errorf("RecoverHost left the record of the host: %v", err)
	}
	if err := RecoverHost(ctx, tlog{t}); err != nil {
		t.Errorf("a second RecoverHost: %v", err)
	}
}

// TestHostSnapshotSeesChanges proves the comparison above can fail: a link and a firewall
// chain added between two snapshots show as differences.
func TestHostSnapshotSeesChanges(t *testing.T) {
	if os.Getenv(NodeTestEnv) == "" {
		t.Skipf("set %s=1 to run (changes the host's links and firewall briefly, as root)", NodeTestEnv)
	}
	tables := nftTables()
	before := hostSnapshot()
	if err := run("ip", "link", "add", "ctrsnaptest0", "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run("ip", "link", "del", "ctrsnaptest0") }()
	if err := run("iptables", "-w", "-t", "filter", "-N", "CTR-NODE-SNAPTEST"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = removeChains("iptables"); _ = deleteNewTables(tables) }()
	diffs := diffSnapshots(before, hostSnapshot())
	joined := strings.Join(diffs, "\n")
	for _, want := range []string{"links", "iptables-save", "nft ruleset"} {
		if !strings.Contains(joined, want+":") {
			t.Errorf("no %q difference after adding a link and a chain:\n%s", want, joined)
		}
	}
}

// kubeletStatus is the HTTP status of a GET of url on the kubelet, with cert as the client
// certificate and token as the bearer token when given. The kubelet's serving certificate is
// its own self-signed one, which the apiserver does not check either (no
// --kubelet-certificate-authority).
func kubeletStatus(t *testing.T, url string, cert *tls.Certificate, token string) int {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

func probePod(name, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector:  map[string]string{"kubernetes.io/hostname": NodeName},
			Tolerations:   []corev1.Toleration{{Key: NodeTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "cube", Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
			}},
		},
	}
}

func mustCreatePod(ctx context.Context, t *testing.T, c *client, p *corev1.Pod) {
	t.Helper()
	if _, err := c.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

func mustCreateService(ctx context.Context, t *testing.T, c *client, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 8027, TargetPort: intstr.FromInt32(8027)}},
		},
	}
	got, err := c.cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", name, err)
	}
	return got
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func podDone(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (c *client) waitPod(ctx context.Context, name string, timeout time.Duration, ok func(*corev1.Pod) bool) error {
	var last *corev1.Pod
	err := poll(ctx, timeout, func() (bool, error) {
		p, err := c.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return ok(p), nil
	}, "pod "+name)
	if err != nil && last != nil {
		return fmt.Errorf("%w: phase %s, status %+v", err, last.Status.Phase, last.Status.ContainerStatuses)
	}
	return err
}

func (c *client) podPhase(ctx context.Context, name string) corev1.PodPhase {
	p, err := c.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return corev1.PodPhase("unknown: " + err.Error())
	}
	return p.Status.Phase
}

func (c *client) podLog(ctx context.Context, name string) string {
	data, err := c.cs.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(data)
}

// tlog writes progress lines to the test log.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
