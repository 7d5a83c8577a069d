package provider

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"sigs.k8s.io/yaml"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

var (
	_ resource.ResourceWithConfigure      = (*trainingJobResource)(nil)
	_ resource.ResourceWithImportState    = (*trainingJobResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*trainingJobResource)(nil)
	_ resource.ResourceWithValidateConfig = (*trainingJobResource)(nil)
)

// NewTrainingJobResource is the ctr_training_job resource.
func NewTrainingJobResource() resource.Resource { return &trainingJobResource{} }

type trainingJobResource struct {
	data *providerData
}

func (r *trainingJobResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_training_job"
}

func (r *trainingJobResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = trainingJobSchema(ctx)
}

func (r *trainingJobResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	data, ok := req.ProviderData.(*providerData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected Provider Data", fmt.Sprintf("Expected *providerData, got %T. Please report this issue to the provider developers.", req.ProviderData))
		return
	}
	r.data = data
}

// ValidateConfig refuses bad settings at plan time, each with its attribute path. Values not
// known until apply are skipped here and checked again when they are.
func (r *trainingJobResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	if unknownAttrs(req.Config.Raw, trainingJobObjects...) {
		return
	}
	var m trainingJobModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.known() || m.MinAvailable.IsUnknown() {
		return
	}
	j, diags := m.job(ctx, m.MinAvailable)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	resp.Diagnostics.Append(settingErrors("Training Job", j.Validate())...)
}

// ModifyPlan renders the Kubernetes objects at plan time, so that `manifests` shows the
// field-level change, and explains any replacement.
func (r *trainingJobResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	if unknownAttrs(req.Plan.Raw, trainingJobObjects...) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("manifests"), types.MapUnknown(types.StringType))...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("min_available"), types.Int64Unknown())...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("upload_token"), types.StringUnknown())...)
		return
	}
	var plan, config trainingJobModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !plan.known() || config.MinAvailable.IsUnknown() {
		plan.Manifests = types.MapUnknown(types.StringType)
		plan.FileServerURL, plan.DonefileURL = types.StringUnknown(), types.StringUnknown()
		plan.UploadToken = types.StringUnknown() // whether uploads take a token may depend on what is unknown
		if config.MinAvailable.IsNull() {
			plan.MinAvailable = types.Int64Unknown()
		}
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	j, diags := plan.job(ctx, config.MinAvailable)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	j.ProviderVersion = providerVersion(r.data)
	d := j.Defaulted()
	if config.MinAvailable.IsNull() {
		// The gang is the whole job unless configured: follows replica changes.
		plan.MinAvailable = types.Int64Value(int64(d.MinAvailable))
		j.MinAvailable = d.MinAvailable
	}
	set, err := stack.RenderTrainingJob(j)
	if err != nil {
		resp.Diagnostics.Append(renderError("Training Job", err)...)
		return
	}
	manifests, err := set.Manifests()
	if err != nil {
		resp.Diagnostics.AddError("Render Training Job Error", err.Error())
		return
	}
	mv, diags := types.MapValueFrom(ctx, types.StringType, manifests)
	resp.Diagnostics.Append(diags...)
	plan.Manifests = mv
	plan.FileServerURL = types.StringValue(d.FileServerURL())
	plan.DonefileURL = types.StringValue(d.DonefileURL())
	plan.ID = types.StringValue(j.Namespace + "/" + j.Name)
	switch {
	case !plan.tokenUploads():
		plan.UploadToken = types.StringNull()
	case plan.UploadToken.IsNull():
		plan.UploadToken = types.StringUnknown() // generated at apply
	}
	var reasons []string
	if !req.State.Raw.IsNull() {
		var state trainingJobModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if !state.Manifests.Equal(plan.Manifests) {
			// Drift alone (no configuration change) still means an apply, after which the
			// phase may differ: Terraform must not promise the old one.
			plan.Phase = types.StringUnknown()
		}
		reasons = replaceReasons(&state, &plan)
		if state.tokenUploads() != plan.tokenUploads() {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("file_server").AtName("upload"))
		}
		if len(reasons) == 0 && volcanoTasksDiffer(state.Manifests, plan.Manifests, stack.VolcanoJobKey(j.Name)) {
			// Volcano refuses any change to a submitted job's tasks, even one that comes from
			// a new provider version rendering them differently (e.g. hardened pods).
			reasons = append(reasons, "the training pods' template (rendered differently by this provider version)")
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("manifests"))
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)

	if len(reasons) > 0 {
		keep := "The model-output volume is recreated empty"
		if d.ModelOutput.ExistingClaim != "" {
			keep = "The existing model-output claim " + d.ModelOutput.ExistingClaim + " is kept"
		}
		resp.Diagnostics.AddWarning("Training Job Will Be Replaced",
			fmt.Sprintf("Changing %s replaces training job %s/%s: Volcano does not allow changing the tasks of a submitted job "+
				"(only min_available changes in place). The running job and its pods are deleted and training starts "+
				"again from the beginning. %s.", strings.Join(reasons, ", "), j.Namespace, j.Name, keep))
	}
}

