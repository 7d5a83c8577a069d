package volcano

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
)

// MaxManifestSize bounds a downloaded release manifest (Volcano's is ~1.5 MB).
const MaxManifestSize = 32 << 20

// CheckManifestURL says whether FetchManifest can read a manifest URL: http://, https:// (with
// a host) or file:// (with a path), for mirrors and air-gapped sites.
func CheckManifestURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", rawURL, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("%q names no host: use https://HOST/PATH", rawURL)
		}
	case "file":
		if u.Path == "" {
			return fmt.Errorf("%q names no file: use file:///absolute/path", rawURL)
		}
	default:
		return fmt.Errorf("%q: use an https://, http:// or file:// URL", rawURL)
	}
	return nil
}

// FetchManifest reads a multi-document YAML manifest from an http(s):// or file:// URL, for
// example Volcano's release manifest or a mirror of it.
func FetchManifest(ctx context.Context, rawURL string) ([]byte, error) {
	if err := CheckManifestURL(rawURL); err != nil {
		return nil, fmt.Errorf("manifest URL %w", err)
	}
	u, _ := url.Parse(rawURL) // checked above
	if u.Scheme == "file" {
		data, err := os.ReadFile(u.Path)
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		return data, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download manifest %s: %w", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download manifest %s: HTTP %d", rawURL, resp.StatusCode)
	}
	data, err := bounded.ReadAll(resp.Body, MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("download manifest %s: %w", rawURL, err)
	}
	return data, nil
}

// ManifestCache keeps the manifests one provider run has downloaded, so that the plan and the
// refreshes of a run download each http(s):// URL once (Volcano's release manifest is about
// 1 MB). A failed download is not kept; file:// URLs are read afresh, as local files change.
// The zero value is ready to use; a nil cache only fetches. Callers must not modify the bytes.
type ManifestCache struct {
	// mu is held across a download, so that two resources refreshed at once which need the
	// same URL wait for one download instead of both starting one.
	mu   sync.Mutex
	data map[string][]byte
}

// Fetch is FetchManifest through the cache.
func (c *ManifestCache) Fetch(ctx context.Context, rawURL string) ([]byte, error) {
	if c == nil || strings.HasPrefix(rawURL, "file:") {
		return FetchManifest(ctx, rawURL)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if data, ok := c.data[rawURL]; ok {
		return data, nil
	}
	data, err := FetchManifest(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if c.data == nil {
		c.data = map[string][]byte{}
	}
	c.data[rawURL] = data
	return data, nil
}
