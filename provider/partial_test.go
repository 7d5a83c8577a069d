package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// Partial failures and destroy: an apply that the API server stops half-way leaves nothing
// behind, and destroy removes what the state names even when the owner label is gone.

// TestAccTrainingJob_FailedCreateLeavesNothing: a ResourceQuota forbids Deployments, so the
// API server refuses the file server after the accounts, Secrets, claim and Service were
// created: the apply fails naming the object and the quota, and removes what it created, so
// nothing is left that no state names. Without the quota the next apply creates the job.
func TestAccTrainingJob_FailedCreateLeavesNothing(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	ctx := context.Background()
	allowDeployments := denyDeployments(t, k, ns)
	owner := stack.Owner(stack.TrainingJobType, name)
	config := trainingJobConfig(ns, name, `  dataset = { hdfs_ugi = "user,secret" }`)
	k.run(t, ns, stack.TrainingJobType, name,
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
				allowDeployments()
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

// denyDeployments makes the API server refuse to create Deployments in ns (a ResourceQuota
// named no-deployments) until the returned function lifts it.
func denyDeployments(t *testing.T, k *kubeClients, ns string) func() {
	t.Helper()
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-deployments"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": apiresource.MustParse("0")}}}
	if _, err := k.cs.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := k.cs.CoreV1().ResourceQuotas(ns).Delete(ctx, quota.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// denyDeletes makes the API server refuse to delete Services in ns (a ValidatingAdmissionPolicy)
// until the returned function lifts it; it waits until the policy is in force.
func denyDeletes(t *testing.T, k *kubeClients, ns string) func() {
	t.Helper()
	ctx := context.Background()
	name := "deny-service-deletes-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "deleting Services is held by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	ar := k.cs.AdmissionregistrationV1()
	if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lifted := false
	lift := func() {
		if lifted {
			return
		}
		lifted = true
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = ar.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
		// Lifted once the probe Service can be deleted.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if err := k.cs.CoreV1().Services(ns).Delete(ctx, "probe", metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
				return
			}
		}
		t.Error("the policy that holds deletes is still in force")
	}
	t.Cleanup(lift)
	// In force once a probe Service cannot be deleted.
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := k.cs.CoreV1().Services(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := k.cs.CoreV1().Services(ns).Delete(ctx, "probe", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return lift
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy that holds deletes is not in force (last delete: %v)", err)
		}
	}
}

// TestAccTrainingJob_FailedCleanupNamesWhatIsLeft: the create fails (a quota forbids the file
// server's Deployment) and so does the removal of what it created (a policy forbids deleting
// Services): the error names every object left behind, and the resource stays in state,
// tainted, so that the next apply (the policy lifted) replaces it and destroy leaves nothing.
func TestAccTrainingJob_FailedCleanupNamesWhatIsLeft(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	allowDeployments := denyDeployments(t, k, ns)
	lift := denyDeletes(t, k, ns)
	config := trainingJobConfig(ns, name, "")
	k.run(t, ns, stack.TrainingJobType, name,
		resource.TestStep{
			Config: config,
			ExpectError: detailRE(`exceeded quota: no-deployments.*could not all be removed \(delete Service ` + ns + `/` + name + `-fileserver: .*deleting Services is held by the test.*\)\. ` +
				`Left behind: .*ServiceAccount ` + ns + `/` + name + `.*Service ` + ns + `/` + name + `-fileserver.*kept in state, tainted`),
		},
		resource.TestStep{
			PreConfig: func() {
				lift()
				allowDeployments()
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionReplace),
			}},
		})
}

// TestAccTrainingJob_DestroyLeavesWhatLostItsLabel: objects the state names that someone took
// the owner label off (the file server's Service, the Volcano job) are not deleted: ctr deletes
// only what it owns. Destroy leaves them, and everything still labelled goes.
func TestAccTrainingJob_DestroyLeavesWhatLostItsLabel(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	ctx := context.Background()
	config := trainingJobConfig(ns, name, "")
	job := gvrOf(stack.TrainingJobKinds[len(stack.TrainingJobKinds)-1])
	left := func(*terraform.State) error {
		if _, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("destroy deleted the Service that lost its owner label: %v", err)
		}
		if _, err := k.dyn.Resource(job).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("destroy deleted the Volcano job that lost its owner label: %v", err)
		}
		_ = k.cs.CoreV1().Services(ns).Delete(ctx, name+"-fileserver", metav1.DeleteOptions{})
		_ = k.dyn.Resource(job).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
		return k.nothingLeftOf(ns, stack.TrainingJobType, name)(nil)
	}
	unlabel := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, stack.OwnerLabel))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             left,
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() {
					if _, err := k.cs.CoreV1().Services(ns).Patch(ctx, name+"-fileserver", types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
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
