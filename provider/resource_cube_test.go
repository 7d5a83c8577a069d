package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

const cubeAddr = "ctr_cube.test"

func cubeConfig(ns, name, extra string) string {
	return fmt.Sprintf(`
resource "ctr_cube" "test" {
  name         = %[2]q
  namespace    = %[1]q
  donefile_url = "http://ctr-fileserver.%[1]s.svc:8080/output/ctr_cube/donefile/base.txt"
%[3]s
  timeouts = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, extra)
}

// withoutTimeouts drops the timeouts line of a test configuration.
func withoutTimeouts(config string) string {
	return regexp.MustCompile(`(?m)^\s*timeouts\s*=.*$`).ReplaceAllString(config, "")
}

// The cube's lifecycle, one behaviour per test: create, update in place, replace, re-shard,
// drift, import, destroy. Every test destroys at the end and checks that nothing it owned is
// left (CheckDestroy); TestAccCube_Destroy does only that.

func cubeTest(t *testing.T) (*kubeClients, string, string) {
	k := requireCluster(t)
	return k, k.namespace(t), "cube-" + jobName()[3:]
}

// TestAccCube_Create: the objects, the exported values, and the pods of a default cube; the
// ctr_cube data source reads the same exported values back.
func TestAccCube_Create(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	k.run(t, ns, stack.CubeType, name, append([]resource.TestStep{{
		Config: cubeConfig(ns, name, ""),
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/"+name)),
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("endpoints"), knownvalue.ListExact([]knownvalue.Check{
				knownvalue.StringExact(fmt.Sprintf("%s-shard-0.%s.svc:8027", name, ns)),
				knownvalue.StringExact(fmt.Sprintf("%s-shard-1.%s.svc:8027", name, ns)),
			})),
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("cube_conf"), knownvalue.StringRegexp(regexp.MustCompile(`"ipport_list": "http://`+name+`-shard-1\.`))),
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("transfer_url"), knownvalue.StringExact(fmt.Sprintf("http://%s-transfer.%s.svc:8099", name, ns))),
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(13)), // Secret, 2 NetworkPolicies, the replicas' Service, 2 × (Service, PodDisruptionBudget, StatefulSet), transfer claim, Service, Deployment
			// No transfer runs on kwok nodes: nothing reports serving, and nothing is claimed.
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("serving_replicas"), knownvalue.Null()),
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("served_version"), knownvalue.StringExact("")),
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("image"), knownvalue.StringExact(stack.CubeImage(testVersion))),
			statecheck.ExpectSensitiveValue(cubeAddr, tfjsonpath.New("control_token")),
		},
		Check: resource.ComposeTestCheckFunc(k.statefulSetReplicas(ns, name+"-shard-0", 2), k.statefulSetReplicas(ns, name+"-shard-1", 2),
			func(*terraform.State) error {
				// The transfer reaches replicas that are not Ready (they serve nothing yet)
				// through a Service that publishes them and governs every shard.
				ctx := context.Background()
				svc, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-replicas", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if !svc.Spec.PublishNotReadyAddresses {
					return fmt.Errorf("service %s does not publish not-ready replicas", svc.Name)
				}
				sts, err := k.cs.AppsV1().StatefulSets(ns).Get(ctx, name+"-shard-1", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if sts.Spec.ServiceName != svc.Name {
					return fmt.Errorf("statefulset %s is governed by %q, want %q", sts.Name, sts.Spec.ServiceName, svc.Name)
				}
				return nil
			}),
	}}, dataSourceSteps(cubeConfig(ns, name, ""), cubeAddr, ns)...)...)
}

// TestAccCube_UpdateInPlace: more replicas per shard is an update of the StatefulSets.
func TestAccCube_UpdateInPlace(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	k.run(t, ns, stack.CubeType, name, []resource.TestStep{
		{Config: cubeConfig(ns, name, "  replicas = 1")},
		{
			Config: cubeConfig(ns, name, "  replicas = 3\n  retry = 0"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("cube_conf"), knownvalue.StringRegexp(regexp.MustCompile(`"dup": 3,[\s\S]*"retry": 0,`))),
			},
			Check: resource.ComposeTestCheckFunc(k.statefulSetReplicas(ns, name+"-shard-0", 3), k.statefulSetReplicas(ns, name+"-shard-1", 3)),
		},
	}...)
}

