package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// servingModel is the Terraform state of ctr_serving.
type servingModel struct {
	ID              types.String          `tfsdk:"id"`
	Name            types.String          `tfsdk:"name"`
	Namespace       types.String          `tfsdk:"namespace"`
	Stack           types.String          `tfsdk:"stack"`
	Image           types.String          `tfsdk:"image"`
	Replicas        types.Int64           `tfsdk:"replicas"`
	Port            types.Int64           `tfsdk:"port"`
	ServiceType     types.String          `tfsdk:"service_type"`
	ModelURL        types.String          `tfsdk:"model_url"`
	Args            types.List            `tfsdk:"args"`
	Env             types.Map             `tfsdk:"env"`
	Resources       *resourcesModel       `tfsdk:"resources"`
	SecurityContext *securityContextModel `tfsdk:"security_context"`
	CubeConf        types.String          `tfsdk:"cube_conf"`
	Kubernetes      types.Object          `tfsdk:"kubernetes"`
	Timeouts        timeouts.Value        `tfsdk:"timeouts"`
	Manifests       types.Map             `tfsdk:"manifests"`
	URL             types.String          `tfsdk:"url"`
}

func (m *servingModel) known() bool {
	vals := append([]attr.Value{m.Name, m.Namespace, m.Stack, m.Image, m.Replicas, m.Port, m.ServiceType, m.ModelURL, m.Args, m.Env, m.CubeConf},
		m.SecurityContext.values()...)
	for _, v := range vals {
		if v.IsUnknown() {
			return false
		}
	}
	return m.Resources == nil || (!m.Resources.Requests.IsUnknown() && !m.Resources.Limits.IsUnknown())
}

func (m *servingModel) serving(ctx context.Context) (stack.Serving, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := stack.Serving{Name: m.Name.ValueString(), Namespace: m.Namespace.ValueString(), Stack: m.Stack.ValueString(), Image: m.Image.ValueString(),
		Replicas: int32(m.Replicas.ValueInt64()), Port: int32(m.Port.ValueInt64()), ServiceType: m.ServiceType.ValueString(),
		ModelURL: m.ModelURL.ValueString(), CubeConf: m.CubeConf.ValueString()}
	s.SecurityContext = m.SecurityContext.stack(ctx, &diags)
	if !m.Args.IsNull() {
		diags.Append(m.Args.ElementsAs(ctx, &s.Args, false)...)
	}
	if !m.Env.IsNull() {
		diags.Append(m.Env.ElementsAs(ctx, &s.Env, false)...)
	}
	if r := m.Resources; r != nil {
		if !r.Requests.IsNull() {
			diags.Append(r.Requests.ElementsAs(ctx, &s.Requests, false)...)
		}
		if !r.Limits.IsNull() {
			diags.Append(r.Limits.ElementsAs(ctx, &s.Limits, false)...)
		}
	}
	return s, diags
}
