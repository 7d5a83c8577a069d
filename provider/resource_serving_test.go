package provider

import (
	"context"
	"fmt"
	"regexp"
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

// TestServing_InvalidInputs: refused at plan time with the attribute named; no cluster needed.
func TestServing_InvalidInputs(t *testing.T) {
	cases := []struct{ extra, want string }{
		{`cube_conf = "{not json"`, `cube_conf: is not the JSON array Paddle Serving reads`},
		{`cube_conf = "[]"`, `cube_conf: needs at least one dictionary`},
		{"cube_conf = \"[{\\\"dict_name\\\":\\\"d\\\",\\\"shard\\\":1}]\"\n  port = 0", `Attribute port value must be between 1 and 65535`},
		{"cube_conf = \"[{\\\"dict_name\\\":\\\"d\\\",\\\"shard\\\":1}]\"\n  replicas = 0", `Attribute replicas value must be at least 1`},
	}
	var steps []resource.TestStep
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config:      fmt.Sprintf("resource \"ctr_serving\" \"test\" {\n  name = \"s\"\n  %s\n}\n", c.extra),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(strings.ReplaceAll(c.want, " ", `\s+`)),
		})
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories, Steps: steps})
}
