package stack

import (
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Object is one rendered object: typed for readers of this package, unstructured for the
// applier, with a stable key for the plan's `manifests` map.
type Object struct {
	Key    string // "<apiVersion>/<Kind>/<name>", e.g. "apps/v1/Deployment/ctr-demo-fileserver"
	Object *unstructured.Unstructured
}

// workload is what the render step common to every workload needs of its settings.
type workload[W any] interface {
	Validate() FieldErrors
	Defaulted() W
	forAnnotation() W // the settings as the settings annotation stores them
	objects() Set     // the objects of settings already defaulted, in apply order
}

// render validates given, renders the objects of its defaulted settings, and records given
// (as forAnnotation has it) in the settings annotation of the primary object, the one
// primary picks, beside the annotations it has.
func render[W workload[W]](given W, primary func(Set) *unstructured.Unstructured) (Set, error) {
	if errs := given.Validate(); len(errs) > 0 {
		return nil, errs
	}
	settings, err := json.Marshal(given.forAnnotation())
	if err != nil {
		return nil, err
	}
	set := given.Defaulted().objects()
	obj := primary(set)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[SettingsAnnotation] = string(settings)
	obj.SetAnnotations(ann)
	return set, nil
}

// Set is a rendered object set in apply order (dependencies first).
type Set []Object

// Manifests returns key -> YAML for every object, the value of a resource's `manifests`.
// The objects are rendered on every core at once: YAML is most of the time a plan or an apply
// spends before it writes (BenchmarkRenderCube64: 22–25 ms, against 25–33 ms on one core).
func (s Set) Manifests() (map[string]string, error) {
	ys := make([]string, len(s))
	var g errgroup.Group
	g.SetLimit(goruntime.GOMAXPROCS(0))
	for i, o := range s {
		g.Go(func() error {
			y, err := YAML(o.Object)
			if err != nil {
				return fmt.Errorf("render %s: %w", o.Key, err)
			}
			ys[i] = y
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(s))
	for i, o := range s {
		out[o.Key] = ys[i]
	}
	return out, nil
}

// Keys returns the sorted keys of the set.
func (s Set) Keys() []string {
	keys := make([]string, 0, len(s))
	for _, o := range s {
		keys = append(keys, o.Key)
	}
	sort.Strings(keys)
	return keys
}

// YAML renders an object the way `manifests` shows it: no status, no server-set metadata,
// and no Secret values (each shows as SensitiveValue, or DriftedValue when drift was found).
func YAML(u *unstructured.Unstructured) (string, error) {
	obj := u.Object
	if u.GetKind() == "Secret" && u.GetAPIVersion() == "v1" {
		obj = redactSecret(u.Object)
	}
	marshal := yaml.Marshal
	if plainYAML(obj) {
		marshal = yamlv2.Marshal
	}
	b, err := marshal(obj)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// plainYAML says whether obj holds only maps, lists, strings (valid UTF-8), integers,
// booleans and nulls: values that go-yaml writes exactly as sigs.k8s.io/yaml writes them
// after its detour through JSON (which sorts the same keys the same way, and reads every such
// value back as it was), at a fifth of the cost. A float (JSON writes 1e6 as 1000000, go-yaml
// as 1e+06) or anything else takes the detour, so `manifests` never changes with the path.
func plainYAML(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if !plainString(k) || !plainYAML(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range t {
			if !plainYAML(e) {
				return false
			}
		}
		return true
	case string:
		return plainString(t)
	case int64, int, int32, bool, nil:
		return true
	}
	return false
}

// plainString is a string both paths write alike: valid UTF-8 without the characters the
// detour writes raw into its JSON and its YAML reader then refuses ("control characters are
// not allowed": DEL, the C1 controls but NEL, U+FFFE and U+FFFF), with which the detour fails.
func plainString(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == 0x7f || (r >= 0x80 && r <= 0x9f && r != 0x85) || r == 0xfffe || r == 0xffff {
			return false
		}
	}
	return true
}

// Key is the manifests key of an object.
func Key(u *unstructured.Unstructured) string {
	return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetName()
}

// toObject converts a typed object to its unstructured form without status or the
// null creationTimestamp that typed objects marshal.
func toObject(obj runtime.Object) Object {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		// Only reachable with a type that cannot be converted: a programming error.
		panic(fmt.Sprintf("stack: convert %T: %v", obj, err))
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	pruneEmpty(m)
	u := &unstructured.Unstructured{Object: m}
	return Object{Key: Key(u), Object: u}
}

// pruneEmpty removes null values and empty maps that typed structs leave behind
// (creationTimestamp: null inside pod templates, resources: {}), so the YAML shows only
// what was set and what the API server will echo back.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneEmpty(t)
			if len(t) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range t {
				if em, ok := e.(map[string]any); ok {
					pruneEmpty(em)
				}
			}
		}
	}
}

// sortedKeys returns a map's keys in order, for deterministic env lists.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func redactSecret(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	for _, field := range []string{"data", "stringData"} {
		data, ok := obj[field].(map[string]any)
		if !ok {
			continue
		}
		red := make(map[string]any, len(data))
		for k, v := range data {
			if v == DriftedValue {
				red[k] = DriftedValue
			} else {
				red[k] = SensitiveValue
			}
		}
		out[field] = red
	}
	return out
}

// Find returns the object with the given key, or nil.
func (s Set) Find(key string) *unstructured.Unstructured {
	for _, o := range s {
		if o.Key == key {
			return o.Object
		}
	}
	return nil
}

// Without returns the set without the objects of the given keys.
func (s Set) Without(keys ...string) Set {
	out := make(Set, 0, len(s))
	for _, o := range s {
		if !slices.Contains(keys, o.Key) {
			out = append(out, o)
		}
	}
	return out
}

// Markers that stand in for Secret values in `manifests`, which the plan prints.
const (
	SensitiveValue = "(sensitive value)"
	DriftedValue   = "(sensitive value, changed outside Terraform)"
)
