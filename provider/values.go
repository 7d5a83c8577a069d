package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// Conversions between Terraform values and stack's settings. Towards stack, null and unknown
// become Go's zero ("not set"); back from settings read from the cluster (import), a zero
// value becomes null, as it was in the configuration.

func unknownManifests() types.Map { return types.MapUnknown(types.StringType) }

func stringList(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

func stringMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	var out map[string]string
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	return out
}

// int32Ptr is a number whose zero is a setting of its own: null stays nil ("the default").
func int32Ptr(v types.Int64) *int32 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	n := int32(v.ValueInt64())
	return &n
}

// optionalInt32 is int32Ptr's way back: nil is null.
func optionalInt32(n *int32) types.Int64 {
	if n == nil {
		return types.Int64Null()
	}
	return types.Int64Value(int64(*n))
}

func optionalString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func optionalInt64(n int64) types.Int64 {
	if n == 0 {
		return types.Int64Null()
	}
	return types.Int64Value(n)
}

func optionalStringMap(ctx context.Context, m map[string]string, diags *diag.Diagnostics) types.Map {
	if m == nil {
		return types.MapNull(types.StringType)
	}
	v, d := types.MapValueFrom(ctx, types.StringType, m)
	diags.Append(d...)
	return v
}

func optionalStringList(ctx context.Context, l []string, diags *diag.Diagnostics) types.List {
	if l == nil {
		return types.ListNull(types.StringType)
	}
	v, d := types.ListValueFrom(ctx, types.StringType, l)
	diags.Append(d...)
	return v
}

// resourcesModel is the `resources` object of ctr_cube and ctr_serving.
type resourcesModel struct {
	Requests types.Map `tfsdk:"requests"`
	Limits   types.Map `tfsdk:"limits"`
}

func (r *resourcesModel) stack(ctx context.Context, diags *diag.Diagnostics) (requests, limits map[string]string) {
	if r == nil {
		return nil, nil
	}
	return stringMap(ctx, r.Requests, diags), stringMap(ctx, r.Limits, diags)
}

func resourcesFromStack(ctx context.Context, requests, limits map[string]string, diags *diag.Diagnostics) *resourcesModel {
	if requests == nil && limits == nil {
		return nil
	}
	return &resourcesModel{Requests: optionalStringMap(ctx, requests, diags), Limits: optionalStringMap(ctx, limits, diags)}
}

// tolerationModel is one of ctr_cube's `tolerations`.
type tolerationModel struct {
	Key      types.String `tfsdk:"key"`
	Operator types.String `tfsdk:"operator"`
	Value    types.String `tfsdk:"value"`
	Effect   types.String `tfsdk:"effect"`
}

func tolerations(ts []tolerationModel) []stack.Toleration {
	var out []stack.Toleration
	for _, t := range ts {
		out = append(out, stack.Toleration{Key: t.Key.ValueString(), Operator: t.Operator.ValueString(), Value: t.Value.ValueString(), Effect: t.Effect.ValueString()})
	}
	return out
}

func tolerationsFromStack(ts []stack.Toleration) []tolerationModel {
	var out []tolerationModel
	for _, t := range ts {
		out = append(out, tolerationModel{Key: optionalString(t.Key), Operator: optionalString(t.Operator), Value: optionalString(t.Value), Effect: optionalString(t.Effect)})
	}
	return out
}
