package stack

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	} {
		errs := s.Validate()
		require.NotEmpty(t, errs, path)
		assert.Equal(t, path, errs[0].Path)
	}
}
