package provider

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube/health"
	"github.com/elasticctr/terraform-provider-ctr/internal/kube/kubetest"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// Waits that explain: what pods and pod groups report reaches the error, permanent failures
// end the apply early, and a wait that runs out of time on a submitted job is a warning that
// leaves the job in state. The pods of these tests land on a node the test plays the kubelet
// of (kubetest), so that they report what the test says.

// diagRecorder serves the provider to the terraform CLI like providerFactories, and keeps the
// diagnostics of every apply: the plugin-testing steps see errors only, not warnings.
type diagRecorder struct {
	tfprotov6.ProviderServer
	mu    sync.Mutex
	diags []*tfprotov6.Diagnostic
	// reads are the diagnostics of every refresh (what a plan shows before its changes).
	reads []*tfprotov6.Diagnostic
}

func (r *diagRecorder) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	resp, err := r.ProviderServer.ReadResource(ctx, req)
	if resp != nil {
		r.keep(&r.reads, resp.Diagnostics)
	}
	return resp, err
}

// keep adds a response's diagnostics to one of the recorder's lists.
func (r *diagRecorder) keep(list *[]*tfprotov6.Diagnostic, diags []*tfprotov6.Diagnostic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, diags...)
}

// expectRead checks that a refresh warned with a summary and detail matching pattern.
func (r *diagRecorder) expectRead(pattern string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		var warnings []string
		for _, d := range r.reads {
			w := d.Summary + ": " + d.Detail
			if detailRE(pattern).MatchString(w) {
				return nil
			}
			warnings = append(warnings, w)
		}
		return fmt.Errorf("no refresh warned %q; the refreshes said %q", pattern, warnings)
	}
}

func newDiagRecorder(t *testing.T) *diagRecorder {
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	return &diagRecorder{ProviderServer: server}
}

func (r *diagRecorder) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	resp, err := r.ProviderServer.ApplyResourceChange(ctx, req)
	if resp != nil {
		r.keep(&r.diags, resp.Diagnostics)
	}
	return resp, err
}

func (r *diagRecorder) factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){"ctr": func() (tfprotov6.ProviderServer, error) { return r, nil }}
}

// expect checks that the applies returned no error and, for each pattern, a warning whose
// summary and detail match it (none when no pattern is given).
func (r *diagRecorder) expect(patterns ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		var warnings []string
		for _, d := range r.diags {
			if d.Severity == tfprotov6.DiagnosticSeverityError {
				return fmt.Errorf("an apply returned an error: %s: %s", d.Summary, d.Detail)
			}
			warnings = append(warnings, d.Summary+": "+d.Detail)
		}
		if len(patterns) == 0 && len(warnings) > 0 {
			return fmt.Errorf("want no warning, got %q", warnings)
		}
		for _, p := range patterns {
			re := detailRE(p)
			found := false
			for _, w := range warnings {
				found = found || re.MatchString(w)
			}
			if !found {
				return fmt.Errorf("no warning matches %q; warnings: %q", p, warnings)
			}
		}
		return nil
	}
}

// onTestNode is a training job whose pods can run only on node: a ReadWriteMany model output
// (no affinity to the file server, which runs on a kwok node) and node's resource asked for.
func onTestNode(ns, name string, node *kubetest.Node, extra string) string {
	return fmt.Sprintf(`
resource "ctr_training_job" "test" {
  name         = %[2]q
  namespace    = %[1]q
  pserver      = { replicas = 1, requests = %[3]s, limits = %[3]s }
  trainer      = { replicas = 1, requests = %[3]s, limits = merge(%[3]s, { memory = "256Mi" }) }
  model_output = { access_mode = "ReadWriteMany" }
%[4]s
  timeouts = { create = "5m", update = "3m", delete = "3m" }
}
`, ns, name, node.Requests(), extra)
}

