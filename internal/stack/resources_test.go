package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// TestSizingOver: what is given stays, a resource not given takes the default's request and
// limit, and a default never puts a request above its limit.
func TestSizingOver(t *testing.T) {
	def := Sizing{Requests: map[string]string{"cpu": "100m", "memory": "256Mi"}, Limits: map[string]string{"cpu": "1", "memory": "1Gi"}}
	for _, tc := range []struct {
		name               string
		requests, limits   map[string]string
		wantReq, wantLimit map[string]string
	}{
		{name: "nothing given", wantReq: def.Requests, wantLimit: def.Limits},
		{name: "a request given", requests: map[string]string{"memory": "512Mi"},
			wantReq: map[string]string{"cpu": "100m", "memory": "512Mi"}, wantLimit: def.Limits},
		{name: "a request above the default limit raises it", requests: map[string]string{"memory": "8Gi", "cpu": "4"},
			wantReq: map[string]string{"cpu": "4", "memory": "8Gi"}, wantLimit: map[string]string{"cpu": "4", "memory": "8Gi"}},
		{name: "a limit below the default request lowers it", limits: map[string]string{"memory": "128Mi", "cpu": "50m"},
			wantReq: map[string]string{"cpu": "50m", "memory": "128Mi"}, wantLimit: map[string]string{"cpu": "50m", "memory": "128Mi"}},
		{name: "other resources pass through", requests: map[string]string{"ephemeral-storage": "1Gi"}, limits: map[string]string{GPUResource: "1"},
			wantReq: map[string]string{"cpu": "100m", "memory": "256Mi", "ephemeral-storage": "1Gi"}, wantLimit: map[string]string{"cpu": "1", "memory": "1Gi", GPUResource: "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := def.Over(tc.requests, tc.limits)
			assert.Equal(t, tc.wantReq, got.Requests)
			assert.Equal(t, tc.wantLimit, got.Limits)
		})
	}
	assert.Equal(t, map[string]string{"cpu": "100m", "memory": "256Mi"}, def.Requests, "Over leaves the defaults as they were")
}

// TestDefaultedResources: each container with defaults of its own (and a setting over them)
// has them when nothing is given, and a resource given replaces its default's alone.
func TestDefaultedResources(t *testing.T) {
	for _, tc := range []struct {
		name, key, container string
		def                  Sizing
		render               func(req, lim map[string]string) (Set, error)
	}{
		{name: "transfer", key: "apps/v1/Deployment/" + cubeTransferName("cube"), container: "transfer", def: DefaultTransferResources,
			render: func(req, lim map[string]string) (Set, error) {
				return RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, TransferRequests: req, TransferLimits: lim})
			}},
		{name: "cube server", key: "apps/v1/StatefulSet/" + cubeShardName("cube", 1), container: "cube", def: DefaultCubeServerResources,
			render: func(req, lim map[string]string) (Set, error) {
				return RenderCube(Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, Requests: req, Limits: lim})
			}},
		{name: "file server", key: "apps/v1/Deployment/" + fileServerName("t"), container: "fileserver", def: DefaultFileServerResources,
			render: func(req, lim map[string]string) (Set, error) {
				return RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", ProviderVersion: "v1.2.3", FileServer: &FileServer{Requests: req, Limits: lim}})
			}},
		{name: "model export", key: "apps/v1/Deployment/" + modelExportName("t"), container: "export", def: DefaultModelExportResources,
			render: func(req, lim map[string]string) (Set, error) {
				return RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", ProviderVersion: "v1.2.3", ModelExport: &ModelExport{Requests: req, Limits: lim}})
			}},
		{name: "trainer", key: VolcanoJobKey("t"), container: "trainer", def: DefaultTaskResources,
			render: func(req, lim map[string]string) (Set, error) {
				return RenderTrainingJob(TrainingJob{Name: "t", Namespace: "ads", ProviderVersion: "v1.2.3", Trainer: &Task{Requests: req, Limits: lim}})
			}},
		{name: "serving", key: "apps/v1/Deployment/s", container: "serving", def: DefaultServingResources,
			render: func(req, lim map[string]string) (Set, error) {
				return RenderServing(Serving{Name: "s", Namespace: "ads", CubeConf: `[{"dict_name":"d","shard":1}]`, ProviderVersion: "v1.2.3", Requests: req, Limits: lim})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sizing := func(req, lim map[string]string) Sizing {
				set, err := tc.render(req, lim)
				require.NoError(t, err)
				obj := set.Find(tc.key)
				require.NotNil(t, obj, tc.key)
				c, ok := findContainer(obj.Object, tc.container)
				require.True(t, ok, "no container %s in %s", tc.container, tc.key)
				return Sizing{Requests: stringsOf(c, "requests"), Limits: stringsOf(c, "limits")}
			}
			got := sizing(nil, nil)
			assert.Equal(t, tc.def.Requests, got.Requests)
			assert.Equal(t, tc.def.Limits, got.Limits)

			got = sizing(map[string]string{"cpu": "300m"}, map[string]string{"cpu": "3"})
			assert.Equal(t, "300m", got.Requests["cpu"])
			assert.Equal(t, "3", got.Limits["cpu"])
			assert.Equal(t, tc.def.Requests["memory"], got.Requests["memory"], "a resource not given keeps its default")
			assert.Equal(t, tc.def.Limits["memory"], got.Limits["memory"], "a resource not given keeps its default")
		})
	}
}

