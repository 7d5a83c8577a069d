package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/testenv"
	"github.com/elasticctr/terraform-provider-ctr/internal/volcano"
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
// kubeconfig) is adopted. Its Volcano (the control plane's own) is not ctr's: it is found and
// left alone, and the cluster's connection feeds a training job in the same apply.
// volcano.mode = "none" then manages nothing either.
func TestAccCluster_AdoptExisting(t *testing.T) {
	k := requireCluster(t)
	manifest := volcanoManifest(t)
	ns, name := k.namespace(t), jobName()
	crdLabels := func() map[string]string {
		u, err := k.dyn.Resource(crdGVR).Get(context.Background(), "jobs.batch.volcano.sh", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetLabels()
	}
	before := crdLabels()
	unchanged := func(*terraform.State) error {
		if after := crdLabels(); !reflect.DeepEqual(before, after) {
			return fmt.Errorf("the existing Volcano's job CRD was changed: labels %v, were %v", after, before)
		}
		return nil
	}
	cfg := func(volcano string) string {
		return fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %[1]q }
  volcano    = %[2]s
}

resource "ctr_training_job" "test" {
  kubernetes = ctr_cluster.this.kubernetes
  name       = %[4]q
  namespace  = %[3]q
  pserver    = { replicas = 1 }
  trainer    = { replicas = 1 }
  depends_on = [ctr_cluster.this]
}
`, os.Getenv("KUBECONFIG"), volcano, ns, name)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             unchanged,
		Steps: []resource.TestStep{
			{
				Config: cfg(fmt.Sprintf("{ manifest_url = %q }", manifest)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("phase"), knownvalue.StringExact("adopted")),
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_state"), knownvalue.StringExact("existing")),
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_objects"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
				},
				Check: unchanged,
			},
			{
				Config: cfg(`{ mode = "none" }`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_state"), knownvalue.StringExact("existing")),
				},
				Check: unchanged,
			},
		},
	})
}

var (
	crdGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	vcjobGVR = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}
	nsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	depGVR   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// preinstallVolcano installs Volcano on a dedicated control plane the way a cluster's own
// administrator would, not through ctr: the control plane's own manifest (namespace, CRDs,
// component Deployments; the control plane runs the components themselves, kwok runs these
// pods) applied with kubectl's field manager and no label of ctr's, leaving out the
// Deployments named in skip. It returns the keys of what it installed.
func preinstallVolcano(t *testing.T, k *kubeClients, manifestPath string, skip ...string) []string {
	t.Helper()
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	set, err := kube.ParseManifest(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	gvr := map[string]schema.GroupVersionResource{"Namespace": nsGVR, "CustomResourceDefinition": crdGVR, "Deployment": depGVR}
	var keys []string
	for _, o := range set {
		if slices.Contains(skip, o.Object.GetName()) {
			continue
		}
		r, ok := gvr[o.Object.GetKind()]
		if !ok {
			t.Fatalf("preinstall: no resource for %s", o.Key)
		}
		var ri dynamic.ResourceInterface = k.dyn.Resource(r)
		if ns := o.Object.GetNamespace(); ns != "" {
			ri = k.dyn.Resource(r).Namespace(ns)
		}
		if _, err := ri.Apply(context.Background(), o.Object.GetName(), o.Object, metav1.ApplyOptions{FieldManager: "kubectl", Force: true}); err != nil {
			t.Fatalf("preinstall %s: %v", o.Key, err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// runVolcanoJob submits a Volcano Job to the control plane's own Volcano and waits until it runs.
func runVolcanoJob(t *testing.T, k *kubeClients, ns, name string) {
	t.Helper()
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"schedulerName": "volcano", "minAvailable": int64(1), "tasks": []any{map[string]any{
			"name": "work", "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "work", "image": "busybox"}}}},
		}}},
	}}
	ctx := context.Background()
	if _, err := k.dyn.Resource(vcjobGVR).Namespace(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("submit Volcano job: %v", err)
	}
	if err := k.volcanoJobRunning(ns, name)(nil); err != nil {
		deadline := time.Now().Add(60 * time.Second)
		for ; err != nil && time.Now().Before(deadline); err = k.volcanoJobRunning(ns, name)(nil) {
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAccCluster_AdoptLeavesExistingVolcano: a cluster whose administrator installed Volcano
// (and runs a Volcano job on it) is adopted with the defaults: ctr finds that Volcano, changes
// none of it, and destroy removes none of it; the job runs on.
func TestAccCluster_AdoptLeavesExistingVolcano(t *testing.T) {
	env, kubeconfig, k := dedicatedEnv(t)
	pre := preinstallVolcano(t, k, env.VolcanoManifest)
	ns := k.namespace(t)
	runVolcanoJob(t, k, ns, "theirs")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(k.intact(pre), k.volcanoJobRunning(ns, "theirs")),
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %q }
  volcano    = { manifest_url = %q }
}
`, kubeconfig, "file://"+env.VolcanoManifest),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_state"), knownvalue.StringExact("existing")),
				// What the administrator's scheduler runs.
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_version"), knownvalue.StringExact(testenv.VolcanoVersion)),
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_objects"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_adopted_objects"), knownvalue.ListSizeExact(0)),
			},
			Check: resource.ComposeTestCheckFunc(k.intact(pre), k.volcanoJobRunning(ns, "theirs")),
		}},
	})
}

