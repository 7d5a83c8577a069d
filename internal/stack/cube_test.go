package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
)

const testDonefile = "http://ctr-fileserver.default.svc:8080/output/ctr_cube/donefile/base.txt"

func renderCubeYAML(t *testing.T, c Cube) string {
	t.Helper()
	return setYAML(t)(RenderCube(c))
}

func TestRenderCube_Golden(t *testing.T) {
	golden(t, "cube_minimal.yaml", renderCubeYAML(t, Cube{Name: "cube", Namespace: "default", DonefileURL: testDonefile, Token: "t0k3n"}))
	golden(t, "cube_full.yaml", renderCubeYAML(t, Cube{Name: "ctr-cube", Namespace: "ads", Stack: "elastic-ctr", Dict: "ctr_dict",
		Shards: 3, Replicas: 1, Image: "ghcr.io/elasticctr/cube:v1.2.3", DonefileURL: testDonefile, Mode: "base_delta", ServeVersion: "1700000000",
		Requests: map[string]string{"cpu": "2", "memory": "8Gi"}, Storage: &CubeStorage{Size: "50Gi", StorageClass: "ssd"}, TransferStorageClass: "gp3",
		NodeSelector: map[string]string{"pool": "cube"}, Tolerations: []Toleration{{Key: "dedicated", Operator: "Equal", Value: "cube", Effect: "NoSchedule"}},
		TimeoutMS: 100, Retry: ptr.To[int32](1), BackupRequestMS: 20, Token: "t0k3n", TransferFilesPort: 9100,
		SecurityContext: &SecurityContext{RunAsUser: ptr.To[int64](1000), ReadOnlyRootFilesystem: ptr.To(false), AddCapabilities: []string{"NET_BIND_SERVICE"}},
		NetworkPolicy: &NetworkPolicy{AllowFrom: []NetworkPeer{
			{PodLabels: map[string]string{"app": "prometheus"}, NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
			{PodLabels: map[string]string{"app": "ctr-debug"}}}}}))
	golden(t, "cube_metrics.yaml", renderCubeYAML(t, Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Token: "t0k3n", Shards: 1,
		Metrics: &Metrics{Annotations: ptr.To(false), PodMonitor: true, PodMonitorLabels: map[string]string{"release": "kube-prometheus-stack"},
			ScrapeFrom: []NetworkPeer{{NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}, PodLabels: map[string]string{LabelName: "prometheus"}}}}}))
}

func TestCube_CubeConf(t *testing.T) {
	c := Cube{Name: "cube", Namespace: "ads", Shards: 3, Dict: "d", DonefileURL: testDonefile}.Defaulted()
	var conf []map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.CubeConf()), &conf))
	require.Len(t, conf, 1)
	assert.Equal(t, "d", conf[0]["dict_name"])
	assert.EqualValues(t, 3, conf[0]["shard"])
	assert.EqualValues(t, 2, conf[0]["dup"])
	assert.Equal(t, "ipport_list", conf[0]["type"])
	nodes := conf[0]["nodes"].([]any)
	require.Len(t, nodes, 3)
	for i, n := range nodes {
		assert.Equal(t, "http://"+c.Endpoints()[i], n.(map[string]any)["ipport_list"], "shard %d in order", i)
	}
	assert.Equal(t, "cube-shard-2.ads.svc:8027", c.Endpoints()[2])
}

func TestRenderCube_TokenNeverInPlanOrSettings(t *testing.T) {
	set, err := RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Token: "s3cr3t-token"})
	require.NoError(t, err)
	m, err := set.Manifests()
	require.NoError(t, err)
	for k, y := range m {
		assert.NotContains(t, y, "s3cr3t-token", k)
		assert.NotContains(t, y, "czNjcjN0LXRva2Vu", k)
	}
	// The plan renders before a token exists; the YAML is the same as with the real token.
	planned, err := RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile})
	require.NoError(t, err)
	pm, err := planned.Manifests()
	require.NoError(t, err)
	assert.Equal(t, m, pm)
}

