package stack

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// The RBAC guide (templates/guides/rbac.md.tmpl) shows examples/rbac/ctr-workloads.yaml,
// which is WorkloadsClusterRole as YAML: rewritten with -update, never by hand.
const workloadsRoleFile = "../../examples/rbac/ctr-workloads.yaml"

func TestWorkloadsClusterRole_IsTheGuidesFile(t *testing.T) {
	b, err := yaml.Marshal(WorkloadsClusterRole())
	require.NoError(t, err)
	got := "# The permissions ctr_training_job, ctr_cube and ctr_serving need in a namespace: grant it\n" +
		"# there with a RoleBinding. Generated from the provider's code (go test ./internal/stack -update).\n" + string(b)
	if *update {
		require.NoError(t, os.WriteFile(workloadsRoleFile, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(workloadsRoleFile)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "the rules changed; run go test ./internal/stack -update and review the diff")
}

// Every kind a workload renders is created, patched and deleted; what controllers make of
// them is only read; nothing is granted by wildcard.
func TestWorkloadsClusterRole_CoversEveryKind(t *testing.T) {
	role := WorkloadsClusterRole()
	can := func(group, res, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, r := range role.Rules {
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs) {
			assert.NotEqual(t, "*", s, "rule %+v", r)
		}
	}
	for _, kinds := range [][]schema.GroupVersionKind{TrainingJobKinds, CubeKinds, ServingKinds} {
		for _, k := range kinds {
			res, _ := apimeta.UnsafeGuessKindToResource(k)
			for _, v := range []string{"create", "patch", "get", "list", "watch", "delete"} {
				assert.True(t, can(k.Group, res.Resource, v), "%s %s", v, res)
			}
		}
	}
	for _, k := range ControllerKinds {
		res, _ := apimeta.UnsafeGuessKindToResource(k)
		assert.True(t, can(k.Group, res.Resource, "watch"), "watch %s", res)
		assert.False(t, can(k.Group, res.Resource, "delete"), "delete %s: controllers own these", res)
	}
	assert.True(t, can("", "services/proxy", "get"))
	assert.True(t, can("", "pods/proxy", "get"))
	assert.True(t, can("", "pods/eviction", "create"), "the cube's rollout evicts its servers' pods")
}
