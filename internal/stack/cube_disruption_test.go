package stack

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	require.False(t, s.Empty(), "an empty selector selects every pod")
	return s.Matches(labels.Set(podLabels))
}

// TestRenderCube_ShardBudgetSelectsItsShardOnly: each shard has a PodDisruptionBudget that
// lets one replica go at a time and whose selector matches the pods of that shard's
// StatefulSet and no other pod the cube (or a second cube in the namespace) renders.
func TestRenderCube_ShardBudgetSelectsItsShardOnly(t *testing.T) {
	c := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Shards: 3, Replicas: 2}
	set, err := RenderCube(c)
	require.NoError(t, err)
	other, err := RenderCube(Cube{Name: "d", Namespace: "n", DonefileURL: testDonefile, Shards: 3, Replicas: 2})
	require.NoError(t, err)
	budgets := ofKind[policyv1.PodDisruptionBudget](t, set, kindDisruption)
	require.Len(t, budgets, 3)
	pods := podTemplates(t, set)
	for key, tpl := range podTemplates(t, other) {
		pods["other cube: "+key] = tpl
	}
	for i := range int32(3) {
		b := budgets[c.ShardService(i)]
		require.NotNil(t, b, "shard %d has no budget", i)
		assert.Equal(t, ShardMaxUnavailable, b.Spec.MaxUnavailable.IntValue(), "shard %d", i)
		assert.Nil(t, b.Spec.MinAvailable, "shard %d", i)
		assert.Equal(t, policyv1.AlwaysAllow, *b.Spec.UnhealthyPodEvictionPolicy, "shard %d: a replica that is not Ready serves nothing", i)
		own := fmt.Sprintf("apps/v1/StatefulSet/%s", c.ShardService(i))
		require.Contains(t, pods, own)
		for key, tpl := range pods {
			assert.Equal(t, key == own, selects(t, b.Spec.Selector, tpl.Labels), "budget of shard %d against the pods of %s", i, key)
		}
		assert.Equal(t, fmt.Sprint(i), b.Labels[ShardLabel])
	}
}

// TestRenderCube_NoBudgetWhenNothingToSpare: one replica per shard renders no budget (it
// could only block every drain or protect nothing), nor does disruption_budget = false.
func TestRenderCube_NoBudgetWhenNothingToSpare(t *testing.T) {
	for name, c := range map[string]Cube{
		"one replica": {Name: "c", Namespace: "n", DonefileURL: testDonefile, Replicas: 1},
		"turned off":  {Name: "c", Namespace: "n", DonefileURL: testDonefile, Replicas: 3, DisruptionBudget: ptr.To(false)},
	} {
		set, err := RenderCube(c)
		require.NoError(t, err, name)
		assert.Empty(t, ofKind[policyv1.PodDisruptionBudget](t, set, kindDisruption), name)
	}
	set, err := RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Replicas: 2, DisruptionBudget: ptr.To(true)})
	require.NoError(t, err)
	assert.Len(t, ofKind[policyv1.PodDisruptionBudget](t, set, kindDisruption), DefaultCubeShards)
}

// TestRenderCube_SpreadsEachShardsReplicas: by default a shard's pods prefer nodes without
// another replica of their shard (anti-affinity) and spread evenly over nodes, as preferences
// (ScheduleAnyway); the terms count the shard's own pods only, not the other shards'.
// spread sets the topology key and makes both rules; a node affinity from pod stays beside.
func TestRenderCube_SpreadsEachShardsReplicas(t *testing.T) {
	nodeAffinity := &Affinity{Node: &NodeAffinity{Required: []NodeSelectorTerm{{MatchExpressions: []NodeRequirement{{Key: "pool", Operator: "In", Values: []string{"cube"}}}}}}}
	for name, tc := range map[string]struct {
		spread   *Spread
		pod      *PodSettings
		key      string
		required bool
	}{
		"default":            {key: corev1.LabelHostname},
		"zone, required":     {spread: &Spread{TopologyKey: corev1.LabelTopologyZone, Required: true}, key: corev1.LabelTopologyZone, required: true},
		"with node affinity": {pod: &PodSettings{Affinity: nodeAffinity}, key: corev1.LabelHostname},
	} {
		c := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Shards: 2, Replicas: 3, Spread: tc.spread, Pod: tc.pod}
		set, err := RenderCube(c)
		require.NoError(t, err, name)
		all := ofKind[appsv1.StatefulSet](t, set, kindStatefulSet)
		require.Len(t, all, 2, name)
		for i := range int32(2) {
			sts := all[c.ShardService(i)]
			spec := sts.Spec.Template.Spec
			require.NotNil(t, spec.Affinity, name)
			require.NotNil(t, spec.Affinity.PodAntiAffinity, name)
			anti := spec.Affinity.PodAntiAffinity
			var term corev1.PodAffinityTerm
			if tc.required {
				require.Len(t, anti.RequiredDuringSchedulingIgnoredDuringExecution, 1, name)
				assert.Empty(t, anti.PreferredDuringSchedulingIgnoredDuringExecution, name)
				term = anti.RequiredDuringSchedulingIgnoredDuringExecution[0]
			} else {
				require.Len(t, anti.PreferredDuringSchedulingIgnoredDuringExecution, 1, name)
				assert.Empty(t, anti.RequiredDuringSchedulingIgnoredDuringExecution, name)
				assert.Equal(t, int32(MaxAffinityWeight), anti.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight, name)
				term = anti.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
			}
			assert.Equal(t, tc.key, term.TopologyKey, name)
			require.Len(t, spec.TopologySpreadConstraints, 1, name)
			tsc := spec.TopologySpreadConstraints[0]
			assert.Equal(t, tc.key, tsc.TopologyKey, name)
			assert.Equal(t, int32(1), tsc.MaxSkew, name)
			want := corev1.ScheduleAnyway
			if tc.required {
				want = corev1.DoNotSchedule
			}
			assert.Equal(t, want, tsc.WhenUnsatisfiable, name)
			for j, other := range all {
				own := other.Name == sts.Name
				assert.Equal(t, own, selects(t, term.LabelSelector, other.Spec.Template.Labels), "%s: shard %d's anti-affinity against %s's pods", name, i, j)
				assert.Equal(t, own, selects(t, tsc.LabelSelector, other.Spec.Template.Labels), "%s: shard %d's spread against %s's pods", name, i, j)
			}
			if tc.pod != nil {
				require.NotNil(t, spec.Affinity.NodeAffinity, "%s: the pod block's node affinity was dropped", name)
				assert.Equal(t, "pool", spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key, name)
			} else {
				assert.Nil(t, spec.Affinity.NodeAffinity, name)
			}
		}
	}
}

// TestRenderCube_ShardsRollOnlyWhenTheApplyRollsThem: a shard's StatefulSet takes a changed
// template with OnDelete, so that its controller replaces no pod by itself (its RollingUpdate
// would take the last serving replica of a shard): the apply's kube.RollOut does, guarded.
func TestRenderCube_ShardsRollOnlyWhenTheApplyRollsThem(t *testing.T) {
	c := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Shards: 2, Replicas: 2}
	set, err := RenderCube(c)
	require.NoError(t, err)
	n := 0
	for name, sts := range ofKind[appsv1.StatefulSet](t, set, kindStatefulSet) {
		assert.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, sts.Spec.UpdateStrategy.Type, name)
		assert.Nil(t, sts.Spec.UpdateStrategy.RollingUpdate, name)
		n++
	}
	assert.Equal(t, 2, n)
}
