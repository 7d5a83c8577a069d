package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/elasticctr/terraform-provider-ctr/internal/cceemu"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const (
	testAK = "AKTESTCTR0001"
	testSK = "sk-test-secret-0001"
	// adminPassword must reach CCE once and appear nowhere else.
	adminPassword = "Adm1n-Pa55-never-logged"
)

// emulator starts a CCE emulator whose running clusters hand out the local control plane's
// kubeconfig, so a "CCE cluster" gets Volcano and workloads for real.
func emulator(t *testing.T) (*cceemu.Server, string) {
	t.Helper()
	requireCluster(t)
	kc, err := os.ReadFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	emu := cceemu.New(cceemu.Options{Credentials: map[string]string{testAK: testSK}, Kubeconfig: string(kc), PhaseDelay: 50 * time.Millisecond})
	endpoint, err := emu.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	return emu, endpoint
}

func cceProvider(endpoint, secret string) string {
	return fmt.Sprintf(`
provider "ctr" {
  access_key        = %[1]q
  secret_key        = %[2]q
  cce_endpoint      = %[3]q
  cce_poll_interval = "100ms"
}
`, testAK, secret, endpoint)
}

func cceConfig(endpoint, secret, manifest, extra string, replicas int) string {
	return cceCluster(endpoint, secret, manifest, "", fmt.Sprintf(`
      replicas       = %d
      admin_password = %q`, replicas, adminPassword)) + extra
}

// cceCluster is a ctr_cluster of a CCE cluster (the rest of cce: more) of one worker pool
// (the rest of worker_pool: pool), which takes over the emulated cluster's Volcano.
func cceCluster(endpoint, secret, manifest, more, pool string) string {
	return cceProvider(endpoint, secret) + fmt.Sprintf(`
resource "ctr_cluster" "this" {
  cce = {
    name        = "ctr-test"
    k8s_version = "1.34.2"
    vpc_id      = "vpc-test"%[2]s
    worker_pool = {
      machine_spec = "bcc.g5.c8m32"
      subnet_id    = "sbn-test"%[3]s
    }
  }
  # The emulated cluster is the local control plane, which has Volcano: take it over, to install.
  volcano  = { mode = "adopt", manifest_url = %[1]q }
  timeouts = { create = "2m", delete = "2m" }
}
`, manifest, more, pool)
}

func clusterGone(emu *cceemu.Server) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, c := range emu.Clusters() {
			if c.Phase != "deleted" {
				return fmt.Errorf("destroy left CCE cluster %s in phase %s", c.ID, c.Phase)
			}
		}
		return nil
	}
}

