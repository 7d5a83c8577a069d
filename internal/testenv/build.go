// Package testenv runs a real Kubernetes control plane on loopback for tests and the demo:
// embedded etcd, kube-apiserver, kube-controller-manager, kube-scheduler (one multi-call
// binary built from the kcp module beside this file), kwok with simulated nodes, and
// Volcano's scheduler, controller-manager and admission webhook; and, when asked, a real node
// (kubelet, containerd and CNI on this host, see node.go) that runs this repository's image in
// pods, reachable only on loopback and its pods' bridge.
//
// Binaries are built from the Go module proxy only and cached outside the checkout
// (see CacheDir), so a second run does not rebuild. All state of a running environment
// (pids, logs, certificates, kubeconfig) lives in one folder (see Env).
package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Pinned versions of everything the environment runs. Kubernetes and Volcano move together:
// Volcano v1.14.1 is built on k8s v1.34.1, so the control plane matches its scheduler framework.
const (
	KubernetesVersion = "v1.34.1"
	KwokVersion       = "v0.8.0"
	CoreDNSVersion    = "v1.12.4" // pinned in coredns/go.mod
	VolcanoVersion    = "v1.14.1"
	volcanoAPIVersion = "v1.14.0" // volcano.sh/apis v1.14.1 does not exist; v1.14.0 is API-identical.
)

// Binaries are the paths of every program the environment runs, plus the data files taken from
// the module sources (kwok stages, Volcano CRDs).
type Binaries struct {
	KCP         string // etcd, kube-apiserver, kube-controller-manager, kube-scheduler
	Kwok        string
	VCScheduler string
	VCCtrl      string
	VCWebhook   string
	KwokStages  string   // one YAML with the kwok stages that make pods Ready and nodes alive
	VolcanoCRDs []string // CRD YAML files
	CoreDNS     string   // the real node's cluster DNS (see the coredns module beside this file)
	PauseImage  string   // docker-archive tarball of the real node's sandbox image, named PauseImage
}

// CacheDir is where built binaries are kept: $CTR_TESTENV_CACHE, else the user cache dir.
func CacheDir() (string, error) {
	if d := os.Getenv("CTR_TESTENV_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory (set CTR_TESTENV_CACHE): %w", err)
	}
	return filepath.Join(d, "ctr-testenv"), nil
}

// Builder builds (or finds in the cache) every binary the environment needs.
type Builder struct {
	RepoRoot string    // the checkout; the kcp module is at internal/testenv/kcp
	Cache    string    // see CacheDir
	Log      io.Writer // progress lines
}

