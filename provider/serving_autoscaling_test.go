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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestAccServing_Autoscaling: a serving of 2 fixed replicas is given an autoscaler and keeps
// its 2 pods (spec.replicas is handed over, not dropped to the API server's default of 1);
// the HPA targets its Deployment; scaling the Deployment as an HPA does (its scale
// subresource) is no drift, and an apply that changes something else does not scale it back;
// the configuration imports; removing autoscaling sizes it by replicas again, without an HPA.
func TestAccServing_Autoscaling(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	cpu := `  resources = { requests = { cpu = "100m" } }` + "\n"
	fixed := servingConfig(ns, name, "1", cpu+"  replicas = 2")
	autoscaled := func(extra string) string {
		return servingConfig(ns, name, "1", cpu+"  autoscaling = { min_replicas = 1, max_replicas = 4, target_cpu_utilization = 60 }\n"+extra)
	}
	k.run(t, ns, stack.ServingType, name, append(append([]resource.TestStep{
		{
			Config: fixed,
			Check:  resource.ComposeTestCheckFunc(k.deploymentAvailable(ns, name, 2), k.servingScale(ns, name, 2), k.disruptionBudget(ns, name)),
		},
		{
			Config: autoscaled(""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(servingAddr, tfjsonpath.New("replicas"), knownvalue.Null()),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("replicas"), knownvalue.Null()),
				statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("autoscaling").AtMapKey("min_replicas"), knownvalue.Int64Exact(1)),
			},
			Check: resource.ComposeTestCheckFunc(k.servingScale(ns, name, 2), k.servingAutoscaler(ns, name, 1, 4)),
		},
		{
			// What an HPA does: a write of the scale subresource. Then the same configuration
			// plans nothing.
			PreConfig: func() { k.scaleDeployment(t, ns, name, 3) },
			Config:    autoscaled(""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
		},
		{
			// An apply that writes the serving's objects again (a Service annotation) leaves
			// the autoscaler's size alone.
			Config: autoscaled(`  service_annotations = { "example.com/team" = "ads" }`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
			}},
			Check: resource.ComposeTestCheckFunc(k.servingScale(ns, name, 3), k.deploymentAvailable(ns, name, 3)),
		},
	}, importRoundTrip("ctr_serving", ns+"/"+name, autoscaled(`  service_annotations = { "example.com/team" = "ads" }`))...),
		resource.TestStep{
			Config: fixed,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("replicas"), knownvalue.Int64Exact(2)),
			},
			Check: resource.ComposeTestCheckFunc(k.servingScale(ns, name, 2), k.deploymentAvailable(ns, name, 2), k.noAutoscaler(ns, name)),
		},
	)...)
}

// scaleDeployment sets a Deployment's size through its scale subresource, as an HPA does.
func (k *kubeClients) scaleDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	scale, err := k.cs.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = replicas
	if _, err := k.cs.AppsV1().Deployments(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{FieldManager: "horizontal-pod-autoscaler-test"}); err != nil {
		t.Fatal(err)
	}
}

// servingScale checks the Deployment's spec.replicas.
func (k *kubeClients) servingScale(ns, name string, want int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := k.cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
			return fmt.Errorf("deployment %s: spec.replicas %d, want %d", name, ptr.Deref(d.Spec.Replicas, 0), want)
		}
		return nil
	}
}

// servingAutoscaler checks the serving's HPA: it scales its Deployment within [min, max].
func (k *kubeClients) servingAutoscaler(ns, name string, minReplicas, maxReplicas int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		h, err := k.cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != name {
			return fmt.Errorf("HPA %s targets %s %s/%s, want apps/v1 Deployment/%s", name, ref.APIVersion, ref.Kind, ref.Name, name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != minReplicas || h.Spec.MaxReplicas != maxReplicas {
			return fmt.Errorf("HPA %s scales within [%d, %d], want [%d, %d]", name, ptr.Deref(h.Spec.MinReplicas, 0), h.Spec.MaxReplicas, minReplicas, maxReplicas)
		}
		if h.Labels[stack.OwnerLabel] != stack.Owner(stack.ServingType, name) {
			return fmt.Errorf("HPA %s has owner label %q", name, h.Labels[stack.OwnerLabel])
		}
		return nil
	}
}

// noAutoscaler checks that the serving has no HPA.
func (k *kubeClients) noAutoscaler(ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := k.cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("HPA %s/%s is still there", ns, name)
	}
}

// disruptionBudget checks the serving's PodDisruptionBudget: at most one pod at a time.
func (k *kubeClients) disruptionBudget(ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		p, err := k.cs.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != stack.ServingMaxUnavailable {
			return fmt.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want %d", name, p.Spec.MaxUnavailable, stack.ServingMaxUnavailable)
		}
		return nil
	}
}