// TestAccCluster_CCE_Lifecycle: create -> running with workers and Volcano, scale workers in
// place, repair drift of the worker count, import by cluster ID, destroy.
func TestAccCluster_CCE_Lifecycle(t *testing.T) {
	emu, endpoint := emulator(t)
	manifest := volcanoManifest(t)
	var clusterID, poolID string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             clusterGone(emu),
		Steps: []resource.TestStep{
			{
				Config: cceConfig(endpoint, testSK, manifest, "", 2),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("phase"), knownvalue.StringExact("running")),
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("cluster_id"), knownvalue.StringRegexp(regexp.MustCompile(`^cce-`))),
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("kubernetes").AtMapKey("host"), knownvalue.StringRegexp(regexp.MustCompile(`^https://127\.0\.0\.1:`))),
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("cce").AtMapKey("worker_pool").AtMapKey("admin_password"), knownvalue.Null()),
				},
				Check: func(s *terraform.State) error {
					rs := s.RootModule().Resources["ctr_cluster.this"].Primary
					clusterID, poolID = rs.Attributes["cluster_id"], rs.Attributes["cce.worker_pool.id"]
					groups := emu.InstanceGroups(clusterID)
					if len(groups) != 1 || groups[0].Replicas != 2 || groups[0].ReadyReplicas != 2 {
						return fmt.Errorf("worker pools in CCE: %+v, want one with 2/2 ready", groups)
					}
					// The password went to CCE in the create request and nowhere else.
					sent := 0
					for _, r := range emu.Requests("", "") {
						if strings.Contains(r.Body, adminPassword) {
							if r.Method != "POST" || !strings.HasSuffix(r.Path, "/instancegroup") {
								return fmt.Errorf("the admin password was sent in %s %s", r.Method, r.Path)
							}
							sent++
						}
					}
					if sent != 1 {
						return fmt.Errorf("the admin password was sent %d times, want once", sent)
					}
					for k, v := range rs.Attributes {
						if strings.Contains(v, adminPassword) {
							return fmt.Errorf("state attribute %s holds the admin password", k)
						}
					}
					return nil
				},
			},
			{
				Config: cceConfig(endpoint, testSK, manifest, "", 3),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					if g := emu.InstanceGroups(clusterID); g[0].Replicas != 3 || g[0].ReadyReplicas != 3 {
						return fmt.Errorf("worker pool not scaled to 3: %+v", g[0])
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					// Someone scales the pool down in the console.
					if err := emu.SetReplicasOutOfBand(clusterID, poolID, 1); err != nil {
						t.Fatal(err)
					}
				},
				Config: cceConfig(endpoint, testSK, manifest, "", 3),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("cce").AtMapKey("worker_pool").AtMapKey("replicas"), knownvalue.Int64Exact(3)),
				}},
				Check: func(*terraform.State) error {
					if g := emu.InstanceGroups(clusterID); g[0].Replicas != 3 {
						return fmt.Errorf("drift not repaired: %+v", g[0])
					}
					return nil
				},
			},
			{
				ResourceName:      "ctr_cluster.this",
				ImportState:       true,
				ImportStateIdFunc: func(*terraform.State) (string, error) { return clusterID, nil },
				ImportStateVerify: true,
				// The Volcano block and its objects come back from the install's annotations;
				// timeouts are configuration.
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				// Terraform forgets the cluster; it stays in CCE.
				Config: cceProvider(endpoint, testSK) + "removed {\n  from = ctr_cluster.this\n  lifecycle { destroy = false }\n}\n",
			},
			{
				// An import block with the configuration plans to store the timeouts and nothing
				// else: not Volcano's install again.
				// The cluster ID is known only once the first step ran: Terraform reads it from
				// the environment.
				PreConfig: func() { t.Setenv("TF_VAR_cluster_id", clusterID) },
				Config: "variable \"cluster_id\" { type = string }\nimport {\n  to = ctr_cluster.this\n  id = var.cluster_id\n}\n" +
					cceConfig(endpoint, testSK, manifest, "", 3),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionUpdate),
					onlyChanges("ctr_cluster.this", "timeouts"),
				}},
			},
		},
	})
}

// TestAccCluster_CCE_CreateFailedShowsReason: CCE's own reason for create_failed reaches
// the user, and the failed cluster is still in state so destroy removes it.
func TestAccCluster_CCE_CreateFailedShowsReason(t *testing.T) {
	emu, endpoint := emulator(t)
	emu.FailNextCreate("CreateClusterBLB", "BLB.QuotaExceeded", "BLB quota exceeded in region bj", "raise the BLB quota or delete unused BLBs")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             clusterGone(emu),
		Steps: []resource.TestStep{{
			Config:      cceConfig(endpoint, testSK, volcanoManifest(t), "", 1),
			ExpectError: regexp.MustCompile(`(?s)create_failed.*CreateClusterBLB.*BLB\.QuotaExceeded.*BLB\s+quota\s+exceeded.*raise\s+the\s+BLB\s+quota`),
		}},
	})
}

// TestAccCluster_CCE_SignatureRejected: a wrong secret key fails with the service's code.
func TestAccCluster_CCE_SignatureRejected(t *testing.T) {
	_, endpoint := emulator(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config:      cceConfig(endpoint, "wrong-secret", volcanoManifest(t), "", 1),
			ExpectError: regexp.MustCompile(`(?s)SignatureDoesNotMatch.*check\s+the\s+access\s+key`),
		}},
	})
}

