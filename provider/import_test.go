package provider

import (
	"context"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestImport_MalformedID: every resource answers a malformed import ID with the same clear
// error, before anything is read (two resources used to crash on "a/b/c").
func TestImport_MalformedID(t *testing.T) {
	t.Parallel()
	workload := []string{"a/b/c", "", "/b", "a/", "a//b", "default", "Default/x", "default/1x", "default/x/"}
	cases := map[string][]string{
		"ctr_training_job": workload,
		"ctr_cube":         workload,
		"ctr_serving":      workload,
		"ctr_cluster":      {"", "a/b/c", "existing/10.0.0.2:6443", "cce abc", "kubeconfig:", "kubeconfig:#ctx"},
	}
	want := map[string]*regexp.Regexp{
		"ctr_cluster": regexp.MustCompile(`^Expected a CCE cluster ID, e.g. cce-abcd1234, or for an existing cluster the kubeconfig that reaches it, kubeconfig:PATH or kubeconfig:PATH#CONTEXT; got ".*"\.$`),
	}
	server, err := providerserver.NewProtocol6WithError(New(testVersion)())()
	if err != nil {
		t.Fatal(err)
	}
	for typ, ids := range cases {
		re := want[typ]
		if re == nil {
			re = regexp.MustCompile(`^Expected NAMESPACE/NAME, e.g. default/ctr-demo \(.+\); got ".*"\.$`)
		}
		for _, id := range ids {
			resp, err := server.ImportResourceState(context.Background(), &tfprotov6.ImportResourceStateRequest{TypeName: typ, ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Summary != "Invalid Import ID" || !re.MatchString(resp.Diagnostics[0].Detail) {
				t.Errorf("%s: import %q: want one Invalid Import ID error, got %s", typ, id, describeDiags(resp.Diagnostics))
			}
			if len(resp.ImportedResources) > 0 {
				t.Errorf("%s: import %q: imported %d resources", typ, id, len(resp.ImportedResources))
			}
		}
	}
}

// TestImport_MalformedIDTerraform: the same through `terraform import`, for every resource.
func TestImport_MalformedIDTerraform(t *testing.T) {
	t.Parallel()
	configs := map[string]string{
		"ctr_training_job": hclResource("ctr_training_job", "x", map[string]any{"name": "x"}),
		"ctr_cube":         hclResource("ctr_cube", "x", map[string]any{"name": "x", "donefile_url": "http://f/base.txt"}),
		"ctr_serving":      hclResource("ctr_serving", "x", map[string]any{"name": "x", "cube_conf": `[{"dict_name":"d","shard":1}]`}),
		"ctr_cluster":      hclResource("ctr_cluster", "x", map[string]any{"kubernetes": map[string]any{"config_path": "/kubeconfig"}}),
	}
	for typ, cfg := range configs {
		t.Run(typ, func(t *testing.T) {
			resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories, Steps: []resource.TestStep{{
				Config: cfg, ResourceName: typ + ".x", ImportState: true, ImportStateId: "a/b/c",
				ExpectError: regexp.MustCompile(`(?s)Error: Invalid Import ID.*Expected .*got\s+"a/b/c"`),
			}}})
		})
	}
}
