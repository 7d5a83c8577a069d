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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// Partial failures and destroy: an apply that the API server stops half-way leaves nothing
// behind, and destroy removes what the state names even when the owner label is gone.

// TestAccTrainingJob_FailedCreateLeavesNothing: a ResourceQuota forbids Deployments, so the
// API server refuses the file server after the accounts, Secrets, claim and Service were
// created: the apply fails naming the object and the quota, and removes what it created, so
// nothing is left that no state names. Without the quota the next apply creates the job.
func TestAccTrainingJob_FailedCreateLeavesNothing(t *testing.T) {
	k, ns, name := trainingJobTest(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-deployments"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": apiresource.MustParse("0")}}}
	if _, err := k.cs.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := stack.Owner(stack.TrainingJobType, name)
	config := trainingJobConfig(ns, name, `  dataset = { hdfs_ugi = "user,secret" }`)
	k.run(t, ns, stack.TrainingJobType, name, stack.TrainingJobKinds,
		resource.TestStep{
			Config: config,
			ExpectError: detailRE(`Could not apply the objects of training job ` + ns + `/` + name + `: apply Deployment ` + ns + `/` + name +
				`-fileserver: Forbidden: .*exceeded quota: no-deployments.*The \d+ objects it had created were removed; nothing of it is left`),
		},
		resource.TestStep{
			PreConfig: func() {
				// Nothing is in state, and nothing is left in the cluster: not by label, nor by name.
				n, names, err := k.owned(ctx, ns, owner)
				if err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					t.Fatalf("the failed apply left %d objects: %s", n, strings.Join(names, ", "))
				}
				for _, get := range []func() error{
					func() error {
						_, err := k.cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
						return err
					},
					func() error {
						_, err := k.cs.CoreV1().Secrets(ns).Get(ctx, name+"-dataset", metav1.GetOptions{})
						return err
					},
					func() error {
						_, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
						return err
					},
					func() error {
						_, err := k.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name+"-model", metav1.GetOptions{})
						return err
					},
				} {
					if err := get(); !apierrors.IsNotFound(err) {
						t.Fatalf("an object of the failed apply is left: %v", err)
					}
				}
				if err := k.cs.CoreV1().ResourceQuotas(ns).Delete(ctx, quota.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionCreate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
			},
		})
}

// TestAccTrainingJob_DestroyUnlabelled: someone removed the owner label from the Volcano job
// and the file server's Service; destroy still removes them, since the state names them.
func TestAccTrainingJob_DestroyUnlabelled(t *testing.T) {
	k, ns, name := trainingJobTest(t)
	ctx := context.Background()
	config := trainingJobConfig(ns, name, "")
	gone := func(*terraform.State) error {
		if _, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("destroy left the unlabelled Service: %v", err)
		}
		if _, err := k.dyn.Resource(gvrOf(stack.TrainingJobKinds[len(stack.TrainingJobKinds)-1])).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("destroy left the unlabelled Volcano job: %v", err)
		}
		return k.checkNothingOwned(ns, stack.Owner(stack.TrainingJobType, name))(nil)
	}
	unlabel := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, stack.OwnerLabel))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             gone,
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() {
					if _, err := k.cs.CoreV1().Services(ns).Patch(ctx, name+"-fileserver", types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
					job := gvrOf(stack.TrainingJobKinds[len(stack.TrainingJobKinds)-1])
					if _, err := k.dyn.Resource(job).Namespace(ns).Patch(ctx, name, types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:  config,
				Destroy: true,
			},
		},
	})
}
