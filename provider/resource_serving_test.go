package provider

import (
	"context"
	"fmt"
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

// TestAccServing_Lifecycle: create -> rolled out, scale, a new cube.conf rolls the pods,
// drift repair, import, destroy leaving nothing.
func TestAccServing_Lifecycle(t *testing.T) {
	k := requireCluster(t)
	ns, name := k.namespace(t), "srv-"+jobName()[3:]
	podTemplateSum := func() string {
		d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Annotations[stack.CubeConfChecksumAnnotation]
	}
	var firstSum string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.checkNothingOwnedOf(ns, stack.Owner(stack.ServingType, name), stack.ServingKinds),
		Steps: []resource.TestStep{
			{
				Config: servingConfig(ns, name, "1", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("url"), knownvalue.StringExact(fmt.Sprintf("http://%s.%s.svc:8010", name, ns))),
					statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(3)),
				},
				Check: func(*terraform.State) error { firstSum = podTemplateSum(); return nil },
			},
			{
				Config: servingConfig(ns, name, "1", "  replicas = 2"),
				Check: func(*terraform.State) error {
					d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if d.Status.AvailableReplicas != 2 {
						return fmt.Errorf("%d replicas available, want 2", d.Status.AvailableReplicas)
					}
					if podTemplateSum() != firstSum {
						return fmt.Errorf("scaling changed the cube.conf checksum")
					}
					return nil
				},
			},
			{
				Config: servingConfig(ns, name, "2", "  replicas = 2"),
				Check: func(*terraform.State) error {
					if podTemplateSum() == firstSum {
						return fmt.Errorf("a new cube.conf did not change the pod template (pods would not roll)")
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					if err := k.cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), name+"-cube-conf", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: servingConfig(ns, name, "2", "  replicas = 2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
				}},
			},
			{
				ResourceName:            servingAddr,
				ImportState:             true,
				ImportStateId:           ns + "/" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
		},
	})
}

// TestServing_BadInput: refused at plan time, once, at the attribute; no cluster needed.
func TestServing_BadInput(t *testing.T) {
	base := map[string]any{"name": "s", "cube_conf": `[{"dict_name":"d","shard":1}]`}
	testBadInputs(t, "ctr_serving", []badInput{
		{"cube.conf not JSON", with(base, "cube_conf", "{not json"), "cube_conf", `cube_conf: is not the JSON array Paddle Serving reads`},
		{"cube.conf without a dictionary", with(base, "cube_conf", "[]"), "cube_conf", `cube_conf: needs at least one dictionary`},
		{"port 0", with(base, "port", 0), "port", `port value must be between 1 and 65535`},
		{"no replicas", with(base, "replicas", 0), "replicas", `replicas value must be at least 1`},
		{"name starting with a digit", with(base, "name", "9serving"), "name", `starting with a letter`},
		{"empty image", with(base, "image", ""), "image", `string length must be at least 1`},
		{"service type", with(base, "service_type", "Ingress"), "service_type", `value must be one of`},
		{"environment variable name", with(base, "env", map[string]any{"1X": "y"}), `env["1X"]`, `"1X" is not a valid environment variable name`},
		{"negative limit", with(base, "resources", map[string]any{"limits": map[string]any{"cpu": "-1"}}), `resources.limits["cpu"]`, `"-1" is negative`},
		{"bad timeout", with(base, "timeouts", map[string]any{"update": "soon"}), "timeouts.update", `"soon" is not a positive duration`},
	})
}
