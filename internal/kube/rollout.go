package kube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube/health"
)

// A guarded rollout replaces the pods of StatefulSets whose update strategy is OnDelete (the
// controller replaces nothing by itself) so that each one keeps serving: a pod that is not
// Ready serves nothing and goes at once; a Ready one goes only when every other replica of its
// StatefulSet is Ready, one at a time. Pods go through the eviction API, so that a
// PodDisruptionBudget guards the rollout as it guards a drain. One replica is never more than
// one pod, so a StatefulSet of one replica is out of service while its pod is replaced.

// Replica is one pod of a StatefulSet as the guarded rollout judges it.
type Replica struct {
	Pod         string
	Ordinal     int
	Updated     bool // at the StatefulSet's update revision
	Ready       bool
	Terminating bool
}

// Evictions is the guarded rollout's next step for one StatefulSet of want replicas whose
// pods are pods: the pods to evict now (highest ordinal first), and what it waits for
// otherwise ("" once every replica runs the update revision).
func Evictions(want int, pods []Replica) (evict []string, waiting string) {
	byOrdinal := map[int]Replica{}
	for _, p := range pods {
		if p.Ordinal < want {
			byOrdinal[p.Ordinal] = p
		}
	}
	var outdated []Replica // not being deleted, at an older revision: what is left to replace
	ready, gone := 0, []string{}
	for o := range want {
		p, ok := byOrdinal[o]
		switch {
		case !ok || p.Terminating:
			gone = append(gone, strconv.Itoa(o))
		case !p.Updated:
			outdated = append(outdated, p)
		}
		if ok && !p.Terminating && p.Ready {
			ready++
		}
	}
	slices.Reverse(outdated)
	// What does not serve costs nothing to replace.
	for _, p := range outdated {
		if !p.Ready {
			evict = append(evict, p.Pod)
		}
	}
	if len(evict) > 0 {
		return evict, fmt.Sprintf("replacing %s (not serving)", strings.Join(evict, ", "))
	}
	switch {
	case len(outdated) == 0 && len(gone) == 0:
		return nil, ""
	case len(outdated) == 0:
		return nil, "waiting for replica " + strings.Join(gone, ", ") + " to be created at the update revision"
	case ready == want:
		return []string{outdated[0].Pod}, "replacing " + outdated[0].Pod + " (every other replica serves)"
	}
	var notServing []string
	for o := range want {
		if p, ok := byOrdinal[o]; !ok || p.Terminating || !p.Ready {
			notServing = append(notServing, strconv.Itoa(o))
		}
	}
	return nil, fmt.Sprintf("%d replica(s) still to replace; waiting for replica %s to serve before taking one that serves",
		len(outdated), strings.Join(notServing, ", "))
}

// RollOutEvery is how often RollOut looks at the pods it replaces.
var RollOutEvery = time.Second

// RollOut runs the guarded rollout of the live StatefulSets sets, all at once, until every
// replica of each runs its update revision (it does not wait for the last ones to be Ready),
// logging each eviction and, at least every ProgressEvery, what it waits for. A pod with a
// permanent problem (see health) ends it with a *FailedError; a refused eviction (the
// StatefulSet's PodDisruptionBudget allows none now) is tried again.
func (c *Client) RollOut(ctx context.Context, sets []*unstructured.Unstructured) error {
	if len(sets) == 0 {
		return nil
	}
	what := fmt.Sprintf("%d StatefulSet(s) in %s", len(sets), sets[0].GetNamespace())
	if len(sets) == 1 {
		what = Describe(sets[0])
	}
	evicted := map[string]bool{} // logged once each
	line, err := c.Poll(ctx, RollOutEvery, func(ctx context.Context) (bool, string, error) {
		var waits []string
		for _, set := range sets {
			st, err := c.rollStep(ctx, set, func(pod string) {
				if !evicted[pod] {
					evicted[pod] = true
					c.logf("%s: evicting pod %s to replace it at the update revision", Describe(set), pod)
				}
			})
			if err != nil {
				return false, "", err
			}
			if st != "" {
				waits = append(waits, set.GetName()+": "+st)
			}
		}
		return len(waits) == 0, what + ": rolling out one replica at a time: " + strings.Join(waits, "; "), nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s did not roll out in time (last state: %s): %w", what, line, ctx.Err())
	}
	return err
}

// rollStep reads set and its pods, evicts what Evictions says, and returns what it waits for.
func (c *Client) rollStep(ctx context.Context, set *unstructured.Unstructured, evicting func(pod string)) (string, error) {
	u, err := c.Get(ctx, set)
	if err != nil {
		return "", err
	}
	if u == nil {
		return "not created yet", nil
	}
	current, want := rollout(u)
	update, _, _ := unstructured.NestedString(u.Object, "status", "updateRevision")
	if !current || update == "" {
		return "its controller has not seen the current generation yet", nil
	}
	pods, err := c.Pods(ctx, u)
	if err != nil {
		return "", err
	}
	// A pod of an older revision with a problem is replaced like any that does not serve;
	// one of the update revision has it from the new template, which waiting does not fix.
	var updated []corev1.Pod
	for _, p := range pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == update {
			updated = append(updated, p)
		}
	}
	if pr, ok := health.FirstPermanent(health.Pods(updated)); ok {
		return "", &FailedError{Object: Describe(u), Problem: pr}
	}
	evict, waiting := Evictions(int(want), Replicas(u.GetName(), update, pods))
	for _, name := range evict {
		evicting(name)
		if err := c.evict(ctx, pods, name); err != nil {
			if apierrors.IsTooManyRequests(err) {
				return "its PodDisruptionBudget allows no eviction now: " + waiting, nil
			}
			return "", fmt.Errorf("evict pod %s/%s of %s: %w", u.GetNamespace(), name, Describe(u), err)
		}
	}
	return waiting, nil
}

// evict evicts the pod name of pods, that very pod (by UID): one that was replaced meanwhile
// is left alone.
func (c *Client) evict(ctx context.Context, pods []corev1.Pod, name string) error {
	for _, p := range pods {
		if p.Name != name {
			continue
		}
		err := c.cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone or replaced already
		}
		return err
	}
	return nil
}

// Replicas judges the pods of the StatefulSet named set against its update revision. A pod's
// ordinal is the suffix of its name (set-N); pods named otherwise are not the set's own.
func Replicas(set, update string, pods []corev1.Pod) []Replica {
	var out []Replica
	for i := range pods {
		p := &pods[i]
		suffix, ok := strings.CutPrefix(p.Name, set+"-")
		o, err := strconv.Atoi(suffix)
		if !ok || err != nil || o < 0 || strconv.Itoa(o) != suffix {
			continue
		}
		out = append(out, Replica{Pod: p.Name, Ordinal: o, Updated: p.Labels[appsv1.ControllerRevisionHashLabelKey] == update,
			Ready: serving(p), Terminating: p.DeletionTimestamp != nil})
	}
	return out
}

// serving reports whether a pod is Ready: what a Service's endpoints (and a
// PodDisruptionBudget) count as serving.
func serving(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
