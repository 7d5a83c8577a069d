// Package health tells, from what pods and Volcano pod groups report, why a workload is not
// ready yet and whether waiting can still make it ready. It is pure: callers list the objects.
package health

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// CrashLoopLimit is how many restarts a container in CrashLoopBackOff may have before the
// wait gives up on it: a container that failed this often fails for a reason that waiting
// does not fix (a wrong command, a missing file, a bad argument).
const CrashLoopLimit = 3

// Reasons that the kubelet and the Volcano scheduler report, and that a Problem carries.
const (
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImagePull      = "ErrImagePull"
	ReasonInvalidImageName  = "InvalidImageName"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonCrashLoopBackOff  = "CrashLoopBackOff"
	ReasonOOMKilled         = "OOMKilled"
	ReasonUnschedulable     = "Unschedulable"
)

// Problem is one reason why a workload is not ready, as one of its pods or its pod group
// reports it.
type Problem struct {
	Object    string // "pod NAME" or "pod group NAME"
	Container string // the container, when a container reports it
	Reason    string // ImagePullBackOff, CrashLoopBackOff, OOMKilled, Unschedulable, ...
	Message   string // what the kubelet or the scheduler says, as it says it
	// Permanent: waiting will not fix it; the configuration (image, command, resources) must
	// change. A wait ends with it at once instead of running out its timeout.
	Permanent bool
	Hint      string // what to do, for the error a permanent problem ends a wait with
}

// String is the problem as progress lines and errors show it: "pod x container c:
// ImagePullBackOff: Back-off pulling image ...".
func (p Problem) String() string {
	where := p.Object
	if p.Container != "" {
		where += " container " + p.Container
	}
	if p.Message == "" {
		return where + ": " + p.Reason
	}
	return where + ": " + p.Reason + ": " + p.Message
}

// Pods reports the problems of pods, in the order given, one per container at most. Pods
// being deleted are left out: they are on their way out, whatever they report.
func Pods(pods []corev1.Pod) []Problem {
	var out []Problem
	for i := range pods {
		out = append(out, Pod(&pods[i])...)
	}
	return out
}

// Pod reports the problems of one pod: containers that wait for a reason other than
// starting up, containers killed for running out of memory, a pod the scheduler cannot
// place, and a pod that failed.
func Pod(p *corev1.Pod) []Problem {
	if p.DeletionTimestamp != nil {
		return nil
	}
	obj := "pod " + p.Name
	var out []Problem
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if pr, ok := container(p, cs); ok {
			pr.Object = obj
			out = append(out, pr)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			out = append(out, Problem{Object: obj, Reason: ReasonUnschedulable, Message: c.Message,
				Hint: "The cluster lacks room or a matching node for the pod: lower its resources, or add nodes."})
		}
	}
	if p.Status.Phase == corev1.PodFailed && len(out) == 0 {
		out = append(out, failed(p))
	}
	return out
}

// failed is the problem of a failed pod: the pod's own reason (Evicted, ...), else how its
// containers exited. Not permanent: its controller, or the Volcano job's policy, replaces it.
func failed(p *corev1.Pod) Problem {
	pr := Problem{Object: "pod " + p.Name, Reason: p.Status.Reason, Message: p.Status.Message}
	if pr.Reason == "" {
		pr.Reason = string(corev1.PodFailed)
	}
	if pr.Message != "" {
		return pr
	}
	var exits []string
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			e := fmt.Sprintf("container %s exited with code %d (%s)", cs.Name, t.ExitCode, t.Reason)
			if t.Message != "" {
				e += ": " + t.Message
			}
			exits = append(exits, e)
		}
	}
	pr.Message = strings.Join(exits, "; ")
	return pr
}

// container classifies one container's status; false: nothing wrong with it.
func container(p *corev1.Pod, cs corev1.ContainerStatus) (Problem, bool) {
	if cs.Ready || cs.State.Running != nil {
		return Problem{}, false // running; a restart before it is history
	}
	if t := cs.State.Terminated; t != nil {
		if t.Reason == ReasonOOMKilled {
			return oomKilled(p, cs.Name), true
		}
		return Problem{}, false // exited: Completed, or a failure that a restart or the job's policy handles
	}
	w := cs.State.Waiting
	if w == nil {
		return Problem{}, false
	}
	pr := Problem{Container: cs.Name, Reason: w.Reason, Message: w.Message}
	switch w.Reason {
	case "", "ContainerCreating", "PodInitializing":
		return Problem{}, false // starting up
	case ReasonImagePullBackOff, ReasonErrImagePull:
		pr.Permanent = imageNeverPulls(w.Message)
		pr.Hint = "Check the image name and tag, and that the cluster may pull it (image pull secrets, registry mirrors)."
	case ReasonInvalidImageName, ReasonErrImageNeverPull:
		pr.Permanent = true
		pr.Hint = "Check the image name, and the image pull policy (Never needs the image on the node)."
	case ReasonCrashLoopBackOff:
		if last := cs.LastTerminationState.Terminated; last != nil {
			if last.Reason == ReasonOOMKilled {
				return oomKilled(p, cs.Name), true
			}
			pr.Message = fmt.Sprintf("restarted %d times, last exit code %d (%s)", cs.RestartCount, last.ExitCode, last.Reason)
			if last.Message != "" {
				pr.Message += ": " + last.Message
			}
		}
		pr.Permanent = cs.RestartCount >= CrashLoopLimit
		pr.Hint = fmt.Sprintf("Read the container's log: kubectl logs -n %s %s -c %s --previous", p.Namespace, p.Name, cs.Name)
	}
	return pr, true
}