// TestAccCluster_CCE_Faults: server errors are retried (the SDK's bounded retries), throttling
// that outlasts them is reported as such, and versions are judged by CCE, not by us.
func TestAccCluster_CCE_Faults(t *testing.T) {
	emu, endpoint := emulator(t)
	manifest := volcanoManifest(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             clusterGone(emu),
		Steps: []resource.TestStep{
			{
				// The SDK does not retry 429.
				PreConfig:   func() { emu.FailRequests("POST", "/api/cce/service/v2/cluster", 429, "Throttling", 1) },
				Config:      cceConfig(endpoint, testSK, manifest, "", 1),
				ExpectError: regexp.MustCompile(`(?s)Throttling.*throttling\s+requests`),
			},
			{
				Config: strings.Replace(cceConfig(endpoint, testSK, manifest, "", 1), `"1.34.2"`, `"1.99.0"`, 1),
				// CCE's own message, not an echo of the configuration.
				ExpectError: regexp.MustCompile(`CCE\s+refused\s+the\s+request:\s+[A-Za-z.]+:\s+cluster\.k8sVersion\s+"1\.99\.0"\s+is\s+not\s+supported`),
			},
			{
				// Fewer 500s than the SDK's retries: the apply goes through.
				PreConfig: func() { emu.FailRequests("GET", "/api/cce/service/v2/cluster/", 500, "InternalError", 2) },
				Config:    cceConfig(endpoint, testSK, manifest, "", 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("phase"), knownvalue.StringExact("running")),
				},
			},
		},
	})
}

// TestAccCluster_CCE_FullStackOneApply: one apply builds the CCE cluster, Volcano, a training
// job, the cube and Paddle Serving, the way kubernetes provider users know: the workloads use
// the provider's connection, configured from the cluster created in the same apply (unknown at
// plan time), and the cluster is managed through a provider alias. The provider runs as real
// plugin processes, one per provider configuration, as Terraform runs it for users; the
// second plan is empty (checked by the framework after every step) and destroy goes through
// the provider's connection, read afresh.
func TestAccCluster_CCE_FullStackOneApply(t *testing.T) {
	emu, endpoint := emulator(t)
	k := requireCluster(t)
	for _, env := range connectionEnv {
		t.Setenv(env, "") // only the cluster's connection may reach it
	}
	ns, name := k.namespace(t), jobName()
	config := cceConfig(endpoint, testSK, volcanoManifest(t), fmt.Sprintf(`
provider "ctr" {
  kubernetes = ctr_cluster.this.kubernetes
}

resource "ctr_training_job" "test" {
  name      = %[1]q
  namespace = %[2]q
  pserver   = { replicas = 1 }
  trainer   = { replicas = 1 }
}

resource "ctr_cube" "test" {
  name         = "%[1]s-cube"
  namespace    = %[2]q
  donefile_url = ctr_training_job.test.donefile_url
  replicas     = 1
}

resource "ctr_serving" "test" {
  name      = "%[1]s-serving"
  namespace = %[2]q
  cube_conf = ctr_cube.test.cube_conf
}
`, name, ns), 1)
	config = strings.Replace(config, "provider \"ctr\" {\n", "provider \"ctr\" {\n  alias = \"cloud\"\n", 1)
	config = strings.Replace(config, "resource \"ctr_cluster\" \"this\" {\n", "resource \"ctr_cluster\" \"this\" {\n  provider = ctr.cloud\n", 1)
	t.Setenv("TF_CLI_CONFIG_FILE", localProvider(t))
	resource.Test(t, resource.TestCase{
		ExternalProviders: map[string]resource.ExternalProvider{"ctr": {Source: "elasticctr/ctr", VersionConstraint: devProviderVersion}},
		CheckDestroy:      resource.ComposeTestCheckFunc(clusterGone(emu), k.nothingLeftOf(ns, stack.TrainingJobType, name)),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectUnknownValue("ctr_cluster.this", tfjsonpath.New("kubernetes")),
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionCreate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
				statecheck.ExpectKnownValue("ctr_serving.test", tfjsonpath.New("url"), knownvalue.NotNull()),
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("kubernetes"), knownvalue.Null()),
			},
		}},
	})
}

