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
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const cubeAddr = "ctr_cube.test"

func cubeConfig(ns, name, extra string) string {
	return fmt.Sprintf(`
resource "ctr_cube" "test" {
  name         = %[2]q
  namespace    = %[1]q
  donefile_url = "http://ctr-fileserver.%[1]s.svc:8080/output/ctr_cube/donefile/base.txt"
%[3]s
  timeouts = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, extra)
}

func (k *kubeClients) checkNothingOwnedOf(ns, owner string, kinds []schema.GroupVersionKind) resource.TestCheckFunc {
	return func(*terraform.State) error {
		n, names, err := k.ownedOf(context.Background(), ns, owner, append(append([]schema.GroupVersionKind{}, kinds...), stack.ControllerKinds...))
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("destroy left %d objects owned by %s: %s", n, owner, strings.Join(names, ", "))
		}
		return nil
	}
}

func (k *kubeClients) statefulSetReplicas(ns, name string, want int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		sts, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *sts.Spec.Replicas != want || sts.Status.ReadyReplicas != want {
			return fmt.Errorf("StatefulSet %s: %d/%d ready, want %d", name, sts.Status.ReadyReplicas, *sts.Spec.Replicas, want)
		}
		return nil
	}
}

// TestAccCube_Lifecycle: create -> ready, scale replicas, reshard 2 -> 3 (visible in the
// plan), drift repair, import, destroy leaving nothing.
func TestAccCube_Lifecycle(t *testing.T) {
	k := requireCluster(t)
	ns, name := k.namespace(t), "cube-"+jobName()[3:]
	owner := stack.Owner(stack.CubeType, name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.checkNothingOwnedOf(ns, owner, stack.CubeKinds),
		Steps: []resource.TestStep{
			{
				Config: cubeConfig(ns, name, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("endpoints"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact(fmt.Sprintf("%s-shard-0.%s.svc:8027", name, ns)),
						knownvalue.StringExact(fmt.Sprintf("%s-shard-1.%s.svc:8027", name, ns)),
					})),
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("cube_conf"), knownvalue.StringRegexp(regexp.MustCompile(`"ipport_list": "http://`+name+`-shard-1\.`))),
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(11)), // Secret, 2 NetworkPolicies, the replicas' Service, 2 × (Service, StatefulSet), transfer claim, Service, Deployment
					// No transfer runs on kwok nodes: nothing reports serving, and nothing is claimed.
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("serving_replicas"), knownvalue.Null()),
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("served_version"), knownvalue.StringExact("")),
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("image"), knownvalue.StringExact("ghcr.io/elasticctr/cube:latest")),
					statecheck.ExpectSensitiveValue(cubeAddr, tfjsonpath.New("control_token")),
				},
				Check: resource.ComposeTestCheckFunc(k.statefulSetReplicas(ns, name+"-shard-0", 2), k.statefulSetReplicas(ns, name+"-shard-1", 2),
					func(*terraform.State) error {
						// The transfer reaches replicas that are not Ready (they serve nothing yet)
						// through a Service that publishes them and governs every shard.
						ctx := context.Background()
						svc, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-replicas", metav1.GetOptions{})
						if err != nil {
							return err
						}
						if !svc.Spec.PublishNotReadyAddresses {
							return fmt.Errorf("service %s does not publish not-ready replicas", svc.Name)
						}
						sts, err := k.cs.AppsV1().StatefulSets(ns).Get(ctx, name+"-shard-1", metav1.GetOptions{})
						if err != nil {
							return err
						}
						if sts.Spec.ServiceName != svc.Name {
							return fmt.Errorf("statefulset %s is governed by %q, want %q", sts.Name, sts.Spec.ServiceName, svc.Name)
						}
						return nil
					}),
			},
			{
				Config: cubeConfig(ns, name, "  replicas = 3"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate),
				}},
				Check: k.statefulSetReplicas(ns, name+"-shard-1", 3),
			},
			{
				Config: cubeConfig(ns, name, "  replicas = 3\n  shards = 3"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("manifests").AtMapKey("apps/v1/StatefulSet/"+name+"-shard-2"), knownvalue.NotNull()),
				}},
				Check: k.statefulSetReplicas(ns, name+"-shard-2", 3),
			},
			{
				PreConfig: func() {
					// kubectl scale and kubectl delete svc behind Terraform's back.
					ctx := context.Background()
					sts, err := k.cs.AppsV1().StatefulSets(ns).Get(ctx, name+"-shard-0", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					one := int32(1)
					sts.Spec.Replicas = &one
					if _, err := k.cs.AppsV1().StatefulSets(ns).Update(ctx, sts, metav1.UpdateOptions{FieldManager: "kubectl-scale"}); err != nil {
						t.Fatal(err)
					}
					if err := k.cs.CoreV1().Services(ns).Delete(ctx, name+"-shard-2", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cubeConfig(ns, name, "  replicas = 3\n  shards = 3"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(k.statefulSetReplicas(ns, name+"-shard-0", 3), func(*terraform.State) error {
					_, err := k.cs.CoreV1().Services(ns).Get(context.Background(), name+"-shard-2", metav1.GetOptions{})
					return err
				}),
			},
			{
				// Shrinking prunes the removed shard's objects.
				Config: cubeConfig(ns, name, "  replicas = 3\n  shards = 2"),
				Check: func(*terraform.State) error {
					if _, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), name+"-shard-2", metav1.GetOptions{}); err == nil {
						return fmt.Errorf("shard 2 was not pruned")
					}
					return nil
				},
			},
			{
				ResourceName:            cubeAddr,
				ImportState:             true,
				ImportStateId:           ns + "/" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
		},
	})
}

