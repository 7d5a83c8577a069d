package stack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
)

func TestRenderQueue_Golden(t *testing.T) {
	golden(t, "queue_minimal.yaml", setYAML(t)(RenderQueue(Queue{Name: "training"})))
	golden(t, "queue_full.yaml", setYAML(t)(RenderQueue(Queue{Name: "ads-gpu", Weight: 4, Reclaimable: ptr.To(false),
		Capability: map[string]string{"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}})))
}

// A queue is cluster-scoped, carries ctr's owner label, and reads back as it was rendered
// (what import and drift compare); Volcano's defaults are rendered, so that they are ctr's.
func TestRenderQueue_RoundTrip(t *testing.T) {
	for _, q := range []Queue{
		{Name: "training"},
		{Name: "ads", Weight: 3, Reclaimable: ptr.To(false), Capability: map[string]string{"cpu": "8", "memory": "16Gi"}},
	} {
		set, err := RenderQueue(q)
		require.NoError(t, err)
		require.Len(t, set, 1)
		u := set[0].Object
		assert.Empty(t, u.GetNamespace())
		assert.True(t, CreatedQueue(u), "owner label %v", u.GetLabels())
		want := q
		if want.Weight == 0 {
			want.Weight = DefaultQueueWeight
		}
		if want.Reclaimable == nil {
			want.Reclaimable = ptr.To(DefaultQueueReclaimable)
		}
		assert.Equal(t, want, QueueFromLive(u))
	}
}

func TestQueue_Validate(t *testing.T) {
	for name, c := range map[string]struct {
		q    Queue
		path string
		want string
	}{
		"Volcano's default":  {Queue{Name: "default"}, "name", `"default" is Volcano's own queue`},
		"Volcano's root":     {Queue{Name: "root"}, "name", `"root" is Volcano's own queue`},
		"not a quantity":     {Queue{Name: "q", Capability: map[string]string{"cpu": "lots"}}, `capability["cpu"]`, `"lots" is not a quantity`},
		"negative":           {Queue{Name: "q", Capability: map[string]string{"memory": "-1Gi"}}, `capability["memory"]`, `"-1Gi" is not a quantity`},
		"not a resource key": {Queue{Name: "q", Capability: map[string]string{"-x": "1"}}, `capability["-x"]`, `"-x" is not a resource name`},
	} {
		t.Run(name, func(t *testing.T) {
			errs := c.q.Validate()
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, c.path, errs[0].Path)
			assert.Contains(t, errs[0].Detail, c.want)
		})
	}
	assert.Empty(t, Queue{Name: "ads", Capability: map[string]string{"cpu": "500m"}}.Validate())
	assert.True(t, SameQuantity("1", "1000m"))
	assert.False(t, SameQuantity("1", "1Gi"))
}

// QueueResource, read without discovery, is the resource of the kind queues render as.
func TestQueueResource_IsTheKindsResource(t *testing.T) {
	set, err := RenderQueue(Queue{Name: "q"})
	require.NoError(t, err)
	res, _ := apimeta.UnsafeGuessKindToResource(set[0].Object.GroupVersionKind())
	assert.Equal(t, QueueResource, res)
}