func (r *trainingJobResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan trainingJobModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, 20*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.apply(ctx, &plan, &resp.State, &resp.Diagnostics, "Create")
}

func (r *trainingJobResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan trainingJobModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, 20*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.apply(ctx, &plan, &resp.State, &resp.Diagnostics, "Update")
}

// stateLike is the part of tfsdk.State that apply needs.
type stateLike interface {
	Set(context.Context, any) diag.Diagnostics
}

// apply converges the cluster to the plan: server-side apply, prune, then wait for the
// file server and for the job to run. State is saved before waiting, so a failed wait
// leaves a resource Terraform knows about (tainted) rather than orphaned objects.
func (r *trainingJobResource) apply(ctx context.Context, plan *trainingJobModel, state stateLike, diags *diag.Diagnostics, verb string) {
	switch {
	case !plan.tokenUploads():
		plan.UploadToken = types.StringNull()
	case plan.UploadToken.IsUnknown() || plan.UploadToken.IsNull():
		tok, err := newToken()
		if err != nil {
			diags.AddError(verb+" Training Job Error", "generate the upload token: "+err.Error())
			return
		}
		plan.UploadToken = types.StringValue(tok)
	}
	j, d := plan.job(ctx, plan.MinAvailable)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	j.ProviderVersion = providerVersion(r.data)
	set, err := stack.RenderTrainingJob(j)
	if err != nil {
		diags.AddError(verb+" Training Job Error", err.Error())
		return
	}
	c, d := kubeClient(ctx, plan.Kubernetes, r.data)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	owner := stack.Owner(stack.TrainingJobType, j.Name)
	if _, err := c.Apply(ctx, set); err != nil {
		diags.AddError(verb+" Training Job Error", fmt.Sprintf("Could not apply the objects of training job %s/%s: %s", j.Namespace, j.Name, err))
		return
	}
	if _, err := c.Prune(ctx, j.Namespace, owner, stack.TrainingJobKinds, set); err != nil {
		diags.AddError(verb+" Training Job Error", "Could not remove objects that are no longer rendered: "+err.Error())
		return
	}
	plan.Phase = types.StringValue("Pending")
	diags.Append(state.Set(ctx, plan)...)

	d0 := j.Defaulted()
	fs, job := set.Find(stack.FileServerKey(j.Name)), set.Find(stack.VolcanoJobKey(j.Name))
	tflog.Info(ctx, fmt.Sprintf("waiting for %s and %s to run", kube.Describe(fs), kube.Describe(job)))
	if _, err := c.WaitFor(ctx, fs, kube.DeploymentAvailable); err != nil {
		diags.AddError(verb+" Training Job Error", "The file server did not become available: "+err.Error())
		return
	}
	live, err := c.WaitFor(ctx, job, kube.VolcanoJobRunning)
	if err != nil {
		diags.AddError(verb+" Training Job Error", fmt.Sprintf("Training job %s/%s did not reach Running (gang of %d pods): %s. "+
			"If it stays Pending, the cluster may lack room for the whole gang; lower min_available or the task resources.",
			j.Namespace, j.Name, d0.MinAvailable, err))
		return
	}
	plan.Phase = types.StringValue(kube.VolcanoJobPhase(live))
	diags.Append(state.Set(ctx, plan)...)
}

