package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/acctest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// The identity each resource type declares, by attribute: which an import block's identity
// must give (true) and which it may (false).
var wantIdentity = map[string]map[string]bool{
	"ctr_training_job": {"namespace": false, "name": true},
	"ctr_cube":         {"namespace": false, "name": true},
	"ctr_serving":      {"namespace": false, "name": true},
	"ctr_namespace":    {"name": true},
	"ctr_queue":        {"name": true},
	"ctr_cluster":      {"cluster_id": false, "api_server": false},
}

// TestIdentity_EveryResource: every resource declares its identity (Terraform 1.12+), and an
// import by identity fills the state that an import by ID does: namespace and name (the
// namespace defaulting as the resource's), the name, or the CCE cluster ID. An identity
// that names nothing importable is refused, saying what to give. No cluster is needed: this
// is the provider's half of an import, which Read then completes.
func TestIdentity_EveryResource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New(testVersion)())()
	if err != nil {
		t.Fatal(err)
	}
	ids, err := server.GetResourceIdentitySchemas(ctx, &tfprotov6.GetResourceIdentitySchemasRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for typ := range resourceSchemas() {
		s, ok := ids.IdentitySchemas[typ]
		if !ok {
			t.Errorf("%s declares no identity", typ)
			continue
		}
		got := map[string]bool{}
		for _, a := range s.IdentityAttributes {
			got[a.Name] = a.RequiredForImport
			if !a.RequiredForImport && !a.OptionalForImport {
				t.Errorf("%s: identity attribute %s cannot be given at import", typ, a.Name)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantIdentity[typ]) {
			t.Errorf("%s: identity %v, want %v", typ, got, wantIdentity[typ])
		}
	}

	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	importBy := func(typ string, identity map[string]any) (map[string]tftypes.Value, []*tfprotov6.Diagnostic) {
		typType := ids.IdentitySchemas[typ].ValueType()
		v, err := tfValue(typType, identity)
		if err != nil {
			t.Fatal(err)
		}
		dv, err := tfprotov6.NewDynamicValue(typType, v)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := server.ImportResourceState(ctx, &tfprotov6.ImportResourceStateRequest{TypeName: typ,
			Identity: &tfprotov6.ResourceIdentityData{IdentityData: &dv}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ImportedResources) != 1 {
			return nil, resp.Diagnostics
		}
		state, err := resp.ImportedResources[0].State.Unmarshal(schemas.ResourceSchemas[typ].ValueType())
		if err != nil {
			t.Fatal(err)
		}
		attrs := map[string]tftypes.Value{}
		if err := state.As(&attrs); err != nil {
			t.Fatal(err)
		}
		return attrs, resp.Diagnostics
	}
	str := func(v tftypes.Value) string {
		var s string
		if v.IsNull() {
			return "<null>"
		}
		_ = v.As(&s)
		return s
	}
	for _, c := range []struct {
		typ      string
		identity map[string]any
		want     map[string]string // state attributes after the import
	}{
		{"ctr_training_job", map[string]any{"namespace": "ads", "name": "ctr"}, map[string]string{"id": "ads/ctr", "namespace": "ads", "name": "ctr"}},
		{"ctr_cube", map[string]any{"name": "cube"}, map[string]string{"id": stack.DefaultNamespace + "/cube", "namespace": stack.DefaultNamespace, "name": "cube"}},
		{"ctr_serving", map[string]any{"namespace": "ads", "name": "serving"}, map[string]string{"id": "ads/serving", "name": "serving"}},
		{"ctr_namespace", map[string]any{"name": "ads"}, map[string]string{"id": "ads", "name": "ads"}},
		{"ctr_queue", map[string]any{"name": "training"}, map[string]string{"id": "training", "name": "training"}},
		{"ctr_cluster", map[string]any{"cluster_id": "cce-abc123"}, map[string]string{"id": "cce-abc123", "cluster_id": "cce-abc123"}},
	} {
		attrs, diags := importBy(c.typ, c.identity)
		if len(diags) > 0 {
			t.Errorf("%s: import by identity %v: %s", c.typ, c.identity, describeDiags(diags))
			continue
		}
		for k, want := range c.want {
			if got := str(attrs[k]); got != want {
				t.Errorf("%s: import by identity %v set %s = %q, want %q", c.typ, c.identity, k, got, want)
			}
		}
	}
	for _, c := range []struct {
		typ      string
		identity map[string]any
		want     string
	}{
		{"ctr_serving", map[string]any{"namespace": "ads", "name": "Serving"}, `Invalid Import ID: Expected NAMESPACE/NAME, e.g. default/ctr-demo \(the name "Serving" must be at most 40`},
		{"ctr_queue", map[string]any{"name": "Q"}, `Invalid Import ID: Expected a queue name`},
		{"ctr_cluster", map[string]any{"api_server": "10.0.0.1:6443"}, `Invalid Import Identity: An import by identity takes cluster_id, .* id = "kubeconfig:PATH"`},
	} {
		_, diags := importBy(c.typ, c.identity)
		if len(diags) != 1 || !detailRE(c.want).MatchString(diags[0].Summary+": "+diags[0].Detail) {
			t.Errorf("%s: import by identity %v: want one error matching %q, got %s", c.typ, c.identity, c.want, describeDiags(diags))
		}
	}
}

// identityImport is the step that imports addr by the identity the previous steps stored, with
// an import block (Terraform 1.12+), and plans no change with config (without timeouts, which
// the cluster cannot tell).
func identityImport(addr, config string) resource.TestStep {
	return resource.TestStep{ResourceName: addr, ImportState: true, ImportStateKind: resource.ImportBlockWithResourceIdentity, Config: withoutTimeouts(config)}
}

// identityChecks check the identity a resource stores, by attribute.
func identityChecks(addr string, want map[string]string) []statecheck.StateCheck {
	values := map[string]knownvalue.Check{}
	for k, v := range want {
		values[k] = knownvalue.StringExact(v)
	}
	return []statecheck.StateCheck{statecheck.ExpectIdentity(addr, values)}
}

// needsIdentity skips a test case on a Terraform without resource identity (before 1.12).
var needsIdentity = []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)}

