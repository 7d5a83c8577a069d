package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

func TestCheckManifestURL(t *testing.T) {
	for _, ok := range []string{"https://github.com/v.yaml", "http://mirror:8080/v.yaml", "file:///srv/v.yaml"} {
		assert.NoError(t, CheckManifestURL(ok), ok)
	}
	for _, bad := range []string{"ftp://mirror/v.yaml", "/srv/v.yaml", "https:///v.yaml", "file://", "s3://b/v.yaml"} {
		assert.Error(t, CheckManifestURL(bad), bad)
		_, err := FetchManifest(context.Background(), bad)
		assert.Error(t, err, "FetchManifest reads only what CheckManifestURL accepts: %s", bad)
	}
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

// TestManifestCache: a provider run downloads an http(s) manifest once, however many
// resources read it; a failed download is tried again; a file:// manifest is read afresh.
func TestManifestCache(t *testing.T) {
	var requests atomic.Int32
	failFirst := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path == "/flaky" && failFirst {
			failFirst = false
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("kind: Namespace\n"))
	}))
	defer srv.Close()
	ctx := context.Background()

	var c ManifestCache
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := c.Fetch(ctx, srv.URL+"/volcano.yaml")
			assert.NoError(t, err)
			assert.Equal(t, "kind: Namespace\n", string(data))
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, requests.Load(), "four reads of one URL, one download")

	_, err := c.Fetch(ctx, srv.URL+"/flaky")
	require.ErrorContains(t, err, "HTTP 503")
	data, err := c.Fetch(ctx, srv.URL+"/flaky")
	require.NoError(t, err, "a failed download is not kept")
	assert.Equal(t, "kind: Namespace\n", string(data))
	assert.EqualValues(t, 3, requests.Load())

	file := filepath.Join(t.TempDir(), "m.yaml")
	require.NoError(t, os.WriteFile(file, []byte("a: 1\n"), 0o600))
	data, err = c.Fetch(ctx, "file://"+file)
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", string(data))
	require.NoError(t, os.WriteFile(file, []byte("a: 2\n"), 0o600))
	data, err = c.Fetch(ctx, "file://"+file)
	require.NoError(t, err)
	assert.Equal(t, "a: 2\n", string(data), "a local file is read afresh")

	var none *ManifestCache
	_, err = none.Fetch(ctx, srv.URL+"/volcano.yaml")
	require.NoError(t, err)
	assert.EqualValues(t, 4, requests.Load(), "a nil cache downloads")
}
