package provider

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const jobAddr = "ctr_training_job.test"

// trainingJobConfig is a small job (1 pserver + 1 trainer) that fits the simulated nodes.
func trainingJobConfig(ns, name, extra string) string {
	return fmt.Sprintf(`
resource "ctr_training_job" "test" {
  name      = %[2]q
  namespace = %[1]q
  pserver   = { replicas = 1 }
  trainer   = { replicas = 1 }
%[3]s
  timeouts = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, extra)
}

func jobName() string { return "tj-" + acctest.RandString(6) }

// The training job's lifecycle, one behaviour per test: create, update in place, replace,
// drift, import, destroy (every test also checks, at its end, that destroy left nothing).

func trainingJobTest(t *testing.T) (*kubeClients, string, string) {
	k := requireCluster(t)
	return k, k.namespace(t), jobName()
}

// TestAccTrainingJob_Create: the job runs, its objects and exported values; the
// ctr_training_job data source reads the same exported values back.
func TestAccTrainingJob_Create(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	k.run(t, ns, stack.TrainingJobType, name, append([]resource.TestStep{{
		Config: trainingJobConfig(ns, name, ""),
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("wait"), knownvalue.StringExact("running")),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("tasks"), knownvalue.MapExact(map[string]knownvalue.Check{
				"pserver": knownvalue.ObjectExact(map[string]knownvalue.Check{"running": knownvalue.Int64Exact(1), "pending": knownvalue.Int64Exact(0),
					"succeeded": knownvalue.Int64Exact(0), "failed": knownvalue.Int64Exact(0)}),
				"trainer": knownvalue.ObjectExact(map[string]knownvalue.Check{"running": knownvalue.Int64Exact(1), "pending": knownvalue.Int64Exact(0),
					"succeeded": knownvalue.Int64Exact(0), "failed": knownvalue.Int64Exact(0)}),
			})),
			// The scheduler placed the gang, and the job ran (in the same second, or the next).
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("last_condition").AtMapKey("type"), knownvalue.StringRegexp(regexp.MustCompile(`^(Scheduled|Running)$`))),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("last_condition").AtMapKey("time"),
				knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`))),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/"+name)),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("min_available"), knownvalue.Int64Exact(2)),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(7)),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("file_server_url"),
				knownvalue.StringExact(fmt.Sprintf("http://%s-fileserver.%s.svc:8080", name, ns))),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("donefile_url"),
				knownvalue.StringExact(fmt.Sprintf("http://%s-fileserver.%s.svc:8080/output/ctr_cube/donefile/base.txt", name, ns))),
		},
		Check: k.checkPodsRunning(ns, name, 2),
	}}, dataSourceSteps(trainingJobConfig(ns, name, ""), jobAddr, ns)...)...)
}

// TestAccTrainingJob_UpdateInPlace: file server settings, the gang size and naming the
// recipe the job runs change in place; the job keeps running.
func TestAccTrainingJob_UpdateInPlace(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	k.run(t, ns, stack.TrainingJobType, name, []resource.TestStep{
		{Config: trainingJobConfig(ns, name, "")},
		{
			Config: trainingJobConfig(ns, name, `
  min_available = 1
  file_server   = { service_type = "NodePort", replicas = 2 }`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
			},
			Check: func(*terraform.State) error {
				ctx := context.Background()
				svc, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if svc.Spec.Type != corev1.ServiceTypeNodePort {
					return fmt.Errorf("service type is %s, want NodePort", svc.Spec.Type)
				}
				dep, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if *dep.Spec.Replicas != 2 || dep.Status.AvailableReplicas != 2 {
					return fmt.Errorf("file server has %d/%d replicas available, want 2/2", dep.Status.AvailableReplicas, *dep.Spec.Replicas)
				}
				return nil
			},
		},
		{
			// Naming the recipe the default image already runs changes no pod.
			Config: trainingJobConfig(ns, name, `
  recipe        = "edl"
  min_available = 1
  file_server   = { service_type = "NodePort", replicas = 2 }`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionUpdate),
			}},
		},
	}...)
}

