package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube/health"
	"github.com/elasticctr/terraform-provider-ctr/internal/kube/kubetest"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

func volcanoJob(ns, name string, status map[string]any, tasks ...string) *unstructured.Unstructured {
	var specTasks []any
	for _, t := range tasks {
		specTasks = append(specTasks, map[string]any{"name": t, "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}})
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"minAvailable": int64(len(tasks)), "schedulerName": "volcano", "tasks": specTasks}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestPodSelector(t *testing.T) {
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}}}}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	for _, c := range []struct {
		u    *unstructured.Unstructured
		want string
	}{
		{volcanoJob("ns", "tj", nil, "pserver"), "volcano.sh/job-name=tj"},
		{dep, "app=x"},
		{cm, ""},
	} {
		sel, ok := podSelector(c.u)
		if c.want == "" {
			assert.False(t, ok, c.u.GetKind())
			continue
		}
		require.True(t, ok, c.u.GetKind())
		assert.Equal(t, c.want, sel.String())
	}
}

func TestLastJobCondition(t *testing.T) {
	pg := func(typ schedulingv1beta1.PodGroupConditionType, at string) *schedulingv1beta1.PodGroup {
		ts, _ := time.Parse(time.RFC3339, at)
		return &schedulingv1beta1.PodGroup{Status: schedulingv1beta1.PodGroupStatus{Conditions: []schedulingv1beta1.PodGroupCondition{
			{Type: typ, Status: corev1.ConditionTrue, Reason: "NotEnoughResources", Message: "gang unschedulable", LastTransitionTime: metav1.Time{Time: ts}}}}}
	}
	job := func(phase, at string) *unstructured.Unstructured {
		return volcanoJob("ns", "tj", map[string]any{"state": map[string]any{"phase": phase, "lastTransitionTime": at,
			"reason": "PodFailed", "message": "pod tj-trainer-0 failed"}})
	}
	for _, c := range []struct {
		name     string
		job      *unstructured.Unstructured
		pg       *schedulingv1beta1.PodGroup
		wantType string
	}{
		{"nothing reported", volcanoJob("ns", "tj", nil), nil, ""},
		{"the job's phase alone", job("Pending", "2026-01-01T00:00:00Z"), nil, "Pending"},
		{"the gang later than the phase", job("Pending", "2026-01-01T00:00:00Z"), pg("Unschedulable", "2026-01-01T00:00:05Z"), "Unschedulable"},
		{"a tie: the pod group says more", job("Running", "2026-01-01T00:00:05Z"), pg("Scheduled", "2026-01-01T00:00:05Z"), "Scheduled"},
		{"the job failed since", job("Failed", "2026-01-01T00:01:00Z"), pg("Scheduled", "2026-01-01T00:00:05Z"), "Failed"},
	} {
		got, ok := LastJobCondition(c.job, c.pg)
		if c.wantType == "" {
			assert.False(t, ok, c.name)
			continue
		}
		require.True(t, ok, c.name)
		assert.Equal(t, c.wantType, got.Type, c.name)
		if c.wantType == "Failed" {
			assert.Equal(t, "PodFailed", got.Reason)
			assert.Equal(t, "pod tj-trainer-0 failed", got.Message)
		}
	}
}

func TestVolcanoTaskCounts(t *testing.T) {
	p := func(task string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"volcano.sh/task-spec": task}}, Status: corev1.PodStatus{Phase: phase}}
	}
	got := VolcanoTaskCounts(volcanoJob("ns", "tj", nil, "pserver", "trainer"),
		[]corev1.Pod{p("pserver", corev1.PodRunning), p("trainer", corev1.PodSucceeded), p("trainer", corev1.PodPending)})
	assert.Equal(t, map[string]health.Counts{
		"pserver": {Running: 1},
		"trainer": {Pending: 1, Succeeded: 1},
	}, got)
	assert.Equal(t, map[string]health.Counts{"pserver": {}}, VolcanoTaskCounts(volcanoJob("ns", "tj", nil, "pserver"), nil),
		"a task without pods counts zeros")
}

