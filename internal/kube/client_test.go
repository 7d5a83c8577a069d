package kube

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// liveClient connects to the local control plane that `make test` starts; these tests
// need a real API server (server-side apply, watches, garbage collection).
func liveClient(t *testing.T) (*Client, kubernetes.Interface, string, *[]string) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" || os.Getenv("KUBECONFIG") == "" {
		t.Skip("needs the local control plane: make test starts it (TF_ACC=1, KUBECONFIG)")
	}
	cfg, err := Connection{ConfigPaths: []string{os.Getenv("KUBECONFIG")}}.RESTConfig()
	require.NoError(t, err)
	c, err := NewClient(cfg)
	require.NoError(t, err)
	var mu sync.Mutex
	var lines []string
	c.Log = func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock(); t.Log(s) }
	c.ProgressEvery = time.Second
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := "kube-" + strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	if len(ns) > 50 {
		ns = ns[:50]
	}
	_, err = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return c, cs, ns, &lines
}

func configMap(ns, name, owner, value string) stack.Object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{stack.OwnerLabel: owner}},
		"data":     map[string]any{"k": value},
	}}
	return stack.Object{Key: stack.Key(u), Object: u}
}

var cmKind = []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}

func TestClient_ApplyReportsWhatItDid(t *testing.T) {
	c, _, ns, lines := liveClient(t)
	ctx := context.Background()
	set := stack.Set{configMap(ns, "a", "o", "1"), configMap(ns, "b", "o", "1")}
	ops, err := c.Apply(ctx, set)
	require.NoError(t, err)
	assert.Equal(t, Created, ops[set[0].Key])
	ops, err = c.Apply(ctx, set)
	require.NoError(t, err)
	assert.Equal(t, Unchanged, ops[set[0].Key])
	set[1] = configMap(ns, "b", "o", "2")
	ops, err = c.Apply(ctx, set)
	require.NoError(t, err)
	assert.Equal(t, Unchanged, ops[set[0].Key])
	assert.Equal(t, Configured, ops[set[1].Key])
	assert.Contains(t, *lines, "ConfigMap "+ns+"/b configured")
}

func TestClient_PruneAndDeleteAll(t *testing.T) {
	c, cs, ns, _ := liveClient(t)
	ctx := context.Background()
	_, err := c.Apply(ctx, stack.Set{configMap(ns, "keep", "o", "1"), configMap(ns, "stale", "o", "1"), configMap(ns, "other", "someone-else", "1")})
	require.NoError(t, err)
	pruned, err := c.Prune(ctx, ns, "o", cmKind, stack.Set{configMap(ns, "keep", "o", "1")})
	require.NoError(t, err)
	assert.Equal(t, []string{"v1/ConfigMap/stale"}, pruned)
	_, _, err = c.DeleteAll(ctx, ns, "o", cmKind, nil, nil)
	require.NoError(t, err)
	left, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: stack.OwnerLabel})
	require.NoError(t, err)
	require.Len(t, left.Items, 1, "only the object of another owner is left")
	assert.Equal(t, "other", left.Items[0].Name)
}

// Retained objects (stack.RetainAnnotation) outlive their resource: neither a prune nor a
// delete of everything it owns takes them, even when the state names them; both say so.
func TestClient_RetainedObjectsOutliveDeleteAndPrune(t *testing.T) {
	c, cs, ns, lines := liveClient(t)
	ctx := context.Background()
	kept := configMap(ns, "model", "o", "1")
	kept.Object.SetAnnotations(map[string]string{stack.RetainAnnotation: "true"})
	_, err := c.Apply(ctx, stack.Set{kept, configMap(ns, "gone", "o", "1")})
	require.NoError(t, err)
	pruned, err := c.Prune(ctx, ns, "o", cmKind, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"v1/ConfigMap/gone"}, pruned)
	left0, _, err := c.DeleteAll(ctx, ns, "o", cmKind, nil, stack.Set{kept})
	require.NoError(t, err)
	require.Len(t, left0, 1, "DeleteAll returns what it kept")
	assert.Equal(t, "model", left0[0].GetName())
	left, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=o"})
	require.NoError(t, err)
	require.Len(t, left.Items, 1)
	assert.Equal(t, "model", left.Items[0].Name)
	assert.Contains(t, strings.Join(*lines, "\n"), "ConfigMap "+ns+"/model kept ("+stack.RetainAnnotation+")")
	// Without the annotation it goes like the rest.
	_, err = c.Apply(ctx, stack.Set{configMap(ns, "model", "o", "1")})
	require.NoError(t, err)
	_, _, err = c.DeleteAll(ctx, ns, "o", cmKind, nil, nil)
	require.NoError(t, err)
	left, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: stack.OwnerLabel + "=o"})
	require.NoError(t, err)
	assert.Empty(t, left.Items)
}