// Build returns the binaries, building what the cache does not have yet. A cold build takes
// several minutes on two cores; every step prints a progress line first.
func (b *Builder) Build(ctx context.Context) (*Binaries, error) {
	kcpDir := filepath.Join(b.RepoRoot, "internal", "testenv", "kcp")
	kcpKey, err := sourceKey(kcpDir)
	if err != nil {
		return nil, err
	}
	out := &Binaries{}

	kcpOut := filepath.Join(b.Cache, "kcp-"+KubernetesVersion+"-"+kcpKey)
	err = b.cached(ctx, kcpOut, "kube-apiserver, controller-manager, scheduler and etcd "+KubernetesVersion+" (kcp)", func(tmp string) error {
		ld := strings.Join([]string{"-s", "-w",
			"-X", "k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
			"-X", "k8s.io/component-base/version.gitMajor=1",
			"-X", "k8s.io/component-base/version.gitMinor=34",
			"-X", "k8s.io/client-go/pkg/version.gitVersion=" + KubernetesVersion}, " ")
		return b.run(ctx, kcpDir, nil, "go", "build", "-o", filepath.Join(tmp, "kcp"), "-ldflags", ld, ".")
	})
	if err != nil {
		return nil, err
	}
	out.KCP = filepath.Join(kcpOut, "kcp")

	kwokOut := filepath.Join(b.Cache, "kwok-"+KwokVersion)
	err = b.cached(ctx, kwokOut, "kwok "+KwokVersion, func(tmp string) error {
		if err := b.run(ctx, b.Cache, []string{"GOBIN=" + tmp}, "go", "install", "sigs.k8s.io/kwok/cmd/kwok@"+KwokVersion); err != nil {
			return err
		}
		src, err := moduleDir(ctx, "sigs.k8s.io/kwok@"+KwokVersion)
		if err != nil {
			return err
		}
		// Nodes come alive and keep their lease; pods become Ready and are deleted when asked.
		// pod-complete is left out on purpose: it would complete every pod owned by a Volcano Job.
		var stages []byte
		for _, s := range []string{"node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml", "pod/fast/pod-ready.yaml", "pod/fast/pod-delete.yaml"} {
			data, err := os.ReadFile(filepath.Join(src, "kustomize", "stage", s))
			if err != nil {
				return fmt.Errorf("read kwok stage: %w", err)
			}
			stages = append(append(stages, "---\n"...), data...)
		}
		return os.WriteFile(filepath.Join(tmp, "stages.yaml"), stages, 0o644)
	})
	if err != nil {
		return nil, err
	}
	out.Kwok = filepath.Join(kwokOut, "kwok")
	out.KwokStages = filepath.Join(kwokOut, "stages.yaml")

	vcOut := filepath.Join(b.Cache, "volcano-"+VolcanoVersion)
	err = b.cached(ctx, vcOut, "Volcano "+VolcanoVersion+" scheduler, controller-manager and webhook", func(tmp string) error {
		return b.buildVolcano(ctx, tmp)
	})
	if err != nil {
		return nil, err
	}
	out.VCScheduler = filepath.Join(vcOut, "scheduler")
	out.VCCtrl = filepath.Join(vcOut, "controller-manager")
	out.VCWebhook = filepath.Join(vcOut, "webhook-manager")
	out.VolcanoCRDs, err = filepath.Glob(filepath.Join(vcOut, "crd", "*.yaml"))
	if err != nil || len(out.VolcanoCRDs) == 0 {
		return nil, fmt.Errorf("no Volcano CRDs in %q (remove the folder to rebuild)", vcOut)
	}

	dnsDir := filepath.Join(b.RepoRoot, "internal", "testenv", "coredns")
	dnsKey, err := sourceKey(dnsDir)
	if err != nil {
		return nil, err
	}
	dnsOut := filepath.Join(b.Cache, "coredns-"+CoreDNSVersion+"-"+dnsKey)
	err = b.cached(ctx, dnsOut, "CoreDNS "+CoreDNSVersion+" (bind, errors, log, kubernetes plugins only)", func(tmp string) error {
		return b.run(ctx, dnsDir, []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(tmp, "coredns"), "-ldflags", "-s -w", ".")
	})
	if err != nil {
		return nil, err
	}
	out.CoreDNS = filepath.Join(dnsOut, "coredns")

	pauseDir := filepath.Join(b.RepoRoot, "internal", "testenv", "pause")
	pauseKey, err := sourceKey(pauseDir)
	if err != nil {
		return nil, err
	}
	pauseOut := filepath.Join(b.Cache, "pause-"+pauseKey)
	err = b.cached(ctx, pauseOut, "the real node's pause image", func(tmp string) error {
		bin := filepath.Join(tmp, "pause")
		if err := b.run(ctx, pauseDir, []string{"CGO_ENABLED=0"}, "go", "build", "-o", bin, "-ldflags", "-s -w", "."); err != nil {
			return err
		}
		return writePauseImage(bin, filepath.Join(tmp, "pause.tar"))
	})
	if err != nil {
		return nil, err
	}
	out.PauseImage = filepath.Join(pauseOut, "pause.tar")
	return out, nil
}

