package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// errNotServed marks a kind the cluster does not serve (its CRD is not installed).
var errNotServed = errors.New("kind not served")

// FieldManager is the one server-side apply field manager of the provider.
const FieldManager = "terraform-provider-ctr"

// Client applies, reads, prunes and deletes rendered object sets.
type Client struct {
	dyn    dynamic.Interface
	meta   metadata.Interface
	cs     kubernetes.Interface
	mapper meta.ResettableRESTMapper
	// Log receives one line per action ("Deployment ns/name created"); nil discards.
	Log func(msg string)
	// ProgressEvery is how often a wait logs that it still waits.
	ProgressEvery time.Duration
}

// DefaultProgressEvery is a new client's ProgressEvery.
const DefaultProgressEvery = 10 * time.Second

// NewClient connects lazily: nothing is contacted until the first call. The API server's
// warnings go to Log, each text once.
func NewClient(cfg *rest.Config) (*Client, error) {
	c := &Client{ProgressEvery: DefaultProgressEvery}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = &warningLog{c: c}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.dyn, c.meta, c.cs = dyn, mc, cs
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return c, nil
}

// warningLog sends the API server's warnings (deprecated APIs, ignored fields) to the
// client's Log instead of the provider's stderr, each text once: a 64-shard cube's Services
// would otherwise repeat the same one 66 times.
type warningLog struct {
	c    *Client
	seen sync.Map // text -> struct{}
}

func (w *warningLog) HandleWarningHeaderWithContext(_ context.Context, code int, _, text string) {
	if code != 299 || text == "" {
		return
	}
	if _, dup := w.seen.LoadOrStore(text, struct{}{}); !dup {
		w.c.logf("Warning from the API server: %s", text)
	}
}

func (c *Client) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, args...))
	}
}

// Describe names an object the way errors and logs do: "Kind namespace/name".
func Describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

func (c *Client) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(namespace), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

// metadataOf is resource answering with metadata only: lists of names, labels and versions,
// and what an apply needs to know of the object it wrote.
func (c *Client) metadataOf(gvk schema.GroupVersionKind, namespace string) (metadata.ResourceInterface, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.meta.Resource(m.Resource).Namespace(namespace), nil
	}
	return c.meta.Resource(m.Resource), nil
}

// mapping is how the cluster serves a kind.
func (c *Client) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A CRD installed since we last looked: refresh discovery once.
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("%s: %w: %w", notServedWhy(gvk), errNotServed, err)
		}
		return nil, fmt.Errorf("discover %s: %w", gvk.String(), err)
	}
	return m, nil
}

// notServedWhy says that the cluster does not serve gvk, naming the CustomResourceDefinition
// that would (plural.group), and what to do when ctr knows (stack.MissingKindHint).
func notServedWhy(gvk schema.GroupVersionKind) string {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	msg := fmt.Sprintf("the cluster does not serve %s %s: is its CustomResourceDefinition %s.%s installed?", gvk.GroupVersion(), gvk.Kind, plural.Resource, gvk.Group)
	if hint := stack.MissingKindHint(gvk); hint != "" {
		msg += " " + hint
	}
	return msg
}

// Get returns the live object, or nil when it does not exist.
func (c *Client) Get(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := c.resource(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return nil, err
	}
	live, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apiError("read", u, err)
	}
	return live, nil
}

// GetByResource reads a cluster-scoped object by its resource (group, version and plural),
// without discovery: one request, for a look that must stay cheap and quiet when the cluster
// does not answer (a plan's). nil when the object does not exist; an error that IsNotServed
// says so when the cluster does not serve the resource (its CRD is not installed).
func (c *Client) GetByResource(ctx context.Context, gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	live, err := c.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return live, nil
	case apierrors.IsNotFound(err) && errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Name == name:
		return nil, nil // the object's own 404; an unknown resource's names nothing
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("the cluster does not serve %s: %w: %w", gvr.String(), errNotServed, err)
	}
	return nil, fmt.Errorf("read %s %s: %w", gvr.Resource, name, err)
}

