package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const namespaceAddr = "ctr_namespace.this"

// namespaceStack is a ctr_namespace and a ctr_serving inside it.
func namespaceStack(ns, name, labels string) string {
	return fmt.Sprintf(`
resource "ctr_namespace" "this" {
  name   = %[1]q
  labels = %[3]s
}

resource "ctr_serving" "test" {
  name      = %[2]q
  namespace = ctr_namespace.this.name
  cube_conf = jsonencode([{ dict_name = "test_dict", shard = 1, dup = 1, timeout = 200, retry = 3, backup_request = 0,
    type = "ipport_list", nodes = [{ ipport_list = "http://cube-shard-0.%[1]s.svc:8027" }] }])
  timeouts = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, labels)
}

// TestAccNamespace_CreatedAndDestroyed: the stack lands in a namespace ctr creates (before
// the workload, which references it), whose labels change in place and show drift; import
// reads it back; destroy deletes it after the workload and waits until it is gone.
func TestAccNamespace_CreatedAndDestroyed(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, name := "acc-ns-"+acctest.RandString(8), "srv-"+jobName()[3:]
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.namespaceGone(ns),
		Steps: []resource.TestStep{
			{
				Config: namespaceStack(ns, name, `{ team = "ads" }`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(namespaceAddr, tfjsonpath.New("id"), knownvalue.StringExact(ns)),
				},
				Check: resource.ComposeTestCheckFunc(k.namespaceActive(ns), k.deploymentAvailable(ns, name, 1), func(*terraform.State) error {
					n, err := k.cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if n.Labels["team"] != "ads" || n.Labels[stack.OwnerLabel] != "ctr_namespace."+ns {
						return fmt.Errorf("namespace labels %v: want team=ads and ctr's owner label", n.Labels)
					}
					return nil
				}),
			},
			{
				Config: namespaceStack(ns, name, `{ team = "ranking" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(namespaceAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionNoop),
				}},
			},
			{
				// Drift: someone relabels the namespace; the plan shows it, apply restores it.
				PreConfig: func() {
					patch := []byte(`{"metadata":{"labels":{"team":"someone-else"}}}`)
					if _, err := k.cs.CoreV1().Namespaces().Patch(context.Background(), ns, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: namespaceStack(ns, name, `{ team = "ranking" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(namespaceAddr, plancheck.ResourceActionUpdate),
				}},
			},
			{ResourceName: namespaceAddr, ImportState: true, ImportStateId: ns, ImportStateVerify: true, ImportStateVerifyIgnore: []string{"timeouts"}},
		},
	})
}

// TestAccNamespace_ExistingLeftAlone: a namespace that exists already is never taken over
// (ctr_namespace refuses it at apply), and workloads placed in it by name are destroyed
// without touching it.
func TestAccNamespace_ExistingLeftAlone(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(k.namespaceActive(ns), k.nothingLeftOf(ns, stack.ServingType, name)),
		Steps: []resource.TestStep{
			{
				Config:      namespaceStack(ns, name, "null"),
				ExpectError: detailRE(`Namespace Already Exists .* Namespace ` + ns + ` exists and was not created by ctr; .* set the resources' namespace to "` + ns + `"`),
			},
			{
				Config: servingConfig(ns, name, "1", ""),
				Check:  resource.ComposeTestCheckFunc(k.deploymentAvailable(ns, name, 1), k.namespaceActive(ns)),
			},
		},
	})
}
