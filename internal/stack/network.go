package stack

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NetworkPolicy says who may reach a cube. By default (nil, or Enabled unset) two policies
// are rendered: only the cube's transfer, the serving pods whose cube_conf names the cube
// (CubeClientLabel, any namespace) and the serving pods of its stack reach the cube servers'
// port, and only the cube's servers reach the transfer's files port.
type NetworkPolicy struct {
	// Enabled false renders no policy: every pod that can route to the cube reaches it.
	Enabled *bool `json:"enabled,omitempty"`
	// AllowFrom are further peers admitted to the cube servers' port.
	AllowFrom []NetworkPeer `json:"allow_from,omitempty"`
}

// NetworkPeer is a NetworkPolicy peer: pods with PodLabels (in the cube's namespace, or in
// the namespaces with NamespaceLabels), or every pod of the namespaces with NamespaceLabels.
type NetworkPeer struct {
	NamespaceLabels map[string]string `json:"namespace_labels,omitempty"`
	PodLabels       map[string]string `json:"pod_labels,omitempty"`
}

func (p *NetworkPolicy) enabled() bool { return p == nil || p.Enabled == nil || *p.Enabled }

// ServingPeer selects the pods of ctr_serving in a stack: the peer the cube admits.
func ServingPeer(stackName string) map[string]string {
	return stackComponent(stackName, componentServing)
}

// CubeClientLabel is the label a ctr_serving pod carries for each cube its cube_conf names,
// whose value is the cube's namespace: the cube's policy admits the pods that carry it, in
// any namespace and whatever their stack.
func CubeClientLabel(cube string) string { return "cube.ctr.elasticctr.io/" + cube }

// confCubes are the cubes (name -> namespace) a cube.conf's nodes name as ctr_cube renders
// them (http://<cube>-shard-<i>.<namespace>.svc:<port>); nodes of other cubes are skipped.
func confCubes(conf []api.DictConf) map[string]string {
	out := map[string]string{}
	for _, d := range conf {
		for _, n := range d.Nodes {
			host, _, _ := strings.Cut(strings.TrimPrefix(n.IPPortList, "http://"), ":")
			parts := strings.Split(host, ".")
			if len(parts) < 3 || parts[2] != "svc" {
				continue
			}
			i := strings.LastIndex(parts[0], "-shard-")
			if i <= 0 {
				continue
			}
			if _, err := strconv.Atoi(parts[0][i+len("-shard-"):]); err != nil {
				continue
			}
			out[parts[0][:i]] = parts[1]
		}
	}
	return out
}

// networkPolicies are the cube's ingress policies, or none when disabled. The transfer's
// status port stays open to all: Terraform reads /status through the API server's service
// proxy, whose source address no policy can name portably.
func (c Cube) networkPolicies() []*networkingv1.NetworkPolicy {
	if !c.NetworkPolicy.enabled() {
		return nil
	}
	tcp := corev1.ProtocolTCP
	port := func(p int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: ptrIntOrString(p)}
	}
	pods := func(sel map[string]string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: sel}}
	}
	// The serving pods whose cube_conf names this cube, from any namespace, and (as before)
	// the serving pods of its stack.
	clients := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{CubeClientLabel(c.Name): c.Namespace}},
		NamespaceSelector: anyNamespace()}
	cubeFrom := []networkingv1.NetworkPolicyPeer{pods(c.transferSelector()), pods(ServingPeer(c.Stack)), clients}
	if c.NetworkPolicy != nil {
		for _, p := range c.NetworkPolicy.AllowFrom {
			cubeFrom = append(cubeFrom, p.policyPeer())
		}
	}
	policy := func(name, component string, selector map[string]string, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   kindNetworkPolicy,
			ObjectMeta: meta(name, c.Namespace, c.labels(component)),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: selector},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     rules,
			},
		}
	}
	// The servers' probe port (CubeProbePort) admits the scrapers of their metrics alone: the
	// kubelet probes from the pod's own node, whose traffic to its pods the policy does not stop
	// (the servers' port admits no node either, and the probes went there until the probe
	// port), while other pods, the clients among them, cannot reach it and take the few
	// connections it holds. With no scraper, no rule: a rule without peers admits everyone.
	server := policy(cubeServerPolicyName(c.Name), componentCubeServer, c.serverSelector(),
		networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(c.Port)}, From: cubeFrom})
	if scrapers := c.scrapers(); len(scrapers) > 0 {
		server.Spec.Ingress = append(server.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{port(CubeProbePort)}, From: scrapers})
	}
	return []*networkingv1.NetworkPolicy{
		server,
		policy(c.TransferService(), componentCubeTransfer, c.transferSelector(),
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(c.TransferFilesPort)}, From: []networkingv1.NetworkPolicyPeer{pods(c.serverSelector())}},
			// No From: any source, for the status API.
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(c.TransferPort)}}),
	}
}

// anyNamespace selects every namespace: each has its name as a label (Kubernetes 1.21 and
// later). An empty selector would say the same, but does not survive conversion to an
// unstructured object.
func anyNamespace() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpExists}}}
}

// policyPeer is the NetworkPolicy peer p names.
func (p NetworkPeer) policyPeer() networkingv1.NetworkPolicyPeer {
	peer := networkingv1.NetworkPolicyPeer{}
	if len(p.PodLabels) > 0 {
		peer.PodSelector = &metav1.LabelSelector{MatchLabels: p.PodLabels}
	}
	if len(p.NamespaceLabels) > 0 {
		peer.NamespaceSelector = &metav1.LabelSelector{MatchLabels: p.NamespaceLabels}
	}
	return peer
}

func ptrIntOrString(p int32) *intstr.IntOrString {
	v := intstr.FromInt32(p)
	return &v
}

func (c *checker) networkPolicy(path string, p *NetworkPolicy) {
	if p == nil {
		return
	}
	if !p.enabled() && len(p.AllowFrom) > 0 {
		c.bad(path+".allow_from", "has no effect with enabled = false (no policy is rendered); remove it or enable the policies")
	}
	c.peers(path+".allow_from", p.AllowFrom)
}

// peers checks NetworkPolicy peers at path.
func (c *checker) peers(path string, peers []NetworkPeer) {
	for i, peer := range peers {
		at := fmt.Sprintf("%s[%d]", path, i)
		if len(peer.PodLabels) == 0 && len(peer.NamespaceLabels) == 0 {
			c.bad(at, "needs pod_labels, namespace_labels or both, each with at least one label (to admit everyone, set network_policy.enabled = false)")
		}
		c.labels(at+".pod_labels", peer.PodLabels)
		c.labels(at+".namespace_labels", peer.NamespaceLabels)
	}
}