// TestAccCluster_AdoptTakesOver: volcano.mode = "adopt" takes an existing install over (here
// one whose admission Deployment is missing, which ctr creates); the import of the cluster reads
// that back; drift of an adopted object (someone scales the scheduler to 0) shows in the plan
// and the next apply restores it. Destroy deletes only what ctr created and hands the rest
// back, and the Volcano job that ran all along runs on.
func TestAccCluster_AdoptTakesOver(t *testing.T) {
	env, kubeconfig, k := dedicatedEnv(t)
	pre := preinstallVolcano(t, k, env.VolcanoManifest, "volcano-admission")
	ns := k.namespace(t)
	runVolcanoJob(t, k, ns, "theirs")
	config := fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %q }
  volcano    = { mode = "adopt", manifest_url = %q }
}
`, kubeconfig, "file://"+env.VolcanoManifest)
	addr := "ctr_cluster.this"
	admission := "apps/v1/Deployment/volcano-system/volcano-admission"
	scheduler := "apps/v1/Deployment/volcano-system/volcano-scheduler"
	replicas := func(want int32) resource.TestCheckFunc {
		return func(*terraform.State) error {
			d, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), "volcano-scheduler", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if *d.Spec.Replicas != want {
				return fmt.Errorf("volcano-scheduler has %d replicas, want %d", *d.Spec.Replicas, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(k.intact(pre), k.volcanoJobRunning(ns, "theirs"), func(*terraform.State) error {
			if _, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), "volcano-admission", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("destroy left the volcano-admission Deployment that ctr created (err %v)", err)
			}
			return nil
		}),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_state"), knownvalue.StringExact("adopted")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_version"), knownvalue.StringExact(DefaultVolcanoVersion)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_objects"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(admission)})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_adopted_objects"), knownvalue.ListSizeExact(len(pre))),
				},
				Check: func(*terraform.State) error {
					u, err := k.dyn.Resource(crdGVR).Get(context.Background(), "jobs.batch.volcano.sh", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if u.GetLabels()[stack.OwnerLabel] != volcano.Owner || u.GetAnnotations()[volcano.AdoptedAnnotation] != "true" {
						return fmt.Errorf("the adopted job CRD is not marked as taken over by ctr: %v %v", u.GetLabels(), u.GetAnnotations())
					}
					return nil
				},
			},
			{
				ResourceName: addr, ImportState: true, ImportStateId: "kubeconfig:" + kubeconfig, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				PreConfig: func() {
					if _, err := k.cs.AppsV1().Deployments("volcano-system").Patch(context.Background(), "volcano-scheduler", types.MergePatchType,
						[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
						t.Fatal(err)
					}
				},
				RefreshState:       true,
				ExpectNonEmptyPlan: true,
				RefreshPlanChecks: resource.RefreshPlanChecks{PostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_drift"), knownvalue.ListSizeExact(0)),
				}},
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "volcano_drift.#", "1"),
					resource.TestCheckResourceAttr(addr, "volcano_drift.0", scheduler+": spec.replicas")),
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					onlyChanges(addr, "volcano_drift"),
				}},
				Check: replicas(1),
			},
		},
	})
}

// withoutVolcano removes Volcano's CRDs and admission webhooks from a dedicated control plane:
// a cluster that has no Volcano, for tests of installing one. The control plane's Volcano
// processes keep running, and find their CRDs again once installed. It deletes and waits as
// the provider does (kube's DeleteSet, which also gets a CRD deleted right after the control
// plane started, while its storage initializes, out of the API server's retry backoff).
func withoutVolcano(t *testing.T, k *kubeClients) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	list, err := k.dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var set stack.Set
	for _, u := range list.Items {
		if group, _, _ := unstructured.NestedString(u.Object, "spec", "group"); strings.HasSuffix(group, "volcano.sh") {
			set = append(set, stack.Object{Key: u.GetName(), Object: &u})
		}
	}
	for _, n := range []string{"volcano-admission-service-jobs-mutate"} {
		if err := k.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "volcano-admission-service-jobs-validate", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := kube.NewClient(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc.Log = func(s string) { t.Log(s) }
	kc.ProgressEvery = 10 * time.Second
	// Every CRD is gone (a CRD goes only once its custom resources have), not only the Job's.
	if err := kc.DeleteSet(ctx, set); err != nil {
		t.Fatalf("remove Volcano's CRDs: %v", err)
	}
}

// realVolcanoManifest is the vendored copy of the Volcano release the control plane runs (see
// internal/volcano/testdata/README.md).
func realVolcanoManifest(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "internal", "volcano", "testdata", "volcano-development-"+testenv.VolcanoVersion+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAccCluster_RealVolcanoRelease: Volcano's own release manifest, as published, goes through
// parse -> apply -> wait on a cluster without Volcano: its CRDs are established and its three
// Deployments available. Their pods run on kwok's simulated nodes, which take every pod to
// Running and Ready (kwok's pod-ready stage) without running a container: the wait sees what a
// real cluster shows once the images run, while the control plane's Volcano is its own
// processes. The release's admission init Job is simulated the same way (it never completes;
// the wait does not wait for it, as a Deployment that mounts its Secret could not become
// available on a real node before it did). A refresh finds no drift in any of its objects;
// an argument someone changes in the scheduler does show, and the next apply restores it;
// destroy removes every object, CRDs included.
func TestAccCluster_RealVolcanoRelease(t *testing.T) {
	_, kubeconfig, k := dedicatedEnv(t)
	withoutVolcano(t, k)
	manifest := realVolcanoManifest(t)
	config := fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %q }
  volcano    = { manifest_url = %q }
}
`, kubeconfig, "file://"+manifest)
	addr := "ctr_cluster.this"
	scheduler := "apps/v1/Deployment/volcano-system/volcano-scheduler"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: func(*terraform.State) error {
			if err := k.noOwnedVolcanoCRDs(); err != nil {
				return err
			}
			if _, err := k.cs.CoreV1().Namespaces().Get(context.Background(), "volcano-system", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("destroy left namespace volcano-system (err %v)", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_state"), knownvalue.StringExact("installed")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_objects"), knownvalue.ListSizeExact(countDocs(t, "file://"+manifest))),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_adopted_objects"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("volcano_drift"), knownvalue.ListSizeExact(0)),
				},
				Check: func(*terraform.State) error {
					for _, name := range []string{"volcano-admission", "volcano-controllers", "volcano-scheduler"} {
						d, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						if d.Status.AvailableReplicas < 1 {
							return fmt.Errorf("%s is not available", name)
						}
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					d, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), "volcano-scheduler", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--percentage-nodes-to-find=50")
					if _, err := k.cs.AppsV1().Deployments("volcano-system").Update(context.Background(), d, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
						t.Fatal(err)
					}
				},
				RefreshState:       true,
				ExpectNonEmptyPlan: true,
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "volcano_drift.#", "1"),
					resource.TestCheckResourceAttr(addr, "volcano_drift.0", scheduler+": spec.template.spec.containers[volcano-scheduler].args")),
			},
			{
				Config: config,
				Check: func(*terraform.State) error {
					d, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), "volcano-scheduler", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if args := d.Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--percentage-nodes-to-find=50") {
						return fmt.Errorf("the apply did not restore the scheduler's arguments: %v", args)
					}
					return nil
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

