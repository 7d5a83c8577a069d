package stack

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The storage guide (templates/guides/storage.md.tmpl) has one table row per claim a
// workload renders: | `resource` | claim | `class attribute` | `size attribute` (`default`) | access modes |.
const storageGuide = "../../templates/guides/storage.md.tmpl"

// storageRender renders one workload with every optional object, each StorageClass set to a
// class of its own (and, with sizes, each claim size to a size of its own), and returns the
// settings it rendered from.
type storageRender func(sizes bool) (settings any, set Set, err error)

// storageRenders are the workloads that may render claims. A claim added to a workload shows
// here with no class (its attribute is not set below), which fails the test until it is set
// here and has its row in the guide.
var storageRenders = map[string]storageRender{
	TrainingJobType: func(sizes bool) (any, Set, error) {
		j := TrainingJob{Name: "j", Namespace: "n", ProviderVersion: "1.0.0", Stack: "s",
			PServer: &Task{Replicas: 2}, Trainer: &Task{Replicas: 2},
			Dataset:    &Dataset{HDFSAddress: "hdfs://10.0.0.1:9000", HDFSUGI: "u,p", Path: "/d"},
			SlotConfig: "1\n", ModelExport: &ModelExport{ServingModel: "inference_model"},
			ModelOutput: &ModelOutput{StorageClass: "class-model"},
			FileServer:  &FileServer{Upload: true, Pod: fullPod()}, Pod: fullPod(), UploadToken: "t"}
		if sizes {
			j.ModelOutput.Size = "1001Mi"
		}
		set, err := RenderTrainingJob(j)
		return j, set, err
	},
	CubeType: func(sizes bool) (any, Set, error) {
		c := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Shards: 2, Replicas: 2,
			Storage: &CubeStorage{StorageClass: "class-shards"}, TransferStorageClass: "class-transfer",
			Pod: fullPod(), Metrics: &Metrics{PodMonitor: true}}
		if sizes {
			c.Storage.Size, c.TransferStorage = "1002Mi", "1003Mi"
		}
		set, err := RenderCube(c)
		return c, set, err
	},
	ServingType: func(bool) (any, Set, error) {
		s := Serving{Name: "s", Namespace: "n", CubeConf: `[{"dict_name":"d","shard":1}]`, Requests: map[string]string{"cpu": "1"},
			Autoscaling: &Autoscaling{MaxReplicas: 3}, Pod: fullPod()}
		set, err := RenderServing(s)
		return s, set, err
	},
}

// guideClaim is a claim as the guide lists it: what the renders say of it.
type guideClaim struct {
	resource, classAttr, sizeAttr, defaultSize string
	modes                                      []string
	where                                      string // an object that renders it
}