func TestRenderCube_ReshardAddsShardObjects(t *testing.T) {
	two, err := RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Shards: 2})
	require.NoError(t, err)
	three, err := RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Shards: 3})
	require.NoError(t, err)
	assert.Len(t, three, len(two)+3)
	assert.NotNil(t, three.Find("apps/v1/StatefulSet/c-shard-2"))
	assert.NotNil(t, three.Find("v1/Service/c-shard-2"))
	assert.NotNil(t, three.Find("policy/v1/PodDisruptionBudget/c-shard-2"))
	assert.Nil(t, two.Find("apps/v1/StatefulSet/c-shard-2"))
}

func TestCube_Validate(t *testing.T) {
	ok := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile}
	require.Empty(t, ok.Validate())
	for path, mut := range map[string]func(*Cube){
		"donefile_url":                 func(c *Cube) { c.DonefileURL = "ftp://x/base.txt" },
		"stack":                        func(c *Cube) { c.Stack = "not a label" },
		"transfer_port":                func(c *Cube) { c.Port, c.TransferPort = 9000, 9000 },
		`resources.requests["memory"]`: func(c *Cube) { c.Requests = map[string]string{"memory": "lots"} },
		"storage.size":                 func(c *Cube) { c.Storage = &CubeStorage{Size: "0"} },
		`node_selector["-pool"]`:       func(c *Cube) { c.NodeSelector = map[string]string{"-pool": "cube"} },
		"tolerations[0].key":           func(c *Cube) { c.Tolerations = []Toleration{{Key: "bad key", Operator: "Exists"}} },
		"tolerations[0].value":         func(c *Cube) { c.Tolerations = []Toleration{{Key: "k", Operator: "Exists", Value: "v"}} },
		"tolerations[0].operator":      func(c *Cube) { c.Tolerations = []Toleration{{Effect: "NoSchedule"}} },
		"spread.topology_key":          func(c *Cube) { c.Spread = &Spread{TopologyKey: "zone/"} },
	} {
		c := ok
		mut(&c)
		errs := c.Validate()
		require.NotEmpty(t, errs, path)
		assert.Equal(t, path, errs[0].Path)
	}
}

// TestCube_RetryZero: zero retries is a setting of its own, not "the default".
func TestCube_RetryZero(t *testing.T) {
	conf := func(c Cube) (out []map[string]any) {
		require.NoError(t, json.Unmarshal([]byte(c.Defaulted().CubeConf()), &out))
		return out
	}
	c := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile}
	assert.EqualValues(t, DefaultCubeRetry, conf(c)[0]["retry"])
	c.Retry = ptr.To[int32](0)
	assert.EqualValues(t, 0, conf(c)[0]["retry"])
	// And it survives the settings annotation, which import reads back.
	set, err := RenderCube(c)
	require.NoError(t, err)
	back, err := CubeFromSettings(set.Find(CubeTransferKey("c")).GetAnnotations()[SettingsAnnotation])
	require.NoError(t, err)
	require.NotNil(t, back.Retry)
	assert.EqualValues(t, 0, *back.Retry)
}