// TestAccTrainingJob_Replace: a new image cannot be set on a submitted Volcano job: the plan
// says replace, and the new job runs.
func TestAccTrainingJob_Replace(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	k.run(t, ns, stack.TrainingJobType, name, []resource.TestStep{
		{Config: trainingJobConfig(ns, name, "")},
		{
			Config: trainingJobConfig(ns, name, `  image = "volcanosh/edlctr:v2"
  entry = "cd /workspace/ctr && python train.py --is_local 0 --cloud_train 1"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionDestroyBeforeCreate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("image"), knownvalue.StringExact("volcanosh/edlctr:v2")),
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
			},
		},
	}...)
}

// TestAccTrainingJob_ModelOutputOutlivesTheJob: a replaced job (a retraining) keeps its model
// claim, the same claim, with everything on it; retain = false gives it back to destroy.
func TestAccTrainingJob_ModelOutputOutlivesTheJob(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	claim := name + "-model"
	var uid string
	claimUID := func(want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			pvc, err := k.cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pvc.Annotations[stack.RetainAnnotation] != want {
				return fmt.Errorf("claim %s: %s = %q, want %q", claim, stack.RetainAnnotation, pvc.Annotations[stack.RetainAnnotation], want)
			}
			if uid == "" {
				uid = string(pvc.UID)
			} else if string(pvc.UID) != uid {
				return fmt.Errorf("claim %s was recreated (uid %s, was %s): the model versions on it are gone", claim, pvc.UID, uid)
			}
			return nil
		}
	}
	// step applies extra with the planned action; the claim then carries retain.
	step := func(extra string, action plancheck.ResourceActionType, retain string) resource.TestStep {
		return resource.TestStep{
			Config:           trainingJobConfig(ns, name, extra),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(jobAddr, action)}},
			Check:            claimUID(retain),
		}
	}
	const retrained = `  image = "volcanosh/edlctr:v2"
  entry = "python train.py"`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		// With retain = false, destroy leaves nothing, the claim included.
		CheckDestroy: func(*terraform.State) error {
			list, err := k.cs.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=" + stack.Owner(stack.TrainingJobType, name)})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("destroy with retain = false left the claim %s", list.Items[0].Name)
			}
			return k.nothingLeftOf(ns, stack.TrainingJobType, name)(nil)
		},
		Steps: []resource.TestStep{
			{Config: trainingJobConfig(ns, name, ""), Check: claimUID("true")},
			// Adding the block with defaults changes nothing that matters: no replacement.
			step(`  model_output = { retain = true }`, plancheck.ResourceActionUpdate, "true"),
			// A retraining: the job is replaced, its model output is not.
			step(retrained+"\n  model_output = { retain = true }", plancheck.ResourceActionDestroyBeforeCreate, "true"),
			step(retrained+"\n  model_output = { retain = false }", plancheck.ResourceActionUpdate, ""),
		},
	})
}

// trainingJobEveryAttribute sets every configurable attribute of a ps-mode ctr_training_job
// to a value other than its default, for the import round trip; storageClass is the
// cluster's, so that the model output binds and the job runs.
func trainingJobEveryAttribute(storageClass string) string {
	return fmt.Sprintf(`
  stack             = "shop"
  image             = "volcanosh/edlctr:v1-test"
  image_pull_policy = "Always"
  command           = ["paddle_k8s", "start_fluid", "--verbose"]
  entry             = "cd /workspace/ctr && python train.py --is_local 0"
  env               = { GLOG_v = "1", EXTRA = "x" }
  port              = 30240
  queue             = "default"
  scheduler_name    = "volcano"
  min_available     = 1
  max_retry         = 5
  pserver = { replicas = 1, requests = { cpu = "100m" }, limits = { cpu = "1" }, gpus = 0,
    policies = [{ event = "PodFailed", action = "RestartTask" }] }
  trainer = { replicas = 1, requests = { memory = "128Mi" }, limits = { memory = "256Mi" } }
  policies = [{ event = "PodEvicted", action = "RestartJob" }]
  dataset = { hdfs_address = "hdfs://namenode:9000", hdfs_ugi = "user,secret", path = "/train_data",
    start_hour = "20200401/00", end_hour = "20200401/23", sparse_dim = 1000001 }
  slot_config  = "6048\n6002\n"
  model_output = { size = "2Gi", storage_class = %q, access_mode = "ReadWriteOnce", mount_path = "/data", donefile_path = "done/donefile/base.txt", retain = false }
  model_export = { format = "ps-table", path = "saves", var = "embedding", embedx_dim = 8, interval_seconds = 30, serving_model = "inference",
    resources = { requests = { cpu = "200m" }, limits = { memory = "1Gi" } } }
  file_server  = { image = "ghcr.io/elasticctr/cube:v0.0.1-test", upload = true, upload_insecure = false, port = 8081,
    service_type = "NodePort", replicas = 1, security_context = { fs_group = 2000, read_only_root_filesystem = true },
    resources = { requests = { memory = "100Mi" }, limits = { cpu = "1" } } }
  security_context = { fs_group = 3000, seccomp_profile = "RuntimeDefault", allow_privilege_escalation = false, add_capabilities = ["CHOWN"] }
`, storageClass)
}

// TestAccTrainingJob_Import: every attribute round-trips through the cluster (secrets from
// their Secrets): import reads the same configuration back, and with the configuration the
// next plan is empty.
func TestAccTrainingJob_Import(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	config := trainingJobConfig(ns, name, trainingJobEveryAttribute(k.defaultStorageClass(t)))
	config = strings.Replace(config, "  pserver   = { replicas = 1 }\n  trainer   = { replicas = 1 }\n", "", 1)
	k.run(t, ns, stack.TrainingJobType, name, append([]resource.TestStep{{
		Config: config,
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("pserver").AtMapKey("gpus"), knownvalue.Int64Exact(0)),
		},
	}}, importRoundTrip("ctr_training_job", ns+"/"+name, config, "last_condition", "tasks")...)...) // live: pods move on between apply and import
}

// TestAccTrainingJob_Destroy: destroy removes every object the job owns, its pods and its
// pod group.
func TestAccTrainingJob_Destroy(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	k.run(t, ns, stack.TrainingJobType, name, resource.TestStep{Config: trainingJobConfig(ns, name, ""), Check: k.checkPodsRunning(ns, name, 2)})
}

// TestAccTrainingJob_Drift: kubectl-style edits and deletions show in the plan and the next
// apply restores them.
func TestAccTrainingJob_Drift(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, name := k.namespace(t), jobName()
	ctx := context.Background()
	k.run(t, ns, stack.TrainingJobType, name, []resource.TestStep{
		{Config: trainingJobConfig(ns, name, "")},
		{
			PreConfig: func() {
				dep, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				dep.Spec.Replicas = ptr.To[int32](3)
				dep.Spec.Template.Spec.Containers[0].Args = append(dep.Spec.Template.Spec.Containers[0].Args, "--upload") // writable by hand
				if _, err := k.cs.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
					t.Fatal(err)
				}
				if err := k.cs.CoreV1().Services(ns).Delete(ctx, name+"-fileserver", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			Config: trainingJobConfig(ns, name, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectUnknownValue(jobAddr, tfjsonpath.New("phase")),
			}},
			Check: func(*terraform.State) error {
				if _, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{}); err != nil {
					return fmt.Errorf("deleted Service was not recreated: %w", err)
				}
				dep, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if *dep.Spec.Replicas != 1 {
					return fmt.Errorf("replicas %d were not restored to 1", *dep.Spec.Replicas)
				}
				if args := dep.Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--upload") {
					return fmt.Errorf("the file server's arguments were not restored: %v", args)
				}
				return nil
			},
		},
	}...)
}

// TestAccTrainingJob_RemovedBehindOurBack: when every object is gone, the resource is gone
// and the next apply creates it again.
func TestAccTrainingJob_RemovedBehindOurBack(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, name := k.namespace(t), jobName()
	owner := stack.Owner(stack.TrainingJobType, name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.nothingLeftOf(ns, stack.TrainingJobType, name),
		Steps: []resource.TestStep{
			{Config: trainingJobConfig(ns, name, "")},
			{
				PreConfig: func() {
					// What `kubectl delete -l` of everything would do.
					if err := k.deleteOwned(ns, owner); err != nil {
						t.Fatal(err)
					}
				},
				Config: trainingJobConfig(ns, name, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
				},
			},
		},
	})
}

// trainingJobBadInputs are ctr_training_job's bad values: see badInputs.
func trainingJobBadInputs() []badInput {
	base := map[string]any{"name": "bad"}
	dataset := func(kv ...any) map[string]any { return with(base, "dataset", with(map[string]any{}, kv...)) }
	return []badInput{
		{"file server Service annotation key", with(base, "file_server", map[string]any{"service_annotations": map[string]any{"-bad": "x"}}),
			`file_server.service_annotations["-bad"]`, `"-bad" is not an annotation key`},
		{"gang larger than the job", with(base, "min_available", 5), "min_available", `Attribute min_available: 5 is more than the 4 pods the job asks for`},
		{"not a quantity", with(base, "pserver", map[string]any{"requests": map[string]any{"cpu": "lots"}}), `pserver.requests["cpu"]`, `"lots" is not a quantity`},
		{"request above limit", with(base, "pserver", map[string]any{"requests": map[string]any{"cpu": "4"}, "limits": map[string]any{"cpu": "2"}}),
			`pserver.requests["cpu"]`, `request 4 is more than the limit 2`},
		{"unknown mode", with(base, "mode", "mpi"), "mode", `Attribute mode value must be one of`},
		{"port out of range", with(base, "port", 70000), "port", `Attribute port value must be between 1 and 65535`},
		{"max_retry 0", with(base, "max_retry", 0), "max_retry", `value must be at least 1`},
		{"negative GPUs", with(base, "trainer", map[string]any{"gpus": -1}), "trainer.gpus", `value must be at least 0`},
		{"GPUs on parameter servers", with(base, "pserver", map[string]any{"gpus": 1}), "pserver.gpus", `parameter servers keep and update the tables on CPUs`},
		{"negative TTL", with(base, "ttl_seconds_after_finished", -1), "ttl_seconds_after_finished", `value must be at least 0`},
		{"HDFS address", dataset("hdfs_address", "http://namenode:9000"), "dataset.hdfs_address", `"http://namenode:9000" is not an HDFS address`},
		{"hour not in the form", dataset("start_hour", "2020-04-01"), "dataset.start_hour", `"2020-04-01" is not an hour`},
		{"month 13", dataset("start_hour", "20201301/00"), "dataset.start_hour", `"20201301/00" is not an hour that exists`},
		{"February 30", dataset("end_hour", "20200230/12"), "dataset.end_hour", `"20200230/12" is not an hour that exists`},
		{"hour 24", dataset("start_hour", "20200401/24"), "dataset.start_hour", `"20200401/24" is not an hour that exists .* \(hours 00-23\)`},
		{"window reversed", dataset("start_hour", "20200402/00", "end_hour", "20200401/00"), "dataset.end_hour", `"20200401/00" is before start_hour`},
		{"model size", with(base, "model_output", map[string]any{"size": "ten"}), "model_output.size", `"ten" is not a positive storage quantity`},
		{"access mode", with(base, "model_output", map[string]any{"access_mode": "ReadOnlyMany"}), "model_output.access_mode", `value must be one of`},
		{"file server service type", with(base, "file_server", map[string]any{"service_type": "Ingress"}), "file_server.service_type", `value must be one of`},
		{"file server image empty", with(base, "file_server", map[string]any{"image": ""}), "file_server.image", `string length must be at least 1`},
		{"worker in ps mode", with(base, "worker", map[string]any{"replicas": 2}), "worker", `Attribute worker: is only used with mode = "collective"`},
		{"Volcano event", with(base, "policies", []any{map[string]any{"event": "PodExploded", "action": "RestartJob"}}), "policies[0].event", `value must be one of`},
		{"environment variable name", with(base, "env", map[string]any{"1BAD": "x"}), `env["1BAD"]`, `"1BAD" is not a valid environment variable name`},
		{"empty image", with(base, "image", ""), "image", `Attribute image string length must be at least 1`},
		{"empty command word", with(base, "command", []any{"paddle_k8s", ""}), "command[1]", `string length must be at least 1`},
		{"insecure uploads without uploads", with(base, "file_server", map[string]any{"upload_insecure": true}), "file_server.upload_insecure", `has no effect without upload = true`},
		{"insecure uploads from outside the cluster", with(base, "file_server", map[string]any{"upload": true, "upload_insecure": true, "service_type": "LoadBalancer"}),
			"file_server.upload_insecure", `with service_type = "LoadBalancer" the file server is reachable from outside the cluster`},
		{"insecure uploads on a node port", with(base, "file_server", map[string]any{"upload": true, "upload_insecure": true, "service_type": "NodePort"}),
			"file_server.upload_insecure", `with service_type = "NodePort" the file server is reachable from outside the cluster`},
		{"file server request over its limit", with(base, "file_server", map[string]any{"resources": map[string]any{"requests": map[string]any{"memory": "1Gi"}, "limits": map[string]any{"memory": "512Mi"}}}),
			"file_server.resources.requests[\"memory\"]", `request 1Gi is more than the limit 512Mi`},
		{"model export limit", with(base, "model_export", map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "lots"}}}),
			"model_export.resources.limits[\"cpu\"]", `"lots" is not a quantity`},
		{"name with capitals", with(base, "name", "Bad_Name"), "name", `Attribute name must be at most 40 lowercase letters`},
		{"name starting with a digit", with(base, "name", "0job"), "name", `starting with a letter`},
		{"name too long", with(base, "name", strings.Repeat("a", 41)), "name", `at most 40`},
		{"model export format", with(base, "model_export", map[string]any{"format": "pickle"}), "model_export.format", `value must be one of`},
		{"model export interval", with(base, "model_export", map[string]any{"interval_seconds": 0}), "model_export.interval_seconds", `value must be at least 1`},
		{"model export path", with(base, "model_export", map[string]any{"path": "/abs"}), "model_export.path", `must be relative to the model output's mount path`},
		{"model export donefile", with(with(base, "model_export", map[string]any{}), "model_output", map[string]any{"donefile_path": "x/base.txt"}),
			"model_output.donefile_path", `the model export writes <folder>/donefile/base.txt`},
		{"own image without entry", with(base, "image", "registry.example/ctr:1"), "image", `with the default command needs entry`},
		{"unknown recipe", with(base, "recipe", "paddle-1"), "recipe", `value must be one of: \[` + regexp.QuoteMeta(`"`+strings.Join(stack.RecipeNames(), `" "`)+`"`) + `\]`},
		{"paddlerec without an image", with(with(base, "recipe", "paddlerec"), "entry", "python -u tools/static_ps_trainer.py -m config.yaml"), "recipe", `"paddlerec" needs image: PaddleRec publishes no training image`},
		{"fleet-ctr without slot config", with(dataset("hdfs_address", "hdfs://nn:9000", "hdfs_ugi", "u,p", "path", "/d", "start_hour", "20200401/00",
			"end_hour", "20200401/01", "sparse_dim", 1000), "recipe", "fleet-ctr"), "recipe", `"fleet-ctr" needs slot_config: train_with_mlflow.py fetches slot.conf`},
		{"wait mode", with(base, "wait", "forever"), "wait", `Attribute wait value must be one of: \["none" "submitted" "running" "completed"\]`},
		{"pull policy", with(base, "image_pull_policy", "Sometimes"), "image_pull_policy", `value must be one of`},
		{"job policy action", with(base, "policies", []any{map[string]any{"event": "PodFailed", "action": "Shrug"}}), "policies[0].action", `value must be one of`},
		{"file server port", with(base, "file_server", map[string]any{"port": 0}), "file_server.port", `value must be between 1 and 65535`},
		{"no file server", with(base, "file_server", map[string]any{"replicas": 0}), "file_server.replicas", `value must be at least 1`},
		{"parameter servers in collective mode", with(with(base, "mode", "collective"), "pserver", map[string]any{"replicas": 1}), "pserver",
			`is only used with mode = "ps"; with mode = "collective" configure worker`},
		{"sparse dim", dataset("sparse_dim", 0), "dataset.sparse_dim", `value must be at least 1`},
		{"relative dataset path", dataset("path", "train_data"), "dataset.path", `"train_data" must be an absolute path in the dataset's source \(starting with /\)`},
		{"bucket name", dataset("s3", map[string]any{"bucket": "Ads_Data"}), "dataset.s3.bucket", `must be a bucket name`},
		{"region name", dataset("s3", map[string]any{"bucket": "ads", "region": "US East"}), "dataset.s3.region", `must be a region name`},
		{"S3 endpoint", dataset("s3", map[string]any{"bucket": "ads", "endpoint": "s3.bj.bcebos.com"}), "dataset.s3.endpoint", `is not an endpoint; use https://HOST\[:PORT\]`},
		{"credentials Secret", dataset("s3", map[string]any{"bucket": "ads", "credentials_secret": "Keys"}), "dataset.s3.credentials_secret", `"Keys" is not a valid Secret name`},
		{"two sources", dataset("hdfs_address", "hdfs://nn:9000", "s3", map[string]any{"bucket": "ads"}), "dataset", `names hdfs_address/hdfs_ugi and s3: a dataset has one source; set only one of them`},
		{"dataset mount path", dataset("volume", map[string]any{"claim_name": "samples", "mount_path": "/data/../x"}), "dataset.volume.mount_path", `must be a clean absolute path other than /, e.g. /dataset`},
		{"dataset inside the model output", dataset("volume", map[string]any{"claim_name": "samples", "mount_path": "/output/samples"}), "dataset.volume.mount_path",
			`"/output/samples" is, holds or is inside /output, where ctr mounts another volume into the trainers; choose another path`},
		{"model mount path", with(base, "model_output", map[string]any{"mount_path": "output"}), "model_output.mount_path", `"output" must be an absolute path other than /`},
		{"donefile outside the model output", with(base, "model_output", map[string]any{"donefile_path": "../base.txt"}), "model_output.donefile_path",
			`"../base.txt" must be relative to the model output, without ..`},
		{"model claim name", with(base, "model_output", map[string]any{"existing_claim": "Model_Claim"}), "model_output.existing_claim", `is not a valid PersistentVolumeClaim name`},
		{"serving model outside a save", with(base, "model_export", map[string]any{"serving_model": "../dense"}), "model_export.serving_model", `must be relative to a save folder, without ..`},
		{"variable path", with(base, "model_export", map[string]any{"var": "a/b"}), "model_export.var", `"a/b": a variable's file name, without /`},
		{"embedx_dim beside lodtensor", with(base, "model_export", map[string]any{"embedx_dim": 8}), "model_export.embedx_dim", `only with format = "ps-table", and at least 0`},
		{"negative embedx_dim", with(base, "model_export", map[string]any{"format": "ps-table", "embedx_dim": -1}), "model_export.embedx_dim", `and at least 0`},
	}
}

// TestTrainingJob_PlanWithoutCluster: plan renders the manifests without any cluster, even
// with a connection that cannot be reached; apply then fails naming the object and the cause.
func TestTrainingJob_PlanWithoutCluster(t *testing.T) {
	t.Parallel()
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config: `
provider "ctr" {
  kubernetes = { host = "https://127.0.0.1:1", token = "x" }
}

resource "ctr_training_job" "test" {
  name = "offline"
}
`,
			ExpectError: regexp.MustCompile(`(?s)Could not apply the objects of training job default/offline.*ServiceAccount default/offline.*connection refused`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue(jobAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(7)),
				plancheck.ExpectKnownValue(jobAddr, tfjsonpath.New("min_available"), knownvalue.Int64Exact(4)),
			}},
		}},
	})
}

