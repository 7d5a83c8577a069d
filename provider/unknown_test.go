package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestModelKnown_WalksEveryAttributeRenderingReads: an unknown value anywhere rendering reads
// (deep in a nested block too) makes the model unknown; the connection, timeouts, wait and the
// upload token do not.
func TestModelKnown_WalksEveryAttributeRenderingReads(t *testing.T) {
	t.Parallel()
	m := trainingJobModel{ModelExport: &modelExportModel{Var: types.StringUnknown()}}
	if modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("an unknown model_export.var was not noticed")
	}
	m = trainingJobModel{Wait: types.StringUnknown(), UploadToken: types.StringUnknown()}
	m.Kubernetes = types.ObjectUnknown(nil)
	if !modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("wait, upload_token or kubernetes unknown made the model unknown; rendering reads none of them")
	}
	m = trainingJobModel{Phase: types.StringUnknown(), FileServerURL: types.StringUnknown()}
	if !modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("what only the provider sets (phase, file_server_url), unknown in every plan, made the model unknown")
	}
	m = trainingJobModel{}
	m.Name = types.StringUnknown()
	if modelKnown(&m, trainingJobWorkload.skips()) {
		t.Error("an unknown name (an embedded field) was not noticed")
	}
	c := cubeModel{Tolerations: []tolerationModel{{Key: types.StringUnknown()}}}
	if modelKnown(&c, cubeWorkload.skips()) {
		t.Error("an unknown toleration key was not noticed")
	}
	requests := types.MapValueMust(types.StringType, map[string]attr.Value{"cpu": types.StringUnknown(), "memory": types.StringValue("1Gi")})
	c = cubeModel{Resources: &resourcesModel{Requests: requests}}
	if modelKnown(&c, cubeWorkload.skips()) {
		t.Error("an unknown value in a known map (resources.requests.cpu) was not noticed")
	}
}

// TestReadable_UnknownWhereTheModelHoldsNoAttrValue: a configuration cannot be read into the
// model when a value it holds in a Go struct, pointer or slice is unknown, at any depth: a
// nested object, a list element, an object in a list inside a nested object. An unknown
// string, number or map, which the model holds as a types value, leaves it readable (see
// modelKnown for whether it can be rendered).
func TestReadable_UnknownWhereTheModelHoldsNoAttrValue(t *testing.T) {
	t.Parallel()
	typ := cubeSchema(context.Background()).Type().TerraformType(context.Background()).(tftypes.Object)
	cube := func(attrs map[string]tftypes.Value) tftypes.Value {
		all := map[string]tftypes.Value{}
		for name, at := range typ.AttributeTypes {
			all[name] = tftypes.NewValue(at, nil)
		}
		for name, v := range attrs {
			all[name] = v
		}
		return tftypes.NewValue(typ, all)
	}
	policy := typ.AttributeTypes["network_policy"].(tftypes.Object)
	allow := policy.AttributeTypes["allow_from"].(tftypes.List)
	peer := allow.ElementType.(tftypes.Object)
	labels := peer.AttributeTypes["pod_labels"].(tftypes.Map)
	peerWith := func(v tftypes.Value) tftypes.Value {
		return tftypes.NewValue(peer, map[string]tftypes.Value{"namespace_labels": tftypes.NewValue(labels, nil), "pod_labels": v})
	}
	policyWith := func(allowFrom tftypes.Value) tftypes.Value {
		return tftypes.NewValue(policy, map[string]tftypes.Value{"enabled": tftypes.NewValue(tftypes.Bool, nil), "allow_from": allowFrom})
	}
	unknown := func(t tftypes.Type) tftypes.Value { return tftypes.NewValue(t, tftypes.UnknownValue) }
	for name, c := range map[string]struct {
		network tftypes.Value
		want    bool
	}{
		"known":                          {policyWith(tftypes.NewValue(allow, []tftypes.Value{peerWith(tftypes.NewValue(labels, nil))})), true},
		"the object":                     {unknown(policy), false},
		"a list in it":                   {policyWith(unknown(allow)), false},
		"an element of that list":        {policyWith(tftypes.NewValue(allow, []tftypes.Value{unknown(peer)})), false},
		"a map in the element":           {policyWith(tftypes.NewValue(allow, []tftypes.Value{peerWith(unknown(labels))})), true},
		"a value of the map in the list": {policyWith(tftypes.NewValue(allow, []tftypes.Value{peerWith(tftypes.NewValue(labels, map[string]tftypes.Value{"app": unknown(tftypes.String)}))})), true},
	} {
		if got := readable[cubeModel](cube(map[string]tftypes.Value{"network_policy": c.network})); got != c.want {
			t.Errorf("network_policy, %s unknown: readable = %v, want %v", name, got, c.want)
		}
	}
	if readable[cubeModel](cube(map[string]tftypes.Value{"name": unknown(tftypes.String)})) != true {
		t.Error("an unknown name (a types.String of the embedded workload attributes) made the cube unreadable")
	}
}
