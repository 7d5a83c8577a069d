package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestMain gives the tests a connection the way a user opts in, since the provider never
// falls back to KUBECONFIG by itself: KUBE_CONFIG_PATH names the local control plane's
// kubeconfig (the KUBECONFIG that scripts/test.sh exports). Without a control plane, the
// plan-only tests, which never connect, get an explicit unreachable host. Tests of the
// connection itself set their own environment with t.Setenv.
func TestMain(m *testing.M) {
	if os.Getenv("KUBE_CONFIG_PATH") == "" && os.Getenv("KUBE_HOST") == "" {
		if kc := os.Getenv("KUBECONFIG"); kc != "" {
			_ = os.Setenv("KUBE_CONFIG_PATH", kc)
		} else {
			_ = os.Setenv("KUBE_HOST", unreachableHost)
			_ = os.Setenv("KUBE_TOKEN", "plan-only")
		}
	}
	os.Exit(m.Run())
}

// unreachableHost is an API server address where nothing listens.
const unreachableHost = "https://127.0.0.1:1"

// testVersion is the version the tests' provider carries: its default cube image is
// stack.CubeImage(testVersion).
const testVersion = "test"

// providerFactories serves the provider in-process to the real terraform CLI.
var providerFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"ctr": providerserver.NewProtocol6WithError(New(testVersion)()),
}

// requireCluster skips acceptance tests unless TF_ACC is set (the framework's own rule) and
// fails them when TF_ACC is set without a cluster: `make test` always provides one, so a
// skip there would hide a broken setup.
func requireCluster(t *testing.T) *kubeClients {
	t.Helper()
	return requireClusterTB(t)
}

// requireClusterB is requireCluster for benchmarks.
func requireClusterB(b *testing.B) *kubeClients { return requireClusterTB(b) }

func requireClusterTB(t testing.TB) *kubeClients {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 and KUBECONFIG (make testacc does both)")
	}
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		t.Fatal("TF_ACC is set but KUBECONFIG is not: start the local control plane with make testenv-up")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("load KUBECONFIG: %v", err)
	}
	return &kubeClients{cfg: cfg, cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
}

type kubeClients struct {
	cfg *rest.Config
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

// namespace creates a fresh namespace for one test and deletes it afterwards.
func (k *kubeClients) namespace(t *testing.T) string { return k.namespaceTB(t) }

func (k *kubeClients) namespaceB(b *testing.B) string { return k.namespaceTB(b) }

func (k *kubeClients) namespaceTB(t testing.TB) string {
	t.Helper()
	name := "acc-" + acctest.RandString(8)
	_, err := k.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = k.cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// run runs one scenario of a resource's lifecycle against the local control plane; at its end
// destroy must leave nothing that the resource (type, name) owned, nor pods made of it.
func (k *kubeClients) run(t *testing.T, ns, typ, name string, kinds []schema.GroupVersionKind, steps ...resource.TestStep) {
	t.Helper()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.checkNothingOwnedOf(ns, stack.Owner(typ, name), kinds),
		Steps:                    steps,
	})
}

// importRoundTrip are the steps that prove an import reads back every attribute of config:
// `terraform import` gives the state the apply gave (timeouts aside, which the cluster
// cannot tell), and after Terraform forgot the resource, an import block with the same
// configuration plans no change; with the configuration's timeouts, it plans to store the
// timeouts and nothing else (phase, served_version and the other values the cluster
// reports stay as read, not "known after apply"), which the apply does without touching
// the cluster. live names attributes that the cluster may change by itself between two reads
// (a training job's last condition), left out of the comparison of the first import.
func importRoundTrip(typ, id, config string, live ...string) []resource.TestStep {
	addr := typ + ".test"
	forget := resource.TestStep{Config: fmt.Sprintf("removed {\n  from = %s\n  lifecycle { destroy = false }\n}\n", addr)}
	importBlock := fmt.Sprintf("import {\n  to = %s\n  id = %q\n}\n", addr, id)
	return []resource.TestStep{
		{ResourceName: addr, ImportState: true, ImportStateId: id, ImportStateVerify: true, ImportStateVerifyIgnore: append([]string{"timeouts"}, live...)},
		// Terraform forgets the resource; its objects stay in the cluster.
		forget,
		{
			Config: importBlock + withoutTimeouts(config),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(addr, plancheck.ResourceActionNoop),
			}},
		},
		forget,
		{
			Config: importBlock + config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				onlyChanges(addr, "timeouts"),
			}},
		},
	}
}

// onlyChanges checks that the plan of addr changes the named attributes and nothing else:
// every other attribute is planned known and as it was.
func onlyChanges(addr string, attrs ...string) plancheck.PlanCheck {
	return onlyChangesCheck{addr, attrs}
}

// anyTrue reports whether an after_unknown value marks anything unknown: true itself, or a
// true inside the object or list it mirrors.
func anyTrue(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case map[string]any:
		for _, e := range t {
			if anyTrue(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if anyTrue(e) {
				return true
			}
		}
	}
	return false
}

type onlyChangesCheck struct {
	addr  string
	attrs []string
}

