package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube/health"
)

// WaitedMarker sits in the progress line WaitFor logs when a wait ends, between the object
// and how long it waited (a Go duration), e.g. "apps/v1 StatefulSet ns/x: ready after
// waiting 1.25s": benchmarks add these up to tell the waits from the rest of an apply.
const WaitedMarker = ": ready after waiting "

// PodCheckEvery is how often a wait looks at the pods of the workload it waits for.
const PodCheckEvery = time.Second

// Condition looks at the live object and says whether the wait is over, with a short
// description of the current state for progress logs. An error ends the wait.
type Condition func(u *unstructured.Unstructured) (done bool, state string, err error)

// FailedError ends a wait that waiting cannot bring to an end: a pod of the workload has a
// permanent problem (an image that does not exist, a container that keeps crashing or runs
// out of memory).
type FailedError struct {
	Object  string // the object waited for, as Describe names it
	Problem health.Problem
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%s will not become ready: %s", e.Object, e.Problem)
}

// Hint says what to do about an error of a wait: the hint of a permanent problem, else "".
func Hint(err error) string {
	var f *FailedError
	if errors.As(err, &f) {
		return f.Problem.Hint
	}
	return ""
}

// progress is what a wait logs: the object's state and what its pods report, one line
// whenever either changes and at least every ProgressEvery. The watch callback, the pod
// checker and the heartbeat each run on their own goroutine; all three go through mu, so
// that a line is never logged twice nor lost between a change and a heartbeat.
type progress struct {
	c       *Client
	what    string
	mu      sync.Mutex
	state   string // the object's, from its Condition; "" until the object is seen
	pods    string // health.Summary of its pods; "" when nothing is wrong
	earlier string // the last pods summary that was not "", for errors: pods come and go
	lastLog time.Time
}

func (p *progress) line() string {
	s := p.state
	if s == "" {
		s = "not created yet"
	}
	if p.pods != "" {
		s += "; " + p.pods
	}
	return s
}

// set records a new state or pods summary (nil: unchanged) and logs the line if it changed.
func (p *progress) set(state, pods *string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := p.line()
	if state != nil {
		p.state = *state
	}
	if pods != nil {
		p.pods = *pods
		if p.pods != "" {
			p.earlier = p.pods
		}
	}
	if now := p.line(); now != before || p.lastLog.IsZero() {
		p.c.logf("%s: %s", p.what, now)
		p.lastLog = time.Now()
	}
}

// heartbeat logs the line again when nothing changed for ProgressEvery, until done closes.
func (p *progress) heartbeat(done <-chan struct{}) {
	ticker := time.NewTicker(p.c.ProgressEvery / 4)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
			p.mu.Lock()
			if time.Since(p.lastLog) >= p.c.ProgressEvery {
				p.c.logf("%s: still waiting (%s)", p.what, p.line())
				p.lastLog = time.Now()
			}
			p.mu.Unlock()
		}
	}
}

// final is the line for an error: the last state, and what the pods last reported (even if
// those pods are gone by now).
func (p *progress) final() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == "" && p.earlier == "" {
		return "not seen"
	}
	s := p.line()
	if p.pods == "" && p.earlier != "" {
		s += "; earlier: " + p.earlier
	}
	return s
}

// WaitFor watches one object until cond is met or ctx ends, logging the state whenever it
// changes and at least every ProgressEvery. It lists first, so an object that is already
// there in the wanted state returns at once; a missing object is waited for.
//
// While it waits it looks at the object's pods (and a Volcano Job's pod group) every
// PodCheckEvery: what they report (Unschedulable, ImagePullBackOff, CrashLoopBackOff,
// OOMKilled, ...) joins the progress lines and the error of a wait that runs out of time,
// and a permanent problem ends the wait at once with a *FailedError.
func (c *Client) WaitFor(ctx context.Context, obj *unstructured.Unstructured, cond Condition) (*unstructured.Unstructured, error) {
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
	p := &progress{c: c, what: Describe(obj), lastLog: time.Now()}
	start := time.Now()
	done := make(chan struct{})
	defer close(done)
	go p.heartbeat(done)
	// The pod checker looks at the pods of the object the watch saw last; a permanent
	// problem cancels the watch with a FailedError as the cause.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var seen atomic.Pointer[unstructured.Unstructured]
	go c.checkPods(wctx, &seen, p, cancel, done)

	var result *unstructured.Unstructured
	_, err = watchtools.UntilWithSync(wctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		seen.Store(u)
		ok, state, err := cond(u)
		p.set(&state, nil)
		if ok {
			result = u
		}
		return ok, err
	})
	if err != nil {
		var failed *FailedError
		switch {
		case errors.As(context.Cause(wctx), &failed):
			return nil, failed
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s did not become ready in time (last state: %s): %w", Describe(obj), p.final(), ctx.Err())
		}
		// The object failed (a Volcano job Failed): what its pods say now tells why.
		if u := seen.Load(); u != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PodCheckEvery)
			if problems, perr := c.Problems(rctx, u); perr == nil {
				summary := health.Summary(problems)
				p.set(nil, &summary)
			}
			cancel()
		}
		return nil, fmt.Errorf("%s: %w (last state: %s)", Describe(obj), err, p.final())
	}
	c.logf("%s%s%s", Describe(obj), WaitedMarker, time.Since(start).Round(time.Millisecond))
	return result, nil
}

