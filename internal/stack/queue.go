package stack

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// QueueType is the Terraform type of the queue resource, used in its owner label.
const QueueType = "ctr_queue"

// Defaults and bounds of a queue: Volcano's own (its admission webhook fills in weight 1 and
// reclaimable true; its CRD bounds the weight). Rendered explicitly, so that the fields are
// ctr's under server-side apply and drift on them shows.
const (
	DefaultQueueWeight      = 1
	MinQueueWeight          = 1
	MaxQueueWeight          = 65535
	DefaultQueueReclaimable = true
	componentQueue          = "queue"
)

// ReservedQueues are the queues Volcano creates and keeps itself ("default" takes every job
// that names no queue, "root" is the top of hierarchical queues): it refuses to delete them,
// so ctr never creates or owns one.
var ReservedQueues = []string{DefaultQueue, "root"}

// Queue is a Volcano queue (scheduling.volcano.sh/v1beta1 Queue, cluster-scoped) that ctr
// creates and deletes again on destroy. Zero values mean "default".
type Queue struct {
	Name string
	// Weight is the queue's share of the cluster against the other queues.
	Weight int32
	// Capability caps what the queue's jobs may use at once, by resource (quantities).
	Capability map[string]string
	// Reclaimable lets other queues take back what this one uses beyond its share; nil: true.
	Reclaimable *bool
}

// Validate checks what the schema cannot: the name against Volcano's own queues (its
// pattern, NamespacePattern, is the schema's), and the capability's quantities.
func (q Queue) Validate() FieldErrors {
	var c checker
	if slices.Contains(ReservedQueues, q.Name) {
		c.bad("name", "%q is Volcano's own queue, which Volcano creates and never deletes: name it in a training job's queue without declaring it", q.Name)
	}
	for _, k := range sortedKeys(q.Capability) {
		p, v := fmt.Sprintf("capability[%q]", k), q.Capability[k]
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			c.bad(p, "%q is not a resource name (e.g. cpu, memory, nvidia.com/gpu)", k)
		}
		if n, err := resource.ParseQuantity(v); err != nil || n.Sign() < 0 {
			c.bad(p, "%q is not a quantity, e.g. 500m or 2 for cpu, 4Gi for memory, 1 for nvidia.com/gpu", v)
		}
	}
	return c.errs
}

// RenderQueue is the Queue object, with ctr's labels: the owner label is how destroy knows
// that ctr created it.
func RenderQueue(q Queue) (Set, error) {
	if errs := q.Validate(); len(errs) > 0 {
		return nil, errs
	}
	if q.Weight == 0 {
		q.Weight = DefaultQueueWeight
	}
	if q.Reclaimable == nil {
		q.Reclaimable = ptr.To(DefaultQueueReclaimable)
	}
	obj := &schedulingv1beta1.Queue{
		TypeMeta: kindQueue,
		ObjectMeta: metav1.ObjectMeta{Name: q.Name, Labels: map[string]string{
			LabelManagedBy: ManagedBy, LabelComponent: componentQueue, OwnerLabel: Owner(QueueType, q.Name)}},
		Spec: schedulingv1beta1.QueueSpec{Weight: q.Weight, Reclaimable: q.Reclaimable},
	}
	if len(q.Capability) > 0 {
		obj.Spec.Capability = corev1.ResourceList{}
		for k, v := range q.Capability {
			obj.Spec.Capability[corev1.ResourceName(k)] = resource.MustParse(v)
		}
	}
	return Set{toObject(obj)}, nil
}

// QueueResource is the resource of Volcano's queues, for reading one without discovery.
var QueueResource = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}

// QueueRef is a Volcano queue, for reading it.
func QueueRef(name string) *unstructured.Unstructured { return ref(kindQueue, "", name) }

// CreatedQueue reports whether a live queue is one that a ctr_queue created.
func CreatedQueue(u *unstructured.Unstructured) bool {
	return u.GetLabels()[OwnerLabel] == Owner(QueueType, u.GetName())
}

// QueueFromLive reads a live queue's settings back: what import and drift detection compare.
func QueueFromLive(u *unstructured.Unstructured) Queue {
	q := Queue{Name: u.GetName()}
	if w, ok, _ := unstructured.NestedInt64(u.Object, "spec", "weight"); ok {
		q.Weight = int32(w)
	}
	if r, ok, _ := unstructured.NestedBool(u.Object, "spec", "reclaimable"); ok {
		q.Reclaimable = &r
	}
	if c, ok, _ := unstructured.NestedStringMap(u.Object, "spec", "capability"); ok && len(c) > 0 {
		q.Capability = c
	}
	return q
}

// QueueState is a live queue's state (Open, Closed, Closing, Unknown), "" before Volcano's
// queue controller has set one.
func QueueState(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "state")
	return s
}

// QueueOpen is the state of a queue that takes jobs: Volcano's webhook refuses a job whose
// queue is in any other.
const QueueOpen = string(schedulingv1beta1.QueueStateOpen)

// SameQuantity reports whether two quantities are the same amount ("1" and "1000m").
func SameQuantity(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	return errA == nil && errB == nil && qa.Cmp(qb) == 0
}
