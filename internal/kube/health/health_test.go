package health

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// pod is a trainer pod with one container "c" (memory limit 1Gi) in the given status.
func pod(phase corev1.PodPhase, cs ...corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-trainer-0", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: cs},
	}
}

func waiting(reason, msg string, restarts int32, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "c", RestartCount: restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		LastTerminationState: corev1.ContainerState{Terminated: last}}
}

func TestPod(t *testing.T) {
	running := corev1.ContainerStatus{Name: "c", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	oomLast := &corev1.ContainerStateTerminated{Reason: ReasonOOMKilled, ExitCode: 137}
	errLast := &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2, Message: "no such file"}
	unschedulable := pod(corev1.PodPending)
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient cpu."}}
	gangMember := pod(corev1.PodPending)
	gangMember.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Schedulable", Message: "can possibly be assigned to kwok-node-0, once minAvailable is satisfied"}}
	deleting := pod(corev1.PodPending, waiting(ReasonImagePullBackOff, "not found", 0, nil))
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	evicted := pod(corev1.PodFailed)
	evicted.Status.Reason, evicted.Status.Message = "Evicted", "The node was low on resource: memory."
	initCrash := pod(corev1.PodPending)
	initCrash.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	initCrash.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", RestartCount: 5,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff}}}}

	for _, c := range []struct {
		name      string
		pod       corev1.Pod
		want      string // Problem.String() of the one problem; "" for none
		permanent bool
	}{
		{"running and ready", pod(corev1.PodRunning, running), "", false},
		{"running, not ready (a cube before its first model)",
			pod(corev1.PodRunning, corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), "", false},
		{"creating", pod(corev1.PodPending, waiting("ContainerCreating", "", 0, nil)), "", false},
		{"completed", pod(corev1.PodSucceeded, corev1.ContainerStatus{Name: "c",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}), "", false},
		{"image not found",
			pod(corev1.PodPending, waiting(ReasonImagePullBackOff, `Back-off pulling image "x:v9": ErrImagePull: x:v9: not found`, 0, nil)),
			`pod job-trainer-0 container c: ImagePullBackOff: Back-off pulling image "x:v9": ErrImagePull: x:v9: not found`, true},
		{"image of a private repository",
			pod(corev1.PodPending, waiting(ReasonErrImagePull, "pull access denied, repository does not exist or may require authorization", 0, nil)),
			"pod job-trainer-0 container c: ErrImagePull: pull access denied, repository does not exist or may require authorization", true},
		{"registry throttling may pass",
			pod(corev1.PodPending, waiting(ReasonImagePullBackOff, "429 Too Many Requests: toomanyrequests", 0, nil)),
			"pod job-trainer-0 container c: ImagePullBackOff: 429 Too Many Requests: toomanyrequests", false},
		{"network error may pass",
			pod(corev1.PodPending, waiting(ReasonErrImagePull, "dial tcp 10.0.0.1:443: i/o timeout", 0, nil)),
			"pod job-trainer-0 container c: ErrImagePull: dial tcp 10.0.0.1:443: i/o timeout", false},
		{"invalid image name", pod(corev1.PodPending, waiting(ReasonInvalidImageName, `couldn't parse image name "X:"`, 0, nil)),
			`pod job-trainer-0 container c: InvalidImageName: couldn't parse image name "X:"`, true},
		{"crash loop, early",
			pod(corev1.PodRunning, waiting(ReasonCrashLoopBackOff, "back-off 10s", CrashLoopLimit-1, errLast)),
			"pod job-trainer-0 container c: CrashLoopBackOff: restarted 2 times, last exit code 2 (Error): no such file", false},
		{"crash loop past the limit",
			pod(corev1.PodRunning, waiting(ReasonCrashLoopBackOff, "back-off 40s", CrashLoopLimit, errLast)),
			"pod job-trainer-0 container c: CrashLoopBackOff: restarted 3 times, last exit code 2 (Error): no such file", true},
		{"out of memory, restarting", pod(corev1.PodRunning, waiting(ReasonCrashLoopBackOff, "", 1, oomLast)),
			"pod job-trainer-0 container c: OOMKilled: killed for running out of memory (memory limit 1Gi)", true},
		{"out of memory, terminated", pod(corev1.PodFailed, corev1.ContainerStatus{Name: "c",
			State: corev1.ContainerState{Terminated: oomLast}}),
			"pod job-trainer-0 container c: OOMKilled: killed for running out of memory (memory limit 1Gi)", true},
		{"out of memory once, running again", pod(corev1.PodRunning, corev1.ContainerStatus{Name: "c", Ready: true, RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: oomLast}}), "", false},
		{"missing Secret key", pod(corev1.PodPending, waiting("CreateContainerConfigError", `secret "x" not found`, 0, nil)),
			`pod job-trainer-0 container c: CreateContainerConfigError: secret "x" not found`, false},
		{"unschedulable", unschedulable, "pod job-trainer-0: Unschedulable: 0/2 nodes are available: 2 Insufficient cpu.", false},
		{"a gang member waiting for its gang", gangMember, "", false},
		{"being deleted", deleting, "", false},
		{"evicted", evicted, "pod job-trainer-0: Evicted: The node was low on resource: memory.", false},
		{"init container crash loop", initCrash, "pod job-trainer-0 container init: CrashLoopBackOff", true},
		{"failed", pod(corev1.PodFailed, corev1.ContainerStatus{Name: "c",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: "train.py crashed"}}}),
			"pod job-trainer-0: Failed: container c exited with code 1 (Error): train.py crashed", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Pod(&c.pod)
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("want no problem, got %v", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one problem, got %d: %v", len(got), got)
			}
			if got[0].String() != c.want {
				t.Errorf("got  %q\nwant %q", got[0].String(), c.want)
			}
			if got[0].Permanent != c.permanent {
				t.Errorf("permanent = %v, want %v", got[0].Permanent, c.permanent)
			}
			if c.permanent && got[0].Hint == "" {
				t.Error("a permanent problem says what to do")
			}
		})
	}
}

