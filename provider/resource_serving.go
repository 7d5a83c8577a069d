package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
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

func (r *servingResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_serving"
}

func (r *servingResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if data, ok := req.ProviderData.(*providerData); ok {
		r.data = data
	}
}

func (r *servingResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Paddle Serving with the CTR model, reading sparse parameters from `ctr_cube`: a Deployment started with " +
			"`--enable_cube=true`, the cube's `cube.conf` mounted from a ConfigMap at `/serving/conf/cube.conf`, and a Service. A changed " +
			"`cube.conf` rolls the pods (a checksum annotation), because Serving reads it only at start. Apply waits for the rollout.\n\n" +
			"**Pods.** " + hardenedDefaults + " Paddle Serving's images run as root and write inside their own filesystem (the unpacked model), " +
			"so neither a non-root user nor a read-only root filesystem is forced. `security_context` relaxes these defaults. " +
			"The serving pods carry `app.kubernetes.io/part-of = <stack>` and `app.kubernetes.io/component = serving`: a `ctr_cube` with the " +
			"same `stack` in the same namespace admits exactly these pods to its shards through its NetworkPolicy.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name`.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceStr(), MarkdownDescription: "Name of the Deployment and Service.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, stack.MaxNameLength),
					stringvalidator.RegexMatches(dnsLabelRE, "must be lowercase letters, digits and '-', starting and ending with a letter or digit")}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("default"), PlanModifiers: replaceStr(),
				MarkdownDescription: "Namespace. Defaults to `default`."},
			"stack": schema.StringAttribute{Optional: true, MarkdownDescription: "The `app.kubernetes.io/part-of` label. Defaults to `name`."},
			"image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultServingImage),
				MarkdownDescription: "Paddle Serving image with the CTR model's serving program. Defaults to `" + stack.DefaultServingImage + "`."},
			"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1), MarkdownDescription: "Serving pods. Defaults to `1`.",
				Validators: []validator.Int64{int64validator.AtLeast(1)}},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultServingPort),
				MarkdownDescription: fmt.Sprintf("Port of the pods and the Service. Defaults to `%d`.", stack.DefaultServingPort), Validators: []validator.Int64{int64validator.Between(1, 65535)}},
			"service_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("ClusterIP"),
				MarkdownDescription: "One of " + quoted(stack.ServiceTypes) + ". Defaults to `ClusterIP`.", Validators: []validator.String{stringvalidator.OneOf(stack.ServiceTypes...)}},
			"model_url": schema.StringAttribute{Optional: true, MarkdownDescription: "Where the dense model is fetched from (`MODEL_URL`), e.g. the training job's file server."},
			"args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Container arguments. Defaults to `[\"--port=<port>\", \"--enable_cube=true\"]`."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Extra environment variables."},
			"resources": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Requests and limits of each pod.",
				Attributes: map[string]schema.Attribute{
					"requests": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ cpu = \"4\" }`."},
					"limits":   schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ memory = \"8Gi\" }`."},
				}},
			"cube_conf": schema.StringAttribute{Required: true, MarkdownDescription: "The `cube.conf` to mount: `ctr_cube.<name>.cube_conf`."},
			"security_context": securityContextAttribute("the serving pods",
				"Paddle Serving's images run as root: no user and no read-only root filesystem are forced on them. If the image needs a "+
					"capability back (e.g. `tar` restoring file owners needs `CHOWN`), add it with `add_capabilities`."),
			"kubernetes": connectionResourceAttribute(),
			"timeouts":   timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
			"manifests": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Every Kubernetes object this resource owns, `apiVersion/Kind/name` -> YAML, rendered at plan time."},
			"url": schema.StringAttribute{Computed: true, MarkdownDescription: "In-cluster URL of the serving Service."},
		},
	}
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
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	for _, e := range s.Validate() {
		resp.Diagnostics.AddAttributeError(fieldPath(e.Path), "Invalid Serving Setting", "Attribute "+e.Path+": "+e.Detail)
	}
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
		resp.Diagnostics.AddError("Invalid Serving", err.Error())
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
	if _, err := kc.WaitFor(ctx, set.Find("apps/v1/Deployment/"+s.Name), kube.DeploymentAvailable, progressInterval); err != nil {
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
	live, err := kc.Get(ctx, objectFromKey("apps/v1/Deployment/"+ns+"/"+name))
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
	if err := kc.DeleteAll(ctx, ns, stack.Owner(stack.ServingType, name), stack.ServingKinds, stack.ControllerKinds, progressInterval); err != nil {
		resp.Diagnostics.AddError("Delete Serving Error", fmt.Sprintf("Could not delete everything serving %s/%s owns: %s", ns, name, err))
	}
}

func (r *servingResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || ns == "" || name == "" {
		resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("Expected NAMESPACE/NAME; got %q.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
