package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// quotaStack is a whole stack in one namespace: a training job with its file server and model
// export, a cube of one shard and one replica following it, and Paddle Serving reading the
// cube (its pods have an init container). The cube's transfer claim names class; with
// annotated, the cube's pods run as a ServiceAccount of ctr's that carries an annotation.
func quotaStack(ns, name, class string, annotated bool) string {
	pod := ""
	if annotated {
		pod = `  pod = { service_account_annotations = { "eks.amazonaws.com/role-arn" = "arn:aws:iam::123456789012:role/ctr" } }`
	}
	return fmt.Sprintf(`
resource "ctr_training_job" "train" {
  name         = %[2]q
  namespace    = %[1]q
  pserver      = { replicas = 1 }
  trainer      = { replicas = 1 }
  model_export = {}
  timeouts     = { create = "3m", update = "3m", delete = "3m" }
}

resource "ctr_cube" "cube" {
  name                   = "%[2]s-cube"
  namespace              = %[1]q
  donefile_url           = ctr_training_job.train.donefile_url
  shards                 = 1
  replicas               = 1
  transfer_storage_class = %[3]q
%[4]s
  timeouts               = { create = "3m", update = "3m", delete = "3m" }
}

resource "ctr_serving" "serving" {
  name      = "%[2]s-serving"
  namespace = %[1]q
  cube_conf = ctr_cube.cube.cube_conf
  timeouts  = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, class, pod)
}

// quotaPods are the pods quotaStack runs: pserver, trainer, file server, model export, one
// cube server, the transfer, and Paddle Serving.
const quotaPods = 7

// TestAccQuota_StackUnderResourceQuota: in a namespace whose ResourceQuota requires CPU and
// memory requests and limits of every pod (a pod without them is refused, which the test
// checks first), a whole stack applies and becomes ready: every container ctr renders, init
// containers too, is sized. The transfer's claim takes the StorageClass it names. Then the
// cube's service_account_annotations are removed: its ServiceAccount is deleted, and its pod
// templates name the namespace's default one instead of the deleted one (which the API server
// would keep, through the deprecated serviceAccount field, were the name left out), so the
// replaced pods are created and the cube is ready again.
func TestAccQuota_StackUnderResourceQuota(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, name := k.namespace(t), "q"+jobName()[3:]
	class := k.defaultStorageClass(t)
	k.requireLimitsQuota(t, ns)
	cube := stack.Cube{Name: name + "-cube", Namespace: ns}
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("ctr_cube.cube", plancheck.ResourceActionUpdate),
		plancheck.ExpectResourceAction("ctr_training_job.train", plancheck.ResourceActionNoop), plancheck.ExpectResourceAction("ctr_serving.serving", plancheck.ResourceActionNoop)}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(k.nothingLeftOf(ns, stack.TrainingJobType, name), k.nothingLeftOf(ns, stack.CubeType, cube.Name),
			k.nothingLeftOf(ns, stack.ServingType, name+"-serving")),
		Steps: []resource.TestStep{
			{
				Config: quotaStack(ns, name, class, true),
				Check: resource.ComposeTestCheckFunc(k.podsAdmittedUnderQuota(ns, quotaPods), k.claimClass(ns, cube.TransferService(), class),
					k.cubeServiceAccount(cube, cube.Name)),
			},
			{
				Config:           quotaStack(ns, name, class, false),
				ConfigPlanChecks: update,
				Check: resource.ComposeTestCheckFunc(k.serviceAccountGone(ns, cube.Name), k.cubeServiceAccount(cube, stack.DefaultServiceAccount),
					k.podsAdmittedUnderQuota(ns, quotaPods), k.shardPodComesBack(cube, 0)),
			},
		},
	})
}

// limitsQuota is a ResourceQuota on every pod's CPU and memory requests and limits.
const limitsQuota = "requires-limits"

// requireLimitsQuota puts limitsQuota into ns, waits until the quota controller has counted
// it (admission refuses every pod of a quota without status), and checks that it refuses a
// pod without requests and limits: what it must do for the test to mean anything.
func (k *kubeClients) requireLimitsQuota(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	hard := corev1.ResourceList{}
	for _, r := range []corev1.ResourceName{corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU} {
		hard[r] = apiresource.MustParse("40")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory} {
		hard[r] = apiresource.MustParse("128Gi")
	}
	_, err := k.cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: limitsQuota},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ResourceQuota: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := k.cs.CoreV1().ResourceQuotas(ns).Get(ctx, limitsQuota, metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) == len(hard), nil
	})
	if err != nil {
		t.Fatalf("the quota controller did not count ResourceQuota %s/%s: %v", ns, limitsQuota, err)
	}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	_, err = k.cs.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "must specify") {
		t.Fatalf("ResourceQuota %s/%s did not refuse a pod without requests and limits: %v", ns, limitsQuota, err)
	}
}

// podsAdmittedUnderQuota: want pods of the namespace run and are Ready, none Pending, and the
// quota counts their limits (so it admitted them, rather than ignoring them).
func (k *kubeClients) podsAdmittedUnderQuota(ns string, want int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		var state []string
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			state = nil
			ready := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					continue
				}
				state = append(state, fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, podReady(p)))
				if p.Status.Phase == corev1.PodRunning && podReady(p) {
					ready++
				}
			}
			return ready == want && len(state) == want, nil
		})
		if err != nil {
			return fmt.Errorf("want %d Ready pods under the quota: %v (pods: %s)", want, err, strings.Join(state, ", "))
		}
		q, err := k.cs.CoreV1().ResourceQuotas(ns).Get(ctx, limitsQuota, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if used := q.Status.Used[corev1.ResourceLimitsMemory]; used.IsZero() {
			return fmt.Errorf("ResourceQuota %s counts no memory limits: %v", limitsQuota, q.Status.Used)
		}
		return nil
	}
}

// claimClass: the claim asks for the StorageClass class.
func (k *kubeClients) claimClass(ns, claim, class string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		pvc, err := k.cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := pvc.Spec.StorageClassName; got == nil || *got != class {
			return fmt.Errorf("claim %s has StorageClass %v, want %q", claim, got, class)
		}
		return nil
	}
}

// cubeServiceAccount: the cube's StatefulSets and transfer name the ServiceAccount sa, have
// rolled out, and every cube pod runs as it.
func (k *kubeClients) cubeServiceAccount(cube stack.Cube, sa string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		sts, err := k.cs.AppsV1().StatefulSets(cube.Namespace).Get(ctx, cube.ShardService(0), metav1.GetOptions{})
		if err != nil {
			return err
		}
		dep, err := k.cs.AppsV1().Deployments(cube.Namespace).Get(ctx, cube.TransferService(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for obj, got := range map[string]string{"StatefulSet " + sts.Name: sts.Spec.Template.Spec.ServiceAccountName,
			"Deployment " + dep.Name: dep.Spec.Template.Spec.ServiceAccountName} {
			if got != sa {
				return fmt.Errorf("%s names the ServiceAccount %q, want %q", obj, got, sa)
			}
		}
		// OnDelete: the apply replaced the pods; the controller's currentRevision stays.
		if s := sts.Status; s.ObservedGeneration < sts.Generation || s.UpdatedReplicas != *sts.Spec.Replicas || s.Replicas != *sts.Spec.Replicas {
			return fmt.Errorf("StatefulSet %s has not rolled out: %d of %d replicas at revision %s", sts.Name, s.UpdatedReplicas, *sts.Spec.Replicas, s.UpdateRevision)
		}
		pods, err := k.cs.CoreV1().Pods(cube.Namespace).List(ctx, metav1.ListOptions{LabelSelector: stack.LabelInstance + "=" + cube.Name})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.ServiceAccountName != sa {
				return fmt.Errorf("pod %s runs as %q, want %q", p.Name, p.Spec.ServiceAccountName, sa)
			}
		}
		return nil
	}
}

// shardPodComesBack deletes the pods of one shard of cube and waits until as many new ones
// (other UIDs) are Ready: new pods of the shard can be created.
func (k *kubeClients) shardPodComesBack(cube stack.Cube, shard int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		old, _, err := k.shardPods(ctx, cube, shard)
		if err != nil {
			return err
		}
		gone := map[string]bool{}
		for _, p := range old {
			gone[string(p.UID)] = true
			if err := k.cs.CoreV1().Pods(cube.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, _, err := k.shardPods(ctx, cube, shard)
			if err != nil {
				return false, err
			}
			ready := 0
			for _, p := range pods {
				if !gone[string(p.UID)] && p.Status.Phase == corev1.PodRunning && podReady(p) {
					ready++
				}
			}
			return ready == len(old), nil
		})
		if err != nil {
			events, _ := k.cs.CoreV1().Events(cube.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + cube.ShardService(shard)})
			var msgs []string
			if events != nil {
				for _, e := range events.Items {
					msgs = append(msgs, e.Reason+": "+e.Message)
				}
			}
			return fmt.Errorf("shard %d's %d deleted pods did not come back Ready: %v (events: %s)", shard, len(old), err, strings.Join(msgs, "; "))
		}
		return nil
	}
}

// serviceAccountGone: the ServiceAccount name of ns no longer exists.
func (k *kubeClients) serviceAccountGone(ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := k.cs.CoreV1().ServiceAccounts(ns).Get(context.Background(), name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("ServiceAccount %s/%s is still there (err %v)", ns, name, err)
		}
		return nil
	}
}
