package stack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRenderNamespace(t *testing.T) {
	set, err := RenderNamespace(Namespace{Name: "ads", Labels: map[string]string{"team": "ads"}, Annotations: map[string]string{"owner": "ads@example.com"}})
	require.NoError(t, err)
	require.Len(t, set, 1)
	u := set[0].Object
	assert.Equal(t, "v1/Namespace/ads", set[0].Key)
	assert.Equal(t, map[string]string{"team": "ads", LabelManagedBy: ManagedBy, OwnerLabel: "ctr_namespace.ads"}, u.GetLabels())
	assert.Equal(t, map[string]string{"owner": "ads@example.com"}, u.GetAnnotations())
	assert.True(t, CreatedNamespace(u))

	u.SetLabels(map[string]string{"team": "ads"})
	assert.False(t, CreatedNamespace(u), "a namespace without ctr's owner label was not created by ctr")
	u.SetLabels(map[string]string{OwnerLabel: "ctr_namespace.other"})
	assert.False(t, CreatedNamespace(u), "the owner label must name this namespace")
}

func TestNamespace_Validate(t *testing.T) {
	// The name is the provider schema's to check (NamespacePattern), once.
	errs := Namespace{Name: "Ads", Labels: map[string]string{OwnerLabel: "x", "kubernetes.io/metadata.name": "y"}}.Validate()
	require.Len(t, errs, 2)
	assert.Equal(t, `labels["ctr.elasticctr.io/owner"]`, errs[0].Path)
	assert.Equal(t, `labels["kubernetes.io/metadata.name"]`, errs[1].Path)
}