// planRecipeExample plans a documented recipe example (examples/recipes/<recipe>/main.tf)
// with no cluster behind the provider (providerExtra adds to its configuration), runs checks
// on the plan, and expects the apply to fail on the unreachable cluster, naming the job.
func planRecipeExample(t *testing.T, recipe, job, providerExtra string, checks ...plancheck.PlanCheck) {
	t.Helper()
	example, err := os.ReadFile("../examples/recipes/" + recipe + "/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config:           "provider \"ctr\" {\n  kubernetes = { host = \"https://127.0.0.1:1\", token = \"x\" }\n" + providerExtra + "}\n" + string(example),
			ExpectError:      regexp.MustCompile(`(?s)Could not apply the objects of training job default/` + job + `.*connection refused`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: checks},
		}},
	})
}

// manifestHas checks that the planned manifest key of addr holds each of want, in order.
func manifestHas(addr, key string, want ...string) plancheck.PlanCheck {
	quoted := make([]string, len(want))
	for i, w := range want {
		quoted[i] = regexp.QuoteMeta(w)
	}
	return plancheck.ExpectKnownValue(addr, tfjsonpath.New("manifests").AtMapKey(key), knownvalue.StringRegexp(regexp.MustCompile("(?s)"+strings.Join(quoted, ".*"))))
}

