// Package kubetest plays the kubelet of one node in tests, so that a test decides what the
// pods placed there report (ImagePullBackOff, CrashLoopBackOff, OOMKilled, Succeeded), which
// kwok's simulated nodes, turning every pod Running, cannot do.
package kubetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// Node is a node that no kubelet and no kwok runs; the test is its kubelet. It alone has the
// extended resource Resource: pods that ask for one (request and limit "1"), or that select
// the node by its hostname label, land here and nowhere else. Other tests run at the same time
// against the same cluster: a taint makes the schedulers prefer every other node for their
// pods, and any of them that lands here all the same runs as on a kwok node.
type Node struct {
	Name     string
	Resource corev1.ResourceName

	cs     kubernetes.Interface
	mu     sync.Mutex
	status PodStatus
}

// PodStatus says what status a pod on the node should have now: it changes st, a copy of the
// pod's status, and the node writes it when it differs. It must be deterministic (no clock),
// since it is asked again every round.
type PodStatus func(p *corev1.Pod, st *corev1.PodStatus)

// preferOthers keeps other tests' pods away unless no other node fits them.
var preferOthers = corev1.Taint{Key: "test.elasticctr.io/kubelet", Value: "test", Effect: corev1.TaintEffectPreferNoSchedule}

// heartbeatEvery keeps the node Ready for the node lifecycle controller (grace 40 s or more).
const heartbeatEvery = 10 * time.Second

// kubeletEvery is how often the node looks at its pods.
const kubeletEvery = 300 * time.Millisecond

// StartNode registers a Ready node and plays its kubelet until the test ends: it writes the
// status that SetPodStatus asks for, and removes pods being deleted, as a kubelet confirms a
// deletion. At the end it removes its pods and itself.
func StartNode(t testing.TB, cs kubernetes.Interface) *Node {
	t.Helper()
	name := "ctr-test-" + rand.String(6)
	n := &Node{Name: name, Resource: corev1.ResourceName("test.elasticctr.io/" + name), cs: cs}
	ctx, cancel := context.WithCancel(context.Background())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "type": "ctr-test"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{preferOthers}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		cancel()
		t.Fatalf("create node %s: %v", name, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		n.removePods(context.Background())
		_ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if err := n.heartbeat(ctx); err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	if err := n.waitUntainted(ctx); err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		beat, look := time.NewTicker(heartbeatEvery), time.NewTicker(kubeletEvery)
		defer beat.Stop()
		defer look.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-beat.C:
				if err := n.heartbeat(ctx); err != nil && ctx.Err() == nil {
					t.Logf("node %s: heartbeat: %v", name, err)
				}
			case <-look.C:
				n.kubelet(ctx, t)
			}
		}
	}()
	return n
}

// SetPodStatus sets what the node reports for its pods from now on (nil: leave them).
func (n *Node) SetPodStatus(s PodStatus) {
	n.mu.Lock()
	n.status = s
	n.mu.Unlock()
}

// Requests is the resource map that places a pod on the node, as HCL: `{ "<resource>" = "1" }`.
func (n *Node) Requests() string { return fmt.Sprintf(`{ %q = "1" }`, n.Resource) }

func (n *Node) heartbeat(ctx context.Context) error {
	// The node lifecycle controller writes the node too (its taints): retry on a conflict.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return n.beat(ctx) })
}

func (n *Node) beat(ctx context.Context) error {
	node, err := n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("50"), n.Resource: resource.MustParse("100")}
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	node.Status.Phase = corev1.NodeRunning
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "the test plays this node's kubelet", LastHeartbeatTime: now, LastTransitionTime: node.CreationTimestamp}}
	_, err = n.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// waitUntainted waits until the node lifecycle controller has lifted the not-ready taint it
