package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// FuzzYAMLMatchesTheJSONDetour: whatever object YAML is given (decoded from JSON the way
// objects read from the API server are: int64, float64, strings, lists, maps), it writes
// exactly what sigs.k8s.io/yaml writes, so that `manifests` of existing states never changes
// with the faster path. The seeds are every object of the golden files and values that YAML
// quotes, reads as other types, or that JSON writes differently.
func FuzzYAMLMatchesTheJSONDetour(f *testing.F) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(goldens) == 0 {
		f.Fatalf("golden files: %v %v", goldens, err)
	}
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			j, err := utilyaml.ToJSON([]byte(doc))
			if err != nil {
				f.Fatalf("%s: %v", g, err)
			}
			f.Add(string(j))
		}
	}
	for _, s := range []string{
		`{"a":"yes","b":"no","c":"on","d":"off","e":"y","f":"n","g":"true","h":"null","i":"~","j":""}`,
		`{"a":"123","b":"0x1F","c":"1e3","d":"0o17","e":"-.inf","f":".nan","g":"1_000","h":"08","i":"+1"}`,
		`{"a":": x","b":"- x","c":"#x","d":"a: b","e":"multi\nline\n","f":" lead","g":"trail ","h":"\t","i":"\u2028","j":"<&>"}`,
		`{"shard-10":1,"shard-9":2,"shard-1":3,"a10":4,"a9":5,"A":6,"_":7,"":8}`,
		`{"i":9223372036854775807,"n":-1,"z":0,"f":0.5,"e":1e6,"g":1.0,"h":-0.0,"big":1e21}`,
		`{"l":[[],{},[1,"2",null],{"k":[{"x":true}]}],"n":null,"t":true,"u":"ünïcødé","x":"\u0000"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var obj map[string]any
		if err := utiljson.Unmarshal([]byte(in), &obj); err != nil || obj == nil {
			return
		}
		u := &unstructured.Unstructured{Object: obj}
		shown := obj
		if u.GetKind() == "Secret" && u.GetAPIVersion() == "v1" {
			shown = redactSecret(obj) // what YAML shows of a Secret, either way
		}
		want, wantErr := yaml.Marshal(shown)
		got, gotErr := YAML(u)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("errors differ: sigs.k8s.io/yaml %v, YAML %v", wantErr, gotErr)
		}
		if wantErr == nil && got != string(want) {
			t.Fatalf("%s\nYAML wrote:\n%s\nsigs.k8s.io/yaml wrote:\n%s", in, got, want)
		}
	})
}