// Owned lists the objects of the given kinds in namespace that carry the owner label, in the
// order of kinds (callers pass them in apply order), by name within a kind. Kinds the
// cluster does not serve are skipped. Only metadata is listed (what pruning and deletion
// decide by), every kind at once: a 64-shard cube's 130 Services and StatefulSets are 0.1 MB
// of metadata rather than 1 MB of objects.
func (c *Client) Owned(ctx context.Context, namespace, owner string, kinds []schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	sel := stack.OwnerLabel + "=" + owner
	byKind := make([][]*unstructured.Unstructured, len(kinds))
	g, gctx := errgroup.WithContext(ctx)
	for i, gvk := range kinds {
		g.Go(func() error {
			lister, err := c.metadataOf(gvk, namespace)
			if errors.Is(err, errNotServed) {
				return nil
			}
			if err != nil {
				return err
			}
			list, err := lister.List(gctx, metav1.ListOptions{LabelSelector: sel})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("list %s owned by %s in %s: %w", gvk.Kind, owner, namespace, err)
			}
			sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
			for j := range list.Items {
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&list.Items[j])
				if err != nil {
					return err
				}
				u := &unstructured.Unstructured{Object: obj}
				u.SetAPIVersion(gvk.GroupVersion().String())
				u.SetKind(gvk.Kind)
				byKind[i] = append(byKind[i], u)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, l := range byKind {
		out = append(out, l...)
	}
	return out, nil
}

// pollEvery is how often waits that cannot watch (several objects, of several kinds) look.
const pollEvery = 250 * time.Millisecond

// Poll calls cond every `every` (the first time at once) until it is done, fails, or ctx
// ends, logging the progress line cond returns at most once per ProgressEvery: the waits
// that cannot watch one object. It returns the last progress line, for the error of a wait
// that ran out of time.
func (c *Client) Poll(ctx context.Context, every time.Duration, cond func(context.Context) (done bool, progress string, err error)) (string, error) {
	last, line := time.Now(), ""
	err := wait.PollUntilContextCancel(ctx, every, true, func(ctx context.Context) (bool, error) {
		done, progress, err := cond(ctx)
		line = progress
		if !done && err == nil && time.Since(last) >= c.ProgressEvery {
			c.logf("%s", progress)
			last = time.Now()
		}
		return done, err
	})
	return line, err
}

// apiError names the object and gives the API's reason in words a user can act on.
func apiError(verb string, u *unstructured.Unstructured, err error) error {
	var status apierrors.APIStatus
	reason := ""
	if errors.As(err, &status) {
		reason = string(status.Status().Reason)
	}
	hint := ""
	switch {
	case apierrors.IsForbidden(err):
		hint = " (the credentials lack RBAC permission for this)"
	case apierrors.IsInvalid(err):
		hint = " (the API server rejected the object; the message says which field)"
	case apierrors.IsUnauthorized(err):
		hint = " (the credentials were refused; check token or certificates)"
	}
	if reason != "" {
		return fmt.Errorf("%s %s: %s: %w%s", verb, Describe(u), reason, err, hint)
	}
	return fmt.Errorf("%s %s: %w%s", verb, Describe(u), err, hint)
}

// ServiceProxyGet GETs path from a Service port through the API server's service proxy, so
// that Terraform needs no network route into the cluster.
func (c *Client) ServiceProxyGet(ctx context.Context, namespace, service, port, path string) ([]byte, error) {
	b, err := c.cs.CoreV1().Services(namespace).ProxyGet("http", service, port, path, nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s from Service %s/%s:%s: %w%s", path, namespace, service, port, err, proxyHint(err, stack.ServiceProxy, namespace))
	}
	return b, nil
}

// proxyHint is what to do about a proxy read the API server refused (IsForbidden): grant
// get on the proxy subresource.
func proxyHint(err error, subresource, namespace string) string {
	if !IsForbidden(err) {
		return ""
	}
	return fmt.Sprintf(" (403 Forbidden: the provider's identity needs get on %s in namespace %q; the RBAC guide's %s ClusterRole grants it)",
		subresource, namespace, stack.WorkloadsRoleName)
}

// IsForbidden says whether err is the API server refusing the request to this identity
// (RBAC): asking again does not help until someone grants it.
func IsForbidden(err error) bool { return apierrors.IsForbidden(err) }

// RemoveMetadata removes labels and annotations from the live object u names (a JSON merge
// patch, so no other field changes hands): how an object that was there before we applied it
// is handed back. An object that is gone is no error.
func (c *Client) RemoveMetadata(ctx context.Context, u *unstructured.Unstructured, labels, annotations []string) error {
	ri, err := c.resource(u.GroupVersionKind(), u.GetNamespace())
	if errors.Is(err, errNotServed) {
		return nil
	}
	if err != nil {
		return err
	}
	meta := map[string]any{}
	for field, keys := range map[string][]string{"labels": labels, "annotations": annotations} {
		if len(keys) == 0 {
			continue
		}
		m := map[string]any{}
		for _, k := range keys {
			m[k] = nil
		}
		meta[field] = m
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError("release", u, err)
	}
	return nil
}

// IsNotServed says whether err is about a kind the cluster does not serve (its CRD is not
// installed).
func IsNotServed(err error) bool { return errors.Is(err, errNotServed) }

// PodProxyGet GETs path from a pod's port through the API server's pod proxy: a pod that is
// not ready (which a Service's proxy skips) answers too.
func (c *Client) PodProxyGet(ctx context.Context, namespace, pod, port, path string) ([]byte, error) {
	b, err := c.cs.CoreV1().Pods(namespace).ProxyGet("http", pod, port, path, nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s from pod %s/%s:%s: %w%s", path, namespace, pod, port, err, proxyHint(err, stack.PodProxy, namespace))
	}
	return b, nil
}
