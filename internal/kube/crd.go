package kube

import (
	"context"
	"encoding/json"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// CleanupRetryAnnotation is written to a CustomResourceDefinition whose deletion is stuck
// because the API server failed to delete its custom resources. The API server's CRD
// finalizer retries a failure with an exponential backoff that reaches minutes (a CRD deleted
// while its storage is still initializing fails with "storage is (re)initializing" over and
// over), but it retries at once on any change to the CRD other than its Terminating
// condition: this annotation is that change.
const CleanupRetryAnnotation = "ctr.elasticctr.io/cleanup-retry"

// cleanupRetryEvery is how often a stuck CRD deletion is retried.
const cleanupRetryEvery = 2 * time.Second

// crdCleanupFailed says whether u is a CustomResourceDefinition being deleted whose last
// attempt to delete its custom resources failed, and why.
func crdCleanupFailed(u *unstructured.Unstructured) (string, bool) {
	if u.GetKind() != "CustomResourceDefinition" || u.GetDeletionTimestamp() == nil {
		return "", false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Terminating" && m["reason"] == "InstanceDeletionFailed" {
			msg, _ := m["message"].(string)
			return msg, true
		}
	}
	return "", false
}

// retryCRDCleanup makes the API server retry the deletion of a stuck CRD's custom resources
// now (see CleanupRetryAnnotation). A CRD that is gone is no error.
func (c *Client) retryCRDCleanup(ctx context.Context, u *unstructured.Unstructured, why string) error {
	ri, err := c.resource(u.GroupVersionKind(), "")
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		CleanupRetryAnnotation: time.Now().UTC().Format(time.RFC3339Nano),
	}}})
	if err != nil {
		return err
	}
	c.logf("%s: the API server failed to delete its custom resources (%s); asking it to retry now", Describe(u), why)
	_, err = ri.Patch(ctx, u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError("retry the deletion of", u, err)
	}
	return nil
}
