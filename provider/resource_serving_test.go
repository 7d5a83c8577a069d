package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const servingAddr = "ctr_serving.test"

func servingConfig(ns, name, shards, extra string) string {
	return fmt.Sprintf(`
resource "ctr_serving" "test" {
  name      = %[2]q
  namespace = %[1]q
  cube_conf = jsonencode([{ dict_name = "test_dict", shard = %[3]s, dup = 1, timeout = 200, retry = 3, backup_request = 0,
    type = "ipport_list", nodes = [{ ipport_list = "http://cube-shard-0.%[1]s.svc:8027" }] }])
%[4]s
  timeouts = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, shards, extra)
}

// Paddle Serving's lifecycle, one behaviour per test: create, update in place (and the roll
// a new cube.conf causes), replace, drift, import, destroy.

func servingTest(t *testing.T) (*kubeClients, string, string) {
	k := requireCluster(t)
	return k, k.namespace(t), "srv-" + jobName()[3:]
}

// TestAccServing_StatusNotReadableWarns: an identity that may not read the launchers' status
// through the API server's pod proxy (the RBAC guide's role without pods/proxy) refreshes a
// serving that follows a cube with a warning that names the permission, instead of a
// silently empty model_id.
func TestAccServing_StatusNotReadableWarns(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	rec := newDiagRecorder(t)
	provider := providerAs(k.workloadsKubeconfig(t, ns, stack.PodProxy))
	config := provider + servingConfig(ns, name, "1", fmt.Sprintf(`  cube_transfer_url = "http://cube-transfer.%s.svc:8099"
  model_url         = "http://ctr-fileserver.%s.svc:8080/output/models/{id}.tar.gz"`, ns, ns))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		CheckDestroy:             k.nothingLeftOf(ns, stack.ServingType, name),
		Steps: []resource.TestStep{{Config: config}, {
			Config:           config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionNoop)}},
			Check: resource.ComposeTestCheckFunc(resource.TestCheckResourceAttr(servingAddr, "model_id", ""),
				rec.expectRead(`Status Not Readable: Serving `+ns+`/`+name+`: its status cannot be read, so these are left empty: model_id\. `+
					`GET .* from pod `+ns+`/`+name+`-.*403 Forbidden: the provider's identity needs get on pods/proxy in namespace "`+ns+`"`)),
		}},
	})
}

// TestAccServing_Create: rolled out, with its URL and its three objects; the ctr_serving data
// source reads the same exported values back.
func TestAccServing_Create(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	k.run(t, ns, stack.ServingType, name, append([]resource.TestStep{{
		Config: servingConfig(ns, name, "1", ""),
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/"+name)),
			statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("url"), knownvalue.StringExact(fmt.Sprintf("http://%s.%s.svc:8010", name, ns))),
			statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(3)),
		},
		Check: resource.ComposeTestCheckFunc(k.deploymentAvailable(ns, name, 1), k.runsLauncher(ns, name, stack.CubeImage(testVersion))),
	}}, dataSourceSteps(servingConfig(ns, name, "1", ""), servingAddr, ns)...)...)
}

// TestAccServing_UpdateInPlace: scaling keeps the pods' cube.conf checksum; a new cube.conf
// changes it, which rolls the pods (Serving reads cube.conf only at start).
func TestAccServing_UpdateInPlace(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	var first string
	k.run(t, ns, stack.ServingType, name, []resource.TestStep{
		{
			Config: servingConfig(ns, name, "1", ""),
			Check:  func(*terraform.State) (err error) { first, err = k.cubeConfChecksum(ns, name); return err },
		},
		{
			Config: servingConfig(ns, name, "1", "  replicas = 2"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
			}},
			Check: resource.ComposeTestCheckFunc(k.deploymentAvailable(ns, name, 2), func(*terraform.State) error {
				if sum, err := k.cubeConfChecksum(ns, name); err != nil || sum != first {
					return fmt.Errorf("scaling changed the cube.conf checksum (%v)", err)
				}
				return nil
			}),
		},
		{
			Config: servingConfig(ns, name, "2", "  replicas = 2"),
			Check: func(*terraform.State) error {
				if sum, err := k.cubeConfChecksum(ns, name); err != nil || sum == first {
					return fmt.Errorf("a new cube.conf did not change the pod template: pods would not roll (%v)", err)
				}
				return nil
			},
		},
	}...)
}

