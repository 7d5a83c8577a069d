package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
)

// Env is one running (or stopped) environment. Everything it has lives under Dir:
//
//	Dir/env.json      ports and paths of the running environment (written by Up)
//	Dir/kubeconfig    admin kubeconfig (token auth, CA-verified TLS to 127.0.0.1)
//	Dir/pki/          CA, serving certificates, the apiserver's kubelet client certificate,
//	                  service-account keys
//	Dir/pids/NAME     one pid file per process, removed by Down
//	Dir/logs/NAME.log stdout and stderr of each process
//	Dir/etcd/         etcd data
type Env struct {
	Dir   string
	Ports Ports
	// VolcanoManifest is the environment's own copy of a Volcano release manifest (namespace,
	// the CRDs, and the three component Deployments, which kwok runs as simulated pods), for
	// tests of installing Volcano: file://<path>. The real Volcano of the environment is the
	// processes it started.
	VolcanoManifest string
	// Node is true when the environment has the real node (see node.go); NodeReady is how long
	// it took from kubelet's start to the node's Ready condition, NodeImages the image names
	// imported into its containerd.
	Node       bool          `json:",omitempty"`
	NodeReady  time.Duration `json:",omitempty"`
	NodeImages []string      `json:",omitempty"`

	// tied: the processes die with this one (UpInProcess).
	tied bool
}

// Ports are picked free on 127.0.0.1 at start, so environments never collide with each
// other or with anything else on the machine.
type Ports struct {
	EtcdClient, EtcdPeer, APIServer, KCM, Scheduler, Kwok int
	VCScheduler, VCSchedulerHealth, VCCtrl, VCCtrlHealth  int
	VCWebhook                                             int
	// The real node's: kubelet (on NodeIP), kubelet healthz, kube-proxy healthz and metrics.
	Kubelet, KubeletHealth, ProxyHealth, ProxyMetrics int
}

// NodeImage is the name of the image of repository (e.g. stack.CubeImageRepository) imported
// into the real node, "" when there is none.
func (e *Env) NodeImage(repository string) string {
	for _, n := range e.NodeImages {
		if strings.HasPrefix(n, repository+":") {
			return n
		}
	}
	return ""
}

// pkiPath is the environment's pki folder, or a file in it.
func (e *Env) pkiPath(name ...string) string {
	return filepath.Join(append([]string{e.Dir, "pki"}, name...)...)
}

// Kubeconfig is the admin kubeconfig of the environment.
func (e *Env) Kubeconfig() string { return filepath.Join(e.Dir, "kubeconfig") }

const adminToken = "ctr-testenv-admin-token"

// order is the start order; Down stops in reverse, so etcd goes last.
var order = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "provisioner", "kwok",
	"vc-webhook-manager", "vc-scheduler", "vc-controller-manager"}

// Up starts a fresh environment in dir (which must not hold a running one) and waits until
// nodes are Ready, Volcano's CRDs are established and its default queue is open. With node
// set, it also starts the real node (root only; one per machine) and waits until it is Ready.
func Up(ctx context.Context, dir string, bin *Binaries, log io.Writer, node *NodeOptions) (*Env, error) {
	return up(ctx, dir, bin, log, node, false)
}

// UpInProcess is Up, without the real node, for an environment that lives no longer than
// this process: the kernel kills its processes when this one dies. A test that starts one
// and is killed before its Cleanup runs (make test stopping the others at a first failure)
// leaves nothing running.
func UpInProcess(ctx context.Context, dir string, bin *Binaries, log io.Writer) (*Env, error) {
	return up(ctx, dir, bin, log, nil, true)
}

