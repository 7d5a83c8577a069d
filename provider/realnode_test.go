package provider

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// End-to-end tests on the local cluster's real node: the provider's objects, unchanged, run
// in pods of the project's image (the namespace's annotations place every pod there), and
// nothing in between is simulated.

// e2eModelKeys is how many keys the trainer stand-in writes; lookups check them all.
const e2eModelKeys = 20000

// testE2E runs c with the provider under test on the e2e stacks of ns: at its end, destroy
// must leave nothing that their training job and cube owned, besides what c.CheckDestroy
// checks.
func (k *kubeClients) testE2E(t *testing.T, ns string, c resource.TestCase) {
	t.Helper()
	if c.ProtoV6ProviderFactories == nil {
		c.ProtoV6ProviderFactories = providerFactories
	}
	gone := k.e2eGone(ns)
	if c.CheckDestroy != nil {
		gone = resource.ComposeTestCheckFunc(gone, c.CheckDestroy)
	}
	c.CheckDestroy = gone
	resource.Test(t, c)
}

// testE2EAs is testE2E with Terraform connecting as the identity of kubeconfig (a
// provider block in front of every step's configuration).
func (k *kubeClients) testE2EAs(t *testing.T, ns, kubeconfig string, c resource.TestCase) {
	t.Helper()
	for i := range c.Steps {
		if c.Steps[i].Config != "" {
			c.Steps[i].Config = providerAs(kubeconfig) + c.Steps[i].Config
		}
	}
	k.testE2E(t, ns, c)
}

// e2eGone checks that destroy left nothing that the e2e stacks' training job ("e2e") and
// cube ("e2e-cube") owned.
func (k *kubeClients) e2eGone(ns string) resource.TestCheckFunc {
	return resource.ComposeTestCheckFunc(
		k.nothingLeftOf(ns, stack.TrainingJobType, "e2e"),
		k.nothingLeftOf(ns, stack.CubeType, "e2e-cube"))
}

// e2eStack is a training job whose trainer is the stand-in (`cube model`, generation gen,
// donefile id id) writing into the model volume, and a cube of 2 shards × 2 replicas that
// follows its donefile.
func e2eStack(ns, image string, id, gen int, cubeExtra ...string) string {
	return e2eStackShards(ns, image, id, gen, 2, cubeExtra...)
}

func e2eStackShards(ns, image string, id, gen, shards int, cubeExtra ...string) string {
	return e2eTraining(ns, image, id, gen, "") + e2eCube(ns, image, shards, cubeExtra...)
}

// e2eCube is the cube of e2eStack: shards × 2 replicas following the training job's donefile.
func e2eCube(ns, image string, shards int, extra ...string) string {
	return fmt.Sprintf(`
resource "ctr_cube" "cube" {
  name         = "e2e-cube"
  namespace    = %[1]q
  image        = %[2]q
  donefile_url = ctr_training_job.train.donefile_url
  replicas     = 2
  timeouts     = { create = "5m", update = "5m", delete = "3m" }
%[3]s
}
`, ns, image, strings.Join(append([]string{fmt.Sprintf("  shards       = %d", shards)}, extra...), "\n"))
}

// e2eTraining is the training job of e2eStack alone, with extra attributes.
func e2eTraining(ns, image string, id, gen int, extra string) string {
	return e2eTrainingRunning(ns, image, fmt.Sprintf(`["/cube", "model", "--out", "/data", "--keys", "%d", "--id", "%d", "--gen", "%d"]`, e2eModelKeys, id, gen), extra)
}

// e2eTrainingRunning is the training job of the end-to-end tests, its one worker running
// command (HCL) in our image, with extra attributes.
func e2eTrainingRunning(ns, image, command, extra string) string {
	return fmt.Sprintf(`
resource "ctr_training_job" "train" {
  name              = "e2e"
  namespace         = %[1]q
  mode              = "collective"
  image             = %[2]q
  image_pull_policy = "IfNotPresent"
  command           = %[3]s
  worker            = { replicas = 1 }
  model_output      = { size = "1Gi", mount_path = "/data", donefile_path = "donefile/base.txt" }
  file_server       = { image = %[2]q }
  timeouts          = { create = "5m", update = "5m", delete = "3m" }
%[4]s
}
`, ns, image, command, extra)
}

