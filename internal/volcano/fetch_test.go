package volcano

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
