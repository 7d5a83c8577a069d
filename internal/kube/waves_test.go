package kube

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestWaves: a cube's objects, rendered Service/StatefulSet pair by pair, are applied in
// waves by kind — the policies and claims before any pod, the Services before the workloads —
// each wave keeping the rendering's order.
func TestWaves(t *testing.T) {
	var set stack.Set
	for _, k := range []string{"Secret/control", "NetworkPolicy/server", "Service/replicas", "Service/shard-0", "StatefulSet/shard-0",
		"Service/shard-1", "StatefulSet/shard-1", "PersistentVolumeClaim/transfer", "Service/transfer", "Deployment/transfer"} {
		kind, name, _ := strings.Cut(k, "/")
		u := &unstructured.Unstructured{}
		u.SetKind(kind)
		u.SetName(name)
		set = append(set, stack.Object{Key: k, Object: u})
	}
	var got []string
	for _, w := range waves(set) {
		var keys []string
		for _, o := range w {
			keys = append(keys, o.Key)
		}
		got = append(got, strings.Join(keys, " "))
	}
	want := []string{
		"Secret/control NetworkPolicy/server PersistentVolumeClaim/transfer",
		"Service/replicas Service/shard-0 Service/shard-1 Service/transfer",
		"StatefulSet/shard-0 StatefulSet/shard-1 Deployment/transfer",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("waves:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every kind a resource renders has its own place in kindOrder: a serving's disruption budget
// is in force before its pods, and its autoscaler comes after the Deployment it scales.
func TestWaves_EveryRenderedKindIsOrdered(t *testing.T) {
	for _, kinds := range [][]schema.GroupVersionKind{stack.TrainingJobKinds, stack.CubeKinds, stack.ServingKinds} {
		for _, gvk := range kinds {
			if _, ok := kindOrder[gvk.Kind]; !ok {
				t.Errorf("%s has no place in kindOrder", gvk.Kind)
			}
		}
	}
	if !(order("PodDisruptionBudget") < order("Deployment") && order("Deployment") < order("HorizontalPodAutoscaler")) {
		t.Errorf("a serving's PodDisruptionBudget (%d) goes before its Deployment (%d), its HorizontalPodAutoscaler (%d) after",
			order("PodDisruptionBudget"), order("Deployment"), order("HorizontalPodAutoscaler"))
	}
}

// TestWaves_ShardBudgetsBeforeTheirPods: a rendered cube's PodDisruptionBudgets are applied
// in a wave before its StatefulSets', so that no shard's pod exists unprotected.
func TestWaves_ShardBudgetsBeforeTheirPods(t *testing.T) {
	set, err := stack.RenderCube(stack.Cube{Name: "c", Namespace: "n", Image: "img", DonefileURL: "http://fs/base.txt", Shards: 2, Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	wave := map[string]int{}
	for i, w := range waves(set) {
		for _, o := range w {
			if k := o.Object.GetKind(); k == "PodDisruptionBudget" || k == "StatefulSet" {
				wave[k+"/"+o.Object.GetName()] = i
			}
		}
	}
	for _, shard := range []string{"c-shard-0", "c-shard-1"} {
		b, okB := wave["PodDisruptionBudget/"+shard]
		s, okS := wave["StatefulSet/"+shard]
		if !okB || !okS || b >= s {
			t.Errorf("%s: budget in wave %d (rendered: %v), StatefulSet in wave %d (rendered: %v); want the budget first", shard, b, okB, s, okS)
		}
	}
}