// TestAccRealNode/TrainingToLookup: the trainer stand-in writes a model into the training
// job's volume and runs to completion, which the job's phase reports (wait = "completed");
// the model is served over the file server's Service at the exported donefile_url: the
// donefile's line, a directory listing of its input (as the transfer crawls it), and every
// record of every SequenceFile listed there with the value the trainer wrote. The cube's
// transfer picks the donefile line up, builds, distributes and switches 2 shards × 2
// replicas; served_version becomes that version; and a Job on the node looks every key up
// through the exported cube_conf mounted from a ConfigMap, as Paddle Serving would read it.
func realNodeTrainingToLookup(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	config := e2eTraining(ns, image, id, gen, `  wait              = "completed"`) + e2eCube(ns, image, 2)
	var version string
	k.testE2E(t, ns, resource.TestCase{
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_training_job.train", tfjsonpath.New("phase"), knownvalue.StringExact("Completed")),
				},
				Check: resource.ComposeTestCheckFunc(
					k.servesModel(ns, strconv.Itoa(id), gen),
					k.waitServed(ns, "e2e-cube", strconv.Itoa(id), 4*time.Minute, &version),
					k.logPodTimes(t, ns, stack.LabelInstance+"=e2e-cube")),
			},
			{
				// A refresh reads what the replicas serve: that version, on both replicas of
				// both shards.
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_cube.cube", tfjsonpath.New("serving_replicas"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.Int64Exact(2), knownvalue.Int64Exact(2)})),
				},
				Check: resource.ComposeTestCheckFunc(stateServes(&version), k.lookupJob(t, ns, image, "lookup", gen)),
			},
		},
	})
}

// pinVariable is the HCL of the configurations that pin ctr_cube.cube with var.pin.
const pinVariable = `
variable "pin" {
  type    = string
  default = null
}
`

// lazyString is a configuration variable whose value is read when the step runs: a version
// name that an earlier step found.
type lazyString struct{ p *string }

func (v lazyString) MarshalJSON() ([]byte, error) { return json.Marshal(*v.p) }

// TestAccRealNode/RolloutUnderLookups: a second model version rolls out while a Job on the
// node looks keys up through the exported cube_conf the whole time: zero failed lookups and
// no response mixing versions. The new version comes as a trainer does it: the training job
// (command changed) runs again and writes version 2000 of generation 2. Then the rollback:
// serve_version pins the first version, again under lookups, and the apply returns once every
// replica serves it; a version the cube does not keep is refused at plan; unpinned, the
// newest model (2000) is rebuilt and served again.
func realNodeRolloutUnderLookups(t *testing.T) {
	k, ns, image := requireRealNode(t)
	var v1, v2, v3 string
	const load = "6m" // at most: each load ends once it has seen its generation take over
	cfg := func(id, gen int) string {
		return e2eStack(ns, image, id, gen, "  serve_version = var.pin") + pinVariable
	}
	k.testE2E(t, ns, resource.TestCase{
		Steps: []resource.TestStep{
			{
				Config: cfg(1000, 1),
				Check: resource.ComposeTestCheckFunc(
					k.waitServed(ns, "e2e-cube", "1000", 4*time.Minute, &v1),
					func(s *terraform.State) error {
						return k.startSeekJob(t, s, ns, image, "load", 0, "--first", strconv.Itoa(e2eModelKeys), "--for", load, "--until-gen", "2")
					}),
			},
			{
				Config: cfg(2000, 2),
				Check: resource.ComposeTestCheckFunc(
					k.waitServed(ns, "e2e-cube", "2000", 4*time.Minute, &v2),
					k.loadSawSwitch(t, ns, "load", &v1, &v2),
					k.lookupJob(t, ns, image, "lookup", 2),
					func(s *terraform.State) error {
						return k.startSeekJob(t, s, ns, image, "load-pin", 0, "--first", strconv.Itoa(e2eModelKeys), "--for", load, "--until-gen", "1")
					}),
			},
			{
				Config: cfg(2000, 2), ConfigVariables: config.Variables{"pin": lazyString{&v1}}, ConfigPlanChecks: cubeUpdateOnly,
				Check: resource.ComposeTestCheckFunc(
					stateServes(&v1),
					k.loadSawSwitch(t, ns, "load-pin", &v2, &v1),
					k.lookupJob(t, ns, image, "lookup-pinned", 1)),
			},
			{
				Config: cfg(2000, 2), ConfigVariables: config.Variables{"pin": config.StringVariable("1000000000")},
				ExpectError: regexp.MustCompile(`(?s)Invalid Cube Setting.*does not keep\s+version\s+"1000000000"`),
			},
			{
				Config: cfg(2000, 2), ConfigPlanChecks: cubeUpdateOnly,
				Check: resource.ComposeTestCheckFunc(
					k.waitServedShards(ns, "e2e-cube", "2000", 0, 4*time.Minute, &v3, v2),
					k.lookupJob(t, ns, image, "lookup-unpinned", 2)),
			},
		},
	})
}

// cubeUpdateOnly: the plan changes the cube in place and leaves the training job as it is.
var cubeUpdateOnly = resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("ctr_cube.cube", plancheck.ResourceActionUpdate),
	plancheck.ExpectResourceAction("ctr_training_job.train", plancheck.ResourceActionNoop)}}

// loadSawSwitch checks that the lookup Job name succeeded: it looked keys up from before the
// switch from *from to *to until it had seen the new generation take over (seek --until-gen:
// answers of the old generation, then only of the new one for a while), with no failed lookup
// and no response mixing versions.
func (k *kubeClients) loadSawSwitch(t *testing.T, ns, name string, from, to *string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		logs, err := k.waitJob(ns, name, 4*time.Minute)
		if err != nil {
			return err
		}
		t.Logf("lookups during the switch %s -> %s: %s", *from, *to, strings.ReplaceAll(strings.TrimSpace(logs), "\n", "; "))
		return nil
	}
}