func TestPodGroup(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.Time{Time: time.Unix(int64(s), 0)} }
	unsched := schedulingv1beta1.PodGroupCondition{Type: schedulingv1beta1.PodGroupUnschedulableType, Status: corev1.ConditionTrue,
		Reason: "NotEnoughResources", Message: "1/2 tasks in gang unschedulable: 2 Insufficient cpu.", LastTransitionTime: at(10)}
	scheduled := schedulingv1beta1.PodGroupCondition{Type: schedulingv1beta1.PodGroupScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(20)}
	for _, c := range []struct {
		name  string
		conds []schedulingv1beta1.PodGroupCondition
		want  string
	}{
		{"no conditions", nil, ""},
		{"unschedulable", []schedulingv1beta1.PodGroupCondition{unsched},
			"pod group job-1234: Unschedulable (NotEnoughResources): 1/2 tasks in gang unschedulable: 2 Insufficient cpu."},
		{"scheduled since", []schedulingv1beta1.PodGroupCondition{unsched, scheduled}, ""},
		{"unschedulable again", []schedulingv1beta1.PodGroupCondition{scheduled, func() schedulingv1beta1.PodGroupCondition {
			u := unsched
			u.LastTransitionTime = at(30)
			return u
		}()}, "pod group job-1234: Unschedulable (NotEnoughResources): 1/2 tasks in gang unschedulable: 2 Insufficient cpu."},
	} {
		t.Run(c.name, func(t *testing.T) {
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job-1234"}, Status: schedulingv1beta1.PodGroupStatus{Conditions: c.conds}}
			got := PodGroup(pg)
			switch {
			case c.want == "" && len(got) != 0:
				t.Fatalf("want no problem, got %v", got)
			case c.want != "" && (len(got) != 1 || got[0].String() != c.want || got[0].Permanent):
				t.Fatalf("got %v, want one transient problem %q", got, c.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	pull := func(name string) Problem {
		return Problem{Object: "pod " + name, Container: "c", Reason: ReasonImagePullBackOff, Message: "not found", Permanent: true}
	}
	gang := Problem{Object: "pod group g", Reason: "Unschedulable (NotEnoughResources)", Message: "2 Insufficient cpu."}
	if got := Summary(nil); got != "" {
		t.Errorf("no problems: %q", got)
	}
	got := Summary([]Problem{gang, pull("a"), pull("b"), pull("c")})
	want := "ImagePullBackOff on 3 pods (pod a container c: ImagePullBackOff: not found); pod group g: Unschedulable (NotEnoughResources): 2 Insufficient cpu."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if p, ok := FirstPermanent([]Problem{gang, pull("a")}); !ok || !strings.Contains(p.Object, "pod a") {
		t.Errorf("FirstPermanent = %v, %v", p, ok)
	}
}

func TestReady(t *testing.T) {
	ready := pod(corev1.PodRunning)
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
	crashing := pod(corev1.PodRunning, waiting(ReasonCrashLoopBackOff, "", 1, nil))
	crashing.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionFalse}}
	for _, c := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"ready", ready, true},
		{"crash looping", crashing, false},
		{"pending", pod(corev1.PodPending), false},
		{"succeeded", pod(corev1.PodSucceeded), true},
		{"running, no conditions, ready containers", pod(corev1.PodRunning, corev1.ContainerStatus{Name: "c", Ready: true}), true},
	} {
		if got := Ready(&c.pod); got != c.want {
			t.Errorf("%s: Ready = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCount(t *testing.T) {
	deleting := pod(corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pods := []corev1.Pod{pod(corev1.PodRunning), pod(corev1.PodRunning), pod(corev1.PodPending), pod(""), pod(corev1.PodUnknown),
		pod(corev1.PodSucceeded), pod(corev1.PodFailed), deleting}
	if got, want := Count(pods), (Counts{Running: 2, Pending: 3, Succeeded: 1, Failed: 1}); got != want {
		t.Errorf("Count = %+v, want %+v", got, want)
	}
}
