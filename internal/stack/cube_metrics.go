package stack

import (
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
)

// Metrics says how a cube's servers and transfer are scraped. Each cube server serves its
// metrics on its probe port (CubeProbePort, apart from the clients' connection slots), the
// transfer on transfer_port, both at api.MetricsPath. nil renders the defaults: the
// conventional prometheus.io annotations on their pods, no PodMonitor, and DefaultScrapers
// admitted to the servers' probe port by the servers' NetworkPolicy.
type Metrics struct {
	// Annotations false renders no prometheus.io/* annotations on the pods; nil or true renders them.
	Annotations *bool `json:"annotations,omitempty"`
	// PodMonitor renders a monitoring.coreos.com/v1 PodMonitor for the servers and the transfer
	// (the Prometheus Operator's CRD, which the cluster must serve).
	PodMonitor bool `json:"pod_monitor,omitempty"`
	// PodMonitorLabels are further labels of the PodMonitor: what a Prometheus's
	// podMonitorSelector selects (the kube-prometheus-stack chart's selects its release label).
	PodMonitorLabels map[string]string `json:"pod_monitor_labels,omitempty"`
	// ScrapeFrom are the peers admitted to the servers' probe port; nil admits DefaultScrapers,
	// empty admits none. Not omitted when empty, so that the settings annotation keeps "none".
	ScrapeFrom []NetworkPeer `json:"scrape_from"`
}

// The conventional annotations that Prometheus' annotation-driven pod discovery reads (the
// `kubernetes-pods` job of Prometheus' example configuration and of common Helm charts).
const (
	ScrapeAnnotation     = "prometheus.io/scrape"
	ScrapePortAnnotation = "prometheus.io/port"
	ScrapePathAnnotation = "prometheus.io/path"
)

// DefaultMetricsAnnotations says whether the scrape annotations are rendered when Metrics
// does not say.
const DefaultMetricsAnnotations = true

// DefaultScrapers are the labels of the pods, in any namespace, that the servers' NetworkPolicy
// admits to their probe port when metrics.scrape_from is unset: the label the Prometheus
// Operator gives the Prometheus pods it runs.
var DefaultScrapers = map[string]string{LabelName: "prometheus"}

// PodMonitorTargetLabels are the pod labels a rendered PodMonitor copies onto every series
// (as app_kubernetes_io_instance, ...): what selects one cube's series (the shipped Grafana
// dashboard selects by the first).
var PodMonitorTargetLabels = []string{LabelInstance, LabelComponent, LabelPartOf}

const componentCubeMetrics = "cube-metrics"

func (m *Metrics) annotations() bool {
	return m == nil || m.Annotations == nil || *m.Annotations
}

func (m *Metrics) podMonitor() bool { return m != nil && m.PodMonitor }

// scrapeAnnotations are the annotations of pods that serve metrics on port, or none.
func (c Cube) scrapeAnnotations(port int32) map[string]string {
	if !c.Metrics.annotations() {
		return nil
	}
	return map[string]string{ScrapeAnnotation: "true", ScrapePortAnnotation: strconv.Itoa(int(port)), ScrapePathAnnotation: api.MetricsPath}
}

// withScrapeAnnotations adds the scrape annotations to a pod template, each unless the pod
// settings gave the key a value of their own: a user's `prometheus.io/port` (or an existing
// `prometheus.io/scrape = "true"` from before ctr rendered them) wins over ctr's.
func withScrapeAnnotations(t *corev1.PodTemplateSpec, scrape map[string]string) {
	for _, k := range sortedKeys(scrape) {
		if _, given := t.Annotations[k]; given {
			continue
		}
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[k] = scrape[k]
	}
}

// scrapers are the peers admitted to the servers' probe port: DefaultScrapers' pods from any
// namespace unless metrics.scrape_from says otherwise.
func (c Cube) scrapers() []networkingv1.NetworkPolicyPeer {
	if c.Metrics != nil && c.Metrics.ScrapeFrom != nil {
		out := make([]networkingv1.NetworkPolicyPeer, len(c.Metrics.ScrapeFrom))
		for i, p := range c.Metrics.ScrapeFrom {
			out[i] = p.policyPeer()
		}
		return out
	}
	return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(DefaultScrapers)}, NamespaceSelector: anyNamespace()}}
}

// podMonitor is the cube's PodMonitor: the servers' probe port and the transfer's status
// port, at api.MetricsPath, with PodMonitorTargetLabels on every series.
func (c Cube) podMonitor() Object {
	labels := c.labels(componentCubeMetrics)
	for k, v := range c.Metrics.PodMonitorLabels {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"selector": map[string]any{
				"matchLabels": map[string]any{LabelInstance: c.Name},
				"matchExpressions": []any{map[string]any{"key": LabelComponent, "operator": string(metav1.LabelSelectorOpIn),
					"values": []any{componentCubeServer, componentCubeTransfer}}},
			},
			"podMetricsEndpoints": []any{
				map[string]any{"port": cubeProbePortName, "path": api.MetricsPath},
				map[string]any{"port": transferStatusPortName, "path": api.MetricsPath},
			},
			"podTargetLabels": toAny(PodMonitorTargetLabels),
		},
	}}
	u.SetAPIVersion(kindPodMonitor.APIVersion)
	u.SetKind(kindPodMonitor.Kind)
	u.SetName(cubePodMonitorName(c.Name))
	u.SetNamespace(c.Namespace)
	u.SetLabels(labels)
	return Object{Key: Key(u), Object: u}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// metrics checks a cube's metrics settings, and that they agree with its network policy.
func (c *checker) metrics(path string, m *Metrics, policy *NetworkPolicy, own map[string]string) {
	if m == nil {
		return
	}
	if len(m.PodMonitorLabels) > 0 {
		if !m.PodMonitor {
			c.bad(path+".pod_monitor_labels", "has no effect without pod_monitor = true (no PodMonitor is rendered); remove it or set pod_monitor = true")
		}
		c.labels(path+".pod_monitor_labels", m.PodMonitorLabels)
		for _, k := range sortedKeys(m.PodMonitorLabels) {
			if _, ok := own[k]; ok {
				c.bad(fmt.Sprintf("%s.pod_monitor_labels[%q]", path, k), "%q is a label ctr sets on the PodMonitor; choose another key", k)
			}
		}
	}
	if !policy.enabled() && len(m.ScrapeFrom) > 0 {
		c.bad(path+".scrape_from", "has no effect with network_policy.enabled = false (no policy is rendered, every pod reaches the metrics); remove it or enable the policies")
	}
	c.peers(path+".scrape_from", m.ScrapeFrom)
}