// TestAccRealNode/Reshard: shards 2 -> 3 -> 2. Growing, the transfer rebuilds the last model
// for 3 shards and every key answers through the new cube_conf; shrinking, the 2-shard layout
// serves before the removed shard's StatefulSet goes, and lookups through the 2-shard
// cube_conf find every key again.
func realNodeReshard(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	var v2, v3, v2again string
	k.testE2E(t, ns, resource.TestCase{
		Steps: []resource.TestStep{
			{
				Config: e2eStackShards(ns, image, id, gen, 2),
				Check:  k.waitServedShards(ns, "e2e-cube", strconv.Itoa(id), 2, 4*time.Minute, &v2, ""),
			},
			{
				Config:           e2eStackShards(ns, image, id, gen, 3),
				ConfigPlanChecks: cubeUpdateOnly,
				Check: resource.ComposeTestCheckFunc(
					k.waitServedShards(ns, "e2e-cube", strconv.Itoa(id), 3, 4*time.Minute, &v3, v2),
					k.lookupJob(t, ns, image, "lookup-3", gen)),
			},
			{
				Config:           e2eStackShards(ns, image, id, gen, 2),
				ConfigPlanChecks: cubeUpdateOnly,
				Check: resource.ComposeTestCheckFunc(
					// The apply returns only once the 2-shard layout serves; shard 2 is gone.
					k.servesNow(ns, "e2e-cube", strconv.Itoa(id), 2, &v2again, v3),
					k.statefulSetGone(ns, "e2e-cube-shard-2"),
					k.lookupJob(t, ns, image, "lookup-2", gen)),
			},
		},
	})
}

// TestAccRealNode/ReplicaComesBack: the node drained through the eviction API keeps every
// shard answering (drainChecks); then a cube pod deleted (its disk is an emptyDir, so it
// comes back empty) serves the current version again without a new model: the transfer
// heals it.
func realNodeReplicaComesBack(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	var version string
	cube := stack.Cube{Name: "e2e-cube", Namespace: ns, Shards: 2, Replicas: 2}
	var watcher *shardWatcher
	k.testE2E(t, ns, resource.TestCase{
		Steps: []resource.TestStep{{
			Config: e2eStack(ns, image, id, gen),
			Check: resource.ComposeTestCheckFunc(
				k.waitServed(ns, "e2e-cube", strconv.Itoa(id), 4*time.Minute, &version),
				k.drainChecks(t, ns, image, gen),
				k.deletePodAndWaitServing(t, ns, "e2e-cube", "e2e-cube-shard-0-0", &version, 3*time.Minute),
				k.lookupJob(t, ns, image, "lookup", gen)),
		}, {
			// A changed pod template: apply replaces every cube pod, and no shard is ever
			// without a serving replica.
			PreConfig: func() { watcher = k.watchShardsServing(t, cube) },
			Config:    e2eStack(ns, image, id, gen, `  pod          = { annotations = { "example.com/rollout" = "2" } }`),
			Check: resource.ComposeTestCheckFunc(
				func(*terraform.State) error { return watcher.check("example.com/rollout", "2") },
				k.waitServed(ns, "e2e-cube", strconv.Itoa(id), 4*time.Minute, &version),
				k.lookupJob(t, ns, image, "lookup-rolled", gen)),
		}},
	})
}

// TestAccRealNode/DestroyLeavesNothing: with storage set, every shard replica has a claim;
// destroy removes everything the resources own, and those claims too.
func realNodeDestroyLeavesNothing(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	var version string
	k.testE2E(t, ns, resource.TestCase{
		CheckDestroy: k.checkNoClaims(ns),
		Steps: []resource.TestStep{{
			// The model output goes too only when not retained (it is by default; see
			// TestAccTrainingJob_ModelOutputOutlivesTheJob).
			Config: strings.Replace(e2eStack(ns, image, id, gen, `  storage      = { size = "1Gi" }`),
				`donefile_path = "donefile/base.txt" }`, `donefile_path = "donefile/base.txt", retain = false }`, 1),
			Check: resource.ComposeTestCheckFunc(
				k.waitServed(ns, "e2e-cube", strconv.Itoa(id), 4*time.Minute, &version),
				k.countClaims(ns, 1+1+2*2)), // model output, transfer, 2 shards x 2 replicas
		}},
	})
}

// stateServes checks the state's served_version is version (what the replicas report).
func stateServes(version *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got := s.RootModule().Resources["ctr_cube.cube"].Primary.Attributes["served_version"]
		if got != *version || got == "" {
			return fmt.Errorf("ctr_cube.cube served_version = %q, want %q", got, *version)
		}
		return nil
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