// checkPods classifies the pods of the object last seen every PodCheckEvery until done
// closes, reporting to p, and cancels with a FailedError on a permanent problem.
func (c *Client) checkPods(ctx context.Context, seen *atomic.Pointer[unstructured.Unstructured], p *progress, cancel context.CancelCauseFunc, done <-chan struct{}) {
	ticker := time.NewTicker(PodCheckEvery)
	defer ticker.Stop()
	warned := false
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
		}
		u := seen.Load()
		if u == nil {
			continue
		}
		problems, err := c.Problems(ctx, u)
		if err != nil {
			if !warned && ctx.Err() == nil {
				c.logf("%s: could not look at its pods: %s", p.what, err)
				warned = true
			}
			continue
		}
		summary := health.Summary(problems)
		p.set(nil, &summary)
		if pr, ok := health.FirstPermanent(problems); ok {
			cancel(&FailedError{Object: p.what, Problem: pr})
			return
		}
	}
}

// rollout reads what a Deployment's or a StatefulSet's rollout is judged by: whether its
// controller has seen the current generation, and the replicas it wants (1 when unset).
func rollout(u *unstructured.Unstructured) (current bool, want int64) {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	want, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		want = 1
	}
	return observed >= u.GetGeneration(), want
}

// DeploymentAvailable is met when the Deployment's current generation has all replicas
// updated and available.
func DeploymentAvailable(u *unstructured.Unstructured) (bool, string, error) {
	current, want := rollout(u)
	updated, _, _ := unstructured.NestedInt64(u.Object, "status", "updatedReplicas")
	avail, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
	state := fmt.Sprintf("%d/%d replicas available", avail, want)
	if msg := conditionMessage(u, "ReplicaFailure"); msg != "" {
		state += "; ReplicaFailure: " + msg // pods that cannot even be created (quota, admission)
	}
	return current && updated == want && avail == want, state, nil
}

// conditionMessage is the message of a true status condition of the given type, or "".
func conditionMessage(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			msg, _ := m["message"].(string)
			return msg
		}
	}
	return ""
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
	if err := volcanoJobFailed(u, phase); err != nil {
		return false, state, err
	}
	return phase == "Running" || phase == "Completed", state, nil
}

// VolcanoJobSubmitted is met as soon as Volcano has taken the job: its controller gave it a
// phase (and made its pod group). A job that already failed ends the wait with the reason.
func VolcanoJobSubmitted(u *unstructured.Unstructured) (bool, string, error) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "state", "phase")
	state := "not taken by Volcano's controller yet"
	if phase != "" {
		state = "phase " + phase
	}
	if err := volcanoJobFailed(u, phase); err != nil {
		return false, state, err
	}
	return phase != "", state, nil
}

// VolcanoJobCompleted is met when the job has completed (its trainers finished); a job that
// failed, aborted or terminated ends the wait with Volcano's own reason.
func VolcanoJobCompleted(u *unstructured.Unstructured) (bool, string, error) {
	phase := VolcanoJobPhase(u)
	_, state, err := VolcanoJobRunning(u)
	return phase == "Completed", state, err
}

// volcanoJobFailed is the error of a job in a phase it will not leave by itself.
func volcanoJobFailed(u *unstructured.Unstructured, phase string) error {
	switch phase {
	case "Failed", "Aborted", "Terminated":
		reason, _, _ := unstructured.NestedString(u.Object, "status", "state", "reason")
		msg, _, _ := unstructured.NestedString(u.Object, "status", "state", "message")
		because := strings.TrimSpace(reason + " " + msg)
		if because != "" {
			because = ": " + because
		}
		return fmt.Errorf("the job is %s%s", phase, because)
	}
	return nil
}

// StatefulSetRolledOut is met when every pod of the StatefulSet's current generation exists
// at the current revision. It does not wait for readiness: cube pods turn Ready only when
// they serve a model, which may come long after the apply.
func StatefulSetRolledOut(u *unstructured.Unstructured) (bool, string, error) {
	current, want := rollout(u)
	have, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	updated, _, _ := unstructured.NestedInt64(u.Object, "status", "updatedReplicas")
	ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	state := fmt.Sprintf("%d/%d pods at the current revision, %d serving", updated, want, ready)
	return current && have == want && updated == want, state, nil
}

// LoadBalancerHost is the address a Service of type LoadBalancer got from its load balancer
// (status.loadBalancer.ingress[0]: the IP, else the hostname), or "" while it has none.
func LoadBalancerHost(u *unstructured.Unstructured) string {
	ingress, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
	if len(ingress) == 0 {
		return ""
	}
	first, _ := ingress[0].(map[string]any)
	if ip, _ := first["ip"].(string); ip != "" {
		return ip
	}
	host, _ := first["hostname"].(string)
	return host
}

// LoadBalancerReady is met when a Service has an address from its load balancer.
func LoadBalancerReady(u *unstructured.Unstructured) (bool, string, error) {
	if h := LoadBalancerHost(u); h != "" {
		return true, "load balancer address " + h, nil
	}
	return false, "no load balancer address yet (the cloud's load balancer controller sets it)", nil
}