func TestClient_ErrorsNameTheObjectAndReason(t *testing.T) {
	c, _, ns, _ := liveClient(t)
	bad := configMap(ns, "Not_A_Valid_Name", "o", "1")
	_, err := c.Apply(context.Background(), stack.Set{bad})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apply ConfigMap "+ns+"/Not_A_Valid_Name: Invalid")
	assert.Contains(t, err.Error(), "the API server rejected the object")
}

// Apply asks the API server not to parse a body a second time for duplicate keys
// (applyOptions); a field the server does not know is refused all the same, of a built-in
// kind and of a custom resource, and nothing is created.
func TestClient_ApplyRefusesUnknownFields(t *testing.T) {
	c, _, ns, _ := liveClient(t)
	ctx := context.Background()
	cm := configMap(ns, "unknown-field", "o", "1")
	cm.Object.Object["bogus"] = "x"
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
		"metadata": map[string]any{"name": "unknown-field", "namespace": ns},
		"spec": map[string]any{"minAvailable": int64(1), "bogusSpec": int64(1), "tasks": []any{map[string]any{
			"name": "t", "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x"}}}},
		}}},
	}}
	for _, o := range []stack.Object{cm, {Key: stack.Key(job), Object: job}} {
		_, err := c.Apply(ctx, stack.Set{o})
		require.Error(t, err, o.Key)
		assert.Contains(t, err.Error(), "not declared in schema", o.Key)
		assert.Contains(t, err.Error(), Describe(o.Object))
		live, err := c.Get(ctx, o.Object)
		require.NoError(t, err)
		assert.Nil(t, live, "%s must not exist", o.Key)
	}
}

func TestClient_WaitForDeploymentWithProgress(t *testing.T) {
	c, _, ns, lines := liveClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set, err := stack.RenderTrainingJob(stack.TrainingJob{Name: "w", Namespace: ns, ProviderVersion: "1.2.3"})
	require.NoError(t, err)
	dep := set.Find("apps/v1/Deployment/w-fileserver")
	require.NotNil(t, dep)
	// Wait first, create after: the watch must see the object appear.
	go func() {
		time.Sleep(500 * time.Millisecond)
		if _, err := c.Apply(context.Background(), set); err != nil {
			t.Error(err)
		}
	}()
	live, err := c.WaitFor(ctx, dep, DeploymentAvailable)
	require.NoError(t, err)
	avail, _, _ := unstructured.NestedInt64(live.Object, "status", "availableReplicas")
	assert.Equal(t, int64(1), avail)
	assert.Contains(t, strings.Join(*lines, "\n"), "Deployment "+ns+"/w-fileserver: 1/1 replicas available")
	// The last line tells how long the wait took: at least the 500 ms before the object existed.
	_, waited, found := strings.Cut((*lines)[len(*lines)-1], "Deployment "+ns+"/w-fileserver"+WaitedMarker)
	require.True(t, found, "no wait summary in %q", *lines)
	d, err := time.ParseDuration(waited)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, 500*time.Millisecond)
	owner := stack.Owner(stack.TrainingJobType, "w")
	_, _, err = c.DeleteAll(context.Background(), ns, owner, stack.TrainingJobKinds, stack.ControllerKinds, nil)
	require.NoError(t, err)
}

