package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/testenv"
)

// volcanoManifest is the local control plane's own copy of a Volcano release manifest.
func volcanoManifest(t *testing.T) string {
	t.Helper()
	env, err := testenv.Load(filepath.Dir(os.Getenv("KUBECONFIG")))
	if err != nil {
		t.Fatalf("the local control plane's description: %v", err)
	}
	return "file://" + env.VolcanoManifest
}

// TestAccCluster_AdoptExisting: an existing cluster (the local control plane, through its
// kubeconfig) is adopted; only Volcano is managed, installed from a mirror URL, and the
// cluster's connection feeds a training job in the same apply.
func TestAccCluster_AdoptExisting(t *testing.T) {
	k := requireCluster(t)
	manifest := volcanoManifest(t)
	ns, name := k.namespace(t), jobName()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %[1]q }
  volcano = {
    manifest_url    = %[2]q
    keep_on_destroy = true # the control plane's own Volcano serves the other tests
  }
}

resource "ctr_training_job" "test" {
  kubernetes = ctr_cluster.this.kubernetes
  name       = %[4]q
  namespace  = %[3]q
  pserver    = { replicas = 1 }
  trainer    = { replicas = 1 }
  depends_on = [ctr_cluster.this]
}
`, os.Getenv("KUBECONFIG"), manifest, ns, name),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("phase"), knownvalue.StringExact("adopted")),
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_objects"), knownvalue.ListSizeExact(countDocs(t, manifest))),
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
			},
			Check: func(*terraform.State) error {
				crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
				u, err := k.dyn.Resource(crd).Get(context.Background(), "jobs.batch.volcano.sh", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if u.GetLabels()["ctr.elasticctr.io/owner"] != volcanoOwner {
					return fmt.Errorf("the Volcano job CRD is not labelled as installed by ctr_cluster: %v", u.GetLabels())
				}
				dep, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), "volcano-scheduler", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if dep.Status.AvailableReplicas != 1 {
					return fmt.Errorf("volcano-scheduler is not available")
				}
				return nil
			},
		}},
	})
}

// TestAccCluster_AdoptImport: an adopted cluster is imported by the kubeconfig that reaches
// it; the Volcano release ctr_cluster installed comes back with its objects, and an import
// block with the configuration plans nothing but keep_on_destroy, which the cluster cannot
// tell (import sets false).
func TestAccCluster_AdoptImport(t *testing.T) {
	requireCluster(t)
	manifest, kubeconfig := volcanoManifest(t), os.Getenv("KUBECONFIG")
	config := fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %[1]q }
  volcano = {
    manifest_url    = %[2]q
    keep_on_destroy = true # the control plane's own Volcano serves the other tests
  }
}
`, kubeconfig, manifest)
	addr := "ctr_cluster.this"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{
				ResourceName: addr, ImportState: true, ImportStateId: "kubeconfig:" + kubeconfig, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"volcano.keep_on_destroy"},
			},
			{Config: "removed {\n  from = ctr_cluster.this\n  lifecycle { destroy = false }\n}\n"},
			{
				Config: fmt.Sprintf("import {\n  to = ctr_cluster.this\n  id = %q\n}\n", "kubeconfig:"+kubeconfig) + config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					onlyChanges(addr, "volcano"),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("volcano"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"version": knownvalue.StringExact(DefaultVolcanoVersion), "manifest_url": knownvalue.StringExact(manifest),
						"keep_on_destroy": knownvalue.Bool(true),
					})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("adopted")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_objects"), knownvalue.ListSizeExact(countDocs(t, manifest))),
				},
			},
		},
	})
}

func countDocs(t *testing.T, fileURL string) int {
	t.Helper()
	data, err := os.ReadFile(fileURL[len("file://"):])
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseForTest(data)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func parseForTest(data []byte) (int, error) {
	set, err := kube.ParseManifest(data, nil)
	return len(set), err
}

// dedicatedEnv starts a control plane of the test's own (from the cached binaries), for tests
// that break what other tests rely on, such as deleting Volcano's CRDs.
func dedicatedEnv(t *testing.T) string {
	t.Helper()
	requireCluster(t)
	cache, err := testenv.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin, err := (&testenv.Builder{RepoRoot: root, Cache: cache, Log: io.Discard}).Build(ctx)
	if err != nil {
		t.Fatalf("build the control plane: %v", err)
	}
	dir := t.TempDir()
	env, err := testenv.Up(ctx, dir, bin, io.Discard, nil)
	if err != nil {
		t.Fatalf("start a dedicated control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := testenv.Down(dir, io.Discard); err != nil {
			t.Errorf("stop the dedicated control plane: %v", err)
		}
	})
	return env.Kubeconfig()
}