// TestAccCube_Replace: a new dictionary storage cannot change on a StatefulSet: the plan says
// replace, and the new cube has per-replica claims.
func TestAccCube_Replace(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	k.run(t, ns, stack.CubeType, name, []resource.TestStep{
		{Config: cubeConfig(ns, name, "  replicas = 1")},
		{
			Config: cubeConfig(ns, name, "  replicas = 1\n  storage = { size = \"1Gi\" }"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionDestroyBeforeCreate),
			}},
			Check: func(*terraform.State) error {
				sts, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), name+"-shard-0", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if len(sts.Spec.VolumeClaimTemplates) != 1 {
					return fmt.Errorf("statefulset %s has %d claim templates, want 1", sts.Name, len(sts.Spec.VolumeClaimTemplates))
				}
				return nil
			},
		},
	}...)
}

// TestAccCube_Reshard: 2 -> 3 shards creates the new shard's objects (visible in the plan);
// 3 -> 2 prunes them.
func TestAccCube_Reshard(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	k.run(t, ns, stack.CubeType, name, []resource.TestStep{
		{Config: cubeConfig(ns, name, "  replicas = 1")},
		{
			Config: cubeConfig(ns, name, "  replicas = 1\n  shards = 3"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("manifests").AtMapKey("apps/v1/StatefulSet/"+name+"-shard-2"), knownvalue.NotNull()),
			}},
			Check: k.statefulSetReplicas(ns, name+"-shard-2", 1),
		},
		{
			Config: cubeConfig(ns, name, "  replicas = 1\n  shards = 2"),
			Check: func(*terraform.State) error {
				if _, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), name+"-shard-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("shard 2 was not pruned (%v)", err)
				}
				return nil
			},
		},
	}...)
}

// TestAccCube_Drift: kubectl scale and kubectl delete svc behind Terraform's back show in the
// plan, and the apply restores them.
func TestAccCube_Drift(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	ctx := context.Background()
	k.run(t, ns, stack.CubeType, name, []resource.TestStep{
		{Config: cubeConfig(ns, name, "")},
		{
			PreConfig: func() {
				sts, err := k.cs.AppsV1().StatefulSets(ns).Get(ctx, name+"-shard-0", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				sts.Spec.Replicas = ptr.To[int32](1)
				if _, err := k.cs.AppsV1().StatefulSets(ns).Update(ctx, sts, metav1.UpdateOptions{FieldManager: "kubectl-scale"}); err != nil {
					t.Fatal(err)
				}
				if err := k.cs.CoreV1().Services(ns).Delete(ctx, name+"-shard-1", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			Config: cubeConfig(ns, name, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate),
			}},
			Check: resource.ComposeTestCheckFunc(k.statefulSetReplicas(ns, name+"-shard-0", 2), func(*terraform.State) error {
				_, err := k.cs.CoreV1().Services(ns).Get(ctx, name+"-shard-1", metav1.GetOptions{})
				return err
			}),
		},
	}...)
}

// TestAccCube_ShardBudgets: a cube of 2 shards × 2 replicas has a PodDisruptionBudget per
// shard that selects exactly that shard's live pods, and StatefulSets whose pods spread;
// disruption_budget = false deletes the budgets, and so does one replica per shard.
func TestAccCube_ShardBudgets(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	cube := stack.Cube{Name: name, Namespace: ns, Shards: 2, Replicas: 2}
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate)}}
	k.run(t, ns, stack.CubeType, name, []resource.TestStep{
		{Config: cubeConfig(ns, name, "  replicas = 2"), Check: k.checkShardBudgets(cube, true)},
		{Config: cubeConfig(ns, name, "  replicas = 2\n  disruption_budget = false"), ConfigPlanChecks: update, Check: k.checkShardBudgets(cube, false)},
		{Config: cubeConfig(ns, name, "  replicas = 2"), ConfigPlanChecks: update, Check: k.checkShardBudgets(cube, true)},
		{Config: cubeConfig(ns, name, "  replicas = 1"), ConfigPlanChecks: update, Check: k.checkShardBudgets(cube, false)},
	}...)
}