// TestStorageGuide_ListsEveryClaim: every PersistentVolumeClaim the workloads render, found in
// their objects wherever a claim spec sits, has its row in the storage guide with the attribute
// that sets its class (which the test finds by the class it gave), its size attribute and default
// size, and its access modes; and every row names a claim that is rendered.
func TestStorageGuide_ListsEveryClaim(t *testing.T) {
	claims := map[[2]string]guideClaim{} // by resource and class attribute
	for _, resource := range slices.Sorted(maps.Keys(storageRenders)) {
		render := storageRenders[resource]
		settings, set, err := render(false)
		require.NoError(t, err, resource)
		sizedSettings, sized, err := render(true)
		require.NoError(t, err, resource)
		sizeOf := map[string]string{} // class -> size, in the render with sizes set
		for _, o := range sized {
			for _, c := range claimSpecs(o.Object.Object) {
				sizeOf[c.class] = c.size
			}
		}
		for _, o := range set {
			for _, c := range claimSpecs(o.Object.Object) {
				if c.class == "" {
					t.Errorf("%s renders a claim in %s that no attribute gives a StorageClass: every claim takes one (a cluster "+
						"without a default class leaves it Pending); set it in storageRenders and add its row to %s", resource, o.Key, storageGuide)
					continue
				}
				g := guideClaim{resource: resource, classAttr: attributeOf(t, settings, c.class), defaultSize: c.size,
					sizeAttr: attributeOf(t, sizedSettings, sizeOf[c.class]), modes: c.modes, where: o.Key}
				claims[[2]string{g.resource, g.classAttr}] = g
			}
		}
	}
	require.NotEmpty(t, claims)

	b, err := os.ReadFile(storageGuide)
	require.NoError(t, err)
	rows := map[[2]string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `ctr_") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		require.Len(t, cells, 5, "row %q: resource | claim | class attribute | size attribute | access modes", line)
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[[2]string{strings.Trim(cells[0], "`"), strings.Trim(cells[2], "`")}] = cells
	}
	for _, k := range slices.SortedFunc(maps.Keys(claims), func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) }) {
		c := claims[k]
		t.Logf("%s: claim in %s, class from %s, size from %s (default %s), access %v", c.resource, c.where, c.classAttr, c.sizeAttr, c.defaultSize, c.modes)
		row, ok := rows[k]
		if !assert.True(t, ok, "%s renders a claim (%s) whose class %s sets: the guide has no row | `%s` | … | `%s` | … |", c.resource, c.where, c.classAttr, c.resource, c.classAttr) {
			continue
		}
		assert.Contains(t, row[3], "`"+c.sizeAttr+"`", "%s %s: the size attribute", c.resource, c.classAttr)
		assert.Contains(t, row[3], "`"+c.defaultSize+"`", "%s %s: the default size", c.resource, c.classAttr)
		for _, m := range c.modes {
			assert.Contains(t, row[4], "`"+m+"`", "%s %s: the access mode", c.resource, c.classAttr)
		}
	}
	for k := range rows {
		assert.Contains(t, claims, k, "the guide lists a claim of %s with class %s, which no workload renders", k[0], k[1])
	}
}

// claimSpec is what the guide says of a PersistentVolumeClaim spec.
type claimSpec struct {
	class, size string
	modes       []string
}

// claimSpecs finds every PersistentVolumeClaim spec in an object, wherever it sits: the
// object's own (a claim), a StatefulSet's volumeClaimTemplates, a pod's ephemeral volume, a
// Volcano Job's volumes. A claim spec is the one shape with both accessModes and resources.
func claimSpecs(v any) []claimSpec {
	var out []claimSpec
	switch v := v.(type) {
	case map[string]any:
		if modes, ok := v["accessModes"].([]any); ok && v["resources"] != nil {
			c := claimSpec{}
			c.class, _ = v["storageClassName"].(string)
			if req, ok := v["resources"].(map[string]any)["requests"].(map[string]any); ok {
				c.size, _ = req["storage"].(string)
			}
			for _, m := range modes {
				c.modes = append(c.modes, fmt.Sprint(m))
			}
			return append(out, c)
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, claimSpecs(v[k])...)
		}
	case []any:
		for _, e := range v {
			out = append(out, claimSpecs(e)...)
		}
	}
	return out
}

// attributeOf is the attribute path (`storage.storage_class`) of the one setting that holds
// value, found in the settings as they serialise: their JSON names are the attributes'.
func attributeOf(t *testing.T, settings any, value string) string {
	t.Helper()
	b, err := json.Marshal(settings)
	require.NoError(t, err)
	var tree any
	require.NoError(t, json.Unmarshal(b, &tree))
	var paths []string
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(e, append(slices.Clone(path), k))
			}
		case []any:
			for _, e := range v {
				walk(e, path)
			}
		case string:
			if v == value {
				paths = append(paths, strings.Join(path, "."))
			}
		}
	}
	walk(tree, nil)
	slices.Sort(paths)
	if len(paths) != 1 {
		t.Errorf("the value %q is set by %d settings %v, not one: give each attribute a value of its own", value, len(paths), paths)
		return fmt.Sprintf("<%s>", value)
	}
	return paths[0]
}