func TestCubeLayoutServes(t *testing.T) {
	// The status as the transfer writes it: what it decided, and what each replica reports.
	status := func(decided, inFlight string, replicas ...[]string) []byte {
		st := api.Status{DecidedVersion: decided, InFlight: inFlight}
		for i, rs := range replicas {
			sh := api.ShardStatus{Shard: i}
			for _, v := range rs {
				sh.Replicas = append(sh.Replicas, api.ReplicaStatus{ServedVersion: v})
			}
			st.Shards = append(st.Shards, sh)
		}
		st.Summarize()
		b, _ := json.Marshal(st)
		return b
	}
	for name, c := range map[string]struct {
		status []byte
		want   bool
	}{
		"rebuilt and served everywhere": {status("v2", "", []string{"v2", "v2"}, []string{"v2"}), true},
		"still the old version":         {status("v1", "", []string{"v1"}, []string{"v1"}), false},
		"rebuild in flight":             {status("v1", "v2", []string{"v1"}, []string{"v1"}), false},
		"a replica lags":                {status("v2", "", []string{"v2", "v1"}, []string{"v2"}), false},
		"old shard count":               {status("v2", "", []string{"v2"}, []string{"v2"}, []string{"v2"}), false},
		"no model yet":                  {status("", "", []string{""}, []string{""}), false},
		"a shard is dark":               {status("v2", "", []string{"v2"}, []string{""}), false},
	} {
		got, state, err := CubeLayoutServes(c.status, 2, "v1")
		require.NoError(t, err, name)
		assert.Equal(t, c.want, got, "%s: %s", name, state)
	}
	_, _, err := CubeLayoutServes([]byte("<html>"), 2, "v1")
	assert.Error(t, err)
}

// TestRenderCube_TransferReachesReplicasThatServeNothing: every replica address the transfer
// is given is a pod DNS name of a headless Service that publishes not-ready pods and governs
// that pod's StatefulSet. A replica turns Ready only once it serves a version, so through a
// Service listing ready pods only, the transfer could never reach a replica to make it serve
// (the first rollout, a restart with an empty disk, a new replica).
func TestRenderCube_TransferReachesReplicasThatServeNothing(t *testing.T) {
	set, err := RenderCube(Cube{Name: "c", Namespace: "n", Shards: 2, Replicas: 2, DonefileURL: testDonefile, Token: "t"})
	require.NoError(t, err)
	services, governs := map[string]bool{}, map[string]string{} // Service → publishes not-ready; StatefulSet → serviceName
	var args []string
	for _, o := range set {
		u := o.Object.Object
		switch o.Object.GetKind() {
		case "Service":
			services[o.Object.GetName()] = u["spec"].(map[string]any)["publishNotReadyAddresses"] == true
		case "StatefulSet":
			governs[o.Object.GetName()] = u["spec"].(map[string]any)["serviceName"].(string)
		case "Deployment":
			for _, a := range u["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any) {
				args = append(args, a.(string))
			}
		}
	}
	var addrs []string
	for i, a := range args {
		if a == "--shard-replicas" {
			_, list, _ := strings.Cut(args[i+1], "=")
			addrs = append(addrs, strings.Split(list, ",")...)
		}
	}
	require.Len(t, addrs, 4)
	for _, a := range addrs {
		parts := strings.SplitN(a, ".", 3) // pod.service.namespace.svc:port
		require.Len(t, parts, 3, a)
		pod, svc := parts[0], parts[1]
		sts := pod[:strings.LastIndex(pod, "-")]
		assert.Equal(t, svc, governs[sts], "%s: StatefulSet %s must be governed by %s for the pod name to resolve", a, sts, svc)
		assert.True(t, services[svc], "%s: Service %s must publish pods that are not ready", a, svc)
	}
}

// TestCubeKinds_HaveEveryRenderedKind: what a cube renders, with every optional object
// (claims, disruption budgets, network policies, a service account, a PodMonitor), is in CubeKinds, the
// list prune and destroy work from: a kind missing there is never pruned.
func TestCubeKinds_HaveEveryRenderedKind(t *testing.T) {
	set, err := RenderCube(Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Shards: 2, Replicas: 2,
		Storage: &CubeStorage{Size: "1Gi"}, Pod: fullPod(), Metrics: &Metrics{PodMonitor: true}})
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, o := range set {
		assert.Contains(t, CubeKinds, o.Object.GroupVersionKind(), o.Key)
		seen[o.Object.GetKind()] = true
	}
	assert.True(t, seen["PodDisruptionBudget"] && seen["NetworkPolicy"] && seen["ServiceAccount"] && seen["PodMonitor"], "rendered kinds %v", seen)
}