// TestTrainingJob_RecipeFleetCTRPlans: the documented fleet-ctr block plans, with no cluster,
// the recipe's image (moved to the provider's image_registry), its entry and the variables
// its scripts read, and slot.conf served at the file server's root; apply then fails on the
// unreachable cluster.
func TestTrainingJob_RecipeFleetCTRPlans(t *testing.T) {
	t.Parallel()
	addr := "ctr_training_job.fleet_ctr"
	planRecipeExample(t, "fleet-ctr", "fleet-ctr", "  image_registry = \"mirror.example\"\n",
		plancheck.ExpectKnownValue(addr, tfjsonpath.New("image"), knownvalue.StringExact(stack.MirrorImage("mirror.example", stack.FleetCTRImage))),
		manifestHas(addr, "batch.volcano.sh/v1alpha1/Job/fleet-ctr", "FILE_SERVER_SERVICE_HOST", "fleet-ctr-fileserver.default.svc", "train_with_mlflow.py"),
		manifestHas(addr, "apps/v1/Deployment/fleet-ctr-fileserver", "mountPath: /web/slot.conf", "subPath: slot.conf"))
}

// TestTrainingJob_RecipePaddleRecPlans: the documented paddlerec block plans, with no
// cluster, the entry the recipe's stand-in test runs, Volcano's svc plugin, the parameter
// servers' list by name, and the model volume on the parameter servers too.
func TestTrainingJob_RecipePaddleRecPlans(t *testing.T) {
	t.Parallel()
	addr := "ctr_training_job.paddlerec"
	planRecipeExample(t, "paddlerec", "paddlerec", "",
		plancheck.ExpectKnownValue(addr, tfjsonpath.New("entry"), knownvalue.StringExact(stack.PaddleRecEntry)),
		plancheck.ExpectKnownValue(addr, tfjsonpath.New("manifests").AtMapKey("batch.volcano.sh/v1alpha1/Job/paddlerec"),
			knownvalue.StringRegexp(regexp.MustCompile(`(?s)svc: \[\].*PADDLE_PSERVERS_IP_PORT_LIST\s+value: paddlerec-pserver-0.paddlerec:30236,paddlerec-pserver-1.paddlerec:30236.*name: pserver`))))
}

