package stack

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRenderServing_Golden(t *testing.T) {
	conf := Cube{Name: "cube", Namespace: "default", DonefileURL: testDonefile}.Defaulted().CubeConf()
	model := "http://ctr-fileserver.default.svc:8080/output/ctr_model.tar.gz"
	for name, s := range map[string]Serving{
		"serving.yaml": {Name: "serving", Namespace: "default", ModelURL: model, CubeConf: conf, ProviderVersion: "0.4.0"},
		// A GPU: the launcher gets the devices the container sees.
		"serving_gpu.yaml": {Name: "serving", Namespace: "default", ModelURL: model, CubeConf: conf, ProviderVersion: "0.4.0",
			Image: "registry.baidubce.com/paddlepaddle/serving:0.9.0-cuda11.2-cudnn8-runtime", Limits: map[string]string{GPUResource: "2"}},
		// A cloud load balancer, configured by the Service's annotations.
		"serving_loadbalancer.yaml": {Name: "serving", Namespace: "default", ModelURL: model, CubeConf: conf, ServiceType: "LoadBalancer", ProviderVersion: "0.4.0",
			ServiceAnnotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
				"service.beta.kubernetes.io/cce-load-balancer-id": "lb-123"}},
		// Autoscaling: an HPA owns the Deployment's size (no spec.replicas), the default CPU
		// target, and a disruption budget since the serving can run more than one pod.
		"serving_autoscaling.yaml": {Name: "serving", Namespace: "default", ModelURL: model, CubeConf: conf, ProviderVersion: "0.4.0",
			Requests: map[string]string{"cpu": "2"}, Autoscaling: &Autoscaling{MinReplicas: 2, MaxReplicas: 6}},
		// Fixed replicas above one: a disruption budget, no autoscaler.
		"serving_replicas.yaml": {Name: "serving", Namespace: "default", ModelURL: model, CubeConf: conf, ProviderVersion: "0.4.0", Replicas: 3},
	} {
		t.Run(name, func(t *testing.T) {
			golden(t, name, setYAML(t)(RenderServing(s)))
		})
	}
}

func TestRenderServing_CubeConfChangeRollsPods(t *testing.T) {
	sum := func(shards int32) string {
		conf := Cube{Name: "cube", Namespace: "default", Shards: shards, DonefileURL: testDonefile}.Defaulted().CubeConf()
		set, err := RenderServing(Serving{Name: "s", Namespace: "n", CubeConf: conf})
		require.NoError(t, err)
		ann, _, _ := unstructuredString(set.Find("apps/v1/Deployment/s").Object, "spec", "template", "metadata", "annotations", CubeConfChecksumAnnotation)
		return ann
	}
	assert.NotEmpty(t, sum(2))
	assert.NotEqual(t, sum(2), sum(3))
}

func TestServing_Validate(t *testing.T) {
	for path, s := range map[string]Serving{
		"cube_conf": {Name: "s", Namespace: "n", CubeConf: "{not json"},
		"stack":     {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`, Stack: "a b"},
		`env["1X"]`: {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`, Env: map[string]string{"1X": "y"}},
		`service_annotations["bad key!"]`: {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`,
			ServiceAnnotations: map[string]string{"bad key!": "x"}},
		`service_annotations["ctr.elasticctr.io/settings"]`: {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`,
			ServiceAnnotations: map[string]string{"ctr.elasticctr.io/settings": "x"}},
		"service_annotations": {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`,
			ServiceAnnotations: map[string]string{"big": strings.Repeat("x", 256*1024)}},
		// GPUs: a whole number of devices, and an image that has a GPU build of the server.
		`resources.limits["nvidia.com/gpu"]`: {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`,
			Image: "serving:0.9.0-cuda11.2-cudnn8-runtime", Limits: map[string]string{GPUResource: "500m"}},
		"image": {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`, Limits: map[string]string{GPUResource: "1"}},
		// Autoscaling: replicas is the autoscaler's, and bounds in order.
		"replicas": {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`, Replicas: 2,
			Requests: map[string]string{"cpu": "1"}, Autoscaling: &Autoscaling{MaxReplicas: 3}},
		"autoscaling.max_replicas": {Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`,
			Requests: map[string]string{"cpu": "1"}, Autoscaling: &Autoscaling{MinReplicas: 4, MaxReplicas: 3}},
	} {
		errs := s.Validate()
		require.NotEmpty(t, errs, path)
		assert.Equal(t, path, errs[0].Path)
	}
	// Each utilization target is of a request the pods always have (the defaults').
	for _, a := range []*Autoscaling{{MaxReplicas: 3}, {MaxReplicas: 3, TargetCPUUtilization: 70, TargetMemoryUtilization: 70}} {
		assert.Empty(t, Serving{Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`, Autoscaling: a}.Validate())
	}
}

