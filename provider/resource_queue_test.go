package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const queueAddr = "ctr_queue.test"

// queueJobConfig is a ctr_queue and a training job submitted to it by reference.
func queueJobConfig(ns, job, queue, settings string) string {
	return fmt.Sprintf(`
resource "ctr_queue" "test" {
  name = %[3]q
%[4]s
}
`, ns, job, queue, settings) + trainingJobConfig(ns, job, "  queue = ctr_queue.test.name")
}

func queueName() string { return "acc-q-" + acctest.RandString(6) }

// TestAccQueue_JobSubmittedToIt: one apply creates the queue, waits until Volcano opens it,
// and submits the job to it (Volcano's webhook refuses a job whose queue is missing); weight
// and capability change in place without touching the job; drift shows; import by name reads
// it back; destroy deletes the job, then the queue.
func TestAccQueue_JobSubmittedToIt(t *testing.T) {
	t.Parallel()
	k, ns, job := trainingJobTest(t)
	queue := queueName()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(k.queueGone(queue), k.nothingLeftOf(ns, stack.TrainingJobType, job)),
		Steps: []resource.TestStep{
			{
				Config: queueJobConfig(ns, job, queue, `  weight = 2`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(queueAddr, tfjsonpath.New("id"), knownvalue.StringExact(queue)),
					statecheck.ExpectKnownValue(queueAddr, tfjsonpath.New("reclaimable"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("queue"), knownvalue.StringExact(queue)),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
				},
				Check: k.queueIs(queue, 2, nil, true),
			},
			{
				Config: queueJobConfig(ns, job, queue, `  weight = 3
  capability = { cpu = "2000m", memory = "4Gi" }
  reclaimable = false`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(queueAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionNoop),
				}},
				Check: k.queueIs(queue, 3, map[string]string{"cpu": "2", "memory": "4Gi"}, false),
			},
			{
				// Drift: someone changes the weight; the plan shows it, apply restores it.
				PreConfig: func() {
					patch := []byte(`{"spec":{"weight":7}}`)
					if _, err := k.dyn.Resource(stack.QueueResource).Patch(context.Background(), queue, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: queueJobConfig(ns, job, queue, `  weight = 3
  capability = { cpu = "2000m", memory = "4Gi" }
  reclaimable = false`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(queueAddr, plancheck.ResourceActionUpdate),
				}},
				Check: k.queueIs(queue, 3, map[string]string{"cpu": "2", "memory": "4Gi"}, false),
			},
			// Import reads the quantity as Kubernetes spells it ("2"), not as configured ("2000m").
			{ResourceName: queueAddr, ImportState: true, ImportStateId: queue, ImportStateVerify: true, ImportStateVerifyIgnore: []string{"timeouts", "capability.cpu"}},
		},
	})
}

// TestAccQueue_ExistingRefused: a queue that exists already is never taken over, and is left
// as it was.
func TestAccQueue_ExistingRefused(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	queue := queueName()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
		"metadata": map[string]any{"name": queue}, "spec": map[string]any{"weight": int64(5)}}}
	if _, err := k.dyn.Resource(stack.QueueResource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.dyn.Resource(stack.QueueResource).Delete(context.Background(), queue, metav1.DeleteOptions{})
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config:      fmt.Sprintf("resource \"ctr_queue\" \"test\" {\n  name = %q\n}\n", queue),
			ExpectError: detailRE(`Queue Already Exists .* Volcano queue ` + queue + ` exists and was not created by ctr; .* set the training jobs' queue to "` + queue + `"`),
		}},
		CheckDestroy: k.queueIs(queue, 5, nil, true),
	})
}

// TestAccTrainingJob_MissingQueue: a job whose queue is neither on the cluster nor declared
// is refused at plan time, naming the queue and what to do, where apply would have met
// Volcano's webhook's refusal.
func TestAccTrainingJob_MissingQueue(t *testing.T) {
	t.Parallel()
	k, ns, job := trainingJobTest(t)
	queue := queueName()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.nothingLeftOf(ns, stack.TrainingJobType, job),
		Steps: []resource.TestStep{{
			Config:      trainingJobConfig(ns, job, fmt.Sprintf("  queue = %q", queue)),
			PlanOnly:    true,
			ExpectError: detailRE(`Volcano Queue Not Found .* Volcano queue "` + queue + `" does not exist on the cluster, .* Declare it with a ctr_queue in this configuration and reference it \(queue = ctr_queue.<name>.name\)`),
		}},
	})
}

// queueIs checks a live queue: ctr's when owned, its weight, capability (nil: none) and
// reclaimable, and that Volcano opened it.
func (k *kubeClients) queueIs(name string, weight int64, capability map[string]string, reclaimable bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		u, err := k.dyn.Resource(stack.QueueResource).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("queue %s: %w", name, err)
		}
		q := stack.QueueFromLive(u)
		switch {
		case q.Weight != int32(weight):
			return fmt.Errorf("queue %s has weight %d, want %d", name, q.Weight, weight)
		case fmt.Sprint(q.Capability) != fmt.Sprint(capability) && !(len(q.Capability) == 0 && capability == nil):
			return fmt.Errorf("queue %s has capability %v, want %v", name, q.Capability, capability)
		case q.Reclaimable != nil && *q.Reclaimable != reclaimable:
			return fmt.Errorf("queue %s has reclaimable %v, want %v", name, *q.Reclaimable, reclaimable)
		case stack.QueueState(u) != stack.QueueOpen:
			return fmt.Errorf("queue %s is %q, want %s", name, stack.QueueState(u), stack.QueueOpen)
		}
		return nil
	}
}

// queueGone checks that a queue is deleted, waiting a little for it to go.
func (k *kubeClients) queueGone(name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := k.dyn.Resource(stack.QueueResource).Get(context.Background(), name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("queue %s is still there (%v)", name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestQueue_BadInput: every bad value is refused at plan time, once, at its attribute,
// saying what is allowed. It needs the terraform CLI but no cluster.
func TestQueue_BadInput(t *testing.T) {
	t.Parallel()
	base := map[string]any{"name": "training"}
	testBadInputs(t, "ctr_queue", []badInput{
		{"Volcano's default queue", with(base, "name", "default"), "name", `"default" is Volcano's own queue, which Volcano creates and never deletes`},
		{"Volcano's root queue", with(base, "name", "root"), "name", `"root" is Volcano's own queue`},
		{"name with capitals", with(base, "name", "GPU"), "name", `must be at most 63 lowercase letters`},
		{"weight 0", with(base, "weight", 0), "weight", `value must be between 1 and 65535`},
		{"weight too large", with(base, "weight", 70000), "weight", `value must be between 1 and 65535`},
		{"capability not a quantity", with(base, "capability", map[string]any{"cpu": "lots"}), `capability["cpu"]`, `"lots" is not a quantity`},
		{"capability not a resource", with(base, "capability", map[string]any{"-gpu": "1"}), `capability["-gpu"]`, `"-gpu" is not a resource name`},
		{"bad timeout", with(base, "timeouts", map[string]any{"create": "5"}), "timeouts.create", `"5" is not a positive duration`},
	})
}
