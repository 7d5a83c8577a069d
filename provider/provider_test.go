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
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestMain gives the tests a connection the way a user opts in, since the provider never
// falls back to KUBECONFIG by itself: KUBE_CONFIG_PATH names the local control plane's
// kubeconfig (the KUBECONFIG that scripts/test.sh exports). Without a control plane, the
// plan-only tests, which never connect, get an explicit unreachable host. Tests of the
// connection itself set their own environment with t.Setenv. The providers built for the CLI
// (localProvider, devOverrides) go with the test binary.
func TestMain(m *testing.M) {
	if os.Getenv("KUBE_CONFIG_PATH") == "" && os.Getenv("KUBE_HOST") == "" {
		if kc := os.Getenv("KUBECONFIG"); kc != "" {
			_ = os.Setenv("KUBE_CONFIG_PATH", kc)
		} else {
			_ = os.Setenv("KUBE_HOST", unreachableHost)
			_ = os.Setenv("KUBE_TOKEN", "plan-only")
		}
	}
	code := m.Run()
	for _, dir := range []string{devBuild.dir, devOverridesBuild.dir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
	os.Exit(code)
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

func gvrOf(gvk schema.GroupVersionKind) schema.GroupVersionResource {
	// Every kind ctr renders or makes takes Kubernetes' regular plural (lower case, "y" ->
	// "ies", "s" -> "ses", else "s"), so a new kind in a list needs no entry here.
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvr
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