func TestClient_WaitTimesOutWithLastState(t *testing.T) {
	c, _, ns, _ := liveClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.WaitFor(ctx, configMap(ns, "never", "o", "1").Object, func(*unstructured.Unstructured) (bool, string, error) {
		return false, "", nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ConfigMap "+ns+"/never did not become ready in time")
}

// TestClient_FailedApplySaysWhatItCreated: the API server refuses one object of a wave; the
// report names what was created, and what may have been, for the clean-up of a failed create.
func TestClient_FailedApplySaysWhatItCreated(t *testing.T) {
	c, _, ns, _ := liveClient(t)
	ctx := context.Background()
	existing := configMap(ns, "existing", "o", "1")
	_, err := c.Apply(ctx, stack.Set{existing})
	require.NoError(t, err)
	// The refused object comes in a later wave (Services after ConfigMaps): the ConfigMap's
	// write has finished when it is refused. Refused with it in one wave, the ConfigMap's write
	// might be cut short, and would count as MaybeCreated.
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "Not_Valid", "namespace": ns},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}}
	set := stack.Set{existing, configMap(ns, "new", "o", "1"), {Key: stack.Key(bad), Object: bad}}
	ops, err := c.Apply(ctx, set)
	require.Error(t, err)
	assert.Equal(t, Unchanged, ops[set[0].Key])
	assert.Equal(t, Created, ops[set[1].Key])
	assert.Equal(t, MaybeCreated, ops[set[2].Key])
	assert.Equal(t, stack.Set{set[1], set[2]}, CreatedBy(set, ops), "what existed before is not the failed create's")
}

