package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

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

// CreatedBy lists the objects of set that Apply created or may have created, per its report:
// what to remove when an apply that was to create a resource fails half-way.
func CreatedBy(set stack.Set, ops map[string]Operation) stack.Set {
	var out stack.Set
	for _, o := range set {
		if op := ops[o.Key]; op == Created || op == MaybeCreated {
			out = append(out, o)
		}
	}
	return out
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
	return c.apply(ctx, set, "", false)
}

// ApplyOwned is Apply for the objects of one owner (stack.OwnerLabel): an object of the set
// that exists without that owner label (someone else's, or made by hand) is not taken over;
// the apply stops there with a NotOwnedError naming it. With adopt, an existing object with
// no owner label at all (made by hand, or by a script before ctr) is taken over and labelled;
// one with another owner's label never is.
func (c *Client) ApplyOwned(ctx context.Context, set stack.Set, owner string, adopt bool) (map[string]Operation, error) {
	return c.apply(ctx, set, owner, adopt)
}

// NotOwnedError is an object that exists and does not carry the owner label of the resource
// that was to apply it.
type NotOwnedError struct {
	Object      string // as Describe names it
	Owner, Have string // the owner label wanted, and the one the object has ("" for none)
}

func (e *NotOwnedError) Error() string {
	have := "no owner label"
	if e.Have != "" {
		have = "owner label " + stack.OwnerLabel + "=" + e.Have
	}
	return fmt.Sprintf("%s exists and is not %s's (%s): ctr does not take over an object it did not create. "+
		"Delete or rename it, manage it with the resource that owns it, or (when it has no owner label) set adopt = true to take it over", e.Object, e.Owner, have)
}

func (c *Client) apply(ctx context.Context, set stack.Set, owner string, adopt bool) (map[string]Operation, error) {
	if err := c.checkServed(set); err != nil {
		return nil, err
	}
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
				op, err := c.applyOne(gctx, o.Object, listed, owner, adopt)
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

// checkServed fails, before anything is written, when the cluster does not serve a kind of
// the set that no CustomResourceDefinition of the set defines (a PodMonitor without the
// Prometheus Operator): the apply would otherwise stop at that kind's wave with the objects
// of the waves before it written.
func (c *Client) checkServed(set stack.Set) error {
	defined := map[schema.GroupKind]bool{}
	for _, o := range set {
		if o.Object.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object.Object, "spec", "names", "kind")
		defined[schema.GroupKind{Group: group, Kind: kind}] = true
	}
	checked := map[schema.GroupVersionKind]bool{}
	for _, o := range set {
		gvk := o.Object.GroupVersionKind()
		if checked[gvk] || defined[gvk.GroupKind()] {
			continue
		}
		checked[gvk] = true
		if _, err := c.mapping(gvk); err != nil {
			return fmt.Errorf("apply %s: %w", Describe(o.Object), err)
		}
	}
	return nil
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
func (c *Client) listExisting(ctx context.Context, set stack.Set) (map[kindIn]map[string]existing, error) {
	count := map[kindIn]int{}
	for _, o := range set {
		count[kindIn{o.Object.GroupVersionKind(), o.Object.GetNamespace()}]++
	}
	out := map[kindIn]map[string]existing{}
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
// existing is what a list tells of an object: its version, its owner label and who set which
// of its fields.
type existing struct {
	version, owner string
	managed        []metav1.ManagedFieldsEntry
}

func (c *Client) versions(ctx context.Context, k kindIn) (map[string]existing, error) {
	lister, err := c.metadataOf(k.gvk, k.namespace)
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", k.gvk.Kind, err)
	}
	versions := map[string]existing{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := lister.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s in %q: %w", k.gvk.Kind, k.namespace, err)
		}
		for _, item := range list.Items {
			versions[item.Name] = existing{item.ResourceVersion, item.Labels[stack.OwnerLabel], item.ManagedFields}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return versions, nil
		}
	}
}

// applyOne server-side applies u and says whether that created, changed or left it. When
// the write fails on an object that did not exist, it says MaybeCreated with the error.
// listed holds what listExisting found of u's kind, if it listed it; otherwise u is read.
func (c *Client) applyOne(ctx context.Context, u *unstructured.Unstructured, listed map[kindIn]map[string]existing, owner string, adopt bool) (Operation, error) {
	// Only the metadata of the object before and after the write matters here: asking for
	// nothing more spares the API server the encoding of whole objects, and us their decoding.
	ri, err := c.metadataOf(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", Describe(u), err)
	}
	var before *metav1.PartialObjectMetadata
	if versions, ok := listed[kindIn{u.GroupVersionKind(), u.GetNamespace()}]; ok {
		if e, exists := versions[u.GetName()]; exists {
			before = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: e.version, Labels: map[string]string{stack.OwnerLabel: e.owner},
				ManagedFields: e.managed}}
		}
	} else if before, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", apiError("read", u, err)
		}
		before = nil
	}
	if owner != "" && before != nil {
		have := before.Labels[stack.OwnerLabel]
		if have != owner && (have != "" || !adopt) {
			return "", &NotOwnedError{Object: Describe(u), Owner: owner, Have: have}
		}
	}
	if before != nil && releasesReplicas(u, before.ManagedFields) {
		if err := c.handOverReplicas(ctx, u); err != nil {
			return "", err
		}
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return "", err
	}
	patch := func() (*metav1.PartialObjectMetadata, error) {
		return ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, applyOptions)
	}
	after, err := patch()
	if err != nil && leavesRollingUpdate(u, err) {
		// A StatefulSet that an earlier ctr rendered RollingUpdate keeps the rollingUpdate
		// block the API server defaulted, which no manager owns, so the apply that turns it
		// OnDelete cannot remove it and is refused: clear it, then apply.
		if err = c.clearRollingUpdate(ctx, u); err == nil {
			after, err = patch()
		}
	}
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

