package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// discoveryOnly is an API server that answers discovery, serving the core and apps, policy and
// networking groups (no CRDs), and records every other request: an apply that wrote anything
// would show here.
func discoveryOnly(t *testing.T) (*Client, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var others []string
	res := func(group string, names ...string) metav1.APIResourceList {
		l := metav1.APIResourceList{GroupVersion: group}
		for _, n := range names {
			kind, plural, _ := strings.Cut(n, "/")
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: plural, Kind: kind, Namespaced: true,
				Verbs: metav1.Verbs{"create", "delete", "get", "list", "patch", "watch"}})
		}
		return l
	}
	groups := map[string]metav1.APIResourceList{
		"/api/v1": res("v1", "Secret/secrets", "Service/services", "ServiceAccount/serviceaccounts", "PersistentVolumeClaim/persistentvolumeclaims",
			"ConfigMap/configmaps"),
		"/apis/apps/v1":              res("apps/v1", "Deployment/deployments", "StatefulSet/statefulsets"),
		"/apis/policy/v1":            res("policy/v1", "PodDisruptionBudget/poddisruptionbudgets"),
		"/apis/networking.k8s.io/v1": res("networking.k8s.io/v1", "NetworkPolicy/networkpolicies"),
	}
	var list metav1.APIGroupList
	for _, g := range []string{"apps", "policy", "networking.k8s.io"} {
		gv := metav1.GroupVersionForDiscovery{GroupVersion: g + "/v1", Version: "v1"}
		list.Groups = append(list.Groups, metav1.APIGroup{Name: g, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var body any
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api":
			body = metav1.APIVersions{Versions: []string{"v1"}}
		case r.Method == http.MethodGet && r.URL.Path == "/apis":
			body = list
		case r.Method == http.MethodGet && groups[r.URL.Path].GroupVersion != "":
			body = groups[r.URL.Path]
		default:
			mu.Lock()
			others = append(others, r.Method+" "+r.URL.Path)
			mu.Unlock()
			w.WriteHeader(http.StatusNotFound)
			body = metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound}
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), others...)
	}
}

// TestClient_ApplyWithoutTheirCRDWritesNothing: a cube that asks for a PodMonitor, applied to a
// cluster without the Prometheus Operator, fails before any object is written, naming the
// PodMonitor, the CRD that serves it and the two ways out; a cube without one finds every
// kind served. No control plane: an API server that answers discovery alone.
func TestClient_ApplyWithoutTheirCRDWritesNothing(t *testing.T) {
	c, requests := discoveryOnly(t)
	set, err := stack.RenderCube(stack.Cube{Name: "cube", Namespace: "ads", Image: "cube:1", DonefileURL: "http://fs/base.txt",
		Metrics: &stack.Metrics{PodMonitor: true}})
	require.NoError(t, err)
	_, err = c.ApplyOwned(context.Background(), set, stack.Owner(stack.CubeType, "cube"), false)
	require.Error(t, err)
	for _, want := range []string{"apply PodMonitor ads/cube", "podmonitors.monitoring.coreos.com", "Prometheus Operator", "metrics.pod_monitor = false"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.True(t, IsNotServed(err), "%v", err)
	assert.Empty(t, requests(), "requests beyond discovery: the apply wrote or read objects before it failed")

	plain, err := stack.RenderCube(stack.Cube{Name: "cube", Namespace: "ads", Image: "cube:1", DonefileURL: "http://fs/base.txt"})
	require.NoError(t, err)
	assert.NoError(t, c.checkServed(plain), "every kind of a cube without a PodMonitor is served here")
}
