package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
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
	"k8s.io/utils/ptr"

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

// Operation is what a write did to one object.
type Operation string

const (
	Created    Operation = "created"
	Configured Operation = "configured"
	Unchanged  Operation = "unchanged"
	Deleted    Operation = "deleted"
	// MaybeCreated is an object that did not exist before Apply wrote it, whose write failed
	// or was cut short by another's failure: it may exist now (a request cancelled on our
	// side may still have been carried out). Only a failed Apply reports it.
	MaybeCreated Operation = "maybe created"
)

// New lists the objects of set that Apply created or may have created, per its report: what
// to remove when an apply that was to create a resource fails half-way.
func New(set stack.Set, ops map[string]Operation) stack.Set {
	var out stack.Set
	for _, o := range set {
		if op := ops[o.Key]; op == Created || op == MaybeCreated {
			out = append(out, o)
		}
	}
	return out
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
			return nil, fmt.Errorf("the cluster does not serve %s (is its CRD installed? Volcano Jobs need Volcano, see ctr_cluster): %w: %w", gvk.String(), errNotServed, err)
		}
		return nil, fmt.Errorf("discover %s: %w", gvk.String(), err)
	}
	return m, nil
}

// Apply server-side-applies every object with FieldManager, forcing ownership of
// the fields we set, and reports what each write did.
//
// Objects are applied in waves by kind (see kindOrder: namespaces and CRDs, then accounts
// and RBAC, configuration and policies, Services, workloads, webhooks), each wave's objects
// at once: what others depend on is in place first, and the objects of a 64-shard cube (two
// per shard) take a few round trips instead of one per object in a row. Which objects exist already is learnt
// first, for every wave at once (listExisting).
func (c *Client) Apply(ctx context.Context, set stack.Set) (map[string]Operation, error) {
	listed, err := c.listExisting(ctx, set)
	if err != nil {
		return nil, err
	}
	ops := map[string]Operation{}
	var mu sync.Mutex
	for _, wave := range waves(set) {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(applyParallel)
		for _, o := range wave {
			g.Go(func() error {
				op, err := c.applyOne(gctx, o.Object, listed)
				if op != "" {
					mu.Lock()
					ops[o.Key] = op
					mu.Unlock()
				}
				if err != nil {
					return err
				}
				c.logf("%s %s", Describe(o.Object), op)
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return ops, err
		}
	}
	return ops, nil
}

// applyParallel bounds the objects applied at once (the client allows 50 requests/s, bursts of
// 300). A wave's writes share the API server's CPU: they finish together, late, so a write
// that waits for a free slot adds a round trip of its own to the wave. 160 lets the waves of
// a 128-shard cube go out whole; what the API server's Priority and Fairness does not serve
// at once it queues (up to 6 queues of 50 for one user by default), and client-go retries a 429.
const applyParallel = 160

// waves splits set by kindOrder rank, keeping the set's order within a rank.
func waves(set stack.Set) []stack.Set {
	byRank := map[int]stack.Set{}
	var ranks []int
	for _, o := range set {
		r := order(o.Object.GetKind())
		if _, ok := byRank[r]; !ok {
			ranks = append(ranks, r)
		}
		byRank[r] = append(byRank[r], o)
	}
	sort.Ints(ranks)
	out := make([]stack.Set, 0, len(ranks))
	for _, r := range ranks {
		out = append(out, byRank[r])
	}
	return out
}

// listAtOnce is how many objects of one kind and namespace a set must have for Apply to
// learn which exist with one list of their metadata rather than a read of each: a 64-shard
// cube's 130 Services and StatefulSets take two requests, not 130, and stay inside the
// client's burst together with the writes and the waits that follow.
const listAtOnce = 4

// kindIn is a kind in a namespace ("" for cluster-scoped kinds).
type kindIn struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// listExisting lists, for each kind and namespace with at least listAtOnce objects in set,
// the resource version of every object of that kind there (metadata only), every kind at
// once. Objects of other kinds are not in the result, nor are kinds the cluster does not serve
// yet (their CRD is in the set): applyOne reads those one by one, once their wave comes.
func (c *Client) listExisting(ctx context.Context, set stack.Set) (map[kindIn]map[string]string, error) {
	count := map[kindIn]int{}
	for _, o := range set {
		count[kindIn{o.Object.GroupVersionKind(), o.Object.GetNamespace()}]++
	}
	out := map[kindIn]map[string]string{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for k, n := range count {
		if n < listAtOnce {
			continue
		}
		g.Go(func() error {
			versions, err := c.versions(gctx, k)
			if IsNotServed(err) {
				return nil
			}
			if err != nil {
				return err
			}
			mu.Lock()
			out[k] = versions
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}

// versions lists the resource version of every object of a kind in a namespace, by name.
func (c *Client) versions(ctx context.Context, k kindIn) (map[string]string, error) {
	lister, err := c.metadataOf(k.gvk, k.namespace)
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", k.gvk.Kind, err)
	}
	versions := map[string]string{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := lister.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s in %q: %w", k.gvk.Kind, k.namespace, err)
		}
		for _, item := range list.Items {
			versions[item.Name] = item.ResourceVersion
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return versions, nil
		}
	}
}

// applyOne server-side applies u and says whether that created, changed or left it. When
// the write fails on an object that did not exist, it says MaybeCreated with the error.
// listed holds what listExisting found of u's kind, if it listed it; otherwise u is read.
func (c *Client) applyOne(ctx context.Context, u *unstructured.Unstructured, listed map[kindIn]map[string]string) (Operation, error) {
	// Only the metadata of the object before and after the write matters here: asking for
	// nothing more spares the API server the encoding of whole objects, and us their decoding.
	ri, err := c.metadataOf(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", Describe(u), err)
	}
	var before *metav1.PartialObjectMetadata
	if versions, ok := listed[kindIn{u.GroupVersionKind(), u.GetNamespace()}]; ok {
		if rv, exists := versions[u.GetName()]; exists {
			before = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
		}
	} else if before, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", apiError("read", u, err)
		}
		before = nil
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return "", err
	}
	patch := func() (*metav1.PartialObjectMetadata, error) {
		return ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, applyOptions)
	}
	after, err := patch()
	if err == nil && after.DeletionTimestamp != nil {
		// The write landed on an object being deleted (an uninstall a moment ago; a CRD
		// waits for its custom resources to go): it would vanish after the apply, and a wait
		// for it would never end. Wait until it is gone, then create it afresh.
		c.logf("%s is being deleted; applying it once it is gone", Describe(u))
		if err = c.waitGone(ctx, stack.Set{{Key: stack.Key(u), Object: u}}); err != nil {
			return "", fmt.Errorf("apply %s: %w", Describe(u), err)
		}
		before = nil
		after, err = patch()
	}
	if err != nil {
		if before == nil {
			return MaybeCreated, apiError("apply", u, err)
		}
		return "", apiError("apply", u, err)
	}
	op := Created
	if before != nil && before.ResourceVersion != "" {
		op = Configured
		if before.ResourceVersion == after.ResourceVersion {
			op = Unchanged
		}
	}
	return op, nil
}

// applyOptions are every server-side apply's: our field manager, taking over the fields we set.
//
// FieldValidation is "Ignore" because the API server's default ("Warn") parses every apply
// body a second time, strictly, and that second parse can only find duplicate keys: an
// apply's unknown fields are refused whatever the directive (the server's typed conversion
// of the patch fails on them, "field not declared in schema"), and a body that MarshalJSON
// made from a map cannot repeat a key. The parse costs the API server about 35 ms of CPU for
// a 64-shard cube's Services and StatefulSets (BenchmarkStrictParseOfApplyBodies).
var applyOptions = metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true), FieldValidation: metav1.FieldValidationIgnore}

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

