package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

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

// DeleteAll deletes every owned object of the given kinds, dependents in the foreground, and
// waits until none of them, and no object of the extra kinds with the owner label (pods, pod
// groups), is left, logging progress. Owned objects marked retained (stack.RetainAnnotation)
// are left in place and returned as kept; objects of named (what the resource's state says
// it owns) that exist without the owner label are not touched and returned as foreign.
func (c *Client) DeleteAll(ctx context.Context, namespace, owner string, kinds, extra []schema.GroupVersionKind, named stack.Set) (kept, foreign []*unstructured.Unstructured, err error) {
	owned, err := c.Owned(ctx, namespace, owner, kinds)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	for _, u := range owned {
		seen[ManifestKey(u)] = true
	}
	owned, kept = c.withoutRetained(owned)
	// An object the state names that no longer carries the owner label (taken off by hand, or
	// never ctr's) is not deleted: ctr deletes only what it owns. It is reported.
	foreignUIDs := map[types.UID]bool{}
	for _, o := range named {
		if seen[ManifestKey(o.Object)] {
			continue
		}
		live, err := c.Get(ctx, o.Object)
		if err != nil && !errors.Is(err, errNotServed) {
			return kept, foreign, err
		}
		if live != nil {
			foreign = append(foreign, live)
			foreignUIDs[live.GetUID()] = true
			c.logf("%s left: named in state, but it does not carry the owner label %s=%s", Describe(live), stack.OwnerLabel, owner)
		}
	}
	// Delete in reverse apply order: workloads before the volumes and accounts they use.
	for i := len(owned) - 1; i >= 0; i-- {
		if err := c.deleteOne(ctx, owned[i]); err != nil {
			return kept, foreign, err
		}
		c.logf("%s deletion requested", Describe(owned[i]))
	}
	all := append(append([]schema.GroupVersionKind{}, kinds...), extra...)
	var left []string
	_, err = c.Poll(ctx, pollEvery, func(ctx context.Context) (bool, string, error) {
		owned, err := c.Owned(ctx, namespace, owner, all)
		if err != nil {
			return false, "", err
		}
		owned = slices.DeleteFunc(owned, Retained)
		// What a left object controls (a Volcano job's pods and pod group) stays with it.
		owned = slices.DeleteFunc(owned, func(u *unstructured.Unstructured) bool {
			return slices.ContainsFunc(u.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return foreignUIDs[r.UID] })
		})
		left = left[:0]
		for _, u := range owned {
			left = append(left, Describe(u))
		}
		return len(left) == 0, fmt.Sprintf("waiting for %d objects to go: %s", len(left), strings.Join(left, ", ")), nil
	})
	if wait.Interrupted(err) {
		return kept, foreign, fmt.Errorf("timed out waiting for deletion of %s: %w", strings.Join(left, ", "), err)
	}
	if err != nil {
		return kept, foreign, err
	}
	c.logf("everything owned by %s in %s is gone", owner, namespace)
	return kept, foreign, nil
}

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