// dedicatedEnvs lets one dedicated control plane run at a time.
var dedicatedEnvs sync.Mutex

// dedicatedEnv starts a control plane of the test's own (from the cached binaries), for tests
// that break what other tests rely on, such as deleting Volcano's CRDs: its description, its
// kubeconfig and clients of it. Such a test touches nothing the others see, so it runs in
// parallel with them (t.Parallel), but one at a time (dedicatedEnvs): a control plane is
// nine processes, and two cores carry the real node and the simulated nodes' tests beside it.
func dedicatedEnv(t *testing.T) (*testenv.Env, string, *kubeClients) {
	t.Helper()
	t.Parallel()
	requireCluster(t)
	dedicatedEnvs.Lock()
	t.Cleanup(dedicatedEnvs.Unlock) // after Down, registered below: cleanups run last first
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
	env, err := testenv.UpInProcess(ctx, dir, bin, io.Discard)
	if err != nil {
		t.Fatalf("start a dedicated control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := testenv.Down(dir, io.Discard); err != nil {
			t.Errorf("stop the dedicated control plane: %v", err)
		}
	})
	return env, env.Kubeconfig(), clientsFor(t, env.Kubeconfig())
}

// TestAccCluster_AdoptUninstallAndUpgrade: Volcano is installed, upgraded to a manifest that
// drops a component (its objects are removed), and uninstalled on destroy.
func TestAccCluster_AdoptUninstallAndUpgrade(t *testing.T) {
	env, kubeconfig, k := dedicatedEnv(t)
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
	withoutVolcano(t, k)
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
			if err := k.noOwnedVolcanoCRDs(); err != nil {
				return err
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

// clusterBadInputs are ctr_cluster's bad values: see badInputs.
func clusterBadInputs() []badInput {
	pool := map[string]any{"replicas": 1, "machine_spec": "bcc.g5.c8m32", "subnet_id": "sbn-1"}
	cce := func(pool map[string]any) map[string]any {
		return map[string]any{"cce": map[string]any{"name": "ctr", "k8s_version": "1.34.2", "vpc_id": "vpc-1", "worker_pool": pool}}
	}
	adopt := map[string]any{"kubernetes": map[string]any{"config_path": "/kubeconfig"}}
	return []badInput{
		{"worker pool of 0 nodes", cce(with(pool, "replicas", 0)), "cce.worker_pool.replicas", `Attribute cce.worker_pool.replicas value must be at least 1`},
		{"tiny root disk", cce(with(pool, "root_disk_size", 10)), "cce.worker_pool.root_disk_size", `value must be at least 20`},
		{"manifest over FTP", with(adopt, "volcano", map[string]any{"manifest_url": "ftp://mirror/volcano.yaml"}), "volcano.manifest_url",
			`Attribute volcano.manifest_url: "ftp://mirror/volcano.yaml": use an https://, http:// or file:// URL`},
		{"manifest as a bare path", with(adopt, "volcano", map[string]any{"manifest_url": "/srv/volcano.yaml"}), "volcano.manifest_url", `use an https://, http:// or file:// URL`},
		{"manifest URL without a host", with(adopt, "volcano", map[string]any{"manifest_url": "https:///volcano.yaml"}), "volcano.manifest_url", `names no host`},
		{"unknown Volcano mode", with(adopt, "volcano", map[string]any{"mode": "replace"}), "volcano.mode",
			`Attribute volcano.mode value must be one of: \["if_absent" "adopt" "none"\]`},
		{"Volcano version without Volcano", with(adopt, "volcano", map[string]any{"mode": "none", "version": "v1.13.0"}), "volcano.version",
			`Attribute volcano.version: has no effect with volcano.mode = "none"`},
		{"neither cce nor kubernetes", map[string]any{}, "cce", `No attribute specified when one \(and only one\) of \[cce,kubernetes\] is required`},
		{"empty machine spec", cce(with(pool, "machine_spec", "")), "cce.worker_pool.machine_spec", `string length must be at least 1`},
		{"taint effect", cce(with(pool, "taints", []any{map[string]any{"key": "k", "effect": "NoRun"}})), "cce.worker_pool.taints[0].effect", `value must be one of`},
	}
}
