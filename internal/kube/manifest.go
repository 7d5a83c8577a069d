package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
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
			return fmt.Errorf("%q names no host", rawURL)
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
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("download manifest %s: %w", rawURL, err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("manifest %s is larger than %d bytes", rawURL, MaxManifestSize)
	}
	return data, nil
}

// kindOrder installs what others depend on first: namespaces and CRDs, then accounts and
// RBAC, then configuration, claims and network policies (in force before any pod they
// protect), Services, then workloads, and admission webhooks last (a webhook that
// points at a Service which is not up yet would block everything after it).
var kindOrder = map[string]int{
	"Namespace": 0, "CustomResourceDefinition": 1, "PriorityClass": 2,
	"ServiceAccount": 3, "ClusterRole": 4, "ClusterRoleBinding": 5, "Role": 4, "RoleBinding": 5,
	"Secret": 6, "ConfigMap": 6, "PersistentVolumeClaim": 6, "NetworkPolicy": 6, "Service": 7, "Deployment": 8, "StatefulSet": 8, "DaemonSet": 8, "Job": 9,
	"MutatingWebhookConfiguration": 10, "ValidatingWebhookConfiguration": 10,
}

// ParseManifest decodes a multi-document manifest into an object set in install order, every
// object labelled with the owner so that it can be found again. Keys include the namespace.
func ParseManifest(data []byte, labels map[string]string) (stack.Set, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var set stack.Set
	for i := 0; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("manifest document %d: %w", i+1, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("manifest document %d has no apiVersion, kind or name", i+1)
		}
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		u.SetLabels(l)
		set = append(set, stack.Object{Key: ManifestKey(u), Object: u})
	}
	if len(set) == 0 {
		return nil, errors.New("the manifest has no objects")
	}
	sort.SliceStable(set, func(i, j int) bool {
		return order(set[i].Object.GetKind()) < order(set[j].Object.GetKind())
	})
	return set, nil
}

func order(kind string) int {
	if o, ok := kindOrder[kind]; ok {
		return o
	}
	return 9
}

// ManifestKey is "apiVersion/Kind/namespace/name" ("apiVersion/Kind/name" when cluster-scoped).
func ManifestKey(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return stack.Key(u)
	}
	return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// RefFromManifestKey turns a ManifestKey back into a reference for reading or deleting the
// object; nil when the key is not one.
func RefFromManifestKey(key string) *unstructured.Unstructured {
	parts := strings.Split(key, "/")
	var apiVersion string
	if len(parts) > 0 && coreVersionRE.MatchString(parts[0]) {
		apiVersion, parts = parts[0], parts[1:]
	} else if len(parts) > 1 {
		apiVersion, parts = parts[0]+"/"+parts[1], parts[2:]
	}
	u := &unstructured.Unstructured{}
	switch len(parts) {
	case 2:
		u.SetName(parts[1])
	case 3:
		u.SetNamespace(parts[1])
		u.SetName(parts[2])
	default:
		return nil
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(parts[0])
	return u
}

// coreVersionRE matches the versions of the core group ("v1"), which has no group name.
var coreVersionRE = regexp.MustCompile(`^v\d+((alpha|beta)\d+)?$`)

// WaitInstalled waits until every CRD of the set is Established and every Deployment is
// available.
func (c *Client) WaitInstalled(ctx context.Context, set stack.Set) error {
	for _, o := range set {
		var cond Condition
		switch o.Object.GetKind() {
		case "CustomResourceDefinition":
			cond = CRDEstablished
		case "Deployment":
			cond = DeploymentAvailable
		default:
			continue
		}
		if _, err := c.WaitFor(ctx, o.Object, cond); err != nil {
			return err
		}
	}
	return nil
}

// DeleteSet deletes the objects of a set in reverse install order and waits until all are gone.
func (c *Client) DeleteSet(ctx context.Context, set stack.Set) error {
	for i := len(set) - 1; i >= 0; i-- {
		if err := c.deleteOne(ctx, set[i].Object); err != nil {
			return err
		}
	}
	if err := c.waitGone(ctx, set); err != nil {
		return err
	}
	c.logf("all %d objects deleted", len(set))
	return nil
}

// CRDEstablished is met when a CustomResourceDefinition is Established.
func CRDEstablished(u *unstructured.Unstructured) (bool, string, error) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true, "established", nil
		}
	}
	return false, "not established yet", nil
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
