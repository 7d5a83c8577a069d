package stack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRenderServing_Golden(t *testing.T) {
	conf := Cube{Name: "cube", Namespace: "default", DonefileURL: testDonefile}.Defaulted().CubeConf()
	set, err := RenderServing(Serving{Name: "serving", Namespace: "default", ModelURL: "http://ctr-fileserver.default.svc:8080/output/ctr_model.tar.gz", CubeConf: conf})
	require.NoError(t, err)
	m, err := set.Manifests()
	require.NoError(t, err)
	out := ""
	for _, o := range set {
		out += "# " + o.Key + "\n" + m[o.Key] + "---\n"
	}
	golden(t, "serving.yaml", out)
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
	} {
		errs := s.Validate()
		require.NotEmpty(t, errs, path)
		assert.Equal(t, path, errs[0].Path)
	}
}
