package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

var (
	_ resource.ResourceWithConfigure      = (*servingResource)(nil)
	_ resource.ResourceWithImportState    = (*servingResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*servingResource)(nil)
	_ resource.ResourceWithValidateConfig = (*servingResource)(nil)
)

// NewServingResource is the ctr_serving resource.
func NewServingResource() resource.Resource { return &servingResource{} }

type servingResource struct{ data *providerData }

func (r *servingResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_serving"
}

func (r *servingResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if data, ok := req.ProviderData.(*providerData); ok {
		r.data = data
	}
}

func (r *servingResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = servingSchema(ctx)
}

func (r *servingResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	if unknownAttrs(req.Config.Raw, servingObjects...) {
		return
	}
	var m servingModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.known() {
		return
	}
	s, d := m.serving(ctx)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(settingErrors("Serving", s.Validate())...)
}

func (r *servingResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	if unknownAttrs(req.Plan.Raw, servingObjects...) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("manifests"), types.MapUnknown(types.StringType))...)
		return
	}
	var plan servingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !plan.known() {
		plan.Manifests = types.MapUnknown(types.StringType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	s, d := plan.serving(ctx)
	resp.Diagnostics.Append(d...)
	set, err := stack.RenderServing(s)
	if err != nil {
		resp.Diagnostics.Append(renderError("Serving", err)...)
		return
	}
	plan.Manifests = manifestsValue(ctx, set, &resp.Diagnostics)
	plan.URL = types.StringValue(s.Defaulted().URL())
	plan.ID = types.StringValue(s.Namespace + "/" + s.Name)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *servingResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan servingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	timeout, d := plan.Timeouts.Create(ctx, 15*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.apply(ctx, &plan, &resp.State, &resp.Diagnostics)
}

func (r *servingResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan servingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	timeout, d := plan.Timeouts.Update(ctx, 15*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.apply(ctx, &plan, &resp.State, &resp.Diagnostics)
}

func (r *servingResource) apply(ctx context.Context, plan *servingModel, state stateLike, diags *diag.Diagnostics) {
	s, d := plan.serving(ctx)
	diags.Append(d...)
	set, err := stack.RenderServing(s)
	if err != nil {
		diags.AddError("Apply Serving Error", err.Error())
		return
	}
	kc, d := kubeClient(ctx, plan.Kubernetes, r.data)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	if !applySet(ctx, kc, set, s.Namespace, stack.Owner(stack.ServingType, s.Name), stack.ServingKinds, fmt.Sprintf("serving %s/%s", s.Namespace, s.Name), diags) {
		return
	}
	plan.Manifests = manifestsValue(ctx, set, diags)
	plan.URL = types.StringValue(s.Defaulted().URL())
	plan.ID = types.StringValue(s.Namespace + "/" + s.Name)
	diags.Append(state.Set(ctx, plan)...)
	if _, err := kc.WaitFor(ctx, set.Find(stack.ServingDeploymentKey(s.Name)), kube.DeploymentAvailable); err != nil {
		diags.AddError("Apply Serving Error", "Paddle Serving did not roll out: "+err.Error())
	}
}

func (r *servingResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st servingModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	kc, d := kubeClient(ctx, st.Kubernetes, r.data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if st.CubeConf.IsNull() && !r.importSettings(ctx, kc, &st, &resp.Diagnostics) {
		if !resp.Diagnostics.HasError() {
			resp.State.RemoveResource(ctx)
		}
		return
	}
	s, d := st.serving(ctx)
	resp.Diagnostics.Append(d...)
	set, err := stack.RenderServing(s)
	if err != nil {
		resp.Diagnostics.AddError("Read Serving Error", err.Error())
		return
	}
	manifests, live := readSet(ctx, kc, set, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if len(live) == 0 {
		resp.State.RemoveResource(ctx)
		return
	}
	st.Manifests = manifests
	st.URL = types.StringValue(s.Defaulted().URL())
	st.ID = types.StringValue(s.Namespace + "/" + s.Name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *servingResource) importSettings(ctx context.Context, kc *kube.Client, st *servingModel, diags *diag.Diagnostics) bool {
	ns, name := st.Namespace.ValueString(), st.Name.ValueString()
	live, err := kc.Get(ctx, stack.ServingDeploymentRef(ns, name))
	if err != nil || live == nil {
		if err != nil {
			diags.AddError("Import Serving Error", err.Error())
		}
		return false
	}
	s, err := stack.ServingFromSettings(live.GetAnnotations()[stack.SettingsAnnotation])
	if err != nil {
		diags.AddError("Import Serving Error", fmt.Sprintf("Deployment %s/%s was not created by this provider: %s", ns, name, err))
		return false
	}
	st.Name, st.Namespace, st.Stack, st.Image = types.StringValue(s.Name), types.StringValue(s.Namespace), optionalString(s.Stack), optionalString(s.Image)
	st.Replicas, st.Port, st.ServiceType = types.Int64Value(int64(s.Replicas)), types.Int64Value(int64(s.Port)), optionalString(s.ServiceType)
	st.ModelURL, st.CubeConf, st.Env = optionalString(s.ModelURL), types.StringValue(s.CubeConf), optionalStringMap(ctx, s.Env, diags)
	st.Args = types.ListNull(types.StringType)
	if s.Args != nil {
		v, d := types.ListValueFrom(ctx, types.StringType, s.Args)
		diags.Append(d...)
		st.Args = v
	}
	st.Resources = nil
	st.SecurityContext = securityContextFromStack(ctx, s.SecurityContext, diags)
	if s.Requests != nil || s.Limits != nil {
		st.Resources = &resourcesModel{Requests: optionalStringMap(ctx, s.Requests, diags), Limits: optionalStringMap(ctx, s.Limits, diags)}
	}
	return !diags.HasError()
}

func (r *servingResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st servingModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	timeout, d := st.Timeouts.Delete(ctx, 10*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kc, d := kubeClient(ctx, st.Kubernetes, r.data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := st.Namespace.ValueString(), st.Name.ValueString()
	if err := kc.DeleteAll(ctx, ns, stack.Owner(stack.ServingType, name), stack.ServingKinds, stack.ControllerKinds); err != nil {
		resp.Diagnostics.AddError("Delete Serving Error", fmt.Sprintf("Could not delete everything serving %s/%s owns: %s", ns, name, err))
	}
}

func (r *servingResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByNamespaceName(ctx, req, resp)
}
