package stack

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// The cube's NetworkPolicies are evaluated here by cyclonus's matcher (the NetworkPolicy model
// of the tool that moved into kubernetes-sigs/network-policy-api as policy-assistant), not by
// code of ours: the rendered policies, and pods as the controllers create them, go in; a
// verdict per connection comes out.

// netPod is a pod as its controller creates it from a rendered template, or a pod that
// ctr does not render (a bystander).
type netPod struct {
	name, namespace string
	labels          map[string]string
	ports           []corev1.ContainerPort
	role            netRole
}

// netRole is what a pod is to the cube's policies: the matrix's expectations are stated per role.
type netRole string

const (
	roleShard     netRole = "cube shard"
	roleTransfer  netRole = "cube transfer"
	roleClient    netRole = "cube client" // a pod the cube's policy is meant to admit to the cube port
	roleScraper   netRole = "scraper"     // a pod the cube's policy is meant to admit to the shards' metrics (probe) port
	roleBystander netRole = "bystander"   // any other pod
	roleOutside   netRole = "outside"     // an address outside the cluster (no pod)
)

// podHash stands for the hash a controller puts in a label (pod-template-hash,
// controller-revision-hash): stable per object, not a value any policy could know.
func podHash(key string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// controllerPods are the pods the controllers create from every workload of a rendered set,
// with the labels they add: the StatefulSet controller statefulset.kubernetes.io/pod-name,
// apps.kubernetes.io/pod-index and controller-revision-hash; the Deployment's ReplicaSet
// pod-template-hash; Volcano the job, namespace, queue and task labels. roleOf gives each
// workload's pods their role, by object key.
func controllerPods(t *testing.T, set Set, roleOf func(key string) netRole) []netPod {
	t.Helper()
	var out []netPod
	pod := func(key, name, ns string, tpl corev1.PodTemplateSpec, extra map[string]string) netPod {
		l := map[string]string{}
		for k, v := range tpl.Labels {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		var ports []corev1.ContainerPort
		for _, c := range tpl.Spec.Containers {
			ports = append(ports, c.Ports...)
		}
		return netPod{name: name, namespace: ns, labels: l, ports: ports, role: roleOf(key)}
	}
	for _, o := range set {
		switch o.Object.GetKind() {
		case "StatefulSet":
			sts := typed[appsv1.StatefulSet](t, o.Object)
			for i := range ptr.Deref(sts.Spec.Replicas, 1) {
				name := fmt.Sprintf("%s-%d", sts.Name, i)
				out = append(out, pod(o.Key, name, sts.Namespace, sts.Spec.Template, map[string]string{
					appsv1.StatefulSetPodNameLabel:        name,
					appsv1.PodIndexLabel:                  strconv.Itoa(int(i)),
					appsv1.ControllerRevisionHashLabelKey: sts.Name + "-" + podHash(o.Key),
				}))
			}
		case "Deployment":
			d := typed[appsv1.Deployment](t, o.Object)
			hash := podHash(o.Key)
			for i := range ptr.Deref(d.Spec.Replicas, 1) {
				out = append(out, pod(o.Key, fmt.Sprintf("%s-%s-%d", d.Name, hash, i), d.Namespace, d.Spec.Template,
					map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}))
			}
		case "Job":
			job := typed[batchv1alpha1.Job](t, o.Object)
			for _, task := range job.Spec.Tasks {
				for i := range task.Replicas {
					out = append(out, pod(o.Key+"/"+task.Name, fmt.Sprintf("%s-%s-%d", job.Name, task.Name, i), job.Namespace, task.Template, map[string]string{
						batchv1alpha1.JobNameKey:      job.Name,
						batchv1alpha1.JobNamespaceKey: job.Namespace,
						batchv1alpha1.QueueNameKey:    job.Spec.Queue,
						batchv1alpha1.TaskSpecKey:     task.Name,
						batchv1alpha1.TaskIndex:       strconv.Itoa(int(i)),
						batchv1alpha1.JobVersion:      "0",
					}))
				}
			}
		}
	}
	return out
}

// renderedPolicies are the NetworkPolicies of the rendered sets, typed as the API server holds them.
func renderedPolicies(t *testing.T, sets ...Set) []*networkingv1.NetworkPolicy {
	t.Helper()
	var out []*networkingv1.NetworkPolicy
	for _, set := range sets {
		for _, o := range set {
			if o.Object.GetKind() == "NetworkPolicy" {
				out = append(out, typed[networkingv1.NetworkPolicy](t, o.Object))
			}
		}
	}
	return out
}

// policyMatrix is a cluster for the evaluator: its policies, namespaces and pods.
type policyMatrix struct {
	policy     *matcher.Policy
	namespaces map[string]map[string]string // name -> labels
}

func newPolicyMatrix(t *testing.T, policies []*networkingv1.NetworkPolicy, pods []netPod, extraNamespaceLabels map[string]map[string]string) policyMatrix {
	t.Helper()
	m := policyMatrix{policy: matcher.BuildNetworkPolicies(false, policies), namespaces: map[string]map[string]string{}}
	for _, p := range pods {
		if p.role == roleOutside {
			continue
		}
		// The API server labels every namespace with its name (Kubernetes 1.21 and later).
		l := map[string]string{corev1.LabelMetadataName: p.namespace}
		for k, v := range extraNamespaceLabels[p.namespace] {
			l[k] = v
		}
		m.namespaces[p.namespace] = l
	}
	return m
}

func (m policyMatrix) peer(p netPod) *matcher.TrafficPeer {
	if p.role == roleOutside {
		return &matcher.TrafficPeer{IP: "192.0.2.10"}
	}
	return &matcher.TrafficPeer{IP: "10.0.0.1", Internal: &matcher.InternalPeer{
		PodLabels: p.labels, Namespace: p.namespace, NamespaceLabels: m.namespaces[p.namespace]}}
}

// allows is the evaluator's verdict on a TCP connection from src to dst's port (its number
// and, when declared, its name, as a network plugin resolves a named policy port).
func (m policyMatrix) allows(src, dst netPod, port corev1.ContainerPort) (bool, *matcher.Traffic) {
	tr := &matcher.Traffic{Source: m.peer(src), Destination: m.peer(dst),
		ResolvedPort: int(port.ContainerPort), ResolvedPortName: port.Name, Protocol: corev1.ProtocolTCP}
	return m.policy.IsTrafficAllowed(tr).IsAllowed(), tr
}

// guardedBy names the policies whose ingress rules apply to a pod.
func (m policyMatrix) guardedBy(p netPod) []string {
	var out []string
	for _, target := range m.policy.TargetsApplyingToPod(true, p.namespace, p.labels) {
		for _, np := range target.SourceRules {
			out = append(out, np.Name)
		}
	}
	slices.Sort(out)
	return out
}

// undeclaredPort is a port no container declares: no policy may open it on a guarded pod.
var undeclaredPort = corev1.ContainerPort{ContainerPort: 9999, Protocol: corev1.ProtocolTCP}

// meantToReach is what the cube's policies are for, per role: the transfer and the cube's
// clients reach the shards' cube port (the transfer drives the agent there); the scrapers, and
// no other pod, the shards' probe port (their metrics; the kubelet's probes come from the
// node); only shards download from the transfer's files port; the transfer's status port
// (with its metrics) is open to all; pods the policies do not guard stay open (Kubernetes'
// default).
func meantToReach(src, dst netPod, port corev1.ContainerPort) bool {
	switch dst.role {
	case roleShard:
		if port.Name == cubeProbePortName {
			return src.role == roleScraper
		}
		return port.Name == "cube" && (src.role == roleTransfer || src.role == roleClient)
	case roleTransfer:
		return port.Name == "http" || (port.Name == "files" && src.role == roleShard)
	default:
		return true
	}
}

// checkMatrix evaluates every connection between every two pods, to every declared port of
// the destination and one undeclared, and compares it with meantToReach.
func (m policyMatrix) checkMatrix(t *testing.T, pods []netPod) {
	t.Helper()
	var checked, allowed, failed int
	for _, dst := range pods {
		if dst.role == roleOutside {
			continue
		}
		for _, port := range append(slices.Clone(dst.ports), undeclaredPort) {
			for _, src := range pods {
				if src.name == dst.name && src.namespace == dst.namespace {
					continue // a pod always reaches itself
				}
				got, tr := m.allows(src, dst, port)
				want := meantToReach(src, dst, port)
				checked++
				if got {
					allowed++
				}
				if got != want {
					failed++
					if failed <= 10 {
						t.Errorf("%s/%s (%s) -> %s/%s (%s) port %d %q: allowed %v, want %v\n%s", src.namespace, src.name, src.role,
							dst.namespace, dst.name, dst.role, port.ContainerPort, port.Name, got, want, m.policy.IsTrafficAllowed(tr).Table())
					}
				}
			}
		}
	}
	t.Logf("%d connections evaluated, %d allowed, %d not as meant", checked, allowed, failed)
}

// shopStack renders the stack of the registry's examples in namespace "ads": a training job
// with its file server and model export, the cube "cube" (stack "shop", 2 shards × 2
// replicas) reading the file server's donefile, and servings whose cube_conf names it: one of
// its stack, one of another stack ("other-shop") and one in namespace "team-b". Bystanders:
// servings of another cube and of a cube "cube" in team-b, a serving of the stack "shop" in
// team-b on another cube, a training job in team-b, and unrelated pods in both namespaces.
func shopStack(t *testing.T, policy *NetworkPolicy, metrics *Metrics) (policies []*networkingv1.NetworkPolicy, pods []netPod) {
	t.Helper()
	training := TrainingJob{Name: "cube", Namespace: "ads", Stack: "shop", ModelExport: &ModelExport{}}.Defaulted()
	cube := Cube{Name: "cube", Namespace: "ads", Stack: "shop", Shards: 2, Replicas: 2, DonefileURL: training.DonefileURL(), NetworkPolicy: policy, Metrics: metrics}
	conf := cube.Defaulted().CubeConf()
	cubeSet, err := RenderCube(cube)
	require.NoError(t, err)
	only := func(r netRole) func(string) netRole { return func(string) netRole { return r } }
	pods = controllerPods(t, cubeSet, func(key string) netRole {
		if key == CubeTransferKey("cube") {
			return roleTransfer
		}
		return roleShard
	})
	render := func(set Set, err error) Set {
		t.Helper()
		require.NoError(t, err)
		return set
	}
	for _, s := range []Serving{
		{Name: "serving", Namespace: "ads", Stack: "shop", CubeConf: conf, Replicas: 2},
		{Name: "serving-b", Namespace: "ads", Stack: "other-shop", CubeConf: conf},
		{Name: "serving", Namespace: "team-b", Stack: "x", CubeConf: conf},
	} {
		pods = append(pods, controllerPods(t, render(RenderServing(s)), only(roleClient))...)
	}
	for _, s := range []Serving{
		{Name: "serving-other", Namespace: "ads", Stack: "x", CubeConf: Cube{Name: "other-cube", Namespace: "ads", DonefileURL: testDonefile}.Defaulted().CubeConf()},
		{Name: "serving-elsewhere", Namespace: "ads", Stack: "x", CubeConf: Cube{Name: "cube", Namespace: "team-b", DonefileURL: testDonefile}.Defaulted().CubeConf()},
		// The cube's stack, in another namespace, on another cube: the stack's peer is the cube's namespace only.
		{Name: "serving-shop", Namespace: "team-b", Stack: "shop", CubeConf: Cube{Name: "other-cube", Namespace: "team-b", DonefileURL: testDonefile}.Defaulted().CubeConf()},
	} {
		pods = append(pods, controllerPods(t, render(RenderServing(s)), only(roleBystander))...)
	}
	pods = append(pods, controllerPods(t, render(RenderTrainingJob(training)), only(roleBystander))...)
	pods = append(pods, controllerPods(t, render(RenderTrainingJob(TrainingJob{Name: "cube", Namespace: "team-b", Stack: "shop"})), only(roleBystander))...)
	for _, ns := range []string{"ads", "team-b"} {
		pods = append(pods, netPod{name: "debug", namespace: ns, labels: map[string]string{"app": "debug"}, role: roleBystander,
			ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}})
	}
	pods = append(pods, netPod{name: "outside", role: roleOutside})
	return renderedPolicies(t, cubeSet), pods
}

