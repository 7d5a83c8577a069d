package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube/health"
)

var podGroupKind = schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup")

// isVolcanoJob reports whether u is a Volcano Job.
func isVolcanoJob(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().Group == batchv1alpha1.SchemeGroupVersion.Group && u.GetKind() == "Job"
}

// podSelector selects the pods of a live workload: a Volcano Job's by the job-name label
// Volcano puts on them, anything else's by its spec.selector (Deployments, StatefulSets).
// false: the object runs no pods.
func podSelector(u *unstructured.Unstructured) (labels.Selector, bool) {
	if isVolcanoJob(u) {
		return labels.SelectorFromSet(labels.Set{batchv1alpha1.JobNameKey: u.GetName()}), true
	}
	raw, found, _ := unstructured.NestedMap(u.Object, "spec", "selector")
	if !found {
		return nil, false
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return nil, false
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || sel.Empty() {
		return nil, false
	}
	return sel, true
}

// Pods lists the pods of a live workload (nil for an object that runs none).
func (c *Client) Pods(ctx context.Context, u *unstructured.Unstructured) ([]corev1.Pod, error) {
	sel, ok := podSelector(u)
	if !ok {
		return nil, nil
	}
	list, err := c.cs.CoreV1().Pods(u.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list the pods of %s: %w", Describe(u), err)
	}
	return list.Items, nil
}

// PodGroup reads the pod group Volcano made for a live Volcano Job (named after the job and
// its UID); nil when there is none yet.
func (c *Client) PodGroup(ctx context.Context, job *unstructured.Unstructured) (*schedulingv1beta1.PodGroup, error) {
	ri, err := c.resource(podGroupKind, job.GetNamespace())
	if errors.Is(err, errNotServed) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ref := &unstructured.Unstructured{}
	ref.SetGroupVersionKind(podGroupKind)
	ref.SetNamespace(job.GetNamespace())
	ref.SetName(job.GetName() + "-" + string(job.GetUID()))
	u, err := ri.Get(ctx, ref.GetName(), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, apiError("read", ref, err)
	}
	var pg schedulingv1beta1.PodGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pg); err != nil {
		return nil, fmt.Errorf("read %s: %w", Describe(ref), err)
	}
	return &pg, nil
}

// Problems says what keeps a live workload from being ready, as its pods (and a Volcano
// Job's pod group) report it: see package health.
func (c *Client) Problems(ctx context.Context, u *unstructured.Unstructured) ([]health.Problem, error) {
	pods, err := c.Pods(ctx, u)
	if err != nil {
		return nil, err
	}
	problems := health.Pods(pods)
	if isVolcanoJob(u) {
		pg, err := c.PodGroup(ctx, u)
		if err != nil {
			return nil, err
		}
		if pg != nil {
			problems = append(health.PodGroup(pg), problems...)
		}
	}
	return problems, nil
}

// WaitPodsReady waits until at least want pods of a live workload run with every container
// ready (or have completed): a Volcano Job is Running as soon as its gang's pods are, even
// while a container crash-loops or cannot pull its image. Problems show in the progress
// lines; a permanent one ends the wait with a *FailedError.
func (c *Client) WaitPodsReady(ctx context.Context, u *unstructured.Unstructured, want int) error {
	what := Describe(u)
	line, err := c.Poll(ctx, PodCheckEvery, func(ctx context.Context) (bool, string, error) {
		pods, err := c.Pods(ctx, u)
		if err != nil {
			return false, "", err
		}
		ready := 0
		for i := range pods {
			if health.Ready(&pods[i]) {
				ready++
			}
		}
		problems := health.Pods(pods)
		line := fmt.Sprintf("%s: %d of %d pods running and ready, %d wanted", what, ready, len(pods), want)
		if s := health.Summary(problems); s != "" {
			line += "; " + s
		}
		if pr, ok := health.FirstPermanent(problems); ok {
			return false, line, &FailedError{Object: what, Problem: pr}
		}
		return ready >= want, line, nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: pods not ready in time (%s): %w", what, line, ctx.Err())
	}
	return err
}

// JobCondition is the latest condition reported for a Volcano Job.
type JobCondition struct {
	Type    string // Scheduled or Unschedulable (the pod group's), or the job's phase
	Reason  string
	Message string
	Time    time.Time
}

// LastJobCondition is the later of the pod group's latest condition (the scheduler's word on
// the gang) and the job's last change of phase (Volcano's, with its reason); on a tie, the
// pod group's, which says more. pg may be nil. false: neither has reported anything yet.
func LastJobCondition(job *unstructured.Unstructured, pg *schedulingv1beta1.PodGroup) (JobCondition, bool) {
	var out JobCondition
	found := false
	if pg != nil {
		if c, ok := health.LastCondition(pg); ok {
			out, found = JobCondition{Type: string(c.Type), Reason: c.Reason, Message: c.Message, Time: c.LastTransitionTime.Time}, true
		}
	}
	phase, _, _ := unstructured.NestedString(job.Object, "status", "state", "phase")
	at, _, _ := unstructured.NestedString(job.Object, "status", "state", "lastTransitionTime")
	t, err := time.Parse(time.RFC3339, at)
	if phase == "" || err != nil || (found && !t.After(out.Time)) {
		return out, found
	}
	reason, _, _ := unstructured.NestedString(job.Object, "status", "state", "reason")
	msg, _, _ := unstructured.NestedString(job.Object, "status", "state", "message")
	return JobCondition{Type: phase, Reason: reason, Message: msg, Time: t}, true
}

// VolcanoTaskCounts counts the pods of a live Volcano Job by task (the task-spec label
// Volcano puts on them) and phase. Every task of the job's spec is there, with zeros when it
// has no pods. Counted from the pods rather than from Volcano's status, which forgets them
// once the job has completed.
func VolcanoTaskCounts(job *unstructured.Unstructured, pods []corev1.Pod) map[string]health.Counts {
	byTask := map[string][]corev1.Pod{}
	tasks, _, _ := unstructured.NestedSlice(job.Object, "spec", "tasks")
	for _, t := range tasks {
		if m, ok := t.(map[string]any); ok {
			if name, ok := m["name"].(string); ok {
				byTask[name] = nil
			}
		}
	}
	for _, p := range pods {
		if task := p.Labels[batchv1alpha1.TaskSpecKey]; task != "" {
			byTask[task] = append(byTask[task], p)
		}
	}
	out := make(map[string]health.Counts, len(byTask))
	for task, ps := range byTask {
		out[task] = health.Count(ps)
	}
	return out
}