// The tests that play a node's kubelet (kubetest.StartNode) run alone, before the parallel
// ones ("Not parallel: test node"). Beside parallel tests their gangs were twice left with one
// task Unschedulable on the test node until the wait ran out (JobAbortedFailsEarly,
// WaitCompleted); why was not found. A node that comes and goes while Volcano's scheduler
// places other jobs is what sets them apart from the tests on kwok's nodes.

// failsEarly is runFailsEarly of a training job whose pods get status (5-minute create
// timeout).
func failsEarly(t *testing.T, status kubetest.PodStatus, want string) {
	k, ns, name := trainingJobTest(t)
	node := kubetest.StartNode(t, k.cs)
	node.SetPodStatus(status)
	k.runFailsEarly(t, ns, stack.TrainingJobType, name, onTestNode(ns, name, node, ""),
		want)
}

// TestAccTrainingJob_ImageNotFoundFailsEarly: an image that does not exist fails the apply
// at once, with the kubelet's words and what to check.
func TestAccTrainingJob_ImageNotFoundFailsEarly(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	failsEarly(t, kubetest.Waiting(corev1.PodPending, health.ReasonImagePullBackOff,
		`Back-off pulling image "volcanosh/edlctr:v1": ErrImagePull: manifest unknown`, 0, nil),
		`Apply Training Job Error.*ImagePullBackOff: Back-off pulling image "volcanosh/edlctr:v1": ErrImagePull: manifest unknown.*Check the image name and tag`)
}

// TestAccTrainingJob_CrashLoopFailsEarly: a trainer that keeps crashing fails the apply
// once it restarted CrashLoopLimit times, with its exit code and the command to read its log.
func TestAccTrainingJob_CrashLoopFailsEarly(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	failsEarly(t, kubetest.Waiting(corev1.PodRunning, health.ReasonCrashLoopBackOff, "back-off 40s restarting failed container",
		health.CrashLoopLimit, &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2, Message: "train.py: no such file"}),
		`CrashLoopBackOff: restarted 3 times, last exit code 2 \(Error\): train.py: no such file.*kubectl logs -n acc-\w+ `)
}

// TestAccTrainingJob_OOMKilledFailsEarly: a container killed for running out of memory fails
// the apply, naming its limit.
func TestAccTrainingJob_OOMKilledFailsEarly(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	failsEarly(t, kubetest.ByName(map[string]kubetest.PodStatus{
		"pserver": kubetest.Running(),
		"trainer": kubetest.Waiting(corev1.PodRunning, health.ReasonCrashLoopBackOff, "", 1,
			&corev1.ContainerStateTerminated{Reason: health.ReasonOOMKilled, ExitCode: 137}),
	}), `trainer-0 container \w+: OOMKilled: killed for running out of memory \(memory limit 256Mi\).*Raise the container's memory limit`)
}

// TestAccTrainingJob_JobFailedFailsEarly: trainers that fail make Volcano restart the job
// until max_retry, then fail it: the apply fails then, with Volcano's reason.
func TestAccTrainingJob_JobFailedFailsEarly(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	k, ns, name := trainingJobTest(t)
	node := kubetest.StartNode(t, k.cs)
	node.SetPodStatus(kubetest.ByName(map[string]kubetest.PodStatus{"pserver": kubetest.Running(), "trainer": kubetest.Failed(1, "train.py crashed")}))
	k.runFailsEarly(t, ns, stack.TrainingJobType, name, onTestNode(ns, name, node, "  max_retry = 1"),
		`Apply Training Job Error.*Job `+ns+`/`+name+`: the job is Failed \(last state: .*pod `+name+`-trainer-0: Failed: container \w+ exited with code 1 \(Error\): train.py crashed.*kubectl -n `+ns+` get pods -l volcano.sh/job-name=`+name)
}