// TestAccCluster_AdoptUninstallAndUpgrade: Volcano is installed, upgraded to a manifest that
// drops a component (its objects are removed), and uninstalled on destroy.
func TestAccCluster_AdoptUninstallAndUpgrade(t *testing.T) {
	kubeconfig := dedicatedEnv(t)
	env, err := testenv.Load(filepath.Dir(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(env.VolcanoManifest)
	if err != nil {
		t.Fatal(err)
	}
	// "v2" of the manifest: the admission Deployment is gone.
	idx := bytes.Index(full, []byte("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: volcano-admission"))
	if idx < 0 {
		t.Fatal("the manifest has no admission Deployment to drop")
	}
	v2 := filepath.Join(t.TempDir(), "volcano-v2.yaml")
	if err := os.WriteFile(v2, full[:idx], 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := func(url string) string {
		return fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %q }
  volcano    = { version = "test", manifest_url = %q }
}
`, kubeconfig, url)
	}
	k := clientsFor(t, kubeconfig)
	deployment := func(name string) (bool, error) {
		_, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: func(*terraform.State) error {
			crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
			list, err := k.dyn.Resource(crd).List(context.Background(), metav1.ListOptions{LabelSelector: "ctr.elasticctr.io/owner=" + volcanoOwner})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("destroy left %d Volcano CRDs", len(list.Items))
			}
			if ok, err := deployment("volcano-scheduler"); ok || err != nil {
				return fmt.Errorf("destroy left volcano-scheduler (err %v)", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: cfg("file://" + env.VolcanoManifest),
				Check: func(*terraform.State) error {
					if ok, err := deployment("volcano-admission"); !ok {
						return fmt.Errorf("volcano-admission not installed (err %v)", err)
					}
					return nil
				},
			},
			{
				Config: strings.Replace(cfg("file://"+v2), `version = "test"`, `version = "test2"`, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					if ok, err := deployment("volcano-admission"); ok || err != nil {
						return fmt.Errorf("the upgrade did not remove volcano-admission (err %v)", err)
					}
					if ok, err := deployment("volcano-scheduler"); !ok {
						return fmt.Errorf("the upgrade lost volcano-scheduler (err %v)", err)
					}
					return nil
				},
			},
		},
	})
}

func clientsFor(t *testing.T, kubeconfig string) *kubeClients {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return &kubeClients{cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
}

// TestCluster_BadInput: refused at plan time, once, at the attribute; no cluster or cloud needed.
func TestCluster_BadInput(t *testing.T) {
	pool := map[string]any{"replicas": 1, "machine_spec": "bcc.g5.c8m32", "subnet_id": "sbn-1"}
	cce := func(pool map[string]any) map[string]any {
		return map[string]any{"cce": map[string]any{"name": "ctr", "k8s_version": "1.34.2", "vpc_id": "vpc-1", "worker_pool": pool}}
	}
	adopt := map[string]any{"kubernetes": map[string]any{"config_path": "/kubeconfig"}}
	testBadInputs(t, "ctr_cluster", []badInput{
		{"worker pool of 0 nodes", cce(with(pool, "replicas", 0)), "cce.worker_pool.replicas", `Attribute cce.worker_pool.replicas value must be at least 1`},
		{"tiny root disk", cce(with(pool, "root_disk_size", 10)), "cce.worker_pool.root_disk_size", `value must be at least 20`},
		{"manifest over FTP", with(adopt, "volcano", map[string]any{"manifest_url": "ftp://mirror/volcano.yaml"}), "volcano.manifest_url",
			`Attribute volcano.manifest_url: "ftp://mirror/volcano.yaml": use an https://, http:// or file:// URL`},
		{"manifest as a bare path", with(adopt, "volcano", map[string]any{"manifest_url": "/srv/volcano.yaml"}), "volcano.manifest_url", `use an https://, http:// or file:// URL`},
		{"manifest URL without a host", with(adopt, "volcano", map[string]any{"manifest_url": "https:///volcano.yaml"}), "volcano.manifest_url", `names no host`},
		{"adopted with a static token", map[string]any{"kubernetes": map[string]any{"host": "https://k:6443", "token": "t"}},
			"kubernetes.token", `a resource's kubernetes is stored in state`},
		{"bad timeout", with(adopt, "timeouts", map[string]any{"create": "1 hour"}), "timeouts.create", `"1 hour" is not a positive duration`},
	})
}
