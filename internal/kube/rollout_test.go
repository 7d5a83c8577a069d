package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube/health"
	"github.com/elasticctr/terraform-provider-ctr/internal/kube/kubetest"
)

// shard writes the replicas of a StatefulSet "s" as a string: one letter per ordinal, u/o for
// a pod at the update or an older revision (upper case when Ready), t for one being deleted
// and - for none: "Uo-" is replica 0 updated and serving, 1 older and not serving, 2 missing.
func shard(s string) []Replica {
	var out []Replica
	for i, c := range s {
		if c == '-' {
			continue
		}
		l := strings.ToLower(string(c))
		out = append(out, Replica{Pod: fmt.Sprintf("s-%d", i), Ordinal: i, Updated: l == "u", Ready: l != string(c), Terminating: l == "t"})
	}
	return out
}

// TestEvictions: the guarded rollout never takes the last serving replica of a shard. It
// replaces what does not serve at once, a serving replica only while every other replica
// serves, one at a time, highest ordinal first; and it is done when every replica runs the
// update revision, Ready or not.
func TestEvictions(t *testing.T) {
	for _, c := range []struct {
		pods  string
		want  int
		evict []string
		wait  string // in what it says it waits for; "" when done
	}{
		{"UU", 2, nil, ""},
		{"uu", 2, nil, ""},                        // a cube with no model yet: done, not waiting for Ready
		{"OO", 2, []string{"s-1"}, "every other"}, // every replica serves: the highest goes
		{"OOO", 3, []string{"s-2"}, "every other"},
		{"OU", 2, []string{"s-0"}, "every other"},
		{"Ou", 2, nil, "replica 1 to serve"}, // replica 1 was replaced and does not serve yet: 0 is the last
		{"Ot", 2, nil, "replica 1 to serve"}, // replica 1 is being deleted
		{"O-", 2, nil, "replica 1 to serve"}, // replica 1 is being created
		{"OoO", 3, []string{"s-1"}, "not serving"},
		{"oo", 2, []string{"s-1", "s-0"}, "not serving"}, // nothing serves: nothing to keep
		{"Oo", 2, []string{"s-1"}, "not serving"},
		{"O", 1, []string{"s-0"}, "every other"}, // one replica: no other to keep serving
		{"UUO", 2, nil, ""},                      // replica 2 is scaled away by the controller
		{"u-", 2, nil, "created"},
		{"U-", 2, nil, "created"},
	} {
		evict, wait := Evictions(c.want, shard(c.pods))
		assert.Equal(t, c.evict, evict, "%s of %d", c.pods, c.want)
		if c.wait == "" {
			assert.Empty(t, wait, "%s of %d", c.pods, c.want)
		} else {
			assert.Contains(t, wait, c.wait, "%s of %d", c.pods, c.want)
		}
	}
}

// TestEvictions_NeverTheLastServing plays every shard of up to four replicas, each replica
// in each state, and checks the one rule: after the evictions, some replica still serves if
// one served before.
func TestEvictions_NeverTheLastServing(t *testing.T) {
	states := "UuOot-"
	for want := 2; want <= 4; want++ {
		n := 1
		for range want {
			n *= len(states)
		}
		for code := range n {
			var b strings.Builder
			for c := code; b.Len() < want; c /= len(states) {
				b.WriteByte(states[c%len(states)])
			}
			pods := shard(b.String())
			evict, _ := Evictions(want, pods)
			before, after, taken := 0, 0, 0
			for _, p := range pods {
				if p.Ready && !p.Terminating {
					before++
					if slices.Contains(evict, p.Pod) {
						taken++
					} else {
						after++
					}
				}
			}
			assert.False(t, before > 0 && after == 0, "%s: evicting %v takes the last serving replica", b.String(), evict)
			assert.LessOrEqual(t, taken, 1, "%s: evicting %v takes two serving replicas at once", b.String(), evict)
		}
	}
}

// TestReplicas reads ordinals from the pods' names and revisions from their labels, and
// leaves pods that are not the StatefulSet's own (another set's, set-10a) out.
func TestReplicas(t *testing.T) {
	pod := func(name, rev string, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}}}
		p.Status.Phase = corev1.PodRunning
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	got := Replicas("c-shard-1", "c-shard-1-new", []corev1.Pod{
		pod("c-shard-1-0", "c-shard-1-new", true), pod("c-shard-1-1", "c-shard-1-old", false),
		pod("c-shard-1-1a", "c-shard-1-new", true), pod("c-shard-10-0", "c-shard-10-new", true), pod("c-shard-1-01", "c-shard-1-new", true),
	})
	assert.Equal(t, []Replica{
		{Pod: "c-shard-1-0", Ordinal: 0, Updated: true, Ready: true},
		{Pod: "c-shard-1-1", Ordinal: 1},
	}, got)
}