// TestAccTrainingJob_CreateRefusesAnObjectItDoesNotOwn: a Service of the name the job's file
// server would take, made by hand, is not taken over: create fails naming it, removes what it
// had created, and the Service is as it was.
func TestAccTrainingJob_CreateRefusesAnObjectItDoesNotOwnUnlessAdopted(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	ctx := context.Background()
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name + "-fileserver", Labels: map[string]string{"team": "theirs"}},
		// As a script that came before ctr would have made it: the port ctr renders.
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: stack.DefaultFileServerPort}}}}
	if _, err := k.cs.CoreV1().Services(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.run(t, ns, stack.TrainingJobType, name, resource.TestStep{
		Config:      trainingJobConfig(ns, name, ""),
		ExpectError: regexp.MustCompile(`Service\s+` + ns + `/` + name + `-fileserver\s+exists\s+and\s+is\s+not\s+ctr_training_job\.` + name + `'s`),
	})
	svc, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("their Service is gone: %v", err)
	}
	if svc.Labels["team"] != "theirs" || svc.Labels[stack.OwnerLabel] != "" || svc.Spec.Selector != nil {
		t.Errorf("their Service was changed: labels %v, ports %v", svc.Labels, svc.Spec.Ports)
	}
	// Asked to adopt, the job takes the Service over (it has no owner label), and owns it
	// from then on: the destroy at the end of the run deletes it with the rest.
	k.run(t, ns, stack.TrainingJobType, name, resource.TestStep{
		Config: trainingJobConfig(ns, name, "  adopt = true"),
		Check: func(*terraform.State) error {
			svc, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got, want := svc.Labels[stack.OwnerLabel], stack.Owner(stack.TrainingJobType, name); got != want {
				return fmt.Errorf("the adopted Service's owner label is %q, want %q", got, want)
			}
			return nil
		},
	})
}