// buildVolcano builds Volcano's three mains from a writable copy of its module source: the
// module's go.mod replaces volcano.sh/apis with a path that is not in the module zip.
func (b *Builder) buildVolcano(ctx context.Context, tmp string) error {
	src, err := moduleDir(ctx, "volcano.sh/volcano@"+VolcanoVersion)
	if err != nil {
		return err
	}
	work := filepath.Join(tmp, "src")
	if err := b.run(ctx, b.Cache, nil, "cp", "-r", src, work); err != nil {
		return err
	}
	if err := b.run(ctx, b.Cache, nil, "chmod", "-R", "u+w", work); err != nil {
		return err
	}
	if err := b.run(ctx, work, nil, "go", "mod", "edit", "-replace", "volcano.sh/apis=volcano.sh/apis@"+volcanoAPIVersion); err != nil {
		return err
	}
	if err := b.run(ctx, work, nil, "go", "mod", "download", "volcano.sh/apis"); err != nil {
		return err
	}
	if err := b.run(ctx, work, nil, "go", "build", "-o", tmp+"/", "./cmd/scheduler", "./cmd/controller-manager", "./cmd/webhook-manager"); err != nil {
		return err
	}
	crdDir := filepath.Join(tmp, "crd")
	if err := os.MkdirAll(crdDir, 0o755); err != nil {
		return err
	}
	for _, pattern := range []string{"config/crd/volcano/bases/*.yaml", "config/crd/jobflow/bases/*.yaml"} {
		files, err := filepath.Glob(filepath.Join(work, pattern))
		if err != nil {
			return err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(crdDir, filepath.Base(f)), data, 0o644); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(work)
}

// cached runs build into a temporary folder next to dir and renames it into place, so a
// build interrupted half-way is never mistaken for a finished one.
//
// Builds of one thing are serialised by a lock file beside dir: a second build started
// meanwhile (another checkout's make test, a helper's) waits for the first and then finds
// its result, instead of building again and failing to rename onto it.
func (b *Builder) cached(ctx context.Context, dir, what string, build func(tmp string) error) error {
	if _, err := os.Stat(dir); err == nil {
		fmt.Fprintf(b.Log, "testenv: %s: cached in %s\n", what, dir)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	unlock, err := b.lock(ctx, dir+".lock", what)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(dir); err == nil {
		fmt.Fprintf(b.Log, "testenv: %s: built by the build we waited for, cached in %s\n", what, dir)
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	fmt.Fprintf(b.Log, "testenv: building %s (a few minutes on a cold cache; once only)...\n", what)
	stop := heartbeat(b.Log, what, start)
	err = build(tmp)
	stop()
	if err != nil {
		return fmt.Errorf("build %s: %w", what, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	fmt.Fprintf(b.Log, "testenv: built %s in %s\n", what, time.Since(start).Round(time.Second))
	return nil
}

// lock takes an exclusive flock on path, waiting (and saying so every 30 s) while another
// process holds it; the kernel releases it if that process dies.
func (b *Builder) lock(ctx context.Context, path, what string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return func() { f.Close() }, nil
	}
	fmt.Fprintf(b.Log, "testenv: another build of %s is running; waiting for it...\n", what)
	stop := heartbeat(b.Log, "waiting for "+what, time.Now())
	defer stop()
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %q: %w", path, err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		f.Close() // the flock still waiting ends with the process; it holds nothing meanwhile
		return nil, ctx.Err()
	}
}

// heartbeat prints a line every 30 s until stopped, so long builds visibly make progress.
func heartbeat(w io.Writer, what string, start time.Time) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "testenv: still building %s (%s)\n", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done) }
}

func (b *Builder) run(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out, 4000))
	}
	return nil
}

// moduleDir downloads a module (pinned version) and returns its extracted, read-only source.
func moduleDir(ctx context.Context, modVersion string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", modVersion).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", modVersion, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", modVersion, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", modVersion, info.Error)
	}
	return info.Dir, nil
}

// sourceKey names a build of the program in dir by its sources: go.mod and go.sum when it is a
// module of its own, and every .go file (tests aside), so that any change rebuilds it.
func sourceKey(dir string) (string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	var files []string
	for _, n := range []string{"go.mod", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			files = append(files, n)
		}
	}
	for _, n := range names {
		if !strings.HasSuffix(n, "_test.go") {
			files = append(files, filepath.Base(n))
		}
	}
	sort.Strings(files)
	return hashFiles(dir, files...)
}

func hashFiles(dir string, names ...string) (string, error) {
	h := sha256.New()
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