// cubeEveryAttribute sets every configurable attribute of ctr_cube to a value other than its
// default (retry to 0, a value that is its own), for the import round trip; storageClass is
// the cluster's, so that the transfer's claim binds and its pod becomes ready.
func cubeEveryAttribute(storageClass string) string {
	return fmt.Sprintf(`  stack               = "shop"
  dict                = "ctr_dict"
  shards              = 3
  replicas            = 1
  image               = "ghcr.io/elasticctr/cube:v0.0.1-test"
  mode                = "base_delta"
  port                = 9027
  transfer_port       = 9099
  transfer_files_port = 9100
  resources           = { requests = { cpu = "100m", memory = "256Mi" }, limits = { memory = "512Mi" } }
  storage             = { size = "1Gi", storage_class = "no-such-class" } # the claims stay Pending: the apply waits for pods, not for readiness
  transfer_storage    = "2Gi"
  transfer_storage_class = %q
  transfer_resources  = { requests = { memory = "300Mi" }, limits = { cpu = "3" } }
  node_selector       = { type = "kwok" }
  tolerations         = [{ key = "dedicated", operator = "Equal", value = "cube", effect = "NoSchedule" }, { operator = "Exists" }]
  timeout_ms          = 150
  retry               = 0
  backup_request_ms   = 20
  security_context    = { run_as_user = 1000, run_as_group = 1000, fs_group = 1000, run_as_non_root = true, read_only_root_filesystem = true,
    allow_privilege_escalation = false, seccomp_profile = "RuntimeDefault", add_capabilities = ["NET_BIND_SERVICE"] }
  network_policy      = { enabled = true, allow_from = [{ namespace_labels = { "kubernetes.io/metadata.name" = "monitoring" }, pod_labels = { app = "prometheus" } }] }
  control_token       = "an-operator-chosen-token"
  spread              = { topology_key = "topology.kubernetes.io/zone", required = true }
  disruption_budget   = false
  metrics             = { annotations = false, scrape_from = [{ namespace_labels = { "kubernetes.io/metadata.name" = "monitoring" } }] }
`, storageClass)
}

// TestAccCube_Import: every attribute round-trips through the cluster: import reads the same
// configuration back (and the next plan is empty).
func TestAccCube_Import(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	config := cubeConfig(ns, name, cubeEveryAttribute(k.defaultStorageClass(t)))
	k.run(t, ns, stack.CubeType, name, append([]resource.TestStep{{
		Config: config,
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("retry"), knownvalue.Int64Exact(0)),
		},
	}}, importRoundTrip("ctr_cube", ns+"/"+name, config)...)...)
}

// TestAccCube_Destroy: destroy removes every object the cube owns and every pod made of them.
func TestAccCube_Destroy(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	k.run(t, ns, stack.CubeType, name, resource.TestStep{Config: cubeConfig(ns, name, "")})
}

