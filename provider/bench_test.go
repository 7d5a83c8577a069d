package provider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
)

// BenchmarkTrainingJob_PlanApply measures what a user waits for: `terraform plan` and
// `terraform apply` of one training job (1 pserver + 1 trainer) on the local control plane,
// with the real terraform CLI and the provider binary. Destroy runs outside the timer.
// Needs TF_ACC=1 and KUBECONFIG (scripts/bench.sh sets them).
func BenchmarkTrainingJob_PlanApply(b *testing.B) {
	if os.Getenv("TF_ACC") == "" || os.Getenv("KUBECONFIG") == "" {
		b.Skip("needs the local control plane: run make bench")
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		tf = "terraform"
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "terraform-provider-ctr"), "..").CombinedOutput(); err != nil {
		b.Fatalf("build provider: %v\n%s", err, out)
	}
	rc := filepath.Join(dir, "terraformrc")
	must(b, os.WriteFile(rc, []byte(fmt.Sprintf(`provider_installation {
  dev_overrides { "elasticctr/ctr" = %q }
  direct {}
}
`, bin)), 0o644))
	k := requireClusterB(b)
	run := func(args ...string) time.Duration {
		cmd := exec.Command(tf, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("terraform %v: %v\n%s", args, err, out)
		}
		return time.Since(start)
	}
	var plan, apply time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := k.namespaceB(b)
		must(b, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(fmt.Sprintf(`
terraform {
  required_providers {
    ctr = { source = "elasticctr/ctr" }
  }
}
provider "ctr" {
  kubernetes = { config_path = %q }
}
resource "ctr_training_job" "bench" {
  name      = %q
  namespace = %q
  pserver   = { replicas = 1 }
  trainer   = { replicas = 1 }
}
`, os.Getenv("KUBECONFIG"), "bench-"+acctest.RandString(5), ns)), 0o644))
		b.StartTimer()
		plan += run("plan", "-input=false", "-out=plan.out")
		apply += run("apply", "-input=false", "plan.out")
		b.StopTimer()
		run("destroy", "-auto-approve", "-input=false")
		b.StartTimer()
	}
	b.ReportMetric(plan.Seconds()/float64(b.N), "s/plan")
	b.ReportMetric(apply.Seconds()/float64(b.N), "s/apply")
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