// TestProject_UnfinishedRolloutIsDrift: a StatefulSet that ctr rolls (OnDelete) whose
// controller counts pods of an older revision projects with status.ctr-rollout, which the
// desired object never has; with every pod updated, or before the controller saw the
// generation, or for a RollingUpdate StatefulSet, it projects without.
func TestProject_UnfinishedRolloutIsDrift(t *testing.T) {
	desired := func(strategy string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
			"metadata": map[string]any{"name": "s"}, "spec": map[string]any{"replicas": int64(2), "updateStrategy": map[string]any{"type": strategy}}}}
	}
	live := func(gen, observed, pods, updated int64) *unstructured.Unstructured {
		u := desired("OnDelete").DeepCopy()
		u.SetGeneration(gen)
		u.Object["status"] = map[string]any{"observedGeneration": observed, "replicas": pods, "updatedReplicas": updated}
		return u
	}
	for _, c := range []struct {
		strategy string
		live     *unstructured.Unstructured
		marked   bool
	}{
		{"OnDelete", live(2, 2, 2, 1), true},
		{"OnDelete", live(2, 2, 2, 0), true},
		{"OnDelete", live(2, 2, 2, 2), false},
		{"OnDelete", live(2, 1, 2, 0), false}, // the controller has not seen the new template yet
		{"RollingUpdate", live(2, 2, 2, 1), false},
	} {
		p := Project(desired(c.strategy), c.live)
		msg, found, _ := unstructured.NestedString(p.Object, "status", UnfinishedRolloutField)
		assert.Equal(t, c.marked, found, "%s %v", c.strategy, c.live.Object["status"])
		if c.marked {
			assert.Contains(t, msg, "pods run an older revision")
		}
		drifted := DriftedFields(desired(c.strategy), c.live)
		assert.Equal(t, c.marked, slices.Contains(drifted, "status."+UnfinishedRolloutField), "%v", drifted)
	}
}

// statefulSetOn is a StatefulSet of replicas pods placed on node, which ctr rolls (OnDelete),
// whose template carries the label v.
func statefulSetOn(ns, name, v string, replicas int64, node *kubetest.Node) *unstructured.Unstructured {
	res := map[string]any{string(node.Resource): "1"}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
			"updateStrategy": map[string]any{"type": "OnDelete"},
			"selector":       map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name, "v": v}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "example.com/cube:" + v,
					"resources": map[string]any{"requests": res, "limits": res}}}}}}}}
}

// TestRollOut_NeverTheLastServingReplica: a StatefulSet of two serving replicas gets a new
// template. RollOut replaces replica 1; its replacement does not serve (no model yet), so
// RollOut waits, replica 0 serving alone, and says so; once the new replica 1 serves, it
// replaces replica 0 and ends when both run the new template. A watcher sees a serving replica
// at every moment.
func TestRollOut_NeverTheLastServingReplica(t *testing.T) {
	c, cs, ns, lines := liveClient(t)
	node := kubetest.StartNode(t, cs)
	var newServes atomic.Bool
	node.SetPodStatus(func(p *corev1.Pod, st *corev1.PodStatus) {
		if p.Labels["v"] == "1" || newServes.Load() {
			kubetest.Running()(p, st)
		} else {
			kubetest.NotReady()(p, st)
		}
	})
	applyOne(t, c, statefulSetOn(ns, "s", "1", 2, node))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := func() []corev1.Pod {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=s"})
		require.NoError(t, err)
		return list.Items
	}
	servingPods := func() (n int, v1 []string) {
		for _, p := range pods() {
			if serving(&p) {
				n++
			}
			if p.Labels["v"] == "1" && p.DeletionTimestamp == nil {
				v1 = append(v1, p.Name)
			}
		}
		return n, v1
	}
	require.Eventually(t, func() bool { n, _ := servingPods(); return n == 2 }, time.Minute, 100*time.Millisecond, "two serving replicas")

	sts := statefulSetOn(ns, "s", "2", 2, node)
	applyOne(t, c, sts)
	done := make(chan error, 1)
	go func() { done <- c.RollOut(ctx, []*unstructured.Unstructured{sts}) }()
	// The watcher: some replica serves at every moment.
	stop := make(chan struct{})
	lost := make(chan string, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(lost)
				return
			case <-time.After(50 * time.Millisecond):
			}
			if n, _ := servingPods(); n == 0 {
				lost <- "no replica served"
				close(lost)
				return
			}
		}
	}()
	// Replica 1 is replaced; replica 0 then serves alone and stays, for as long as the new
	// replica 1 does not serve.
	require.Eventually(t, func() bool { _, v1 := servingPods(); return slices.Equal(v1, []string{"s-0"}) }, time.Minute, 100*time.Millisecond)
	time.Sleep(3 * RollOutEvery)
	_, v1 := servingPods()
	assert.Equal(t, []string{"s-0"}, v1, "replica 0, the last serving, was taken")
	select {
	case err := <-done:
		t.Fatalf("RollOut ended while replica 0 runs the old template: %v", err)
	default:
	}
	newServes.Store(true)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("RollOut did not end once the new replica served")
	}
	close(stop)
	if msg, ok := <-lost; ok {
		t.Fatal(msg)
	}
	for _, p := range pods() {
		if p.DeletionTimestamp == nil {
			assert.Equal(t, "2", p.Labels["v"], p.Name)
		}
	}
	log := strings.Join(*lines, "\n")
	assert.Contains(t, log, "evicting pod s-1")
	assert.Contains(t, log, "evicting pod s-0")
	assert.Contains(t, log, "waiting for replica 1 to serve before taking one that serves")
}

