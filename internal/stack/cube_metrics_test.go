package stack

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
)

// metricsListenPort is the port a cube container's arguments say it serves its metrics on:
// a server's --probe-listen, the transfer's --listen (both serve api.MetricsPath there).
func metricsListenPort(t *testing.T, c corev1.Container) int32 {
	t.Helper()
	flag := map[string]string{"server": "--probe-listen", "transfer": "--listen"}[c.Args[0]]
	require.NotEmpty(t, flag, "%s: not a cube server or transfer: %v", c.Name, c.Args)
	i := slices.Index(c.Args, flag)
	require.GreaterOrEqual(t, i, 0, "%s has no %s", c.Name, flag)
	_, port, _ := strings.Cut(c.Args[i+1], ":")
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return int32(n)
}

// TestRenderCube_ScrapeAnnotations: by default every cube pod (servers and transfer) carries
// prometheus.io/scrape, /path = api.MetricsPath and /port = the port its arguments serve the
// metrics on, a port the container declares; metrics.annotations = false renders none; a key
// the pod settings give keeps their value.
func TestRenderCube_ScrapeAnnotations(t *testing.T) {
	set, err := RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, TransferPort: 9099})
	require.NoError(t, err)
	tmpls := podTemplates(t, set)
	require.Len(t, tmpls, 3, "two shards and the transfer")
	for key, tmpl := range tmpls {
		c := tmpl.Spec.Containers[0]
		port := metricsListenPort(t, c)
		assert.Equal(t, "true", tmpl.Annotations[ScrapeAnnotation], key)
		assert.Equal(t, api.MetricsPath, tmpl.Annotations[ScrapePathAnnotation], key)
		assert.Equal(t, strconv.Itoa(int(port)), tmpl.Annotations[ScrapePortAnnotation], key)
		assert.True(t, slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port }), "%s declares no port %d", key, port)
	}

	set, err = RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Metrics: &Metrics{Annotations: ptr.To(false)}})
	require.NoError(t, err)
	for key, tmpl := range podTemplates(t, set) {
		for _, k := range []string{ScrapeAnnotation, ScrapePortAnnotation, ScrapePathAnnotation} {
			assert.NotContains(t, tmpl.Annotations, k, key)
		}
	}

	c := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Pod: &PodSettings{Annotations: map[string]string{ScrapePortAnnotation: "9999"}}}
	require.Empty(t, c.Validate(), "a scrape annotation of the user's own is no collision")
	set, err = RenderCube(c)
	require.NoError(t, err)
	for key, tmpl := range podTemplates(t, set) {
		assert.Equal(t, "9999", tmpl.Annotations[ScrapePortAnnotation], key)
		assert.Equal(t, "true", tmpl.Annotations[ScrapeAnnotation], key)
	}
}

// TestRenderCube_PodMonitor: only metrics.pod_monitor renders a PodMonitor. It carries the
// owner label (prune and destroy find it) and pod_monitor_labels; it selects the cube's
// servers and transfer and no other pod (not a serving of the same name); each selected pod
// has exactly one of its endpoints' ports, the one its scrape annotation names, at
// api.MetricsPath; and every pod it selects carries the labels it copies onto the series.
func TestRenderCube_PodMonitor(t *testing.T) {
	plain, err := RenderCube(Cube{Name: "cube", Namespace: "n", DonefileURL: testDonefile})
	require.NoError(t, err)
	for _, o := range plain {
		assert.NotEqual(t, "PodMonitor", o.Object.GetKind(), "rendered without pod_monitor")
	}

	set, err := RenderCube(Cube{Name: "cube", Namespace: "n", DonefileURL: testDonefile, Shards: 3,
		Metrics: &Metrics{PodMonitor: true, PodMonitorLabels: map[string]string{"release": "prom"}}})
	require.NoError(t, err)
	var pm *unstructured.Unstructured
	for _, o := range set {
		if o.Object.GetKind() == "PodMonitor" {
			require.Nil(t, pm, "two PodMonitors")
			pm = o.Object
		}
	}
	require.NotNil(t, pm)
	assert.Equal(t, "monitoring.coreos.com/v1", pm.GetAPIVersion())
	assert.Equal(t, Owner(CubeType, "cube"), pm.GetLabels()[OwnerLabel])
	assert.Equal(t, "prom", pm.GetLabels()["release"])
	assert.Equal(t, "n", pm.GetNamespace())

	rawSel, _, _ := unstructured.NestedMap(pm.Object, "spec", "selector")
	var ls metav1.LabelSelector
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(rawSel, &ls))
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	require.NoError(t, err)
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	targetLabels, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "podTargetLabels")
	assert.Contains(t, targetLabels, LabelInstance, "the dashboard selects a cube by it")

	serving, err := RenderServing(Serving{Name: "cube", Namespace: "n", CubeConf: Cube{Name: "cube", Namespace: "n"}.Defaulted().CubeConf()})
	require.NoError(t, err)
	for key, tmpl := range podTemplates(t, serving) {
		assert.False(t, sel.Matches(labels.Set(tmpl.Labels)), "the PodMonitor selects %s", key)
	}
	selected := 0
	for key, tmpl := range podTemplates(t, set) {
		require.True(t, sel.Matches(labels.Set(tmpl.Labels)), "the PodMonitor does not select %s", key)
		selected++
		var ports []string
		for _, e := range endpoints {
			m := e.(map[string]any)
			assert.Equal(t, api.MetricsPath, m["path"])
			for _, p := range tmpl.Spec.Containers[0].Ports {
				if p.Name == m["port"] {
					ports = append(ports, p.Name)
					assert.Equal(t, strconv.Itoa(int(p.ContainerPort)), tmpl.Annotations[ScrapePortAnnotation], "%s: the endpoint's port and the annotation's", key)
				}
			}
		}
		assert.Len(t, ports, 1, "%s: endpoint ports %v", key, ports)
		for _, l := range targetLabels {
			assert.Contains(t, tmpl.Labels, l, key)
		}
	}
	assert.Equal(t, 4, selected, "3 shards and the transfer")
}