// TestClient_DeleteAllNamedWithoutLabel: an object someone took the owner label off is not
// deleted, even when the state names it: it is left and reported.
func TestClient_DeleteAllNamedWithoutLabel(t *testing.T) {
	c, cs, ns, _ := liveClient(t)
	ctx := context.Background()
	set := stack.Set{configMap(ns, "labelled", "o", "1"), configMap(ns, "unlabelled", "o", "1")}
	_, err := c.Apply(ctx, set)
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Patch(ctx, "unlabelled", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+stack.OwnerLabel+`":null}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, foreign, err := c.DeleteAll(ctx, ns, "o", cmKind, nil, set)
	require.NoError(t, err)
	require.Len(t, foreign, 1)
	assert.Equal(t, "unlabelled", foreign[0].GetName())
	left, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, cm := range left.Items {
		names = append(names, cm.Name)
	}
	assert.Contains(t, names, "unlabelled")
	assert.NotContains(t, names, "labelled")
}

// TestClient_ApplyOwnedRefusesForeign: an owner's apply does not take over an object of the
// same name that is someone else's or carries no owner label; it names it, and leaves it as
// it was. Read one by one and learnt from a list (listAtOnce objects of a kind) alike. With
// adopt it takes over an object with no owner label, and never another owner's.
func TestClient_ApplyOwnedRefusesForeign(t *testing.T) {
	c, cs, ns, _ := liveClient(t)
	ctx := context.Background()
	_, err := c.Apply(ctx, stack.Set{configMap(ns, "theirs", "someone-else", "1")})
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}, Data: map[string]string{"k": "mine"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"theirs", "by-hand"} {
		for _, n := range []int{1, listAtOnce} {
			set := stack.Set{configMap(ns, name, "o", "2")}
			for i := 1; i < n; i++ {
				set = append(set, configMap(ns, fmt.Sprintf("own-%d", i), "o", "2"))
			}
			_, err := c.ApplyOwned(ctx, set, "o", false)
			var notOwned *NotOwnedError
			require.ErrorAs(t, err, &notOwned, "%s (%d objects)", name, n)
			assert.Contains(t, err.Error(), "ConfigMap "+ns+"/"+name+" exists and is not o's")
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.NotEqual(t, "o", cm.Labels[stack.OwnerLabel], "%s was taken over", name)
		}
	}
	// Its own objects it applies as before.
	_, err = c.ApplyOwned(ctx, stack.Set{configMap(ns, "own-1", "o", "3")}, "o", false)
	require.NoError(t, err)
	// Asked to adopt, it takes over the object with no owner label (configured, not created:
	// a failed create does not delete it), and still not another owner's.
	ops, err := c.ApplyOwned(ctx, stack.Set{configMap(ns, "by-hand", "o", "4")}, "o", true)
	require.NoError(t, err)
	assert.Equal(t, Configured, ops["v1/ConfigMap/by-hand"])
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "by-hand", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "o", cm.Labels[stack.OwnerLabel])
	_, err = c.ApplyOwned(ctx, stack.Set{configMap(ns, "theirs", "o", "4")}, "o", true)
	var notOwned *NotOwnedError
	require.ErrorAs(t, err, &notOwned, "another owner's object adopted")
}

// TestClient_ApplyListsManyOfAKind: with listAtOnce or more objects of a kind, Apply learns
// which exist from one list of their metadata, not a read of each, and still reports what
// every write did: an object that existed before (made by someone else) is configured, not
// created, so a failed create never counts it as its own.
func TestClient_ApplyListsManyOfAKind(t *testing.T) {
	_, cs, ns, _ := liveClient(t)
	cfg, err := Connection{ConfigPaths: []string{os.Getenv("KUBECONFIG")}}.RESTConfig()
	require.NoError(t, err)
	var mu sync.Mutex
	requests := map[string]int{} // "GET one", "GET list", "PATCH"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps") {
				what := r.Method
				if r.Method == http.MethodGet {
					what += map[bool]string{true: " list", false: " one"}[strings.HasSuffix(r.URL.Path, "/configmaps")]
				}
				mu.Lock()
				requests[what]++
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	c, err := NewClient(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-2"}, Data: map[string]string{"k": "theirs"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var set stack.Set
	for i := range listAtOnce + 2 {
		set = append(set, configMap(ns, fmt.Sprintf("cm-%d", i), "o", "1"))
	}
	ops, err := c.Apply(ctx, set)
	require.NoError(t, err)
	assertOps(t, set, ops, Created, 2, Configured)
	assert.Equal(t, map[string]int{"GET list": 1, "PATCH": len(set)}, requests, "one list, then the writes")

	set[3] = configMap(ns, "cm-3", "o", "2")
	ops, err = c.Apply(ctx, set)
	require.NoError(t, err)
	assertOps(t, set, ops, Unchanged, 3, Configured)

	few := stack.Set{configMap(ns, "single", "o", "1")}
	clear(requests)
	_, err = c.Apply(ctx, few)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"GET one": 1, "PATCH": 1}, requests, "fewer than listAtOnce: read one by one")
}

// assertOps checks that Apply reported op for every object of set but the one at index i,
// for which it reported opI.
func assertOps(t *testing.T, set stack.Set, ops map[string]Operation, op Operation, i int, opI Operation) {
	t.Helper()
	for j, o := range set {
		want := op
		if j == i {
			want = opI
		}
		assert.Equal(t, want, ops[o.Key], o.Key)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClient_ApplyWaitsOutADeletion: an object still being deleted (held by a finalizer, as a
// CRD is by its custom resources) is not written to, which would leave nothing once it goes:
// Apply waits until it is gone and creates it afresh.
func TestClient_ApplyWaitsOutADeletion(t *testing.T) {
	c, cs, ns, lines := liveClient(t)
	ctx := context.Background()
	const finalizer = "example.com/hold"
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "going", Finalizers: []string{finalizer}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, cs.CoreV1().ConfigMaps(ns).Delete(ctx, "going", metav1.DeleteOptions{}))
	go func() {
		time.Sleep(time.Second)
		_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "going", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		assert.NoError(t, err)
	}()
	set := stack.Set{configMap(ns, "going", "o", "1")}
	ops, err := c.Apply(ctx, set)
	require.NoError(t, err)
	assert.Equal(t, Created, ops[set[0].Key])
	live, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "going", metav1.GetOptions{})
	require.NoError(t, err, "the object exists after the apply")
	assert.Nil(t, live.DeletionTimestamp)
	assert.Equal(t, "1", live.Data["k"])
	assert.Contains(t, *lines, "ConfigMap "+ns+"/going is being deleted; applying it once it is gone")
}