// TestRollOut_PermanentProblemEndsIt: a new template whose pods cannot pull their image ends
// the rollout with that problem, the old replica still serving.
func TestRollOut_PermanentProblemEndsIt(t *testing.T) {
	c, cs, ns, _ := liveClient(t)
	node := kubetest.StartNode(t, cs)
	node.SetPodStatus(func(p *corev1.Pod, st *corev1.PodStatus) {
		if p.Labels["v"] == "1" {
			kubetest.Running()(p, st)
		} else {
			kubetest.Waiting(corev1.PodPending, health.ReasonErrImagePull, "example.com/cube:2: not found", 0, nil)(p, st)
		}
	})
	applyOne(t, c, statefulSetOn(ns, "s", "1", 2, node))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.Eventually(t, func() bool {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=s"})
		require.NoError(t, err)
		n := 0
		for _, p := range list.Items {
			if serving(&p) {
				n++
			}
		}
		return n == 2
	}, time.Minute, 100*time.Millisecond)
	sts := statefulSetOn(ns, "s", "2", 2, node)
	applyOne(t, c, sts)
	err := c.RollOut(ctx, []*unstructured.Unstructured{sts})
	var failed *FailedError
	require.True(t, errors.As(err, &failed), "want a FailedError, got %v", err)
	assert.Contains(t, err.Error(), "ErrImagePull")
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "s-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1", p.Labels["v"])
	assert.True(t, serving(p), "replica 0 still serves")
}

// TestApply_TurnsARollingUpdateStatefulSetOnDelete: a StatefulSet applied RollingUpdate (what
// earlier releases rendered for a cube's shards), with or without a rollingUpdate block (the
// API server defaults one when the type is left out, and no manager owns it then), is applied
// OnDelete: the StatefulSet is OnDelete with no block.
func TestApply_TurnsARollingUpdateStatefulSetOnDelete(t *testing.T) {
	c, cs, ns, _ := liveClient(t)
	node := kubetest.StartNode(t, cs)
	ctx := context.Background()
	for _, name := range []string{"typed", "defaulted"} {
		old := statefulSetOn(ns, name, "1", 1, node)
		if name == "typed" {
			require.NoError(t, unstructured.SetNestedField(old.Object, "RollingUpdate", "spec", "updateStrategy", "type"))
			applyOne(t, c, old)
		} else {
			unstructured.RemoveNestedField(old.Object, "spec", "updateStrategy")
			sts := &appsv1.StatefulSet{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(old.Object, sts))
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
			require.NoError(t, err)
			live, err := cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			require.NotNil(t, live.Spec.UpdateStrategy.RollingUpdate, "the API server defaults the block")
		}
		applyOne(t, c, statefulSetOn(ns, name, "1", 1, node))
		live, err := cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, live.Spec.UpdateStrategy.Type, name)
		assert.Nil(t, live.Spec.UpdateStrategy.RollingUpdate, name)
	}
}
