package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

func TestCRDCleanupFailed(t *testing.T) {
	crd := func(deleting bool, reason string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "widgets.example.com"},
			"status": map[string]any{"conditions": []any{
				map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
				map[string]any{"type": "Terminating", "status": "True", "reason": reason, "message": "could not list instances: storage is (re)initializing"},
			}},
		}}
		if deleting {
			u.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
		}
		return u
	}
	why, failed := crdCleanupFailed(crd(true, "InstanceDeletionFailed"))
	assert.True(t, failed)
	assert.Equal(t, "could not list instances: storage is (re)initializing", why)
	_, failed = crdCleanupFailed(crd(true, "InstanceDeletionInProgress"))
	assert.False(t, failed, "deletion in progress is not stuck")
	_, failed = crdCleanupFailed(crd(false, "InstanceDeletionFailed"))
	assert.False(t, failed, "a CRD that is not being deleted")
	cm := crd(true, "InstanceDeletionFailed")
	cm.SetKind("ConfigMap")
	_, failed = crdCleanupFailed(cm)
	assert.False(t, failed, "only CRDs")
}

// TestClient_DeleteSetRetriesAStuckCRDCleanup: a CRD whose custom resources the API server
// cannot delete (here: the one instance needs a conversion webhook that is down) is stuck
// with InstanceDeletionFailed, and the server's retries back off. While it is stuck, the wait
// asks the server to retry (the annotation, and a log line that says why); once the cause is
// gone, the CRD goes and DeleteSet returns.
func TestClient_DeleteSetRetriesAStuckCRDCleanup(t *testing.T) {
	c, _, _, lines := liveClient(t)
	ctx := context.Background()
	group := "cleanup-retry.ctr.test"
	crd := widgetCRD(t, c, group, "Cluster", crdVersion("v1", true))
	name := crd.GetName()
	crds := c.dyn.Resource(crdGVR)
	v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	var err error
	require.Eventually(t, func() bool {
		_, err = c.dyn.Resource(v1).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
		}}, metav1.CreateOptions{})
		return err == nil
	}, 30*time.Second, pollEvery, "create a Widget: %v", err)

	// v2 becomes the storage version, and converting the stored v1 Widget needs a webhook
	// nobody serves: the API server can no longer list the Widgets it has to delete.
	live, err := crds.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedSlice(live.Object, []any{crdVersion("v1", false), crdVersion("v2", true)}, "spec", "versions"))
	require.NoError(t, unstructured.SetNestedMap(live.Object, map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig":             map[string]any{"url": "https://127.0.0.1:1/convert"},
		},
	}, "spec", "conversion"))
	_, err = crds.Update(ctx, live, metav1.UpdateOptions{})
	require.NoError(t, err)

	set := stack.Set{{Key: "crd", Object: crd}}
	done := make(chan error, 1)
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	go func() { done <- c.DeleteSet(waitCtx, set) }()

	// The retry it asked for clears the failure for a moment, until the API server fails again:
	// the CRD is read until it shows both.
	var why string
	require.Eventually(t, func() bool {
		stuck, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil || stuck.GetAnnotations()[CleanupRetryAnnotation] == "" {
			return false
		}
		var failed bool
		why, failed = crdCleanupFailed(stuck)
		return failed
	}, time.Minute, pollEvery, "the wait never asked the API server to retry, or the clean-up never failed again")
	assert.Contains(t, why, "could not list instances")

	// The cause goes (no conversion needed any more); the CRD follows. The client and the API
	// server write the CRD meanwhile (the retry annotation, the failed condition): a conflict
	// is read again and retried, for up to about 12 s (retry.DefaultRetry's five tries in 50 ms
	// all met the API server's writes once).
	backoff := wait.Backoff{Steps: 20, Duration: 20 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Cap: time.Second}
	require.NoError(t, retry.RetryOnConflict(backoff, func() error {
		live, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedMap(live.Object, map[string]any{"strategy": "None"}, "spec", "conversion"); err != nil {
			return err
		}
		_, err = crds.Update(ctx, live, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(t, <-done)
	retried := false
	for _, l := range *lines {
		retried = retried || strings.Contains(l, "CustomResourceDefinition "+name+": the API server failed to delete its custom resources (could not list instances")
	}
	assert.True(t, retried, "no log line says why the wait retried: %q", *lines)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdVersion is a version of widgetCRD, of any content.
func crdVersion(name string, storage bool) map[string]any {
	return map[string]any{"name": name, "served": true, "storage": storage, "schema": map[string]any{
		"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
	}}
}

// widgetCRD creates the CRD of Widgets in group with versions, waits until it is established,
// and deletes it when the test ends (also when the test left it stuck: see
// TestClient_DeleteSetRetriesAStuckCRDCleanup).
func widgetCRD(t *testing.T, c *Client, group, scope string, versions ...map[string]any) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	name := "widgets." + group
	vs := make([]any, len(versions))
	for i, v := range versions {
		vs[i] = v
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "scope": scope,
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": vs,
		},
	}}
	crds := c.dyn.Resource(crdGVR)
	_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		if live, err := crds.Get(ctx, name, metav1.GetOptions{}); err == nil {
			_ = unstructured.SetNestedMap(live.Object, map[string]any{"strategy": "None"}, "spec", "conversion")
			_, _ = crds.Update(ctx, live, metav1.UpdateOptions{})
		}
		_ = crds.Delete(ctx, name, metav1.DeleteOptions{})
	})
	_, err = c.Poll(ctx, pollEvery, func(ctx context.Context) (bool, string, error) {
		live, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return CRDEstablished(live)
	})
	require.NoError(t, err)
	return crd
}

// TestClient_ApplyLogsEachWarningOnce: the API server's warnings (here: a deprecated
// version's, on every request to it) go to the client's log, each text once, not to stderr
// once per request.
func TestClient_ApplyLogsEachWarningOnce(t *testing.T) {
	c, _, ns, lines := liveClient(t)
	group := "warnings.ctr.test"
	const warning = "widgets.warnings.ctr.test/v1 is going away"
	v1 := crdVersion("v1", true)
	v1["deprecated"], v1["deprecationWarning"] = true, warning
	widgetCRD(t, c, group, "Namespaced", v1)
	var set stack.Set
	for i := range listAtOnce + 1 {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w-%d", i), "namespace": ns},
		}}
		set = append(set, stack.Object{Key: stack.Key(u), Object: u})
	}
	var ops map[string]Operation
	var err error
	require.Eventually(t, func() bool { // discovery may lag the CRD's establishment
		ops, err = c.Apply(context.Background(), set)
		return err == nil
	}, 30*time.Second, pollEvery, "apply: %v", err)
	assert.Len(t, ops, len(set))
	n := 0
	for _, l := range *lines {
		if strings.Contains(l, warning) {
			n++
			assert.Equal(t, "Warning from the API server: "+warning, l)
		}
	}
	assert.Equal(t, 1, n, "the warning, once: %q", *lines)
}