// TestAccServing_Replace: a new name is a new Deployment and Service: the plan says replace.
func TestAccServing_Replace(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(k.nothingLeftOf(ns, stack.ServingType, name),
			k.nothingLeftOf(ns, stack.ServingType, name+"-b")),
		Steps: []resource.TestStep{
			{Config: servingConfig(ns, name, "1", "")},
			{
				Config: servingConfig(ns, name+"-b", "1", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				Check: resource.ComposeTestCheckFunc(k.deploymentAvailable(ns, name+"-b", 1),
					k.nothingLeftOf(ns, stack.ServingType, name)),
			},
		},
	})
}

// TestAccServing_Drift: a ConfigMap deleted behind Terraform's back shows in the plan and is
// recreated.
func TestAccServing_Drift(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	k.run(t, ns, stack.ServingType, name, []resource.TestStep{
		{Config: servingConfig(ns, name, "1", "")},
		{
			PreConfig: func() {
				if err := k.cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), name+"-cube-conf", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			Config: servingConfig(ns, name, "1", ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
			}},
			Check: func(*terraform.State) error {
				_, err := k.cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name+"-cube-conf", metav1.GetOptions{})
				return err
			},
		},
	}...)
}

// servingEveryAttribute sets every configurable attribute of ctr_serving to a value other
// than its default, for the import round trip.
const servingEveryAttribute = `  stack            = "shop"
  image            = "paddlepaddle/serving:0.9.0-test"
  replicas         = 2
  port             = 9010
  service_type     = "NodePort"
  model_url        = "http://ctr-fileserver.default.svc:8080/output/ctr_model.tar.gz"
  command          = ["/opt/serving/start"]
  args             = ["--port=9010", "--enable_cube=true", "--thread=8"]
  service_annotations = { "service.beta.kubernetes.io/aws-load-balancer-internal" = "true" }
  env              = { GLOG_v = "1" }
  resources        = { requests = { cpu = "100m" }, limits = { cpu = "1", memory = "1Gi" } }
  security_context = { run_as_user = 0, run_as_non_root = false, add_capabilities = ["CHOWN", "FOWNER"], seccomp_profile = "Unconfined" }
`

// TestAccServing_Import: every attribute round-trips through the cluster: import reads the
// same configuration back, and with the configuration the next plan is empty.
func TestAccServing_Import(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	config := servingConfig(ns, name, "1", servingEveryAttribute)
	k.run(t, ns, stack.ServingType, name, append([]resource.TestStep{{
		Config: config,
	}}, importRoundTrip("ctr_serving", ns+"/"+name, config)...)...)
}

// TestAccServing_Destroy: destroy removes every object the serving owns and its pods.
func TestAccServing_Destroy(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	k.run(t, ns, stack.ServingType, name, resource.TestStep{Config: servingConfig(ns, name, "1", "  replicas = 2"), Check: k.deploymentAvailable(ns, name, 2)})
}