// TestCube_InvalidInputs: refused at plan time with the attribute named; no cluster needed.
func TestCube_InvalidInputs(t *testing.T) {
	cases := []struct{ extra, want string }{
		{`shards = 0`, `Attribute shards value must be between 1 and 256`},
		{`replicas = 40`, `Attribute replicas value must be between 1 and 32`},
		{`mode = "delta"`, `Attribute mode value must be one of`},
		{`donefile_url = "ftp://x/base.txt"`, `donefile_url: "ftp://x/base.txt" must be an http:// or https:// URL`},
		{`resources = { requests = { memory = "lots" } }`, `resources.requests\["memory"\]: "lots" is not a quantity`},
		{`port = 8099`, `transfer_port: must differ from port`},
		{`transfer_files_port = 8099`, `transfer_files_port: must differ from transfer_port`},
		{`network_policy = { allow_from = [{ pod_labels = {} }] }`, `network_policy.allow_from\[0\]: needs pod_labels, namespace_labels or both`},
		{`network_policy = { enabled = false, allow_from = [{ pod_labels = { a = "b" } }] }`, `network_policy.allow_from: has no effect with enabled = false`},
		{`security_context = { seccomp_profile = "Localhost" }`, `Attribute security_context.seccomp_profile value must be one of`},
		{`security_context = { add_capabilities = ["cap_chown"] }`, `security_context.add_capabilities\[0\]: "cap_chown" is not a capability name`},
	}
	var steps []resource.TestStep
	for _, c := range cases {
		cfg := fmt.Sprintf("resource \"ctr_cube\" \"test\" {\n  name = \"c\"\n  donefile_url = \"http://f/base.txt\"\n  %s\n}\n", c.extra)
		if strings.HasPrefix(c.extra, "donefile_url") {
			cfg = fmt.Sprintf("resource \"ctr_cube\" \"test\" {\n  name = \"c\"\n  %s\n}\n", c.extra)
		}
		steps = append(steps, resource.TestStep{Config: cfg, PlanOnly: true, ExpectError: regexp.MustCompile(strings.ReplaceAll(c.want, " ", `\s+`))})
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories, Steps: steps})
}