// TestAccIdentity_Workloads: a training job, a cube and a serving store their namespace and
// name as identity, and an import block by that identity brings each back with no change.
func TestAccIdentity_Workloads(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, job, cube, serving := k.namespace(t), jobName(), "cube-"+jobName()[3:], "srv-"+jobName()[3:]
	for _, c := range []struct{ addr, typ, name, config string }{
		{jobAddr, stack.TrainingJobType, job, trainingJobConfig(ns, job, "")},
		{"ctr_cube.test", stack.CubeType, cube, cubeConfig(ns, cube, "")},
		{servingAddr, stack.ServingType, serving, servingConfig(ns, serving, "1", "")},
	} {
		t.Run(c.typ, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				TerraformVersionChecks:   needsIdentity,
				ProtoV6ProviderFactories: providerFactories,
				CheckDestroy:             k.nothingLeftOf(ns, c.typ, c.name),
				Steps: []resource.TestStep{
					{Config: c.config, ConfigStateChecks: identityChecks(c.addr, map[string]string{"namespace": ns, "name": c.name})},
					identityImport(c.addr, c.config),
				},
			})
		})
	}
}

// TestAccIdentity_NamespaceAndQueue: a namespace and a queue store their name as identity,
// and an import block by it brings each back with no change.
func TestAccIdentity_NamespaceAndQueue(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, queue := "acc-ns-"+acctest.RandString(8), queueName()
	config := fmt.Sprintf("resource \"ctr_namespace\" \"this\" {\n  name = %q\n}\n\nresource \"ctr_queue\" \"test\" {\n  name = %q\n}\n", ns, queue)
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   needsIdentity,
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(k.namespaceGone(ns), k.queueGone(queue)),
		Steps: []resource.TestStep{
			{Config: config, ConfigStateChecks: append(identityChecks(namespaceAddr, map[string]string{"name": ns}),
				identityChecks(queueAddr, map[string]string{"name": queue})...)},
			identityImport(namespaceAddr, config),
			identityImport(queueAddr, config),
		},
	})
}

// TestAccIdentity_CCECluster: a CCE cluster stores its cluster ID as identity, and an import
// block by it brings the cluster back with no change.
func TestAccIdentity_CCECluster(t *testing.T) {
	emu, endpoint := emulator(t)
	config := cceConfig(endpoint, testSK, volcanoManifest(t), "", 1)
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   needsIdentity,
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             clusterGone(emu),
		Steps: []resource.TestStep{
			{Config: config, ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectIdentity("ctr_cluster.this", map[string]knownvalue.Check{
					"cluster_id": knownvalue.StringRegexp(regexp.MustCompile(`^cce-`)), "api_server": knownvalue.Null()}),
			}},
			identityImport("ctr_cluster.this", config),
		},
	})
}
