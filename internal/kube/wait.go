package kube

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// WaitedMarker sits in the progress line WaitFor logs when a wait ends, between the object
// and how long it waited (a Go duration), e.g. "apps/v1 StatefulSet ns/x: ready after
// waiting 1.25s": benchmarks add these up to tell the waits from the rest of an apply.
const WaitedMarker = ": ready after waiting "

// Condition looks at the live object and says whether the wait is over, with a short
// description of the current state for progress logs. An error ends the wait.
type Condition func(u *unstructured.Unstructured) (done bool, state string, err error)

// WaitFor watches one object until cond is met or ctx ends, logging the state whenever it
// changes and at least every ProgressEvery. It lists first, so an object that is already
// there in the wanted state returns at once; a missing object is waited for.
func (c *Client) WaitFor(ctx context.Context, obj *unstructured.Unstructured, cond Condition) (*unstructured.Unstructured, error) {
	interval := c.ProgressEvery
	ri, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	sel := fields.OneTermEqualSelector("metadata.name", obj.GetName()).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return ri.Watch(ctx, o)
		},
	}
	lastState := ""
	var result *unstructured.Unstructured
	start := time.Now()
	// Heartbeat: the watch callback sends each new state; this goroutine alone keeps the
	// time of the last line, so a quiet object still produces a progress line per interval.
	done := make(chan struct{})
	defer close(done)
	stateCh := make(chan string, 8)
	go func() {
		cur, lastLog := "not created yet", time.Now()
		ticker := time.NewTicker(interval / 4)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case cur = <-stateCh:
				lastLog = time.Now()
			case <-ticker.C:
				if time.Since(lastLog) >= interval {
					c.logf("%s: still waiting (%s)", Describe(obj), cur)
					lastLog = time.Now()
				}
			}
		}
	}()
	_, err = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		ok, state, err := cond(u)
		if state != lastState {
			c.logf("%s: %s", Describe(obj), state)
			lastState = state
			select {
			case stateCh <- state:
			default: // the heartbeat is behind; it will catch up with a later state
			}
		}
		if ok {
			result = u
		}
		return ok, err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s did not become ready in time (last state: %s): %w", Describe(obj), orUnknown(lastState), ctx.Err())
		}
		return nil, fmt.Errorf("waiting for %s: %w", Describe(obj), err)
	}
	c.logf("%s%s%s", Describe(obj), WaitedMarker, time.Since(start).Round(time.Millisecond))
	return result, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "not seen"
	}
	return s
}

// DeploymentAvailable is met when the Deployment's current generation has all replicas
// updated and available.
func DeploymentAvailable(u *unstructured.Unstructured) (bool, string, error) {
	gen := u.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	want, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		want = 1
	}
	updated, _, _ := unstructured.NestedInt64(u.Object, "status", "updatedReplicas")
	avail, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
	state := fmt.Sprintf("%d/%d replicas available", avail, want)
	return observed >= gen && updated == want && avail == want, state, nil
}

// VolcanoJobPhase is the phase of a Volcano Job (Pending, Running, Completed, Failed, …).
func VolcanoJobPhase(u *unstructured.Unstructured) string {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "state", "phase")
	if phase == "" {
		return "Pending"
	}
	return phase
}

// VolcanoJobRunning is met when the job runs or has completed; a job that failed, aborted
// or terminated ends the wait with Volcano's own reason.
func VolcanoJobRunning(u *unstructured.Unstructured) (bool, string, error) {
	phase := VolcanoJobPhase(u)
	running, _, _ := unstructured.NestedInt64(u.Object, "status", "running")
	pending, _, _ := unstructured.NestedInt64(u.Object, "status", "pending")
	minAvail, _, _ := unstructured.NestedInt64(u.Object, "spec", "minAvailable")
	state := fmt.Sprintf("phase %s, %d pods running, %d pending, gang of %d", phase, running, pending, minAvail)
	switch phase {
	case "Running", "Completed":
		return true, state, nil
	case "Failed", "Aborted", "Terminated":
		reason, _, _ := unstructured.NestedString(u.Object, "status", "state", "reason")
		msg, _, _ := unstructured.NestedString(u.Object, "status", "state", "message")
		return false, state, fmt.Errorf("volcano job %s/%s is %s: %s %s", u.GetNamespace(), u.GetName(), phase, reason, msg)
	}
	return false, state, nil
}

// StatefulSetRolledOut is met when every pod of the StatefulSet's current generation exists
// at the current revision. It does not wait for readiness: cube pods turn Ready only when
// they serve a model, which may come long after the apply.
func StatefulSetRolledOut(u *unstructured.Unstructured) (bool, string, error) {
	gen := u.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	want, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		want = 1
	}
	have, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	updated, _, _ := unstructured.NestedInt64(u.Object, "status", "updatedReplicas")
	ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	state := fmt.Sprintf("%d/%d pods at the current revision, %d serving", updated, want, ready)
	return observed >= gen && have == want && updated == want, state, nil
}