func (c onlyChangesCheck) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		after, _ := rc.Change.After.(map[string]any)
		unknown, _ := rc.Change.AfterUnknown.(map[string]any)
		var diffs []string
		for k, v := range after {
			if slices.Contains(c.attrs, k) {
				continue
			}
			if anyTrue(unknown[k]) {
				diffs = append(diffs, k+" (known after apply)")
			} else if !reflect.DeepEqual(before[k], v) {
				diffs = append(diffs, k)
			}
		}
		for k, u := range unknown {
			if _, ok := after[k]; !ok && anyTrue(u) && !slices.Contains(c.attrs, k) {
				diffs = append(diffs, k+" (known after apply)")
			}
		}
		if len(diffs) > 0 {
			sort.Strings(diffs)
			resp.Error = fmt.Errorf("%s: the plan changes %s besides %s", c.addr, strings.Join(diffs, ", "), strings.Join(c.attrs, ", "))
		}
		return
	}
	resp.Error = fmt.Errorf("%s is not in the plan", c.addr)
}

// defaultStorageClass is the name of the cluster's default StorageClass.
func (k *kubeClients) defaultStorageClass(t *testing.T) string {
	t.Helper()
	list, err := k.cs.StorageV1().StorageClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range list.Items {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			return sc.Name
		}
	}
	t.Fatal("the cluster has no default StorageClass")
	return ""
}

// owned counts every object (rendered kinds, pods, pod groups) that carries the owner label.
func (k *kubeClients) owned(ctx context.Context, namespace, owner string) (int, []string, error) {
	return k.ownedOf(ctx, namespace, owner, append(append([]schema.GroupVersionKind{}, stack.TrainingJobKinds...), stack.ControllerKinds...))
}

func (k *kubeClients) ownedOf(ctx context.Context, namespace, owner string, kinds []schema.GroupVersionKind) (int, []string, error) {
	n := 0
	var names []string
	for _, gvk := range kinds {
		gvr := gvrOf(gvk)
		list, err := k.dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=" + owner})
		if err != nil {
			return 0, nil, err
		}
		for _, it := range list.Items {
			if it.GetAnnotations()[stack.RetainAnnotation] == "true" {
				continue // left on purpose (model_output.retain; TestAccTrainingJob_ModelOutputOutlivesTheJob)
			}
			names = append(names, gvk.Kind+"/"+it.GetName())
			n++
		}
	}
	return n, names, nil
}

func gvrOf(gvk schema.GroupVersionKind) schema.GroupVersionResource {
	plural := map[string]string{
		"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings", "Secret": "secrets",
		"ConfigMap": "configmaps", "PersistentVolumeClaim": "persistentvolumeclaims", "Deployment": "deployments",
		"Service": "services", "NetworkPolicy": "networkpolicies", "Job": "jobs", "StatefulSet": "statefulsets", "Pod": "pods", "ReplicaSet": "replicasets", "PodGroup": "podgroups",
	}[gvk.Kind]
	return gvk.GroupVersion().WithResource(plural)
}

var devBuild struct {
	once sync.Once
	dir  string
	host string
	err  error
}

// devProviderVersion is the version the locally built provider is installed as.
const devProviderVersion = "0.0.1"

// localProvider builds the provider from this checkout once per test binary into a
// filesystem mirror and returns a Terraform CLI configuration that installs `elasticctr/ctr`
// from it (offline), for tests that need the provider as users run it: one plugin process per
// provider configuration. In-process provider servers are shared by every configuration of a
// test, aliases included.
func localProvider(t *testing.T) string {
	t.Helper()
	devBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "ctr-provider-mirror-")
		if err != nil {
			devBuild.err = err
			return
		}
		devBuild.dir = dir
		host, err := registryHost(dir)
		if err != nil {
			devBuild.err = err
			return
		}
		devBuild.host = host
		bin := filepath.Join(dir, host, "elasticctr", "ctr", devProviderVersion, runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-ctr_v"+devProviderVersion)
		out, err := buildProvider(bin, devProviderVersion)
		if err != nil {
			devBuild.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if devBuild.err != nil {
		t.Fatal(devBuild.err)
	}
	rc := filepath.Join(t.TempDir(), "terraformrc")
	cfg := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"%s/elasticctr/ctr\"]\n  }\n}\n", devBuild.dir, devBuild.host)
	if err := os.WriteFile(rc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return rc
}

// buildProvider builds the provider binary, stamped with version as `make build` and a
// release stamp theirs (-X main.version): a binary that carries no version has no default
// cube image, and this machine's GOFLAGS (-buildvcs=false) keep a plain build from taking
// the checkout's commit.
func buildProvider(out, version string) ([]byte, error) {
	return exec.Command("go", "build", "-ldflags", "-X main.version="+version, "-o", out, "..").CombinedOutput()
}

// registryHost is the Terraform CLI's default registry host, as it spells elasticctr/ctr in
// full (the mirror's directories are named by it).
func registryHost(dir string) (string, error) {
	probe := filepath.Join(dir, "probe")
	if err := os.MkdirAll(probe, 0o700); err != nil {
		return "", err
	}
	hcl := "terraform {\n  required_providers {\n    ctr = { source = \"elasticctr/ctr\" }\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(probe, "main.tf"), []byte(hcl), 0o600); err != nil {
		return "", err
	}
	cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), "providers", "-no-color")
	cmd.Dir, cmd.Env = probe, append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("terraform providers: %w", err)
	}
	m := regexp.MustCompile(`provider\[(.+)/elasticctr/ctr\]`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("terraform providers names no elasticctr/ctr: %s", out)
	}
	return string(m[1]), nil
}