// TestAccCluster_CCE_DeletedBehindOurBack: a cluster deleted in the console is planned for
// creation again.
func TestAccCluster_CCE_DeletedBehindOurBack(t *testing.T) {
	emu, endpoint := emulator(t)
	manifest := volcanoManifest(t)
	var clusterID string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             clusterGone(emu),
		Steps: []resource.TestStep{
			{
				Config: cceConfig(endpoint, testSK, manifest, "", 1),
				Check: func(s *terraform.State) error {
					clusterID = s.RootModule().Resources["ctr_cluster.this"].Primary.Attributes["cluster_id"]
					return nil
				},
			},
			{
				PreConfig: func() {
					if err := emu.DeleteClusterOutOfBand(clusterID); err != nil {
						t.Fatal(err)
					}
				},
				Config: cceConfig(endpoint, testSK, manifest, "", 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}

// ccePoolConfig is a cluster with a public API server, whose pool's in-place settings are pool.
func ccePoolConfig(endpoint, manifest, kubeconfigType, pool string) string {
	return cceCluster(endpoint, testSK, manifest, fmt.Sprintf(`
    master          = { exposed_public = true }
    kubeconfig_type = %q`, kubeconfigType), `
      replicas = 1
`+pool)
}

// TestAccCluster_CCE_UpdatePoolInPlace: the pool's labels, taints and root disk size change in
// place through CCE's configure call (without the admin password), kubeconfig_type reads the
// other kubeconfig, and a label changed in the console shows as drift that the next apply
// restores.
func TestAccCluster_CCE_UpdatePoolInPlace(t *testing.T) {
	emu, endpoint := emulator(t)
	manifest := volcanoManifest(t)
	var clusterID, poolID string
	// configure is the body of the last configure call, and its instance template and the
	// template's instance resource.
	configure := func() (body, tmpl, res map[string]any, err error) {
		r, ok := emu.LastRequest("PUT", "/cluster/"+clusterID+"/instancegroup/"+poolID+"/configure")
		if !ok {
			return nil, nil, nil, fmt.Errorf("no configure call reached CCE")
		}
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
			return nil, nil, nil, err
		}
		if r.Status != 200 {
			return nil, nil, nil, fmt.Errorf("CCE answered the configure call with %d %s", r.Status, r.Code)
		}
		tmpl, _ = body["instanceTemplate"].(map[string]any)
		res, _ = tmpl["instanceResource"].(map[string]any)
		return body, tmpl, res, nil
	}
	changed := `      labels         = { role = "train", tier = "gpu" }
      taints         = [{ key = "dedicated", value = "ctr", effect = "NoSchedule" }]
      root_disk_size = 200`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             clusterGone(emu),
		Steps: []resource.TestStep{
			{
				Config: ccePoolConfig(endpoint, manifest, "vpc", `      labels = { role = "train" }`),
				Check: func(s *terraform.State) error {
					rs := s.RootModule().Resources["ctr_cluster.this"].Primary
					clusterID, poolID = rs.Attributes["cluster_id"], rs.Attributes["cce.worker_pool.id"]
					return nil
				},
			},
			{
				Config: ccePoolConfig(endpoint, manifest, "public", changed),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue("ctr_cluster.this", tfjsonpath.New("kubeconfig")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("cce").AtMapKey("worker_pool").AtMapKey("root_disk_size"), knownvalue.Int64Exact(200)),
				},
				Check: func(*terraform.State) error {
					body, tmpl, res, err := configure()
					if err != nil {
						return err
					}
					switch {
					case body["syncMeta"] != true || body["passwordNeedUpdate"] != false:
						return fmt.Errorf("configure flags: syncMeta %v, passwordNeedUpdate %v", body["syncMeta"], body["passwordNeedUpdate"])
					case fmt.Sprint(tmpl["labels"]) != "map[role:train tier:gpu]":
						return fmt.Errorf("configure sent labels %v", tmpl["labels"])
					case !strings.Contains(fmt.Sprint(tmpl["taints"]), "key:dedicated") || !strings.Contains(fmt.Sprint(tmpl["taints"]), "effect:NoSchedule"):
						return fmt.Errorf("configure sent taints %v", tmpl["taints"])
					case fmt.Sprint(res["rootDiskSize"]) != "200":
						return fmt.Errorf("configure sent root disk size %v", res["rootDiskSize"])
					case tmpl["adminPassword"] != nil && tmpl["adminPassword"] != "":
						return fmt.Errorf("configure sent an admin password")
					}
					if _, ok := emu.LastRequest("GET", "/kubeconfig/"+clusterID+"/public"); !ok {
						return fmt.Errorf("the public kubeconfig was not read")
					}
					if n := len(emu.InstanceGroups(clusterID)); n != 1 {
						return fmt.Errorf("%d worker pools, want the one, changed in place", n)
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					// Someone edits the pool's labels in the console.
					if err := emu.SetTemplateOutOfBand(clusterID, poolID, map[string]string{"role": "other"}); err != nil {
						t.Fatal(err)
					}
					emu.ResetRequests()
				},
				Config: ccePoolConfig(endpoint, manifest, "public", changed),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("cce").AtMapKey("worker_pool").AtMapKey("labels"),
						knownvalue.MapExact(map[string]knownvalue.Check{"role": knownvalue.StringExact("train"), "tier": knownvalue.StringExact("gpu")})),
				}},
				Check: func(*terraform.State) error {
					_, tmpl, _, err := configure()
					if err != nil {
						return err
					}
					if fmt.Sprint(tmpl["labels"]) != "map[role:train tier:gpu]" {
						return fmt.Errorf("the drift was not repaired: configure sent labels %v", tmpl["labels"])
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					// Someone replaces the taint and shrinks the root disk in the console.
					if err := emu.EditTemplateOutOfBand(clusterID, poolID, func(tmpl map[string]any) {
						tmpl["taints"] = []any{map[string]any{"key": "dedicated", "value": "other", "effect": "NoExecute"}}
						res, _ := tmpl["instanceResource"].(map[string]any)
						if res == nil {
							res = map[string]any{}
							tmpl["instanceResource"] = res
						}
						res["rootDiskSize"] = 50
					}); err != nil {
						t.Fatal(err)
					}
					emu.ResetRequests()
				},
				Config: ccePoolConfig(endpoint, manifest, "public", changed),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cluster.this", plancheck.ResourceActionUpdate),
					onlyChanges("ctr_cluster.this", "cce"),
					plancheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("cce").AtMapKey("worker_pool").AtMapKey("taints"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
							"key": knownvalue.StringExact("dedicated"), "value": knownvalue.StringExact("ctr"), "effect": knownvalue.StringExact("NoSchedule")})})),
					plancheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("cce").AtMapKey("worker_pool").AtMapKey("root_disk_size"), knownvalue.Int64Exact(200)),
				}},
				Check: func(*terraform.State) error {
					_, tmpl, res, err := configure()
					if err != nil {
						return err
					}
					if taints := fmt.Sprint(tmpl["taints"]); !strings.Contains(taints, "value:ctr") || !strings.Contains(taints, "effect:NoSchedule") {
						return fmt.Errorf("the taint drift was not repaired: configure sent taints %v", tmpl["taints"])
					}
					if fmt.Sprint(res["rootDiskSize"]) != "200" {
						return fmt.Errorf("the root disk drift was not repaired: configure sent %v", res["rootDiskSize"])
					}
					return nil
				},
			},
		},
	})
}
