package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

var (
	_ resource.ResourceWithConfigure      = (*cubeResource)(nil)
	_ resource.ResourceWithImportState    = (*cubeResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*cubeResource)(nil)
	_ resource.ResourceWithValidateConfig = (*cubeResource)(nil)
)

// NewCubeResource is the ctr_cube resource.
func NewCubeResource() resource.Resource { return &cubeResource{} }

type cubeResource struct{ data *providerData }

func (r *cubeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cube"
}

func (r *cubeResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if data, ok := req.ProviderData.(*providerData); ok {
		r.data = data
	}
}

// providerVersion is the provider's version, which picks the default images of this
// repository (stack.CubeImage) for ctr_cube and the training job's file server.
func providerVersion(data *providerData) string {
	if data == nil {
		return ""
	}
	return data.version
}

func (r *cubeResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = cubeSchema(ctx)
}

func (r *cubeResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	if unknownAttrs(req.Config.Raw, cubeObjects...) {
		return
	}
	var m cubeModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.known() {
		return
	}
	c, d := m.cube(ctx)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(settingErrors("Cube", c.Validate())...)
}

func (r *cubeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	if unknownAttrs(req.Plan.Raw, cubeObjects...) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("manifests"), types.MapUnknown(types.StringType))...)
		return
	}
	var plan cubeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Image.IsUnknown() && req.State.Raw.IsNull() {
		plan.Image = types.StringValue(stack.CubeImage(providerVersion(r.data)))
	}
	if !plan.known() {
		plan.Manifests, plan.CubeConf = types.MapUnknown(types.StringType), types.StringUnknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	c, d := plan.cube(ctx)
	resp.Diagnostics.Append(d...)
	set, err := stack.RenderCube(c)
	if err != nil {
		resp.Diagnostics.Append(renderError("Cube", err)...)
		return
	}
	plan.computed(ctx, c, set, &resp.Diagnostics)
	if !req.State.Raw.IsNull() {
		var state cubeModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if !state.Manifests.Equal(plan.Manifests) {
			plan.ServedVersion, plan.ServingReplicas = types.StringUnknown(), types.ListUnknown(types.Int64Type)
		}
		if o, n := state.Shards.ValueInt64(), plan.Shards.ValueInt64(); o != n {
			resp.Diagnostics.AddWarning("Cube Will Be Re-sharded",
				fmt.Sprintf("Changing shards from %d to %d re-shards cube %s/%s: keys move between shards (shard = key %% shards). "+
					"The transfer restarts and rebuilds every shard from the last model; cube.conf changes, so ctr_serving pods roll. "+
					"Until the new layout serves, Paddle Serving may miss keys. Removed shards are deleted once the new layout serves.", o, n, c.Namespace, c.Name))
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *cubeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan cubeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.ControlToken.IsUnknown() || plan.ControlToken.IsNull() {
		tok, err := newToken()
		if err != nil {
			resp.Diagnostics.AddError("Create Cube Error", "generate the control token: "+err.Error())
			return
		}
		plan.ControlToken = types.StringValue(tok)
	}
	timeout, d := plan.Timeouts.Create(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.apply(ctx, &plan, nil, &resp.State, &resp.Diagnostics)
}

func (r *cubeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior cubeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := plan.Timeouts.Update(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.apply(ctx, &plan, &prior, &resp.State, &resp.Diagnostics)
}

// apply converges and waits until every cube pod exists at the current revision and the
// transfer is available. Pods turn Ready only once they serve a model, which may be later.
// Shrinking keeps the removed shards until the new layout serves (pruneAfterReshard).
func (r *cubeResource) apply(ctx context.Context, plan, prior *cubeModel, state stateLike, diags *diag.Diagnostics) {
	c, d := plan.cube(ctx)
	diags.Append(d...)
	set, err := stack.RenderCube(c)
	if err != nil {
		diags.AddError("Apply Cube Error", err.Error())
		return
	}
	kc, d := kubeClient(ctx, plan.Kubernetes, r.data)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	what := fmt.Sprintf("cube %s/%s", c.Namespace, c.Name)
	if _, err := kc.Apply(ctx, set); err != nil {
		diags.AddError("Apply Cube Error", fmt.Sprintf("Could not apply the objects of %s: %s", what, err))
		return
	}
	plan.computed(ctx, c, set, diags)
	plan.ServedVersion, plan.ServingReplicas = types.StringValue(""), types.ListNull(types.Int64Type)
	diags.Append(state.Set(ctx, plan)...)
	for _, o := range set {
		var cond kube.Condition
		switch o.Object.GetKind() {
		case "StatefulSet":
			cond = kube.StatefulSetRolledOut
		case "Deployment":
			cond = kube.DeploymentAvailable
		default:
			continue
		}
		if _, err := kc.WaitFor(ctx, o.Object, cond); err != nil {
			diags.AddError("Apply Cube Error", err.Error())
			return
		}
	}
	if prior != nil && prior.Shards.ValueInt64() > plan.Shards.ValueInt64() && prior.ServedVersion.ValueString() != "" {
		if !waitNewLayout(ctx, kc, c.Defaulted(), prior.ServedVersion.ValueString(), diags) {
			return
		}
	}
	if _, err := kc.Prune(ctx, c.Namespace, stack.Owner(stack.CubeType, c.Name), stack.CubeKinds, set); err != nil {
		diags.AddError("Apply Cube Error", "Could not remove objects that are no longer rendered: "+err.Error())
		return
	}
	var discard diag.Diagnostics // a fresh apply's pods may not serve yet: no warning here
	readServing(ctx, kc, c.Defaulted(), plan, &discard)
	diags.Append(state.Set(ctx, plan)...)
}

// waitNewLayout waits, on a shrinking cube, until the transfer serves a model rebuilt for the
// new shard count on every remaining shard, so that the removed shards go only when nothing
// needs them. When the transfer cannot be asked (no route from the API server to it), it
// says so and lets the prune go ahead.
func waitNewLayout(ctx context.Context, kc *kube.Client, c stack.Cube, before string, diags *diag.Diagnostics) bool {
	what := fmt.Sprintf("cube %s/%s", c.Namespace, c.Name)
	var unasked error
	var st string // what the transfer last said
	_, err := kc.Poll(ctx, 2*time.Second, func(ctx context.Context) (bool, string, error) {
		body, err := transferStatus(ctx, kc, c)
		if err != nil {
			unasked = err
			return true, "", nil
		}
		var ok bool
		ok, st, err = stack.CubeLayoutServes(body, c.Shards, before)
		if ok {
			tflog.Info(ctx, fmt.Sprintf("%s: the %d-shard layout serves (%s); removing the old shards", what, c.Shards, st))
		}
		return ok, fmt.Sprintf("%s: waiting for the %d-shard layout to serve before removing shards: %s", what, c.Shards, st), err
	})
	switch {
	case unasked != nil:
		diags.Append(diagnostics.Warning("Removed Shards Pruned Without Confirmation",
			fmt.Sprintf("Cube %s/%s: the transfer could not be asked whether the %d-shard layout serves yet (%s); the removed shards are deleted now",
				c.Namespace, c.Name, c.Shards, unasked), ""))
		return true
	case wait.Interrupted(err):
		diags.Append(diagnostics.Failed("Apply Cube Error", fmt.Sprintf("Cube %s/%s: the %d-shard layout did not serve in time (%s)", c.Namespace, c.Name, c.Shards, st),
			"The removed shards are kept; apply again to finish.", nil))
		return false
	case err != nil:
		diags.Append(diagnostics.Failed("Apply Cube Error", "Could not read the transfer's status", "", err))
		return false
	}
	return true
}

func (r *cubeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st cubeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	kc, d := kubeClient(ctx, st.Kubernetes, r.data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if st.DonefileURL.IsNull() && !r.importSettings(ctx, kc, &st, &resp.Diagnostics) {
		if !resp.Diagnostics.HasError() {
			resp.State.RemoveResource(ctx)
		}
		return
	}
	c, d := st.cube(ctx)
	resp.Diagnostics.Append(d...)
	set, err := stack.RenderCube(c)
	if err != nil {
		resp.Diagnostics.AddError("Read Cube Error", err.Error())
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
	st.computed(ctx, c, nil, &resp.Diagnostics)
	st.Manifests = manifests
	readServing(ctx, kc, c.Defaulted(), &st, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *cubeResource) importSettings(ctx context.Context, kc *kube.Client, st *cubeModel, diags *diag.Diagnostics) bool {
	ns, name := st.Namespace.ValueString(), st.Name.ValueString()
	live, err := kc.Get(ctx, stack.CubeTransferRef(ns, name))
	if err != nil || live == nil {
		if err != nil {
			diags.AddError("Import Cube Error", err.Error())
		}
		return false
	}
	c, err := stack.CubeFromSettings(live.GetAnnotations()[stack.SettingsAnnotation])
	if err != nil {
		diags.AddError("Import Cube Error", fmt.Sprintf("Deployment %s/%s-transfer was not created by this provider: %s", ns, name, err))
		return false
	}
	secret, err := kc.Get(ctx, stack.CubeControlSecretRef(ns, name))
	if err != nil {
		diags.AddError("Import Cube Error", err.Error())
		return false
	}
	token := stack.ControlToken(secret)
	st.Name, st.Namespace, st.Stack, st.Dict = types.StringValue(c.Name), types.StringValue(c.Namespace), optionalString(c.Stack), optionalString(c.Dict)
	st.Shards, st.Replicas = types.Int64Value(int64(c.Shards)), types.Int64Value(int64(c.Replicas))
	st.Image, st.DonefileURL, st.Mode = optionalString(c.Image), types.StringValue(c.DonefileURL), optionalString(c.Mode)
	st.Port, st.TransferPort = types.Int64Value(int64(c.Port)), types.Int64Value(int64(c.TransferPort))
	st.FilesPort = types.Int64Value(int64(c.Defaulted().TransferFilesPort))
	st.TransferStorage = optionalString(c.TransferStorage)
	d := c.Defaulted() // numbers the schema defaults are always in the settings; older settings left out zeros
	st.TimeoutMS, st.Retry, st.BackupRequestMS = types.Int64Value(int64(d.TimeoutMS)), types.Int64Value(int64(*d.Retry)), types.Int64Value(int64(c.BackupRequestMS))
	st.NodeSelector, st.ControlToken = optionalStringMap(ctx, c.NodeSelector, diags), optionalString(token)
	st.Resources, st.Storage, st.Tolerations = nil, nil, nil
	if c.Requests != nil || c.Limits != nil {
		st.Resources = &resourcesModel{Requests: optionalStringMap(ctx, c.Requests, diags), Limits: optionalStringMap(ctx, c.Limits, diags)}
	}
	if c.Storage != nil {
		st.Storage = &cubeStorageModel{Size: optionalString(c.Storage.Size), StorageClass: optionalString(c.Storage.StorageClass)}
	}
	for _, t := range c.Tolerations {
		st.Tolerations = append(st.Tolerations, tolerationModel{Key: optionalString(t.Key), Operator: optionalString(t.Operator), Value: optionalString(t.Value), Effect: optionalString(t.Effect)})
	}
	st.SecurityContext = securityContextFromStack(ctx, c.SecurityContext, diags)
	st.NetworkPolicy = nil
	if p := c.NetworkPolicy; p != nil {
		st.NetworkPolicy = &networkPolicyModel{Enabled: types.BoolValue(p.Enabled == nil || *p.Enabled)}
		for _, peer := range p.AllowFrom {
			st.NetworkPolicy.AllowFrom = append(st.NetworkPolicy.AllowFrom, networkPeerModel{
				NamespaceLabels: optionalStringMap(ctx, peer.NamespaceLabels, diags), PodLabels: optionalStringMap(ctx, peer.PodLabels, diags)})
		}
	}
	return !diags.HasError()
}

func (r *cubeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st cubeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := st.Timeouts.Delete(ctx, 10*time.Minute)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kc, d := kubeClient(ctx, st.Kubernetes, r.data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := st.Namespace.ValueString(), st.Name.ValueString()
	if err := kc.DeleteAll(ctx, ns, stack.Owner(stack.CubeType, name), stack.CubeKinds, stack.ControllerKinds); err != nil {
		resp.Diagnostics.AddError("Delete Cube Error", fmt.Sprintf("Could not delete everything cube %s/%s owns: %s", ns, name, err))
	}
}

func (r *cubeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByNamespaceName(ctx, req, resp)
}
