package kube

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

var claimGVK = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}

// WaitClaimsGone waits until no PersistentVolumeClaim that matches selector is left in
// namespace. A StatefulSet's claims, made from its volumeClaimTemplates, carry its selector's
// labels, not the owner label; with persistentVolumeClaimRetentionPolicy whenDeleted=Delete
// the garbage collector removes them once the StatefulSet is gone.
func (c *Client) WaitClaimsGone(ctx context.Context, namespace string, selector map[string]string) error {
	ri, err := c.resource(claimGVK, namespace)
	if err != nil {
		return err
	}
	sel := labels.SelectorFromSet(selector).String()
	var left []string
	_, err = c.Poll(ctx, pollEvery, func(ctx context.Context) (bool, string, error) {
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, "", fmt.Errorf("list claims %s in %s: %w", sel, namespace, err)
		}
		left = left[:0]
		for _, u := range list.Items {
			left = append(left, u.GetName())
		}
		return len(left) == 0, fmt.Sprintf("waiting for %d claims to go: %s", len(left), strings.Join(left, ", ")), nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("timed out waiting for the claims %s in %s to go: %w", strings.Join(left, ", "), namespace, err)
	}
	return err
}