// Prune deletes owned objects of the given kinds that the set no longer renders. Objects
// created by controllers (pods, pod groups) carry copies of our labels but have owner
// references; they are left to the garbage collector.
func (c *Client) Prune(ctx context.Context, namespace, owner string, kinds []schema.GroupVersionKind, keep stack.Set) ([]string, error) {
	owned, err := c.Owned(ctx, namespace, owner, kinds)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, o := range keep {
		want[o.Key] = true
	}
	var pruned []string
	var gone stack.Set
	for _, u := range owned {
		if want[stack.Key(u)] || len(u.GetOwnerReferences()) > 0 {
			continue
		}
		if Retained(u) {
			c.logf("%s kept although no longer rendered (%s)", Describe(u), stack.RetainAnnotation)
			continue
		}
		if err := c.deleteOne(ctx, u); err != nil {
			return pruned, err
		}
		pruned = append(pruned, stack.Key(u))
		gone = append(gone, stack.Object{Key: stack.Key(u), Object: u})
		c.logf("%s pruned (no longer rendered)", Describe(u))
	}
	// Deletion is in the foreground (dependents first): wait until it is done, so that an
	// apply that removed a shard has removed it when it returns.
	if len(gone) > 0 {
		if err := c.waitGone(ctx, gone); err != nil {
			return pruned, err
		}
	}
	return pruned, nil
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

// waitGone waits until none of the objects exists, logging what is left.
// A CustomResourceDefinition whose custom resources the API server failed to delete is
// nudged to retry (see CleanupRetryAnnotation) rather than left to the server's backoff.
func (c *Client) waitGone(ctx context.Context, set stack.Set) error {
	var left []string
	retried := map[string]time.Time{}
	_, err := c.Poll(ctx, pollEvery, func(ctx context.Context) (bool, string, error) {
		left = left[:0]
		for _, o := range set {
			live, err := c.Get(ctx, o.Object)
			if err != nil && !errors.Is(err, errNotServed) {
				return false, "", err
			}
			if live == nil {
				continue
			}
			left = append(left, Describe(o.Object))
			if why, failed := crdCleanupFailed(live); failed && time.Since(retried[o.Key]) >= cleanupRetryEvery {
				if err := c.retryCRDCleanup(ctx, live, why); err != nil {
					return false, "", err
				}
				retried[o.Key] = time.Now()
			}
		}
		return len(left) == 0, fmt.Sprintf("waiting for %d objects to go: %s", len(left), strings.Join(left, ", ")), nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("timed out waiting for deletion of %s: %w", strings.Join(left, ", "), err)
	}
	return err
}

func (c *Client) deleteOne(ctx context.Context, u *unstructured.Unstructured) error {
	ri, err := c.resource(u.GroupVersionKind(), u.GetNamespace())
	if errors.Is(err, errNotServed) {
		return nil // its CRD is gone, and the object with it
	}
	if err != nil {
		return err
	}
	err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError("delete", u, err)
	}
	return nil
}

// DeleteAll deletes every owned object of the given kinds and every object of named (what
// the resource's state says it owns, found by name even if someone removed its owner label),
// dependents in the foreground, and waits until none of them, and no object of the extra
// kinds with the owner label (pods, pod groups), is left, logging progress. Owned objects
// marked retained (stack.RetainAnnotation) are left in place and returned.
func (c *Client) DeleteAll(ctx context.Context, namespace, owner string, kinds, extra []schema.GroupVersionKind, named stack.Set) (kept []*unstructured.Unstructured, err error) {
	owned, err := c.Owned(ctx, namespace, owner, kinds)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, u := range owned {
		seen[ManifestKey(u)] = true
	}
	owned, kept = c.withoutRetained(owned)
	var unlabelled stack.Set
	for _, o := range named {
		if !seen[ManifestKey(o.Object)] {
			unlabelled = append(unlabelled, o)
		}
	}
	// Delete in reverse apply order: workloads before the volumes and accounts they use.
	for i := len(owned) - 1; i >= 0; i-- {
		if err := c.deleteOne(ctx, owned[i]); err != nil {
			return kept, err
		}
		c.logf("%s deletion requested", Describe(owned[i]))
	}
	for i := len(unlabelled) - 1; i >= 0; i-- {
		u := unlabelled[i].Object
		if err := c.deleteOne(ctx, u); err != nil {
			return kept, err
		}
		c.logf("%s deletion requested (named in state; it no longer carries the owner label)", Describe(u))
	}
	all := append(append([]schema.GroupVersionKind{}, kinds...), extra...)
	var left []string
	_, err = c.Poll(ctx, pollEvery, func(ctx context.Context) (bool, string, error) {
		owned, err := c.Owned(ctx, namespace, owner, all)
		if err != nil {
			return false, "", err
		}
		owned = slices.DeleteFunc(owned, Retained)
		left = left[:0]
		for _, u := range owned {
			left = append(left, Describe(u))
		}
		for _, o := range unlabelled {
			live, err := c.Get(ctx, o.Object)
			if err != nil && !errors.Is(err, errNotServed) {
				return false, "", err
			}
			if live != nil {
				left = append(left, Describe(o.Object))
			}
		}
		return len(left) == 0, fmt.Sprintf("waiting for %d objects to go: %s", len(left), strings.Join(left, ", ")), nil
	})
	if wait.Interrupted(err) {
		return kept, fmt.Errorf("timed out waiting for deletion of %s: %w", strings.Join(left, ", "), err)
	}
	if err != nil {
		return kept, err
	}
	c.logf("everything owned by %s in %s is gone", owner, namespace)
	return kept, nil
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
		return nil, fmt.Errorf("GET %s from Service %s/%s:%s: %w", path, namespace, service, port, err)
	}
	return b, nil
}

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

// Left names the objects of set that exist and are not being deleted: what a delete that
// failed half-way left behind.
func (c *Client) Left(ctx context.Context, set stack.Set) []string {
	var out []string
	for _, o := range set {
		live, err := c.Get(ctx, o.Object)
		if err != nil && !errors.Is(err, errNotServed) {
			out = append(out, Describe(o.Object)+" (could not be read: "+err.Error()+")")
			continue
		}
		if live != nil && live.GetDeletionTimestamp() == nil {
			out = append(out, Describe(o.Object))
		}
	}
	return out
}

// Retained reports whether an object carries stack.RetainAnnotation: deleting its resource
// leaves it, and pruning too.
func Retained(u *unstructured.Unstructured) bool {
	return u.GetAnnotations()[stack.RetainAnnotation] == "true"
}

// withoutRetained splits off retained objects, saying so.
func (c *Client) withoutRetained(us []*unstructured.Unstructured) (rest, retained []*unstructured.Unstructured) {
	for _, u := range us {
		if Retained(u) {
			c.logf("%s kept (%s): delete it yourself once nothing needs it", Describe(u), stack.RetainAnnotation)
			retained = append(retained, u)
			continue
		}
		rest = append(rest, u)
	}
	return rest, retained
}
