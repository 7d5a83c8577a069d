package stack

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What keeps a shard serving while nodes go away: its replicas spread over nodes (Spread), a
// PodDisruptionBudget per shard that lets a drain or a cluster-autoscaler scale-down evict one
// replica of a shard at a time, and rollouts that replace one replica at a time and never the
// last one serving.

// Spread says how the replicas of one shard spread over the cluster: a pod anti-affinity and
// a topology spread constraint over TopologyKey among the pods of the shard (the other
// shards' pods do not count). Nil renders the defaults.
type Spread struct {
	// TopologyKey is the node label whose values are the domains the replicas spread over;
	// "" is DefaultSpreadTopologyKey (one domain per node).
	TopologyKey string `json:"topology_key,omitempty"`
	// Required makes the spread a scheduling rule (required anti-affinity, DoNotSchedule): a
	// replica with no domain free of its shard's other replicas stays Pending. False, the
	// default, is a preference the scheduler weighs and gives up when it must.
	Required bool `json:"required,omitempty"`
}

// DefaultSpreadTopologyKey spreads a shard's replicas over nodes.
const DefaultSpreadTopologyKey = corev1.LabelHostname

// spreadWeight is the weight of the preferred anti-affinity: the most Kubernetes allows, so
// that spreading a shard outweighs the scheduler's other preferences.
const spreadWeight = MaxAffinityWeight

// ShardMaxUnavailable is how many replicas of a shard its PodDisruptionBudget lets go at once:
// one, so that a shard of two replicas or more always keeps one serving through a drain.
const ShardMaxUnavailable = 1

func (s *Spread) topologyKey() string {
	if s == nil || s.TopologyKey == "" {
		return DefaultSpreadTopologyKey
	}
	return s.TopologyKey
}

func (s *Spread) required() bool { return s != nil && s.Required }

// disruptionBudget reports whether the cube renders its shards' PodDisruptionBudgets: unless
// turned off, when a shard has replicas to spare. A budget for a single replica could only
// refuse every eviction (blocking node drains and scale-downs for good) or allow every one
// (protecting nothing), so a one-replica cube has none.
func (c Cube) disruptionBudget() bool {
	return (c.DisruptionBudget == nil || *c.DisruptionBudget) && c.Replicas > ShardMaxUnavailable
}

// shardDisruptionBudget is shard i's PodDisruptionBudget: at most ShardMaxUnavailable of its
// replicas evicted at a time, counting those that are not Ready. A replica that is not Ready
// serves nothing, so evicting it takes nothing away: AlwaysAllow lets a drain move it (a
// crash-looping replica never blocks a drain) while the Ready ones stay protected.
func (c Cube) shardDisruptionBudget(i int32) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(ShardMaxUnavailable)
	always := policyv1.AlwaysAllow
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   kindDisruption,
		ObjectMeta: meta(c.ShardService(i), c.Namespace, c.shardLabels(i)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &maxUnavailable,
			Selector:                   &metav1.LabelSelector{MatchLabels: c.ShardSelector(i)},
			UnhealthyPodEvictionPolicy: &always,
		},
	}
}

// spreadShard adds to shard i's pod template the anti-affinity and the topology spread
// constraint among the shard's replicas. It runs before applyPod, which keeps them beside
// the node affinity of the pod settings.
func (c Cube) spreadShard(i int32, spec *corev1.PodSpec) {
	key := c.Spread.topologyKey()
	term := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: c.ShardSelector(i)}, TopologyKey: key}
	anti := &corev1.PodAntiAffinity{}
	when := corev1.ScheduleAnyway
	if c.Spread.required() {
		anti.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{term}
		when = corev1.DoNotSchedule
	} else {
		anti.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: spreadWeight, PodAffinityTerm: term}}
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	spec.Affinity.PodAntiAffinity = anti
	spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: c.ShardSelector(i)},
	})
}

// shardUpdateStrategy is how a shard's StatefulSet takes a changed pod template: OnDelete, so
// that its controller replaces no pod by itself. The apply replaces them (kube.RollOut): a
// replica that does not serve at once, one that serves only while every other replica of the
// shard serves, one at a time, through the eviction API (the shard's PodDisruptionBudget
// guards it too). The controller's RollingUpdate would take the highest ordinal even while
// the others do not serve (the last serving replica of a shard), and would wait forever for a
// replaced pod to be Ready before the next, which a cube with no model yet never is. Written
// out, so that an edit is drift that the next apply restores.
func shardUpdateStrategy() appsv1.StatefulSetUpdateStrategy {
	return appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
}

func (c *checker) spread(path string, s *Spread) {
	if s == nil || s.TopologyKey == "" {
		return
	}
	c.labelKey(path+".topology_key", s.TopologyKey)
}
