package stack

import "testing"

// BenchmarkRenderTrainingJob is the plan-time cost of rendering a job and its manifests.
func BenchmarkRenderTrainingJob(b *testing.B) {
	j := TrainingJob{Name: "ctr", Namespace: "default", Dataset: &Dataset{HDFSUGI: "u,p", Path: "/d"}, SlotConfig: "1\n2\n"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		set, err := RenderTrainingJob(j)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := set.Manifests(); err != nil {
			b.Fatal(err)
		}
	}
}