// TestCubeNetworkPolicies_AdmitExactlyTheirPeers evaluates the rendered policies over the pods
// the controllers create from the rendered stack: the transfer and the serving pods whose
// cube_conf names the cube (whatever their stack and namespace) reach the shards' cube port,
// only the shards reach the transfer's files port, its status port is open, and nothing else
// reaches a guarded port.
func TestCubeNetworkPolicies_AdmitExactlyTheirPeers(t *testing.T) {
	policies, pods := shopStack(t, nil, nil)
	require.Len(t, policies, 2)
	m := newPolicyMatrix(t, policies, pods, nil)
	m.checkMatrix(t, pods)

	// Each policy guards the pods it is for, and only those.
	var shards int
	for _, p := range pods {
		switch p.role {
		case roleShard:
			shards++
			assert.Equal(t, []string{"cube-server"}, m.guardedBy(p), p.name)
		case roleTransfer:
			assert.Equal(t, []string{"cube-transfer"}, m.guardedBy(p), p.name)
		default:
			assert.Empty(t, m.guardedBy(p), "%s/%s is not the cube's", p.namespace, p.name)
		}
	}
	assert.Equal(t, 4, shards, "2 shards × 2 replicas")

	for _, np := range policies {
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, np.Name)
	}
}

// TestCubeNetworkPolicies_AllowFromAdmitsItsPeers: allow_from peers reach the cube port, and
// only the pods they name: a peer with both selectors admits those pods in those namespaces, a
// namespace peer every pod of its namespaces.
func TestCubeNetworkPolicies_AllowFromAdmitsItsPeers(t *testing.T) {
	policies, pods := shopStack(t, &NetworkPolicy{AllowFrom: []NetworkPeer{
		{NamespaceLabels: map[string]string{"team": "monitoring"}, PodLabels: map[string]string{"app": "prometheus"}},
		{NamespaceLabels: map[string]string{corev1.LabelMetadataName: "ops"}},
	}}, nil)
	extra := func(name, ns string, l map[string]string, role netRole) netPod {
		return netPod{name: name, namespace: ns, labels: l, role: role,
			ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}}
	}
	pods = append(pods,
		extra("prometheus", "monitoring", map[string]string{"app": "prometheus"}, roleClient),
		extra("grafana", "monitoring", map[string]string{"app": "grafana"}, roleBystander),
		extra("prometheus", "ads", map[string]string{"app": "prometheus"}, roleBystander), // not in a monitoring namespace
		extra("prometheus", "metrics", map[string]string{"app": "prometheus"}, roleBystander),
		extra("anything", "ops", map[string]string{"app": "anything"}, roleClient),
	)
	m := newPolicyMatrix(t, policies, pods, map[string]map[string]string{"monitoring": {"team": "monitoring"}})
	m.checkMatrix(t, pods)
}