// TestAccTrainingJob_JobAbortedFailsEarly: a job whose policy aborts it when a pod fails
// (PodFailed -> AbortJob) ends Aborted: the apply fails then, naming the phase and the pod that
// failed, instead of waiting out the timeout.
func TestAccTrainingJob_JobAbortedFailsEarly(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	k, ns, name := trainingJobTest(t)
	node := kubetest.StartNode(t, k.cs)
	node.SetPodStatus(kubetest.ByName(map[string]kubetest.PodStatus{"pserver": kubetest.Running(), "trainer": kubetest.Failed(3, "bad slot config")}))
	k.runFailsEarly(t, ns, stack.TrainingJobType, name, onTestNode(ns, name, node, `  policies = [{ event = "PodFailed", action = "AbortJob" }]`),
		`Apply Training Job Error.*Job `+ns+`/`+name+`: the job is Aborted.*pod `+name+`-trainer-0: Failed: container \w+ exited with code 3 \(Error\): bad slot config`)
}

// TestAccTrainingJob_UnschedulableTimesOutWithWarning: a gang the cluster cannot place keeps
// the job Pending; when the wait runs out of time, apply warns with the scheduler's reason
// instead of failing, the job stays in state untainted (the next plan replaces nothing), and
// the exported values say why.
func TestAccTrainingJob_UnschedulableTimesOutWithWarning(t *testing.T) {
	// Not parallel: see unplaceableGang.
	k, ns, name := trainingJobTest(t)
	rec := newDiagRecorder(t)
	config := fmt.Sprintf(`
resource "ctr_training_job" "test" {
  name      = %[2]q
  namespace = %[1]q
  pserver   = { replicas = 1, `+unplaceableGang+` }
  trainer   = { replicas = 1 }
  timeouts  = { create = "15s", delete = "3m" }
}
`, ns, name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		CheckDestroy:             k.nothingLeftOf(ns, stack.TrainingJobType, name),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Pending")),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("last_condition").AtMapKey("type"), knownvalue.StringExact("Unschedulable")),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("last_condition").AtMapKey("reason"), knownvalue.StringExact("NotEnoughResources")),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("last_condition").AtMapKey("message"), knownvalue.StringRegexp(regexp.MustCompile(`Insufficient cpu`))),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("tasks").AtMapKey("pserver"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"running": knownvalue.Int64Exact(0), "pending": knownvalue.Int64Exact(1), "succeeded": knownvalue.Int64Exact(0), "failed": knownvalue.Int64Exact(0),
					})),
				},
				Check: rec.expect(`Training Job Wait Timed Out: Training job ` + ns + `/` + name + ` was submitted.*` +
					`did not become ready in time.*pod group ` + name + `-.*: Unschedulable \(NotEnoughResources\): .*Insufficient cpu.*` +
					`stays in state as it is, phase Pending.*does not replace it`),
			},
			{
				// Not tainted: the same configuration plans nothing.
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionNoop),
				}},
			},
		},
	})
}

// TestAccTrainingJob_WaitSubmitted: wait = "submitted" returns as soon as Volcano has taken
// the job, even one whose gang cannot be placed, without a warning.
func TestAccTrainingJob_WaitSubmitted(t *testing.T) {
	// Not parallel: see unplaceableGang.
	testWaitReturnsAtOnce(t, "submitted")
}

// TestAccTrainingJob_WaitNone: wait = "none" returns once the objects are applied, without a
// warning, even for a job whose gang cannot be placed.
func TestAccTrainingJob_WaitNone(t *testing.T) {
	// Not parallel: see unplaceableGang.
	testWaitReturnsAtOnce(t, "none")
}

// unplaceableGang is the pserver request of the tests whose gang can never be placed (more
// CPU than any node has). Such a job can still be admitted (Inqueue) by Volcano's overcommit
// plugin, and then holds its requests against the queue: two or three of them at once leave
// no room to admit the jobs of tests running beside them, which then stay Pending. Those
// tests therefore run alone, before the parallel ones (a CI run failed so, once).
const unplaceableGang = `requests = { cpu = "40" }`