// TestCube_ValidateMetrics: settings that cannot take effect, or would collide, are refused
// at their attribute.
func TestCube_ValidateMetrics(t *testing.T) {
	cube := func(m *Metrics, p *NetworkPolicy) Cube {
		return Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Metrics: m, NetworkPolicy: p}
	}
	peer := []NetworkPeer{{PodLabels: map[string]string{"app": "prometheus"}}}
	for want, c := range map[string]Cube{
		"metrics.pod_monitor_labels":                            cube(&Metrics{PodMonitorLabels: map[string]string{"release": "p"}}, nil),
		`metrics.pod_monitor_labels["bad key!"]`:                cube(&Metrics{PodMonitor: true, PodMonitorLabels: map[string]string{"bad key!": "p"}}, nil),
		`metrics.pod_monitor_labels["ctr.elasticctr.io/owner"]`: cube(&Metrics{PodMonitor: true, PodMonitorLabels: map[string]string{OwnerLabel: "x"}}, nil),
		"metrics.scrape_from":                                   cube(&Metrics{ScrapeFrom: peer}, &NetworkPolicy{Enabled: ptr.To(false)}),
		"metrics.scrape_from[0]":                                cube(&Metrics{ScrapeFrom: []NetworkPeer{{}}}, nil),
		`metrics.scrape_from[0].namespace_labels["-x"]`:         cube(&Metrics{ScrapeFrom: []NetworkPeer{{NamespaceLabels: map[string]string{"-x": "y"}}}}, nil),
	} {
		errs := c.Validate()
		require.NotEmpty(t, errs, want)
		assert.Equal(t, want, errs[0].Path, "%v", errs)
	}
	assert.Empty(t, cube(&Metrics{PodMonitor: true, PodMonitorLabels: map[string]string{"release": "p"}, ScrapeFrom: peer}, nil).Validate())
	assert.Empty(t, cube(&Metrics{ScrapeFrom: []NetworkPeer{}}, &NetworkPolicy{Enabled: ptr.To(false)}).Validate(), "no peers: nothing to refuse")
}

// TestMissingKindHint_EveryKindFromACRD: every kind a resource renders or waits for that
// Kubernetes itself does not serve (a group with a dot, not under k8s.io) has a hint for the
// error of a cluster without its CRD.
func TestMissingKindHint_EveryKindFromACRD(t *testing.T) {
	for _, kinds := range [][]schema.GroupVersionKind{TrainingJobKinds, CubeKinds, ServingKinds, ControllerKinds} {
		for _, k := range kinds {
			builtin := !strings.Contains(k.Group, ".") || strings.HasSuffix(k.Group, ".k8s.io")
			assert.Equal(t, !builtin, MissingKindHint(k) != "", "%s: hint %q", k, MissingKindHint(k))
		}
	}
}
