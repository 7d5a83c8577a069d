package stack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMirrorImage(t *testing.T) {
	for _, c := range []struct{ registry, image, want string }{
		{"", "volcanosh/edlctr:v1", "volcanosh/edlctr:v1"},
		{"mirror.example:5000", "volcanosh/edlctr:v1", "mirror.example:5000/volcanosh/edlctr:v1"},
		{"mirror.example:5000/", "busybox", "mirror.example:5000/library/busybox"},
		{"mirror.example/hub", "ghcr.io/elasticctr/cube:1.2.3", "mirror.example/hub/elasticctr/cube:1.2.3"},
		{"mirror.example", "localhost/x:1", "mirror.example/x:1"},
		{"mirror.example", "registry:5000/team/app@sha256:abcd", "mirror.example/team/app@sha256:abcd"},
		{"mirror.example", "docker.io/volcanosh/vc-scheduler:v1.14.1", "mirror.example/volcanosh/vc-scheduler:v1.14.1"},
	} {
		assert.Equal(t, c.want, MirrorImage(c.registry, c.image), "%s on %s", c.image, c.registry)
	}
	i := Images{ProviderVersion: "1.2.3", Registry: "mirror.example"}
	assert.Equal(t, "mirror.example/elasticctr/cube:1.2.3", i.Cube())
	assert.Equal(t, "mirror.example/"+DefaultImage, i.Training(""))
	assert.Equal(t, "mirror.example/paddlepaddle/serving:0.9.0-runtime", i.Serving(), "Baidu's registry replaced by the mirror")
	assert.Equal(t, CubeImage("1.2.3"), Images{ProviderVersion: "1.2.3"}.Cube())
	for _, ok := range []string{"mirror.example", "mirror.example:5000", "10.0.0.5:5000/hub", "ccr.ccs.tencentyun.com/ns"} {
		assert.True(t, RegistryPattern.MatchString(ok), ok)
	}
	for _, bad := range []string{"https://mirror.example", "mirror.example/", "", "mirror example"} {
		assert.False(t, RegistryPattern.MatchString(bad), bad)
	}
}

func TestMirrorImages(t *testing.T) {
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"initContainers": []any{map[string]any{"name": "i", "image": "docker.io/volcanosh/vc-webhook-manager:v1.14.1"}},
			"containers":     []any{map[string]any{"name": "c", "image": "volcanosh/vc-scheduler:v1.14.1"}},
		}}}}}
	job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "j"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}}}}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}, "data": map[string]any{"image": "x"}}}
	MirrorImages(Set{{Object: dep}, {Object: job}, {Object: cm}}, "mirror.example")
	c, _, err := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	assert.Equal(t, "mirror.example/volcanosh/vc-scheduler:v1.14.1", c[0].(map[string]any)["image"])
	ic, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "initContainers")
	assert.Equal(t, "mirror.example/volcanosh/vc-webhook-manager:v1.14.1", ic[0].(map[string]any)["image"])
	jc, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	assert.Equal(t, "mirror.example/library/busybox", jc[0].(map[string]any)["image"])
	assert.Equal(t, "x", cm.Object["data"].(map[string]any)["image"], "only containers' images move")
}

// TestImages_EveryPodTemplate: pull secrets reach every pod template of the three workload
// resources, and a registry moves the training job's default images (tasks, file server).
func TestImages_EveryPodTemplate(t *testing.T) {
	secrets := []string{"mirror-pull", "team.pull"}
	conf := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile}.Defaulted().CubeConf()
	sets := map[string]func() (Set, error){
		"cube": func() (Set, error) {
			return RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Image: CubeImage("v1.2.3"), ImagePullSecrets: secrets})
		},
		"serving": func() (Set, error) {
			return RenderServing(Serving{Name: "s", Namespace: "ads", CubeConf: conf, ImagePullSecrets: secrets})
		},
		"training": func() (Set, error) {
			return RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", ImagePullSecrets: secrets, ProviderVersion: "1.2.3", ImageRegistry: "mirror.example"})
		},
	}
	seen := eachPodTemplate(t, sets, func(name, key string, _ Set, tpl corev1.PodTemplateSpec) {
		var got []string
		for _, s := range tpl.Spec.ImagePullSecrets {
			got = append(got, s.Name)
		}
		assert.Equal(t, secrets, got, "%s %s", name, key)
		if name == "training" {
			want := "mirror.example/" + DefaultImage
			if tpl.Spec.Containers[0].Name == "fileserver" {
				want = "mirror.example/elasticctr/cube:1.2.3"
			}
			assert.Equal(t, want, tpl.Spec.Containers[0].Image, key)
		}
	})
	assert.GreaterOrEqual(t, seen, 6, "pod templates: pserver, trainer, model-out?, file server, shard servers, transfer, serving")
}
