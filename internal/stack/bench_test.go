package stack

import "testing"

// BenchmarkRenderTrainingJob is the plan-time cost of rendering a job and its manifests.
func BenchmarkRenderTrainingJob(b *testing.B) {
	j := TrainingJob{Name: "ctr", Namespace: "default", Dataset: &Dataset{HDFSUGI: "u,p", Path: "/d"}, SlotConfig: "1\n2\n"}
	benchRender(b, func() (Set, error) { return RenderTrainingJob(j) })
}

// BenchmarkRenderCube64 is the plan-time cost of rendering a 64-shard cube's objects (two per shard and a few more) and
// their manifests (what a plan and an apply of it each spend before the first write).
func BenchmarkRenderCube64(b *testing.B) {
	c := Cube{Name: "c", Namespace: "n", DonefileURL: testDonefile, Token: "t", Shards: 64}
	benchRender(b, func() (Set, error) { return RenderCube(c) })
}

// benchRender times render and the manifests of what it renders.
func benchRender(b *testing.B, render func() (Set, error)) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		set, err := render()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := set.Manifests(); err != nil {
			b.Fatal(err)
		}
	}
}