// TestCubeServerMemoryFollowsRequest: a cube server's memory request given alone is also its
// limit (the page cache of the mapped dictionary counts against it).
func TestCubeServerMemoryFollowsRequest(t *testing.T) {
	r := Cube{Requests: map[string]string{"memory": "512Mi"}}.serverResources()
	assert.Equal(t, "512Mi", ptr.To(r.Limits[corev1.ResourceMemory]).String())
	assert.Equal(t, DefaultCubeServerResources.Limits["cpu"], ptr.To(r.Limits[corev1.ResourceCPU]).String())
}

// TestDefaultedResources_BadInput: a value that is not a quantity, and a request above the
// limit given, are refused with the attribute's path; a request above a default limit is not
// (the limit follows it).
func TestDefaultedResources_BadInput(t *testing.T) {
	errs := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile,
		TransferRequests: map[string]string{"memory": "2Gi"}, TransferLimits: map[string]string{"cpu": "lots", "memory": "1Gi"}}.Validate()
	require.Len(t, errs, 2, "%v", errs)
	assert.Contains(t, errs.Error(), `transfer_resources.limits["cpu"]`)
	assert.Contains(t, errs.Error(), `transfer_resources.requests["memory"]`)
	assert.Contains(t, errs.Error(), "more than the limit 1Gi")

	over := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile, TransferRequests: map[string]string{"memory": "64Gi"}}
	assert.Empty(t, over.Validate())

	errs = TrainingJob{Name: "t", Namespace: "ads", FileServer: &FileServer{Requests: map[string]string{"cpu": "-1"}}}.Validate()
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs.Error(), `file_server.resources.requests["cpu"]`)

	errs = TrainingJob{Name: "t", Namespace: "ads", ModelExport: &ModelExport{Limits: map[string]string{"memory": "much"}}}.Validate()
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs.Error(), `model_export.resources.limits["memory"]`)
}

// sizedResources are what every container must request and be limited to: what a
// ResourceQuota on requests.cpu, requests.memory, limits.cpu and limits.memory requires.
var sizedResources = []string{"cpu", "memory"}

// TestEveryContainerSized walks every object of every golden file (each the whole rendering
// of one resource's settings; TestRender*_Golden keep them equal to the code's) and fails on
// any container, init containers too, at any depth (Deployments, StatefulSets, each task of
// a Volcano Job), without a CPU and a memory request and limit.
func TestEveryContainerSized(t *testing.T) {
	sets := goldenSets(t)
	containers := 0
	for file, set := range sets {
		for _, o := range set {
			walkContainers(o.Object.Object, o.Key, func(at string, c map[string]any) {
				containers++
				for _, field := range []string{"requests", "limits"} {
					got := stringsOf(c, field)
					for _, r := range sizedResources {
						if got[r] == "" {
							t.Errorf("%s: %s has no %s %s", file, at, r, strings.TrimSuffix(field, "s"))
						}
					}
				}
			})
		}
	}
	assert.Greater(t, containers, 2*len(sets), "the walk found too few containers to be looking in the right places")
}

// goldenSets are the golden files' object sets, by file name.
func goldenSets(t *testing.T) map[string]Set {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]Set{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var set Set
		for _, doc := range strings.Split(string(data), "\n---\n") {
			key, body, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(doc), "# "), "\n")
			if strings.TrimSpace(doc) == "" || strings.TrimSpace(doc) == "---" {
				continue
			}
			var obj map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(body), &obj), "%s: %s", f, key)
			set = append(set, Object{Key: key, Object: &unstructured.Unstructured{Object: obj}})
		}
		require.NotEmpty(t, set, f)
		out[filepath.Base(f)] = set
	}
	return out
}

// walkContainers calls fn with every container and init container found anywhere in obj,
// each with a path that names it.
func walkContainers(v any, at string, fn func(at string, c map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if k == "containers" || k == "initContainers" {
				if list, ok := e.([]any); ok {
					for i, c := range list {
						if m, ok := c.(map[string]any); ok {
							fn(fmt.Sprintf("%s.%s[%d] (%v)", at, k, i, m["name"]), m)
						}
					}
				}
				continue
			}
			walkContainers(e, at+"."+k, fn)
		}
	case []any:
		for i, e := range t {
			walkContainers(e, fmt.Sprintf("%s[%d]", at, i), fn)
		}
	}
}

// findContainer finds the container (or init container) called name in obj.
func findContainer(obj map[string]any, name string) (map[string]any, bool) {
	var found map[string]any
	walkContainers(obj, "", func(_ string, c map[string]any) {
		if c["name"] == name {
			found = c
		}
	})
	return found, found != nil
}

// stringsOf is a container's resources.requests or resources.limits as strings.
func stringsOf(c map[string]any, field string) map[string]string {
	out := map[string]string{}
	r, _ := c["resources"].(map[string]any)
	m, _ := r[field].(map[string]any)
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// TestTransferStorageClass: the transfer's claim takes the class given (none: the cluster's
// default), and a class that is not a name is refused at its attribute.
func TestTransferStorageClass(t *testing.T) {
	class := func(c Cube) *string {
		set, err := RenderCube(c)
		require.NoError(t, err)
		claim := typed[corev1.PersistentVolumeClaim](t, set.Find(Key(ref(kindClaim, c.Namespace, cubeTransferName(c.Name)))))
		return claim.Spec.StorageClassName
	}
	c := Cube{Name: "cube", Namespace: "ads", DonefileURL: testDonefile}
	assert.Nil(t, class(c))
	c.TransferStorageClass = "gp3"
	assert.Equal(t, ptr.To("gp3"), class(c))
	c.TransferStorageClass = "GP 3"
	errs := c.Validate()
	require.Len(t, errs, 1, "%v", errs)
	assert.Equal(t, "transfer_storage_class", errs[0].Path)
}