// servingBadInputs are ctr_serving's bad values: see badInputs.
func servingBadInputs() []badInput {
	base := map[string]any{"name": "s", "cube_conf": `[{"dict_name":"d","shard":1}]`}
	return []badInput{
		{"cube.conf not JSON", with(base, "cube_conf", "{not json"), "cube_conf", `cube_conf: is not the JSON array Paddle Serving reads`},
		{"cube.conf without a dictionary", with(base, "cube_conf", "[]"), "cube_conf", `cube_conf: needs at least one dictionary`},
		{"port 0", with(base, "port", 0), "port", `port value must be between 1 and 65535`},
		{"no replicas", with(base, "replicas", 0), "replicas", `replicas value must be at least 1`},
		{"name starting with a digit", with(base, "name", "9serving"), "name", `starting with a letter`},
		{"empty image", with(base, "image", ""), "image", `string length must be at least 1`},
		{"service type", with(base, "service_type", "Ingress"), "service_type", `value must be one of`},
		{"environment variable name", with(base, "env", map[string]any{"1X": "y"}), `env["1X"]`, `"1X" is not a valid environment variable name`},
		{"negative limit", with(base, "resources", map[string]any{"limits": map[string]any{"cpu": "-1"}}), `resources.limits["cpu"]`, `"-1" is negative`},
		{"service annotation key", with(base, "service_annotations", map[string]any{"lb scheme": "internal"}), `service_annotations["lb scheme"]`,
			`"lb scheme" is not an annotation key`},
		{"ctr's annotation on the Service", with(base, "service_annotations", map[string]any{"ctr.elasticctr.io/settings": "x"}),
			`service_annotations["ctr.elasticctr.io/settings"]`, `which ctr and Volcano keep`},
		// Autoscaling: the autoscaler sizes the Deployment, within ordered bounds.
		{"replicas with autoscaling", with(with(base, "replicas", 2), "autoscaling", map[string]any{"max_replicas": 3}), "replicas",
			`is set together with autoscaling`},
		{"min above max", with(base, "autoscaling", map[string]any{"min_replicas": 4, "max_replicas": 3}), "autoscaling.max_replicas",
			`is 3, below min_replicas \(4\)`},
		{"no min", with(base, "autoscaling", map[string]any{"min_replicas": 0, "max_replicas": 3}), "autoscaling.min_replicas",
			`value must be at least 1`},
		{"no max", with(base, "autoscaling", map[string]any{"max_replicas": 0}), "autoscaling.max_replicas", `value must be at least 1`},
		{"zero CPU target", with(base, "autoscaling", map[string]any{"max_replicas": 3, "target_cpu_utilization": 0}),
			"autoscaling.target_cpu_utilization", `value must be at least 1`},
		{"zero memory target", with(base, "autoscaling", map[string]any{"max_replicas": 3, "target_memory_utilization": 0}),
			"autoscaling.target_memory_utilization", `value must be at least 1`},
		{"empty launcher image", with(base, "launcher_image", ""), "launcher_image", `string length must be at least 1`},
		{"wait mode", with(base, "wait", "forever"), "wait", `value must be one of`},
		{"two cubes of a name", with(base, "cube_conf", `[{"dict_name":"a","shard":1,"nodes":[{"ipport_list":"http://c-shard-0.ns1.svc:8027"}]},`+
			`{"dict_name":"b","shard":1,"nodes":[{"ipport_list":"http://c-shard-0.ns2.svc:8027"}]}]`), "cube_conf", `names two cubes called "c" \(in namespaces "ns1" and "ns2"\)`},
		{"model id without the transfer", with(base, "model_url", "http://f/models/{id}.tar.gz"), "model_url", `has \{id\}, the donefile id .* set cube_transfer_url`},
		{"the launcher's port", with(base, "port", stack.ServingStatusPort), "port", `8019 is the launcher's status port: choose another`},
		{"half a GPU", with(base, "image", "serving:0.9.0-cuda11.2-runtime", "resources", map[string]any{"limits": map[string]any{stack.GPUResource: "0.5"}}),
			`resources.limits["nvidia.com/gpu"]`, `"0.5": a GPU limit must be a whole number of devices`},
		{"GPUs on the CPU image", with(base, "resources", map[string]any{"limits": map[string]any{stack.GPUResource: "1"}}), "image",
			`is Paddle Serving's CPU image, but resources.limits asks for nvidia.com/gpu: use a GPU runtime image`},
		{"annotations too large", with(base, "service_annotations", map[string]any{"a": strings.Repeat("x", 300*1024)}), "service_annotations",
			`are too large for Kubernetes`},
	}
}

// TestAccServing_CreateWaitTimesOutWithWarning: a serving whose pods cannot be ready within
// the create timeout (here: nowhere to run; in a stack, no model yet) is a warning that says
// so, not an error: the resource is kept, not tainted, and the same configuration plans
// nothing.
func TestAccServing_CreateWaitTimesOutWithWarning(t *testing.T) {
	// Parallel: an unplaceable pod of the default scheduler holds nothing back (no gang).
	t.Parallel()
	k, ns, name := servingTest(t)
	rec := newDiagRecorder(t)
	config := fmt.Sprintf(`
resource "ctr_serving" "test" {
  name      = %[2]q
  namespace = %[1]q
  cube_conf = jsonencode([{ dict_name = "test_dict", shard = 1, dup = 1, type = "ipport_list", nodes = [{ ipport_list = "http://cube-shard-0.%[1]s.svc:8027" }] }])
  resources = { requests = { cpu = "1000" } }
  timeouts  = { create = "15s", delete = "3m" }
}
`, ns, name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		CheckDestroy:             k.nothingLeftOf(ns, stack.ServingType, name),
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: rec.expect(`Paddle Serving Not Ready Yet: Serving ` + ns + `/` + name + ` is created but not ready within the create timeout: .*` +
					`did not become ready in time.*kept, not tainted`),
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionNoop),
				}},
			},
		},
	})
}