// cubeBadInputs are ctr_cube's bad values: see badInputs.
func cubeBadInputs() []badInput {
	base := map[string]any{"name": "c", "donefile_url": "http://f/base.txt"}
	return []badInput{
		// One bad value, one error: the schema alone checks a bound (stack.Cube.Validate no longer repeats it).
		{"shards above the bound", with(base, "shards", 300), "shards", `shards value must be between 1 and 256, got: 300`},
		{"no shards", with(base, "shards", 0), "shards", `between 1 and 256`},
		{"too many replicas", with(base, "replicas", 40), "replicas", `between 1 and 32`},
		{"retries above the bound", with(base, "retry", 11), "retry", `between 0 and 10`},
		{"zero timeout", with(base, "timeout_ms", 0), "timeout_ms", `between 1 and 600000`},
		{"unknown mode", with(base, "mode", "delta"), "mode", `value must be one of`},
		{"serve_version not a version name", with(base, "serve_version", "v1"), "serve_version", `"v1" is not a cube version name`},
		{"serve_version with a sign", with(base, "serve_version", "+1700000000"), "serve_version", `is not a cube version name`},
		{"name starting with a digit", with(base, "name", "1cube"), "name", `starting with a letter .* DNS-1035 .* got: 1cube`},
		{"name too long", with(base, "name", strings.Repeat("c", 41)), "name", `at most 40`},
		{"empty image", with(base, "image", ""), "image", `string length must be at least 1`},
		{"donefile not http", with(base, "donefile_url", "ftp://x/base.txt"), "donefile_url", `"ftp://x/base.txt" must be an http:// or https:// URL`},
		{"not a quantity", with(base, "resources", map[string]any{"requests": map[string]any{"memory": "lots"}}), `resources.requests["memory"]`, `"lots" is not a quantity`},
		{"port = the transfer's default port", with(base, "port", 8099), "port", `8099 is also the transfer_port; .* each need a port of their own`},
		{"files port = transfer port", with(base, "transfer_files_port", 8099), "transfer_files_port", `8099 is also the transfer_port`},
		{"transfer port = port", with(base, "transfer_port", 9000, "port", 9000), "transfer_port", `9000 is also the port`},
		{"port = the probe port", with(base, "port", stack.CubeProbePort), "port", `8028 is the cube servers' probe port .*; choose another`},
		{"storage size", with(base, "storage", map[string]any{"size": "0"}), "storage.size", `"0" is not a positive storage quantity`},
		{"transfer storage", with(base, "transfer_storage", "lots"), "transfer_storage", `"lots" is not a positive storage quantity`},
		{"transfer storage class", with(base, "transfer_storage_class", "GP 3"), "transfer_storage_class", `"GP 3" is not a valid StorageClass name`},
		{"transfer limit below its request", with(base, "transfer_resources", map[string]any{"requests": map[string]any{"cpu": "2"}, "limits": map[string]any{"cpu": "1"}}),
			`transfer_resources.requests["cpu"]`, `request 2 is more than the limit 1`},
		{"label key of the node selector", with(base, "node_selector", map[string]any{"-pool": "cube"}), `node_selector["-pool"]`, `"-pool" is not a label key`},
		{"toleration operator", with(base, "tolerations", []any{map[string]any{"key": "k", "operator": "Bogus"}}), "tolerations[0].operator", `value must be one of: \["Exists" "Equal"\]`},
		{"toleration effect", with(base, "tolerations", []any{map[string]any{"key": "k", "effect": "NoRun"}}), "tolerations[0].effect", `value must be one of`},
		{"toleration key", with(base, "tolerations", []any{map[string]any{"key": "a b", "operator": "Exists"}}), "tolerations[0].key", `"a b" is not a taint key`},
		{"toleration of every taint without Exists", with(base, "tolerations", []any{map[string]any{"effect": "NoSchedule"}}), "tolerations[0].operator", `must be "Exists" when key is empty`},
		{"spread over no label", with(base, "spread", map[string]any{"topology_key": "zone/"}), "spread.topology_key", `"zone/" is not a label key`},
		{"spread over an empty key", with(base, "spread", map[string]any{"topology_key": ""}), "spread.topology_key", `string length must be at least 1`},
		{"peer without labels", with(base, "network_policy", map[string]any{"allow_from": []any{map[string]any{"pod_labels": map[string]any{}}}}), "network_policy.allow_from[0]", `needs pod_labels, namespace_labels or both`},
		{"peers with policies off", with(base, "network_policy", map[string]any{"enabled": false, "allow_from": []any{map[string]any{"pod_labels": map[string]any{"a": "b"}}}}),
			"network_policy.allow_from", `has no effect with enabled = false`},
		{"negative timeout", with(base, "timeout_ms", -5), "timeout_ms", `Attribute timeout_ms value must be between 1 and 600000, got: -5`},
		{"negative backup request", with(base, "backup_request_ms", -5), "backup_request_ms", `value must be between 0 and 600000, got: -5`},
		{"retries below the bound", with(base, "retry", -1), "retry", `between 0 and 10`},
		{"empty donefile URL", with(base, "donefile_url", ""), "donefile_url", `is required: set the training job's donefile_url`},
		{"a pin at create", with(with(base, "image", "cube:1"), "serve_version", "1700000000"), "serve_version",
			`a new cube keeps no version to pin yet: create it without serve_version, and pin one of its kept_versions later`},
		{"PodMonitor labels without a PodMonitor", with(base, "metrics", map[string]any{"pod_monitor_labels": map[string]any{"release": "p"}}),
			"metrics.pod_monitor_labels", `has no effect without pod_monitor = true`},
		{"a PodMonitor label ctr sets", with(base, "metrics", map[string]any{"pod_monitor": true, "pod_monitor_labels": map[string]any{stack.LabelInstance: "x"}}),
			`metrics.pod_monitor_labels["app.kubernetes.io/instance"]`, `is a label ctr sets on the PodMonitor; choose another key`},
		{"scrapers with policies off", with(base, "network_policy", map[string]any{"enabled": false}, "metrics", map[string]any{"scrape_from": []any{map[string]any{"pod_labels": map[string]any{"a": "b"}}}}),
			"metrics.scrape_from", `has no effect with network_policy.enabled = false`},
		{"scraper without labels", with(base, "metrics", map[string]any{"scrape_from": []any{map[string]any{"namespace_labels": map[string]any{}}}}),
			"metrics.scrape_from[0]", `needs pod_labels, namespace_labels or both`},
	}
}