// TestAccTrainingJob_DeletedByVolcanoAfterFinishing: with ttl_seconds_after_finished, the
// Volcano Job carries the TTL, and a Volcano Job that is gone (as Volcano deletes it once it
// finished) is neither drift nor submitted again: the phase reads Collected, the plan is
// empty, and an update in place (the file server) leaves the training alone.
func TestAccTrainingJob_DeletedByVolcanoAfterFinishing(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	config := func(fileServers int) string {
		return trainingJobConfig(ns, name, fmt.Sprintf("  ttl_seconds_after_finished = 3600\n  file_server = { replicas = %d }", fileServers))
	}
	jobGone := func(*terraform.State) error {
		_, err := k.dyn.Resource(vcjobGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Volcano job %s/%s: want it gone, got %v", ns, name, err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.nothingLeftOf(ns, stack.TrainingJobType, name),
		Steps: []resource.TestStep{
			{
				Config: config(1),
				Check: func(*terraform.State) error {
					u, err := k.dyn.Resource(vcjobGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if ttl, _, _ := unstructured.NestedInt64(u.Object, "spec", "ttlSecondsAfterFinished"); ttl != 3600 {
						return fmt.Errorf("the Volcano job's ttlSecondsAfterFinished is %d, want 3600", ttl)
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					// What Volcano's garbage collector does once the TTL has passed.
					ctx := context.Background()
					if err := k.dyn.Resource(vcjobGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					for deadline := time.Now().Add(30 * time.Second); jobGone(nil) != nil; time.Sleep(200 * time.Millisecond) {
						if time.Now().After(deadline) {
							t.Fatal(jobGone(nil))
						}
					}
				},
				Config: config(1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Collected")),
				},
				Check: jobGone,
			},
			{
				Config: config(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Collected")),
				},
				Check: resource.ComposeTestCheckFunc(jobGone, k.deploymentAvailable(ns, name+"-fileserver", 2)),
			},
		},
	})
}