// setRequests sets the requests of every container of a Volcano Job's tasks.
func setRequests(job *unstructured.Unstructured, requests map[string]any) {
	tasks, _, _ := unstructured.NestedSlice(job.Object, "spec", "tasks")
	for _, t := range tasks {
		spec := t.(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		for _, c := range spec["containers"].([]any) {
			c.(map[string]any)["resources"] = map[string]any{"requests": requests}
		}
	}
	_ = unstructured.SetNestedSlice(job.Object, tasks, "spec", "tasks")
}

// applyOne applies u alone.
func applyOne(t *testing.T, c *Client, u *unstructured.Unstructured) {
	t.Helper()
	_, err := c.Apply(context.Background(), stack.Set{{Key: stack.Key(u), Object: u}})
	require.NoError(t, err)
}

// deploymentOn is a Deployment whose one pod fits only on node.
func deploymentOn(ns, name string, node *kubetest.Node) *unstructured.Unstructured {
	res := map[string]any{string(node.Resource): "1"}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "example.com/nope:v1",
					"resources": map[string]any{"requests": res, "limits": res}}}}}}}}
}

// TestWaitFor_NamesWhatPodsReport: a pod that cannot pull its image for a reason that may
// pass (throttling) keeps the wait going; the progress lines and the error of the timeout
// name the reason.
func TestWaitFor_NamesWhatPodsReport(t *testing.T) {
	c, cs, ns, lines := liveClient(t)
	node := kubetest.StartNode(t, cs)
	node.SetPodStatus(kubetest.Waiting(corev1.PodPending, health.ReasonImagePullBackOff, "429 Too Many Requests: toomanyrequests", 0, nil))
	dep := deploymentOn(ns, "throttled", node)
	applyOne(t, c, dep)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	_, err := c.WaitFor(ctx, dep, DeploymentAvailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Regexp(t, `Deployment .*/throttled did not become ready in time \(last state: 0/1 replicas available; pod throttled-\w+-\w+ container c: `+
		`ImagePullBackOff: 429 Too Many Requests: toomanyrequests\)`, err.Error())
	assert.Regexp(t, `Deployment .*/throttled: 0/1 replicas available; pod throttled-\w+-\w+ container c: ImagePullBackOff`, strings.Join(*lines, "\n"))
}

// TestWaitFor_PermanentProblemEndsTheWait: an image that does not exist ends the wait at once
// with a FailedError that says what to do.
func TestWaitFor_PermanentProblemEndsTheWait(t *testing.T) {
	c, cs, ns, _ := liveClient(t)
	node := kubetest.StartNode(t, cs)
	node.SetPodStatus(kubetest.Waiting(corev1.PodPending, health.ReasonErrImagePull, `example.com/nope:v1: not found`, 0, nil))
	dep := deploymentOn(ns, "missing", node)
	applyOne(t, c, dep)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := c.WaitFor(ctx, dep, DeploymentAvailable)
	var failed *FailedError
	require.True(t, errors.As(err, &failed), "want a FailedError, got %v", err)
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Regexp(t, `^Deployment .*/missing will not become ready: pod missing-\w+-\w+ container c: ErrImagePull: example.com/nope:v1: not found$`, err.Error())
	assert.Contains(t, Hint(err), "Check the image name")
}

// TestWaitFor_GangUnschedulable: a Volcano Job whose gang cannot be placed: the timeout's
// error carries the scheduler's reason from the pod group.
func TestWaitFor_GangUnschedulable(t *testing.T) {
	c, _, ns, _ := liveClient(t)
	job := volcanoJob(ns, "big", nil, "ps")
	setRequests(job, map[string]any{"cpu": "40"}) // more than a node has
	applyOne(t, c, job)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	_, err := c.WaitFor(ctx, job, VolcanoJobRunning)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Regexp(t, `phase Pending, 0 pods running, 1 pending, gang of 1; pod group big-[-0-9a-f]+: Unschedulable \(NotEnoughResources\): .*Insufficient cpu`, err.Error())
}

// TestWaitPodsReady_CrashLoop: the job's pods run, but a container keeps crashing: the wait
// for ready pods ends with a FailedError once it restarted CrashLoopLimit times.
func TestWaitPodsReady_CrashLoop(t *testing.T) {
	c, cs, ns, _ := liveClient(t)
	node := kubetest.StartNode(t, cs)
	node.SetPodStatus(kubetest.Waiting(corev1.PodRunning, health.ReasonCrashLoopBackOff, "back-off", health.CrashLoopLimit,
		&corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}))
	dep := deploymentOn(ns, "crashing", node)
	applyOne(t, c, dep)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live, err := c.Get(ctx, dep)
	require.NoError(t, err)
	err = c.WaitPodsReady(ctx, live, 1)
	var failed *FailedError
	require.True(t, errors.As(err, &failed), "want a FailedError, got %v", err)
	assert.Contains(t, err.Error(), "CrashLoopBackOff: restarted 3 times, last exit code 1 (Error)")
}