func up(ctx context.Context, dir string, bin *Binaries, log io.Writer, node *NodeOptions, tied bool) (*Env, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if running(dir) {
		return nil, fmt.Errorf("an environment is already running in %q: run down first", dir)
	}
	for _, d := range []string{"etcd", "pids", "logs", "pki", "volumes"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	e := &Env{Dir: dir, tied: tied}
	if err := e.pickPorts(); err != nil {
		return nil, err
	}
	start := time.Now()
	ok := false
	defer func() {
		if !ok {
			fmt.Fprintf(log, "testenv: start failed; stopping what was started (logs in %s)\n", filepath.Join(dir, "logs"))
			_ = Down(dir, io.Discard)
		}
	}()
	p, tokens, err := e.writePKI()
	if err != nil {
		return nil, err
	}
	if err := e.startAPIServer(ctx, bin, p, tokens, log); err != nil {
		return nil, err
	}
	if err := e.startControllers(bin, p, log); err != nil {
		return nil, err
	}
	c, err := newClient(e.Kubeconfig())
	if err != nil {
		return nil, err
	}
	step(log, "refusing hostNetwork pods (ValidatingAdmissionPolicy %s)", HostNetworkPolicy)
	if err := c.refuseHostNetwork(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	if err := e.startKwok(ctx, bin, c, log); err != nil {
		return nil, err
	}
	if err := e.startVolcano(ctx, bin, c, p, log); err != nil {
		return nil, err
	}
	step(log, "waiting for nodes Ready and Volcano's default queue")
	if err := c.waitReady(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	if node != nil {
		e.Node = true
		if err := e.save(); err != nil { // Down must know of the node from here on
			return nil, err
		}
		if err := e.startNode(ctx, bin, c, *node, log); err != nil {
			return nil, err
		}
		for _, img := range append([]string{bin.PauseImage}, node.Images...) {
			names, err := imageNames(img)
			if err != nil {
				return nil, err
			}
			e.NodeImages = append(e.NodeImages, names...)
		}
	}
	if err := e.save(); err != nil {
		return nil, err
	}
	ok = true
	step(log, "ready in %s; KUBECONFIG=%s", time.Since(start).Round(100*time.Millisecond), e.Kubeconfig())
	return e, nil
}

// loop is a loopback address.
func loop(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// writePKI writes the certificates, the service-account keys, the admin token file and the
// kubeconfig; it returns the PKI and the token file.
func (e *Env) writePKI() (*pki, string, error) {
	p, err := newPKI(e.pkiPath())
	if err != nil {
		return nil, "", err
	}
	for i, n := range []string{"apiserver", "webhook"} {
		if err := p.serving(n, int64(i+2)); err != nil {
			return nil, "", err
		}
	}
	// Signed by the CA the kubelet trusts for clients (see writeNodeConfigs): the apiserver's
	// identity for logs, exec and port-forward, which the kubelet alone admits.
	if err := p.clientCert(kubeletClientCert, KubeletClientUser, 4); err != nil {
		return nil, "", err
	}
	if err := p.serviceAccountKeys(); err != nil {
		return nil, "", err
	}
	tokens := e.pkiPath("tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, "", err
	}
	return p, tokens, e.writeKubeconfig(p)
}

// startAPIServer starts etcd and kube-apiserver and waits until it is ready.
func (e *Env) startAPIServer(ctx context.Context, bin *Binaries, p *pki, tokens string, log io.Writer) error {
	step(log, "starting etcd")
	if err := e.spawn("etcd", bin.KCP, "etcd", "--data-dir", filepath.Join(e.Dir, "etcd"),
		"--listen-client", loop(e.Ports.EtcdClient), "--listen-peer", loop(e.Ports.EtcdPeer)); err != nil {
		return err
	}
	step(log, "starting kube-apiserver %s", KubernetesVersion)
	if err := e.spawn("kube-apiserver", bin.KCP, "kube-apiserver",
		"--etcd-servers=http://"+loop(e.Ports.EtcdClient),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(e.Ports.APIServer),
		"--tls-cert-file="+p.path("apiserver.crt"), "--tls-private-key-file="+p.path("apiserver.key"),
		"--client-ca-file="+p.path("ca.crt"),
		"--token-auth-file="+tokens,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://127.0.0.1:"+strconv.Itoa(e.Ports.APIServer),
		"--service-account-key-file="+p.path("sa.pub"),
		"--service-account-signing-key-file="+p.path("sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		// The real node's hostname resolves nowhere: logs and exec go to its InternalIP.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate="+p.path(kubeletClientCert+".crt"),
		"--kubelet-client-key="+p.path(kubeletClientCert+".key"),
		"--allow-privileged=true",
		// Namespace annotations place every pod of a namespace on the real node (see
		// RealNodeNamespace): the end-to-end tests run the provider's objects there unchanged.
		"--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
		"--enable-priority-and-fairness=false",
		"--profiling=false"); err != nil {
		return err
	}
	if err := e.waitHTTPS(ctx, p, e.Ports.APIServer, "/readyz", 60*time.Second, false); err != nil {
		return fmt.Errorf("kube-apiserver did not become ready: %w (see %s)", err, e.logPath("kube-apiserver"))
	}
	step(log, "kube-apiserver ready at https://%s", loop(e.Ports.APIServer))
	return nil
}

// startControllers starts kube-controller-manager, kube-scheduler and the volume provisioner.
func (e *Env) startControllers(bin *Binaries, p *pki, log io.Writer) error {
	kc := e.Kubeconfig()
	step(log, "starting kube-controller-manager and kube-scheduler")
	if err := e.spawn("kube-controller-manager", bin.KCP, "kube-controller-manager",
		"--kubeconfig="+kc, "--leader-elect=false", "--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(e.Ports.KCM),
		"--service-account-private-key-file="+p.path("sa.key"),
		"--root-ca-file="+p.path("ca.crt"),
		"--use-service-account-credentials=false",
		// Claims of the default StorageClass are provisioned by kcp's provisioner (below), whose
		// folders the real node's non-root pods can write; the controller-manager's own makes
		// root-only ones.
		"--enable-hostpath-provisioner=false",
		// nodeipam would hand out pod CIDRs; kwok assigns pod IPs itself. nodelifecycle must stay:
		// it removes the not-ready taint from new nodes.
		"--controllers=*,-nodeipam",
		// Its default client limit, 20 requests/s in bursts of 30, paced a 64-shard cube's
		// pods and claims over most of an apply: tests and benchmarks would measure that
		// limit rather than the provider.
		"--kube-api-qps=100", "--kube-api-burst=200"); err != nil {
		return err
	}
	// A pod the scheduler found unschedulable waits for a cluster event to be tried again.
	// When the event that makes it schedulable is missed (a claim bound by our provisioner
	// while the pod was being scheduled: it then waited out the default 5 minutes, longer
	// than a test's wait), the deprecated flag still bounds the stay: 15 s, plus the
	// scheduler's 30 s flush period.
	if err := e.spawn("kube-scheduler", bin.KCP, "kube-scheduler",
		"--kubeconfig="+kc, "--leader-elect=false", "--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(e.Ports.Scheduler), "--pod-max-in-unschedulable-pods-duration=15s"); err != nil {
		return err
	}
	return e.spawn("provisioner", bin.KCP, "provisioner", "--kubeconfig="+kc,
		"--dir="+filepath.Join(e.Dir, "volumes"), "--class="+storageClass, "--name="+provisionerName)
}

// startKwok creates the simulated nodes and the default StorageClass, and starts kwok.
func (e *Env) startKwok(ctx context.Context, bin *Binaries, c *client, log io.Writer) error {
	// Nodes must exist before workloads: pods rejected for "no nodes available" are retried late.
	step(log, "creating %d kwok nodes", len(nodeNames))
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.createStorageClass(ctx); err != nil {
		return err
	}
	step(log, "starting kwok %s", KwokVersion)
	return e.spawn("kwok", bin.Kwok, "-c", bin.KwokStages, "--kubeconfig="+e.Kubeconfig(),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// Simulated pod and node IPs come from the loopback range, so nothing that ever
		// dials a pod address can leave this machine.
		"--node-ip=127.0.0.2", "--cidr=127.1.0.0/16",
		"--server-address="+loop(e.Ports.Kwok))
}

// startVolcano installs Volcano's CRDs and webhook configuration and starts its webhook,
// scheduler and controller-manager.
func (e *Env) startVolcano(ctx context.Context, bin *Binaries, c *client, p *pki, log io.Writer) error {
	kc := e.Kubeconfig()
	step(log, "installing Volcano %s CRDs and admission webhook configuration", VolcanoVersion)
	if err := c.applyFiles(ctx, bin.VolcanoCRDs); err != nil {
		return err
	}
	if err := c.waitCRDs(ctx, 60*time.Second); err != nil {
		return err
	}
	if err := c.applyWebhooks(ctx, "https://"+loop(e.Ports.VCWebhook), p.path("ca.crt")); err != nil {
		return err
	}
	e.VolcanoManifest = filepath.Join(e.Dir, "volcano-manifest.yaml")
	if err := writeVolcanoManifest(e.VolcanoManifest, bin.VolcanoCRDs); err != nil {
		return err
	}
	step(log, "starting Volcano webhook, scheduler and controller-manager")
	if err := e.spawn("vc-webhook-manager", bin.VCWebhook, "--kubeconfig="+kc,
		"--listen-address=127.0.0.1", "--port="+strconv.Itoa(e.Ports.VCWebhook),
		"--tls-cert-file="+p.path("webhook.crt"), "--tls-private-key-file="+p.path("webhook.key"),
		"--ca-cert-file="+p.path("ca.crt"),
		"--webhook-url=https://"+loop(e.Ports.VCWebhook),
		"--enabled-admission=/jobs/mutate,/jobs/validate"); err != nil {
		return err
	}
	if err := e.spawn("vc-scheduler", bin.VCScheduler, "--kubeconfig="+kc, "--leader-elect=false",
		"--listen-address="+loop(e.Ports.VCScheduler),
		"--healthz-address="+loop(e.Ports.VCSchedulerHealth)); err != nil {
		return err
	}
	if err := e.spawn("vc-controller-manager", bin.VCCtrl, "--kubeconfig="+kc, "--leader-elect=false",
		"--listen-address="+loop(e.Ports.VCCtrl),
		"--healthz-address="+loop(e.Ports.VCCtrlHealth)); err != nil {
		return err
	}
	if err := e.waitHTTPS(ctx, p, e.Ports.VCWebhook, "/healthz", 60*time.Second, true); err != nil {
		return fmt.Errorf("volcano webhook did not answer: %w (see %s)", err, e.logPath("vc-webhook-manager"))
	}
	return nil
}

// Load reads a running environment's description from dir.
func Load(dir string) (*Env, error) {
	data, err := os.ReadFile(filepath.Join(dir, "env.json"))
	if err != nil {
		return nil, fmt.Errorf("no environment in %q (run up first): %w", dir, err)
	}
	e := &Env{}
	if err := json.Unmarshal(data, e); err != nil {
		return nil, fmt.Errorf("read %q: %w", filepath.Join(dir, "env.json"), err)
	}
	return e, nil
}

func (e *Env) save() error {
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.Dir, "env.json"), data, 0o644)
}

// Down stops every process of the environment in dir by its recorded pid, in reverse start
// order (etcd last), and waits for each to exit. It is safe to call when nothing runs.
func Down(dir string, log io.Writer) error {
	var errs []error
	if abs, err := filepath.Abs(dir); err == nil {
		if err := (&Env{Dir: abs}).stopNode(log); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(order) - 1; i >= 0; i-- {
		name := order[i]
		pidFile := filepath.Join(dir, "pids", name)
		if pid := pidOf(dir, name); pid > 0 && alive(pid) {
			step(log, "stopping %s (pid %d)", name, pid)
			if err := stop(pid); err != nil {
				errs = append(errs, fmt.Errorf("stop %s (pid %d): %w", name, pid, err))
				continue
			}
		}
		_ = os.Remove(pidFile)
	}
	_ = os.Remove(filepath.Join(dir, "env.json"))
	return errors.Join(errs...)
}

func running(dir string) bool {
	for _, name := range append(order, nodeOrder...) {
		if pid := pidOf(dir, name); pid > 0 && alive(pid) {
			return true
		}
	}
	return false
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie (exited, not yet reaped) still answers signal 0.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func stop(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil // already gone
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond)
	if alive(pid) {
		return errors.New("still running after SIGKILL")
	}
	return nil
}

// spawn starts a process detached from our session (it outlives the `up` command) with its
// output in logs/NAME.log and its pid in pids/NAME; in a tied environment, the kernel sends
// it SIGKILL when this process ends.
func (e *Env) spawn(name, path string, args ...string) error {
	logf, err := os.OpenFile(e.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir = e.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// kwok writes its own state under $HOME; keep it inside the environment folder.
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(e.Dir, "home"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if e.tied {
		// Strictly, when the thread that started it ends; the Go runtime keeps its threads
		// until the process ends (unless a goroutine exits while locked to one).
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	// Reap the child if it exits while we still run, so alive() sees it gone.
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(filepath.Join(e.Dir, "pids", name), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

func (e *Env) logPath(name string) string { return filepath.Join(e.Dir, "logs", name+".log") }

func (e *Env) pickPorts() error {
	ports := []*int{&e.Ports.EtcdClient, &e.Ports.EtcdPeer, &e.Ports.APIServer, &e.Ports.KCM, &e.Ports.Scheduler,
		&e.Ports.Kwok, &e.Ports.VCScheduler, &e.Ports.VCSchedulerHealth, &e.Ports.VCCtrl, &e.Ports.VCCtrlHealth, &e.Ports.VCWebhook,
		&e.Ports.Kubelet, &e.Ports.KubeletHealth, &e.Ports.ProxyHealth, &e.Ports.ProxyMetrics}
	for _, p := range ports {
		port, err := loopback.Port()
		if err != nil {
			return err
		}
		*p = port
	}
	return nil
}

func (e *Env) writeKubeconfig(p *pki) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: testenv
  context:
    cluster: testenv
    user: admin
current-context: testenv
`, e.Ports.APIServer, b64(ca), adminToken)
	return os.WriteFile(e.Kubeconfig(), []byte(kc), 0o600)
}

// waitHTTPS polls https://127.0.0.1:port/path until it answers 200 (or, with anyStatus, any
// HTTP answer over verified TLS: the webhook serves no health path) or the timeout passes.
func (e *Env) waitHTTPS(ctx context.Context, p *pki, port int, path string, timeout time.Duration, anyStatus bool) error {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || anyStatus {
				return nil
			}
			last = fmt.Errorf("HTTP %d from %s", resp.StatusCode, url)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}

func step(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "testenv: %s "+format+"\n", append([]any{time.Now().Format("15:04:05.0")}, args...)...)
}
