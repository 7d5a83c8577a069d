package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestCube_MetricsRoundTrip: a metrics block goes to the settings annotation and comes back
// the same at import, an unset scrape_from (the default scrapers) apart from an empty one (no
// scraper).
func TestCube_MetricsRoundTrip(t *testing.T) {
	ctx := context.Background()
	peer := networkPeerModel{NamespaceLabels: types.MapNull(types.StringType),
		PodLabels: types.MapValueMust(types.StringType, map[string]attr.Value{"app": types.StringValue("prometheus")})}
	for name, m := range map[string]*metricsModel{
		"unset":         nil,
		"defaults":      {Annotations: types.BoolValue(true), PodMonitor: types.BoolValue(false), PodMonitorLabels: types.MapNull(types.StringType)},
		"no scrapers":   {Annotations: types.BoolValue(true), PodMonitor: types.BoolValue(false), PodMonitorLabels: types.MapNull(types.StringType), ScrapeFrom: []networkPeerModel{}},
		"every setting": {Annotations: types.BoolValue(false), PodMonitor: types.BoolValue(true), PodMonitorLabels: types.MapValueMust(types.StringType, map[string]attr.Value{"release": types.StringValue("p")}), ScrapeFrom: []networkPeerModel{peer}},
	} {
		var diags diag.Diagnostics
		b, err := json.Marshal(m.stack(ctx, &diags))
		if err != nil {
			t.Fatal(err)
		}
		var back *stack.Metrics
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got := metricsFromStack(ctx, back, &diags)
		if diags.HasError() {
			t.Fatalf("%s: %v", name, diags)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: %s came back as %+v, want %+v", name, b, got, m)
		}
	}
}

// TestCube_MetricsPlan: what the metrics block renders, as the plan's manifests show it (no
// cluster needed): by default the scrape annotations and a rule admitting the default scrapers
// to the probe port; scrape_from = [] no such rule; pod_monitor a PodMonitor.
func TestCube_MetricsPlan(t *testing.T) {
	t.Parallel()
	policy := "networking.k8s.io/v1/NetworkPolicy/c-server"
	transfer := stack.CubeTransferKey("c")
	probePort := fmt.Sprintf("port: %d", stack.CubeProbePort)
	has := func(parts ...string) knownvalue.Check {
		return knownvalue.StringFunc(func(v string) error {
			for _, p := range parts {
				if !strings.Contains(v, p) {
					return fmt.Errorf("no %q in\n%s", p, v)
				}
			}
			return nil
		})
	}
	lacks := func(part string) knownvalue.Check {
		return knownvalue.StringFunc(func(v string) error {
			if strings.Contains(v, part) {
				return fmt.Errorf("%q in\n%s", part, v)
			}
			return nil
		})
	}
	manifest := func(key string) tfjsonpath.Path { return tfjsonpath.New("manifests").AtMapKey(key) }
	step := func(metrics string, checks ...plancheck.PlanCheck) resource.TestStep {
		return resource.TestStep{
			Config:             "resource \"ctr_cube\" \"test\" {\n  name = \"c\"\n  donefile_url = \"http://f/base.txt\"\n" + metrics + "}\n",
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks:   resource.ConfigPlanChecks{PostApplyPreRefresh: checks},
		}
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories, Steps: []resource.TestStep{
		step("",
			plancheck.ExpectKnownValue(cubeAddr, manifest(policy), has(probePort, stack.LabelName+": prometheus")),
			plancheck.ExpectKnownValue(cubeAddr, manifest(transfer), has(stack.ScrapeAnnotation+`: "true"`, stack.ScrapePortAnnotation+`: "8099"`))),
		step("  metrics = { scrape_from = [] }\n",
			plancheck.ExpectKnownValue(cubeAddr, manifest(policy), lacks(probePort)),
			plancheck.ExpectKnownValue(cubeAddr, manifest(transfer), has(stack.ScrapeAnnotation))),
		step("  metrics = { annotations = false, pod_monitor = true, pod_monitor_labels = { release = \"p\" } }\n",
			plancheck.ExpectKnownValue(cubeAddr, manifest(transfer), lacks(stack.ScrapeAnnotation)),
			plancheck.ExpectKnownValue(cubeAddr, manifest("monitoring.coreos.com/v1/PodMonitor/c"), has("release: p", "port: probe"))),
	}})
}