// A serving's size belongs to its autoscaler when it has one: the Deployment carries no
// spec.replicas and an HPA targets it; without, the Deployment has its replicas and no HPA.
func TestRenderServing_AutoscalingOwnsReplicas(t *testing.T) {
	conf := `[{"dict_name":"d","shard":1}]`
	set, err := RenderServing(Serving{Name: "s", Namespace: "n", CubeConf: conf, Limits: map[string]string{"cpu": "1"},
		Autoscaling: &Autoscaling{MaxReplicas: 4, TargetCPUUtilization: 60}})
	require.NoError(t, err)
	_, found, _ := unstructured.NestedInt64(set.Find(ServingDeploymentKey("s")).Object, "spec", "replicas")
	assert.False(t, found, "spec.replicas is the autoscaler's")
	hpa := set.Find(ServingAutoscalerKey("s"))
	require.NotNil(t, hpa)
	ref, _, _ := unstructured.NestedMap(hpa.Object, "spec", "scaleTargetRef")
	assert.Equal(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "s"}, ref)
	minR, _, _ := unstructured.NestedInt64(hpa.Object, "spec", "minReplicas")
	assert.EqualValues(t, DefaultServingReplicas, minR)
	metrics, _, _ := unstructured.NestedSlice(hpa.Object, "spec", "metrics")
	require.Len(t, metrics, 1, "only the CPU target that was set")

	set, err = RenderServing(Serving{Name: "s", Namespace: "n", CubeConf: conf, Replicas: 2})
	require.NoError(t, err)
	replicas, found, _ := unstructured.NestedInt64(set.Find(ServingDeploymentKey("s")).Object, "spec", "replicas")
	assert.True(t, found)
	assert.EqualValues(t, 2, replicas)
	assert.Nil(t, set.Find(ServingAutoscalerKey("s")))
}

// The disruption budget comes when the serving can run more than one pod, never for one pod.
func TestRenderServing_DisruptionBudgetOnlyForMoreThanOnePod(t *testing.T) {
	conf := `[{"dict_name":"d","shard":1}]`
	cpu := map[string]string{"cpu": "1"}
	for _, c := range []struct {
		s    Serving
		want bool
	}{
		{Serving{}, false},
		{Serving{Replicas: 1}, false},
		{Serving{Replicas: 2}, true},
		{Serving{Requests: cpu, Autoscaling: &Autoscaling{MaxReplicas: 1}}, false},
		{Serving{Requests: cpu, Autoscaling: &Autoscaling{MaxReplicas: 2}}, true},
	} {
		c.s.Name, c.s.Namespace, c.s.CubeConf = "s", "n", conf
		set, err := RenderServing(c.s)
		require.NoError(t, err)
		pdb := set.Find(ServingDisruptionBudgetKey("s"))
		assert.Equal(t, c.want, pdb != nil, "%+v", c.s)
		if pdb != nil {
			mu, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "maxUnavailable")
			assert.EqualValues(t, ServingMaxUnavailable, mu)
		}
	}
}

// ServingKinds, what a serving prunes and deletes, has every kind a serving renders.
func TestServingKinds_HaveEveryRenderedKind(t *testing.T) {
	conf := `[{"dict_name":"d","shard":1}]`
	set, err := RenderServing(Serving{Name: "s", Namespace: "n", CubeConf: conf, Requests: map[string]string{"cpu": "1"},
		Autoscaling: &Autoscaling{MaxReplicas: 3}, Pod: fullPod()})
	require.NoError(t, err)
	for _, o := range set {
		assert.Contains(t, ServingKinds, o.Object.GroupVersionKind(), o.Key)
	}
}