func (r *trainingJobResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st trainingJobModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, diags := kubeClient(ctx, st.Kubernetes, r.data)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if st.Image.IsNull() {
		// Just imported: only namespace and name are known. The settings come from the
		// annotation on the Volcano job, the secret from its Secret.
		if !r.importSettings(ctx, c, &st, &resp.Diagnostics) {
			if !resp.Diagnostics.HasError() {
				resp.State.RemoveResource(ctx)
			}
			return
		}
	}
	j, diags := st.job(ctx, st.MinAvailable)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	j.ProviderVersion = providerVersion(r.data)
	set, err := stack.RenderTrainingJob(j)
	if err != nil {
		resp.Diagnostics.AddError("Read Training Job Error", err.Error())
		return
	}
	live := map[string]string{}
	phase := "Missing"
	for _, o := range set {
		u, err := c.Get(ctx, o.Object)
		if err != nil {
			resp.Diagnostics.AddError("Read Training Job Error", err.Error())
			return
		}
		if u == nil {
			continue
		}
		y, err := stack.YAML(kube.Project(o.Object, u))
		if err != nil {
			resp.Diagnostics.AddError("Read Training Job Error", err.Error())
			return
		}
		live[o.Key] = y
		if o.Key == stack.VolcanoJobKey(j.Name) {
			phase = kube.VolcanoJobPhase(u)
		}
	}
	if len(live) == 0 {
		tflog.Warn(ctx, fmt.Sprintf("training job %s/%s: none of its objects exist any more; removing it from state", j.Namespace, j.Name))
		resp.State.RemoveResource(ctx)
		return
	}
	mv, diags := types.MapValueFrom(ctx, types.StringType, live)
	resp.Diagnostics.Append(diags...)
	st.Manifests = mv
	st.Phase = types.StringValue(phase)
	d := j.Defaulted()
	st.FileServerURL, st.DonefileURL = types.StringValue(d.FileServerURL()), types.StringValue(d.DonefileURL())
	st.ID = types.StringValue(j.Namespace + "/" + j.Name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

// importSettings fills st from the cluster. It returns false when the job does not exist.
func (r *trainingJobResource) importSettings(ctx context.Context, c *kube.Client, st *trainingJobModel, diags *diag.Diagnostics) bool {
	ns, name := st.Namespace.ValueString(), st.Name.ValueString()
	live, err := c.Get(ctx, stack.VolcanoJobRef(ns, name))
	if err != nil {
		diags.AddError("Import Training Job Error", err.Error())
		return false
	}
	if live == nil {
		return false
	}
	j, err := stack.TrainingJobFromSettings(live.GetAnnotations()[stack.SettingsAnnotation])
	if err != nil {
		diags.AddError("Import Training Job Error", fmt.Sprintf("Volcano job %s/%s was not created by this provider "+
			"(its %s annotation is missing or unreadable): %s", ns, name, stack.SettingsAnnotation, err))
		return false
	}
	if j.Dataset != nil {
		secret, err := c.Get(ctx, stack.DatasetSecretRef(ns, name))
		if err != nil {
			diags.AddError("Import Training Job Error", err.Error())
			return false
		}
		j.Dataset.HDFSUGI = stack.DatasetUGI(secret)
	}
	if j.FileServer.TokenUploads() {
		secret, err := c.Get(ctx, stack.UploadSecretRef(ns, name))
		if err != nil {
			diags.AddError("Import Training Job Error", err.Error())
			return false
		}
		j.UploadToken = stack.UploadToken(secret)
	}
	diags.Append(st.fromJob(ctx, j)...)
	return !diags.HasError()
}

func (r *trainingJobResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st trainingJobModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := st.Timeouts.Delete(ctx, 10*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, diags := kubeClient(ctx, st.Kubernetes, r.data)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := st.Namespace.ValueString(), st.Name.ValueString()
	err := c.DeleteAll(ctx, ns, stack.Owner(stack.TrainingJobType, name), stack.TrainingJobKinds, stack.ControllerKinds)
	if err != nil {
		resp.Diagnostics.AddError("Delete Training Job Error", fmt.Sprintf("Could not delete everything training job %s/%s owns: %s", ns, name, err))
	}
}

func (r *trainingJobResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByNamespaceName(ctx, req, resp)
}

// volcanoTasksDiffer reports whether the tasks of the Volcano Job (manifests key) differ
// between the state's manifests and the plan's. Unknown or missing manifests do not differ.
func volcanoTasksDiffer(state, plan types.Map, key string) bool {
	tasks := func(m types.Map) (any, bool) {
		if m.IsNull() || m.IsUnknown() {
			return nil, false
		}
		v, ok := m.Elements()[key].(types.String)
		if !ok || v.IsNull() || v.IsUnknown() {
			return nil, false
		}
		var job struct {
			Spec struct {
				Tasks any `json:"tasks"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(v.ValueString()), &job); err != nil {
			return nil, false
		}
		return job.Spec.Tasks, true
	}
	a, okA := tasks(state)
	b, okB := tasks(plan)
	return okA && okB && !reflect.DeepEqual(a, b)
}
