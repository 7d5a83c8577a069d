package provider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
)

// The provider benchmarks measure what a user waits for: `terraform plan` and `terraform
// apply` on the local control plane, with the real terraform CLI and the provider binary.
// Apply is reported twice: whole (s/apply), and without the provider's waits for the cluster
// (s/apply-no-wait: the waits for StatefulSets, Deployments and Volcano jobs, summed from the
// progress lines kube.WaitFor logs, are what the control plane's controllers and kwok's
// simulated nodes take, not the provider). Destroy runs outside the timer. They need
// TF_ACC=1 and KUBECONFIG (scripts/bench.sh sets them).

// BenchmarkTrainingJob_PlanApply: one training job (1 pserver + 1 trainer).
func BenchmarkTrainingJob_PlanApply(b *testing.B) {
	tb := newTFBench(b)
	tb.planApply(func(ns string) string {
		return tb.provider() + fmt.Sprintf(`
resource "ctr_training_job" "bench" {
  name      = %q
  namespace = %q
  pserver   = { replicas = 1 }
  trainer   = { replicas = 1 }
}
`, "bench-"+acctest.RandString(5), ns)
	})
}

// BenchmarkCube_PlanApply: one ctr_cube of 4, 16 and 64 shards (2 replicas each): how
// plan and apply grow with the objects rendered (2 per shard, plus 5: 133 at 64 shards).
func BenchmarkCube_PlanApply(b *testing.B) {
	tb := newTFBench(b)
	for _, shards := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			tb := tb.sub(b)
			tb.planApply(func(ns string) string {
				return tb.provider() + fmt.Sprintf(`
resource "ctr_cube" "bench" {
  name         = %[1]q
  namespace    = %[2]q
  donefile_url = "http://ctr-fileserver.%[2]s.svc:8080/output/ctr_cube/donefile/base.txt"
  shards       = %[3]d
  replicas     = 2
  timeouts     = { create = "10m", update = "10m", delete = "10m" }
}
`, "bench-"+acctest.RandString(5), ns, shards)
			})
		})
	}
}

// BenchmarkStack_PlanApply: examples/stack as it is, the training job, the cube (2 shards)
// and Paddle Serving in one apply.
func BenchmarkStack_PlanApply(b *testing.B) {
	tb := newTFBench(b)
	example, err := os.ReadFile(filepath.Join("..", "examples", "stack", "main.tf"))
	must(b, err)
	tb.planApply(func(ns string) string {
		tb.vars = []string{"-var", "namespace=" + ns, "-var", "kubeconfig=" + os.Getenv("KUBECONFIG")}
		return string(example)
	})
}

// tfBench runs terraform in a scratch directory against the provider built once.
type tfBench struct {
	b           *testing.B
	tf, dir, rc string
	bin         string // the directory of the provider binary
	k           *kubeClients
	vars        []string // -var flags of plan
}

func newTFBench(b *testing.B) *tfBench {
	if os.Getenv("TF_ACC") == "" || os.Getenv("KUBECONFIG") == "" {
		b.Skip("needs the local control plane: run make bench")
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		tf = "terraform"
	}
	bin := b.TempDir() // the build cache makes every build after the first a link
	if out, err := buildProvider(filepath.Join(bin, "terraform-provider-ctr"), testVersion); err != nil {
		b.Fatalf("build provider: %v\n%s", err, out)
	}
	tb := &tfBench{b: b, tf: tf, k: requireClusterB(b), bin: bin}
	return tb.sub(b)
}

// sub is tb for a sub-benchmark, in a directory of its own.
func (tb *tfBench) sub(b *testing.B) *tfBench {
	n := &tfBench{b: b, tf: tb.tf, k: tb.k, bin: tb.bin, dir: b.TempDir()}
	n.rc = filepath.Join(n.dir, "terraformrc")
	must(b, os.WriteFile(n.rc, []byte(fmt.Sprintf(`provider_installation {
  dev_overrides { "elasticctr/ctr" = %q }
  direct {}
}
`, tb.bin)), 0o644))
	return n
}

func (tb *tfBench) provider() string {
	return fmt.Sprintf(`
terraform {
  required_providers {
    ctr = { source = "elasticctr/ctr" }
  }
}
provider "ctr" {
  kubernetes = { config_path = %q }
}
`, os.Getenv("KUBECONFIG"))
}

func (tb *tfBench) run(args ...string) time.Duration {
	return tb.runEnv(nil, args...)
}

func (tb *tfBench) runEnv(env []string, args ...string) time.Duration {
	cmd := exec.Command(tb.tf, args...)
	cmd.Dir = tb.dir
	cmd.Env = append(append(os.Environ(), "TF_CLI_CONFIG_FILE="+tb.rc, "TF_IN_AUTOMATION=1"), env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.b.Fatalf("terraform %v: %v\n%s", args, err, out)
	}
	return time.Since(start)
}

// planApply times `terraform plan` and `terraform apply` of config(namespace) in a fresh
// namespace per iteration, and destroys it untimed. It reports the median of the iterations
// (one slow iteration, a neighbour's build on the two cores, does not move it) and, for apply
// without waits, the fastest and slowest beside it.
func (tb *tfBench) planApply(config func(ns string) string) {
	b := tb.b
	var plans, applies, noWaits []time.Duration
	logFile := filepath.Join(tb.dir, "apply.log")
	b.ResetTimer() // not the provider's build
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := tb.k.namespaceB(b)
		must(b, os.WriteFile(filepath.Join(tb.dir, "main.tf"), []byte(config(ns)), 0o644))
		b.StartTimer()
		plan := tb.run(append([]string{"plan", "-input=false", "-out=plan.out"}, tb.vars...)...)
		apply := tb.runEnv([]string{"TF_LOG_PROVIDER=INFO", "TF_LOG_PATH=" + logFile}, "apply", "-input=false", "plan.out")
		b.StopTimer()
		plans, applies = append(plans, plan), append(applies, apply)
		noWaits = append(noWaits, apply-waited(b, logFile))
		must(b, os.Remove(logFile))
		tb.run(append([]string{"destroy", "-auto-approve", "-input=false"}, tb.vars...)...)
		time.Sleep(settle)
		b.StartTimer()
	}
	b.ReportMetric(median(plans).Seconds(), "s/plan")
	b.ReportMetric(median(applies).Seconds(), "s/apply")
	b.ReportMetric(median(noWaits).Seconds(), "s/apply-no-wait")
	b.ReportMetric(slices.Min(noWaits).Seconds(), "s/apply-no-wait-min")
	b.ReportMetric(slices.Max(noWaits).Seconds(), "s/apply-no-wait-max")
}

// median is the middle value (the mean of the two middle ones of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// settle is how long an iteration leaves the control plane after its destroy: the controllers
// and kwok are busy for 3–4 s with the 128 pods and claims a 64-shard cube leaves (the CPU
// was 2–3% busy after 5 s), and the next iteration's plan and apply would share the two cores
// with them.
const settle = 5 * time.Second

// waited adds up the waits that kube.WaitFor logged in a provider log.
func waited(b *testing.B, logFile string) time.Duration {
	data, err := os.ReadFile(logFile)
	must(b, err)
	var total time.Duration
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		_, rest, ok := strings.Cut(line, kube.WaitedMarker)
		if !ok {
			continue
		}
		d, err := time.ParseDuration(strings.FieldsFunc(rest, func(r rune) bool { return r == ':' || r == ' ' || r == '"' })[0])
		must(b, err)
		total += d
		n++
	}
	if n == 0 {
		b.Fatalf("no %q line in the provider's log %s", kube.WaitedMarker, logFile)
	}
	return total
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