// TestCube_RetryZero: `retry = 0` is a setting of its own (no retries), not "the default".
func TestCube_RetryZero(t *testing.T) {
	t.Parallel()
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories, Steps: []resource.TestStep{{
		Config:             "resource \"ctr_cube\" \"test\" {\n  name = \"c\"\n  donefile_url = \"http://f/base.txt\"\n  retry = 0\n}\n",
		PlanOnly:           true,
		ExpectNonEmptyPlan: true,
		ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
			plancheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("retry"), knownvalue.Int64Exact(0)),
			plancheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("cube_conf"), knownvalue.StringRegexp(regexp.MustCompile(`"retry": 0,`))),
		}},
	}}})
}

// TestAccCube_CreateWaitTimesOutWithWarning: a cube whose pods cannot be ready within the
// create timeout (here: its transfer has nowhere to run) is a warning, not an error: the
// resource is kept, not tainted, and the same configuration plans nothing.
func TestAccCube_CreateWaitTimesOutWithWarning(t *testing.T) {
	// Parallel: an unplaceable pod of the default scheduler holds nothing back (no gang).
	t.Parallel()
	k, ns, name := cubeTest(t)
	rec := newDiagRecorder(t)
	config := strings.Replace(cubeConfig(ns, name, `  pod = { node_selector = { "ctr.example/nowhere" = "x" } }`),
		`timeouts = { create = "3m", update = "3m", delete = "3m" }`, `timeouts = { create = "15s", delete = "3m" }`, 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		CheckDestroy:             k.nothingLeftOf(ns, stack.CubeType, name),
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: rec.expect(`Cube Not Serving Yet: cube ` + ns + `/` + name + ` is created but not ready within the create timeout: .*` +
					`did not become ready in time.*kept, not tainted`),
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionNoop),
				}},
			},
		},
	})
}

// TestAccCube_StatusNotReadableWarns: an identity that may not read the transfer's status
// through the API server's service proxy (the RBAC guide's role without services/proxy)
// applies and refreshes a cube with a warning that names the permission and the attributes
// left empty, instead of silently empty ones.
func TestAccCube_StatusNotReadableWarns(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	rec := newDiagRecorder(t)
	provider := providerAs(k.workloadsKubeconfig(t, ns, stack.ServiceProxy))
	warning := `Status Not Readable: Cube ` + ns + `/` + name + `: its status cannot be read, so these are left empty: served_version, serving_replicas and kept_versions\. ` +
		`GET .* from Service ` + ns + `/` + name + `-transfer:.*403 Forbidden: the provider's identity needs get on services/proxy in namespace "` + ns + `"; ` +
		`the RBAC guide's ` + stack.WorkloadsRoleName + ` ClusterRole grants it`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		CheckDestroy:             k.nothingLeftOf(ns, stack.CubeType, name),
		Steps: []resource.TestStep{{
			Config: provider + cubeConfig(ns, name, ""),
			Check:  resource.ComposeTestCheckFunc(rec.expect(warning), resource.TestCheckResourceAttr(cubeAddr, "served_version", "")),
		}, {
			// The next plan's refresh says so too, and plans no change.
			Config:           provider + cubeConfig(ns, name, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionNoop)}},
			Check:            rec.expectRead(warning),
		}},
	})
}

// TestPlanPin_OnlyAKeptVersion: a new pin of a cube that exists must be one of the versions it
// kept at the last refresh; the refusal names them.
func TestPlanPin_OnlyAKeptVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kept := types.ListValueMust(types.StringType, []attr.Value{types.StringValue("1700000001"), types.StringValue("1700000000")})
	state := &cubeModel{KeptVersions: kept}
	state.Namespace, state.Name = types.StringValue("ads"), types.StringValue("c")
	plan := *state
	plan.ServeVersion = types.StringValue("1600000000")
	var diags diag.Diagnostics
	if planPin(ctx, &plan, state, &diags) || !diags.HasError() ||
		!strings.Contains(diags[0].Detail(), `does not keep version "1600000000": it keeps ["1700000001" "1700000000"]`) {
		t.Errorf("a version the cube does not keep: %v", diags)
	}
	plan.ServeVersion, diags = types.StringValue("1700000000"), nil
	if !planPin(ctx, &plan, state, &diags) || diags.HasError() {
		t.Errorf("a kept version: %v", diags)
	}
}
