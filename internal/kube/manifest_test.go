package kube

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestRefFromManifestKey_RoundTrip(t *testing.T) {
	for _, o := range []struct{ apiVersion, kind, ns, name string }{
		{"apps/v1", "Deployment", "volcano-system", "volcano-scheduler"},
		{"v1", "Namespace", "", "volcano-system"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "jobs.batch.volcano.sh"},
		{"v1beta1", "Thing", "ns", "x"},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.apiVersion)
		u.SetKind(o.kind)
		u.SetNamespace(o.ns)
		u.SetName(o.name)
		back := RefFromManifestKey(ManifestKey(u))
		require.NotNil(t, back, ManifestKey(u))
		assert.Equal(t, u.Object, back.Object, ManifestKey(u))
	}
	assert.Nil(t, RefFromManifestKey("apps/v1/Deployment"))
	assert.Nil(t, RefFromManifestKey("apps/v1/Deployment/a/b/c"))
}

// TestPoll: a wait that cannot watch logs its progress at most once per ProgressEvery and,
// out of time, returns its last progress line.
func TestPoll(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	c := &Client{ProgressEvery: 30 * time.Millisecond, Log: func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() }}
	n := 0
	_, err := c.Poll(context.Background(), 5*time.Millisecond, func(context.Context) (bool, string, error) {
		n++
		return n == 40, "still here", nil
	})
	require.NoError(t, err)
	mu.Lock()
	assert.NotEmpty(t, lines)
	assert.Less(t, len(lines), 20, "throttled: %d lines for 40 polls", len(lines))
	mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	last, err := c.Poll(ctx, 5*time.Millisecond, func(context.Context) (bool, string, error) { return false, "3 left", nil })
	assert.True(t, wait.Interrupted(err), "%v", err)
	assert.Equal(t, "3 left", last)

	boom := errors.New("boom")
	_, err = c.Poll(context.Background(), time.Millisecond, func(context.Context) (bool, string, error) { return false, "", boom })
	assert.ErrorIs(t, err, boom)
	assert.False(t, strings.Contains(strings.Join(lines, "\n"), "boom"))
}
