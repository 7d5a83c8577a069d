package kube

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// BenchmarkStrictParseOfApplyBodies is the parse that applyOptions spares the API server:
// with the default fieldValidation ("Warn") it parses every apply body a second time with
// yaml.UnmarshalStrict. One op is the bodies of a 64-shard cube's Services and StatefulSets.
func BenchmarkStrictParseOfApplyBodies(b *testing.B) {
	set, err := stack.RenderCube(stack.Cube{Name: "c", Namespace: "ns", Shards: 64, Replicas: 2,
		Image: "cube:1", DonefileURL: "http://files/base.txt", Token: "t"})
	if err != nil {
		b.Fatal(err)
	}
	var bodies [][]byte
	for _, o := range set {
		if k := o.Object.GetKind(); k == "Service" || k == "StatefulSet" {
			body, err := o.Object.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			bodies = append(bodies, body)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, body := range bodies {
			if err := yaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(bodies)), "bodies/op")
}