// puts on a new node.
func (n *Node) waitUntainted(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		node, err := n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(node.Spec.Taints) == 1 && node.Spec.Taints[0].MatchTaint(&preferOthers) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still tainted after 30s: %v", node.Spec.Taints)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Node) pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := n.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// kubelet does one round: confirms deletions and writes the status the test asks for.
func (n *Node) kubelet(ctx context.Context, t testing.TB) {
	pods, err := n.pods(ctx)
	if err != nil {
		return
	}
	n.mu.Lock()
	status := n.status
	n.mu.Unlock()
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			n.forceDelete(ctx, p)
			continue
		}
		st := p.Status.DeepCopy()
		switch {
		case !n.owns(p):
			Running()(p, st) // another test's pod: it runs, as on a kwok node
		case status != nil:
			status(p, st)
		}
		if equality.Semantic.DeepEqual(&p.Status, st) {
			continue
		}
		p.Status = *st
		if _, err := n.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil &&
			!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			t.Logf("node %s: status of pod %s/%s: %v", n.Name, p.Namespace, p.Name, err)
		}
	}
}

// owns reports whether a pod came here for the test: it asks for the node's resource, or
// selects the node by name.
func (n *Node) owns(p *corev1.Pod) bool {
	if p.Spec.NodeSelector[corev1.LabelHostname] == n.Name {
		return true
	}
	for _, c := range p.Spec.Containers {
		if _, ok := c.Resources.Requests[n.Resource]; ok {
			return true
		}
	}
	return false
}

func (n *Node) forceDelete(ctx context.Context, p *corev1.Pod) {
	_ = n.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
}

func (n *Node) removePods(ctx context.Context) {
	pods, err := n.pods(ctx)
	if err != nil {
		return
	}
	for i := range pods {
		n.forceDelete(ctx, &pods[i])
	}
}

// Statuses the tests ask for. Each sets every container of the pod alike.

// Waiting is a status whose containers wait for reason (ImagePullBackOff, CrashLoopBackOff, ...) with
// message, after restarts restarts, the last ending as last (nil: none); the pod is in phase.
func Waiting(phase corev1.PodPhase, reason, message string, restarts int32, last *corev1.ContainerStateTerminated) PodStatus {
	return every(phase, phase == corev1.PodRunning, false, func() corev1.ContainerStatus {
		cs := corev1.ContainerStatus{RestartCount: restarts,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
		if last != nil {
			cs.LastTerminationState = corev1.ContainerState{Terminated: last}
		}
		return cs
	})
}

// Running is a status whose containers all run and are ready.
func Running() PodStatus {
	return every(corev1.PodRunning, true, true, func() corev1.ContainerStatus {
		return corev1.ContainerStatus{Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	})
}

// NotReady is a status whose containers all run but are not ready: a readiness probe that
// fails (a cube server that serves no model yet).
func NotReady() PodStatus {
	return every(corev1.PodRunning, true, false, func() corev1.ContainerStatus {
		return corev1.ContainerStatus{Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	})
}

// Succeeded is a status whose containers all exited 0.
func Succeeded() PodStatus {
	return every(corev1.PodSucceeded, true, false, func() corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}
	})
}

// every is the status of a pod in phase with the conditions of started and ready containers,
// each container's status made by container (named and imaged after the container).
func every(phase corev1.PodPhase, started, ready bool, container func() corev1.ContainerStatus) PodStatus {
	return func(p *corev1.Pod, st *corev1.PodStatus) {
		st.Phase = phase
		st.Conditions = conditions(started, ready)
		st.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			cs := container()
			cs.Name, cs.Image = c.Name, c.Image
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
		}
	}
}

// Failed is a status whose containers all exited with code, and whose pod failed.
func Failed(code int32, message string) PodStatus {
	return every(corev1.PodFailed, true, false, func() corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: code, Message: message}}}
	})
}

// ByName picks a status by the pod's name: the first entry whose key the name contains.
func ByName(statuses map[string]PodStatus) PodStatus {
	return func(p *corev1.Pod, st *corev1.PodStatus) {
		for part, s := range statuses {
			if strings.Contains(p.Name, part) {
				s(p, st)
				return
			}
		}
	}
}

func conditions(started, ready bool) []corev1.PodCondition {
	b := func(v bool) corev1.ConditionStatus {
		if v {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	return []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: b(started)},
		{Type: corev1.ContainersReady, Status: b(ready)},
		{Type: corev1.PodReady, Status: b(ready)},
	}
}