// leavesRollingUpdate says whether err refused applying u, a StatefulSet to be rolled
// OnDelete, because the live object keeps its spec.updateStrategy.rollingUpdate.
func leavesRollingUpdate(u *unstructured.Unstructured, err error) bool {
	strategy, _, _ := unstructured.NestedString(u.Object, "spec", "updateStrategy", "type")
	if u.GetKind() != "StatefulSet" || strategy != "OnDelete" || !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "spec.updateStrategy.rollingUpdate" {
			return true
		}
	}
	return false
}

// clearRollingUpdate turns the live StatefulSet of u OnDelete and removes its rollingUpdate
// block, with a JSON merge patch (null removes a field whoever set it).
func (c *Client) clearRollingUpdate(ctx context.Context, u *unstructured.Unstructured) error {
	ri, err := c.metadataOf(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	body := []byte(`{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}`)
	if _, err := ri.Patch(ctx, u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return apiError("turn OnDelete", u, err)
	}
	c.logf("%s: its pods are replaced by the apply from now on (update strategy OnDelete)", Describe(u))
	return nil
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

// kindOrder installs what others depend on first: namespaces and CRDs, then accounts and
// RBAC, then configuration, claims, network policies and disruption budgets (in force before
// any pod they protect), Services, then workloads, then what acts on workloads (autoscalers,
// which target a Deployment that exists by then; PodMonitors, which select its pods), and
// admission webhooks last (a webhook that points at a Service which is not up yet would block
// everything after it).
var kindOrder = map[string]int{
	"Namespace": 0, "CustomResourceDefinition": 1, "PriorityClass": 2,
	"ServiceAccount": 3, "ClusterRole": 4, "ClusterRoleBinding": 5, "Role": 4, "RoleBinding": 5,
	"Secret": 6, "ConfigMap": 6, "PersistentVolumeClaim": 6, "NetworkPolicy": 6, "PodDisruptionBudget": 6,
	"Service": 7, "Deployment": 8, "StatefulSet": 8, "DaemonSet": 8, "Job": 9, "HorizontalPodAutoscaler": 9, "PodMonitor": 9,
	"MutatingWebhookConfiguration": 10, "ValidatingWebhookConfiguration": 10,
}

func order(kind string) int {
	if o, ok := kindOrder[kind]; ok {
		return o
	}
	return 9
}

// HandoverManager is the field manager that keeps a workload's spec.replicas when an apply
// stops setting it (a serving given an autoscaler): see handOverReplicas.
const HandoverManager = FieldManager + "-handover"

// releasesReplicas says whether applying u gives up spec.replicas: u leaves it out, and our
// field manager's last apply set it (managed are the live object's managed fields).
func releasesReplicas(u *unstructured.Unstructured, managed []metav1.ManagedFieldsEntry) bool {
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); found {
		return false
	}
	for _, m := range managed {
		if m.Manager != FieldManager || m.Operation != metav1.ManagedFieldsOperationApply || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		if json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields) == nil {
			if _, ok := fields["f:spec"]["f:replicas"]; ok {
				return true
			}
		}
	}
	return false
}

// handOverReplicas makes HandoverManager co-owner of the live spec.replicas of u's object, at
// the value it has. Server-side apply removes a field that an apply leaves out when no other
// manager owns it, and the API server then defaults a Deployment's replicas to 1: a serving of
// 3 pods given an autoscaler would drop to 1 until the autoscaler scales it up again. With a
// co-owner the field stays; the autoscaler's first change of it takes it over
// (Kubernetes' "transferring ownership" of server-side apply).
func (c *Client) handOverReplicas(ctx context.Context, u *unstructured.Unstructured) error {
	live, err := c.Get(ctx, u)
	if err != nil || live == nil {
		return err
	}
	replicas, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	if !found {
		return nil
	}
	keep := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
	keep.SetAPIVersion(u.GetAPIVersion())
	keep.SetKind(u.GetKind())
	keep.SetName(u.GetName())
	keep.SetNamespace(u.GetNamespace())
	body, err := keep.MarshalJSON()
	if err != nil {
		return err
	}
	ri, err := c.metadataOf(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return fmt.Errorf("apply %s: %w", Describe(u), err)
	}
	opts := applyOptions
	opts.FieldManager = HandoverManager
	if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts); err != nil {
		return apiError("hand over spec.replicas of", u, err)
	}
	c.logf("%s keeps its %d replicas; spec.replicas is handed over (%s)", Describe(u), replicas, HandoverManager)
	return nil
}