// scraperPods are pods that may or may not scrape the cube's metrics, each with the role
// roles gives its name ("operator-prometheus", "operator-prometheus-ads", "app-prometheus",
// "grafana"): a Prometheus the Prometheus Operator runs (labelled app.kubernetes.io/name =
// prometheus) in "monitoring" and one in the cube's namespace, a Prometheus labelled
// app = prometheus in "monitoring" (namespace label team = monitoring), and a Grafana there.
func scraperPods(roles map[string]netRole) []netPod {
	port := []corev1.ContainerPort{{Name: "web", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}
	pod := func(name, ns string, l map[string]string) netPod {
		role, ok := roles[name]
		if !ok {
			role = roleBystander
		}
		return netPod{name: name, namespace: ns, labels: l, role: role, ports: port}
	}
	return []netPod{
		pod("operator-prometheus", "monitoring", map[string]string{LabelName: "prometheus", "prometheus": "k8s"}),
		pod("operator-prometheus-ads", "ads", map[string]string{LabelName: "prometheus"}),
		pod("app-prometheus", "monitoring", map[string]string{"app": "prometheus"}),
		pod("grafana", "monitoring", map[string]string{LabelName: "grafana"}),
	}
}

var monitoringNamespace = map[string]map[string]string{"monitoring": {"team": "monitoring"}}

// TestCubeNetworkPolicies_DefaultScrapersReachTheMetrics: with metrics unset, the pods labelled
// as DefaultScrapers, in any namespace, reach the shards' probe port, where their metrics are
// (and no other port the policies guard); every other pod is kept off it.
func TestCubeNetworkPolicies_DefaultScrapersReachTheMetrics(t *testing.T) {
	policies, pods := shopStack(t, nil, nil)
	pods = append(pods, scraperPods(map[string]netRole{"operator-prometheus": roleScraper, "operator-prometheus-ads": roleScraper})...)
	newPolicyMatrix(t, policies, pods, monitoringNamespace).checkMatrix(t, pods)
}

// TestCubeNetworkPolicies_ScrapeFromReplacesTheDefault: metrics.scrape_from admits its peers
// to the metrics port instead of DefaultScrapers; an empty list admits no pod (and renders no
// rule, which would admit every pod).
func TestCubeNetworkPolicies_ScrapeFromReplacesTheDefault(t *testing.T) {
	policies, pods := shopStack(t, nil, &Metrics{ScrapeFrom: []NetworkPeer{{NamespaceLabels: map[string]string{"team": "monitoring"}, PodLabels: map[string]string{"app": "prometheus"}}}})
	pods = append(pods, scraperPods(map[string]netRole{"app-prometheus": roleScraper})...)
	newPolicyMatrix(t, policies, pods, monitoringNamespace).checkMatrix(t, pods)

	policies, pods = shopStack(t, nil, &Metrics{ScrapeFrom: []NetworkPeer{}})
	pods = append(pods, scraperPods(nil)...)
	newPolicyMatrix(t, policies, pods, monitoringNamespace).checkMatrix(t, pods)
	for _, np := range policies {
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				assert.NotEqual(t, int32(CubeProbePort), p.Port.IntVal, "%s has a rule on the probe port with scrape_from = []", np.Name)
			}
		}
	}
}