// testWaitReturnsAtOnce applies a job whose gang cannot be placed (a pserver asks for more
// CPU than a node has) with wait: the apply returns with the job Pending and no warning.
func testWaitReturnsAtOnce(t *testing.T, wait string) {
	k, ns, name := trainingJobTest(t)
	rec := newDiagRecorder(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		CheckDestroy:             k.nothingLeftOf(ns, stack.TrainingJobType, name),
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "ctr_training_job" "test" {
  name      = %[2]q
  namespace = %[1]q
  pserver   = { replicas = 1, `+unplaceableGang+` }
  trainer   = { replicas = 1 }
  wait      = %[3]q
  timeouts  = { create = "3m", delete = "3m" }
}
`, ns, name, wait),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Pending")),
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("wait"), knownvalue.StringExact(wait)),
			},
			Check: rec.expect(),
		}},
	})
}

// TestAccTrainingJob_WaitCompleted: wait = "completed" returns when the trainers have
// finished and Volcano completed the job; the task counts show the finished trainer.
func TestAccTrainingJob_WaitCompleted(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	k, ns, name := trainingJobTest(t)
	node := kubetest.StartNode(t, k.cs)
	node.SetPodStatus(kubetest.ByName(map[string]kubetest.PodStatus{"pserver": kubetest.Running(), "trainer": kubetest.Succeeded()}))
	k.run(t, ns, stack.TrainingJobType, name, resource.TestStep{
		Config: onTestNode(ns, name, node, `  wait = "completed"`),
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Completed")),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("tasks").AtMapKey("trainer"), knownvalue.ObjectExact(map[string]knownvalue.Check{
				"running": knownvalue.Int64Exact(0), "pending": knownvalue.Int64Exact(0), "succeeded": knownvalue.Int64Exact(1), "failed": knownvalue.Int64Exact(0),
			})),
			statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("last_condition").AtMapKey("type"), knownvalue.StringExact("Completed")),
		},
	})
}

// TestAccServing_ImageNotFoundFailsEarly: the same for Paddle Serving's pods (a Deployment):
// the rollout wait ends at once with the kubelet's reason.
func TestAccServing_ImageNotFoundFailsEarly(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	k, ns, name := servingTest(t)
	node := kubetest.StartNode(t, k.cs)
	node.SetPodStatus(kubetest.Waiting(corev1.PodPending, health.ReasonErrImagePull,
		`failed to pull and unpack image "docker.io/paddlepaddle/serving:nope": not found`, 0, nil))
	k.runFailsEarly(t, ns, stack.ServingType, name, servingConfig(ns, name, "1", fmt.Sprintf("  resources = { requests = %[1]s, limits = %[1]s }", node.Requests())),
		`Paddle Serving did not roll out.*ErrImagePull: failed to pull and unpack image.*not found.*Check the image name`)
}

// TestAccCube_TransferCrashLoopFailsEarly: the same for the cube's transfer: a transfer that
// keeps crashing fails the apply once it restarted CrashLoopLimit times.
func TestAccCube_TransferCrashLoopFailsEarly(t *testing.T) {
	// Not parallel: test node (see above failsEarly).
	k, ns, name := cubeTest(t)
	node := kubetest.StartNode(t, k.cs)
	node.SetPodStatus(kubetest.ByName(map[string]kubetest.PodStatus{
		"-shard-": kubetest.Running(),
		"-transfer-": kubetest.Waiting(corev1.PodRunning, health.ReasonCrashLoopBackOff, "back-off 40s", health.CrashLoopLimit,
			&corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: "donefile: connection refused"}),
	}))
	k.runFailsEarly(t, ns, stack.CubeType, name, cubeConfig(ns, name, fmt.Sprintf("  node_selector = { %q = %q }", "kubernetes.io/hostname", node.Name)),
		`The transfer did not become available.*CrashLoopBackOff: restarted 3 times, last exit code 1 \(Error\): donefile: connection refused.*kubectl logs`)
}