// oomKilled is the problem of a container killed for running out of memory: permanent, as
// the limit it ran into is configuration.
func oomKilled(p *corev1.Pod, name string) Problem {
	msg := "killed for running out of memory"
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name != name {
			continue
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			msg += " (memory limit " + q.String() + ")"
		}
	}
	return Problem{Object: "pod " + p.Name, Container: name, Reason: ReasonOOMKilled, Message: msg, Permanent: true,
		Hint: "Raise the container's memory limit (limits.memory), or lower what it keeps in memory."}
}

// neverPulls are what registries and container runtimes say about an image that no retry
// will pull: it does not exist, or these credentials may not read it. Throttling, timeouts
// and network errors are not among them: those may pass.
var neverPulls = []string{
	"not found", "manifest unknown", "repository does not exist", "pull access denied", "unauthorized",
	"authorization failed", "invalid reference format", "no match for platform", "name unknown",
}

func imageNeverPulls(message string) bool {
	m := strings.ToLower(message)
	for _, s := range neverPulls {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// PodGroup reports a Volcano pod group that the scheduler cannot place: its latest
// condition is Unschedulable, with the scheduler's reason and message. Not permanent: room
// may free up, and the queue may admit it later.
func PodGroup(pg *schedulingv1beta1.PodGroup) []Problem {
	c, ok := LastCondition(pg)
	if !ok || c.Type != schedulingv1beta1.PodGroupUnschedulableType || c.Status != corev1.ConditionTrue {
		return nil
	}
	reason := ReasonUnschedulable
	if c.Reason != "" {
		reason += " (" + c.Reason + ")"
	}
	return []Problem{{Object: "pod group " + pg.Name, Reason: reason, Message: c.Message,
		Hint: "The cluster lacks room for the whole gang: lower min_available or the task resources, or add nodes."}}
}

// LastCondition is a pod group's most recent condition (by transition time, the later in
// the list on a tie).
func LastCondition(pg *schedulingv1beta1.PodGroup) (schedulingv1beta1.PodGroupCondition, bool) {
	var last schedulingv1beta1.PodGroupCondition
	found := false
	for _, c := range pg.Status.Conditions {
		if !found || !c.LastTransitionTime.Before(&last.LastTransitionTime) {
			last, found = c, true
		}
	}
	return last, found
}

// FirstPermanent is the first permanent problem, if any.
func FirstPermanent(problems []Problem) (Problem, bool) {
	for _, p := range problems {
		if p.Permanent {
			return p, true
		}
	}
	return Problem{}, false
}

// Summary condenses problems for a progress line: one entry per reason, with how many
// report it and the first one's words, e.g. "ImagePullBackOff on 3 pods (pod x container
// c: Back-off pulling image ...)". "" when there are none.
func Summary(problems []Problem) string {
	type group struct {
		first Problem
		n     int
	}
	groups := map[string]*group{}
	var order []string
	for _, p := range problems {
		g, ok := groups[p.Reason]
		if !ok {
			g = &group{first: p}
			groups[p.Reason] = g
			order = append(order, p.Reason)
		}
		g.n++
	}
	sort.SliceStable(order, func(i, j int) bool { // permanent ones first: they end the wait
		return groups[order[i]].first.Permanent && !groups[order[j]].first.Permanent
	})
	parts := make([]string, 0, len(order))
	for _, r := range order {
		g := groups[r]
		if g.n == 1 {
			parts = append(parts, g.first.String())
			continue
		}
		parts = append(parts, fmt.Sprintf("%s on %d %ss (%s)", r, g.n, strings.Fields(g.first.Object)[0], g.first.String()))
	}
	return strings.Join(parts, "; ")
}

// Counts are how many pods are in each phase.
type Counts struct {
	Running, Pending, Succeeded, Failed int64
}

// Count counts pods by phase. Pods being deleted are left out; pods of an unknown phase (a
// node that stopped reporting) count as pending: not known to run.
func Count(pods []corev1.Pod) Counts {
	var c Counts
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		switch pods[i].Status.Phase {
		case corev1.PodRunning:
			c.Running++
		case corev1.PodSucceeded:
			c.Succeeded++
		case corev1.PodFailed:
			c.Failed++
		default:
			c.Pending++
		}
	}
	return c
}

// Ready reports whether a pod runs with every container ready, or has completed.
func Ready(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}
