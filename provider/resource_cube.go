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
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
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

type cubeModel struct {
	ID              types.String          `tfsdk:"id"`
	Name            types.String          `tfsdk:"name"`
	Namespace       types.String          `tfsdk:"namespace"`
	Stack           types.String          `tfsdk:"stack"`
	Dict            types.String          `tfsdk:"dict"`
	Shards          types.Int64           `tfsdk:"shards"`
	Replicas        types.Int64           `tfsdk:"replicas"`
	Image           types.String          `tfsdk:"image"`
	DonefileURL     types.String          `tfsdk:"donefile_url"`
	Mode            types.String          `tfsdk:"mode"`
	Port            types.Int64           `tfsdk:"port"`
	TransferPort    types.Int64           `tfsdk:"transfer_port"`
	FilesPort       types.Int64           `tfsdk:"transfer_files_port"`
	Resources       *resourcesModel       `tfsdk:"resources"`
	Storage         *cubeStorageModel     `tfsdk:"storage"`
	TransferStorage types.String          `tfsdk:"transfer_storage"`
	NodeSelector    types.Map             `tfsdk:"node_selector"`
	Tolerations     []tolerationModel     `tfsdk:"tolerations"`
	TimeoutMS       types.Int64           `tfsdk:"timeout_ms"`
	Retry           types.Int64           `tfsdk:"retry"`
	BackupRequestMS types.Int64           `tfsdk:"backup_request_ms"`
	SecurityContext *securityContextModel `tfsdk:"security_context"`
	NetworkPolicy   *networkPolicyModel   `tfsdk:"network_policy"`
	ControlToken    types.String          `tfsdk:"control_token"`
	Kubernetes      types.Object          `tfsdk:"kubernetes"`
	Timeouts        timeouts.Value        `tfsdk:"timeouts"`
	Manifests       types.Map             `tfsdk:"manifests"`
	CubeConf        types.String          `tfsdk:"cube_conf"`
	Endpoints       types.List            `tfsdk:"endpoints"`
	TransferURL     types.String          `tfsdk:"transfer_url"`
	ServedVersion   types.String          `tfsdk:"served_version"`
	ServingReplicas types.List            `tfsdk:"serving_replicas"`
}

type resourcesModel struct {
	Requests types.Map `tfsdk:"requests"`
	Limits   types.Map `tfsdk:"limits"`
}

type cubeStorageModel struct {
	Size         types.String `tfsdk:"size"`
	StorageClass types.String `tfsdk:"storage_class"`
}

type networkPolicyModel struct {
	Enabled   types.Bool         `tfsdk:"enabled"`
	AllowFrom []networkPeerModel `tfsdk:"allow_from"`
}

type networkPeerModel struct {
	NamespaceLabels types.Map `tfsdk:"namespace_labels"`
	PodLabels       types.Map `tfsdk:"pod_labels"`
}

type tolerationModel struct {
	Key      types.String `tfsdk:"key"`
	Operator types.String `tfsdk:"operator"`
	Value    types.String `tfsdk:"value"`
	Effect   types.String `tfsdk:"effect"`
}

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
	num := func(desc string, def int64, min, max int64) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(def),
			MarkdownDescription: fmt.Sprintf("%s Defaults to `%d`.", desc, def), Validators: []validator.Int64{int64validator.Between(min, max)}}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "The cube sparse-parameter service: `shards` × `replicas` cube servers (one StatefulSet and one headless " +
			"Service per shard, so that shard i has a stable name), the transfer that watches the training job's donefile and rolls new " +
			"model versions out to every replica, and the shared control token. Exports the `cube_conf` Paddle Serving reads.\n\n" +
			"**Network policies.** Unless `network_policy.enabled = false`, two NetworkPolicies admit only the cube's transfer and the " +
			"`ctr_serving` pods of the same `stack` (in the cube's namespace) to the cube servers' `port`, and only the cube servers to the " +
			"transfer's `transfer_files_port` (the model's published shards); the transfer's status port (`transfer_port`) stays open, " +
			"since Terraform reads `/status` through the API server. NetworkPolicies take effect only where the cluster's network plugin " +
			"enforces them (e.g. Calico, Cilium, or a cloud's policy-enforcing CNI); elsewhere they are accepted and ignored.\n\n" +
			"**Pods.** " + hardenedDefaults + " This repository's image also runs as user and group 65532 (non-root, with `fsGroup` 65532 so " +
			"that it writes its dictionary and work volumes) on a read-only root filesystem. `security_context` relaxes any of it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name`.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceStr(),
				MarkdownDescription: fmt.Sprintf("Name prefix of every object. At most %d lowercase letters, digits and `-`.", stack.MaxNameLength),
				Validators: []validator.String{stringvalidator.LengthBetween(1, stack.MaxNameLength),
					stringvalidator.RegexMatches(dnsLabelRE, "must be lowercase letters, digits and '-', starting and ending with a letter or digit")}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("default"), PlanModifiers: replaceStr(),
				MarkdownDescription: "Namespace of every object. Defaults to `default`."},
			"stack": schema.StringAttribute{Optional: true, MarkdownDescription: "The `app.kubernetes.io/part-of` label. Defaults to `name`."},
			"dict": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultCubeDict),
				MarkdownDescription: "Dictionary name, Paddle Serving's `sparse_param_service_table_name`. Defaults to `" + stack.DefaultCubeDict + "`."},
			"shards": num("Number of shards; key k lives on shard `k % shards`, as Paddle's client routes it. Changing it re-shards: "+
				"new shards' objects are created, removed ones deleted, and the transfer restarts and rebuilds every shard from the last model.", stack.DefaultCubeShards, 1, 256),
			"replicas": num("Cube servers per shard.", stack.DefaultCubeReplicas, 1, 32),
			"image": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "Image with the `cube` binary, for servers and transfer. Defaults to `" + stack.CubeImageRepository + ":<provider version>`, built from this repository (`latest` for a development build of the provider).",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"donefile_url": schema.StringAttribute{Required: true,
				MarkdownDescription: "URL of the donefile (`base.txt`) the transfer watches: `ctr_training_job.<name>.donefile_url`."},
			"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultCubeMode),
				MarkdownDescription: "`base`: roll out base versions only; `base_delta`: also the patches in `patch.txt`. Defaults to `base`.",
				Validators:          []validator.String{stringvalidator.OneOf(stack.CubeModes...)}},
			"port":          num("Port of the cube servers (baidu_std and HTTP).", stack.DefaultCubePort, 1, 65535),
			"transfer_port": num("Port of the transfer's status API (`/status`, `/healthz`, `/metrics`, `POST /trigger`).", stack.DefaultTransferPort, 1, 65535),
			"transfer_files_port": num("Port at which the transfer publishes built shards (`/files/`) for the cube servers to download; "+
				"only cube servers may reach it while the network policies are enabled. Must differ from `transfer_port`.", stack.DefaultTransferFilesPort, 1, 65535),
			"resources": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Requests and limits of each cube server. A cube server always has a memory limit: " +
				"the memory request when only a request is given, else `" + stack.DefaultCubeMemory + "` as both request and limit. The dictionary is memory-mapped: " +
				"its page cache counts against the limit but is reclaimed under pressure, so a limit below the shard's dictionary size slows lookups " +
				"(they read from disk) rather than killing the pod; to keep a shard in memory, ask for its dictionary size plus about 512Mi.",
				Attributes: map[string]schema.Attribute{
					"requests": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ cpu = \"2\", memory = \"8Gi\" }`."},
					"limits":   schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ memory = \"16Gi\" }`."},
				}},
			"storage": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Per-replica dictionary storage as a PersistentVolumeClaim. Unset: an emptyDir (a restarted pod gets its dictionary back from the transfer). Changing it replaces the cube.",
				PlanModifiers:       []planmodifier.Object{objectplanmodifier.RequiresReplace()},
				Attributes: map[string]schema.Attribute{
					"size":          schema.StringAttribute{Optional: true, MarkdownDescription: "Claim size. Defaults to `10Gi`."},
					"storage_class": schema.StringAttribute{Optional: true, MarkdownDescription: "StorageClass; the cluster default when unset."},
				}},
			"transfer_storage": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultTransferStorage),
				MarkdownDescription: "Size of the transfer's volume (downloads, built shards, state). Defaults to `" + stack.DefaultTransferStorage + "`."},
			"node_selector": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Node selector of every cube pod."},
			"tolerations": schema.ListNestedAttribute{Optional: true, MarkdownDescription: "Tolerations of every cube pod.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"key": schema.StringAttribute{Optional: true}, "operator": schema.StringAttribute{Optional: true},
					"value": schema.StringAttribute{Optional: true}, "effect": schema.StringAttribute{Optional: true},
				}}},
			"timeout_ms":        num("cube.conf `timeout`: Paddle Serving's per-request timeout in milliseconds.", stack.DefaultCubeTimeoutMS, 1, 600000),
			"retry":             num("cube.conf `retry`: Paddle Serving's retries on another replica.", stack.DefaultCubeRetry, 0, 10),
			"backup_request_ms": num("cube.conf `backup_request`: send a backup request after this many milliseconds; 0 disables it.", 0, 0, 600000),
			"security_context": securityContextAttribute("the cube servers' and the transfer's pods",
				"This repository's image also runs as user and group 65532 with `runAsNonRoot`, `fsGroup` 65532 and a read-only root filesystem."),
			"network_policy": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Who may reach the cube (see above). Unset: the policies are rendered with no extra peers. " +
					"Turning them off or changing the peers updates the NetworkPolicies in place (turned off, they are deleted).",
				Attributes: map[string]schema.Attribute{
					"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
						MarkdownDescription: "Render the NetworkPolicies. Defaults to `true`; `false` lets every pod that can route to the cube reach its servers and the model."},
					"allow_from": schema.ListNestedAttribute{Optional: true,
						MarkdownDescription: "Further peers admitted to the cube servers' `port` (not to the model files), e.g. a Prometheus that scrapes `/metrics`, " +
							"or a Paddle Serving deployed by other means. Each peer is a NetworkPolicy peer: the pods with `pod_labels` in the cube's namespace, " +
							"the pods with `pod_labels` in the namespaces with `namespace_labels`, or every pod of the namespaces with `namespace_labels`.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"namespace_labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
								MarkdownDescription: "Labels of the peers' namespaces, e.g. `{ \"kubernetes.io/metadata.name\" = \"monitoring\" }`."},
							"pod_labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
								MarkdownDescription: "Labels of the peer pods, e.g. `{ \"app.kubernetes.io/name\" = \"prometheus\" }`."},
						}}},
				}},
			"control_token": schema.StringAttribute{Optional: true, Computed: true, Sensitive: true,
				MarkdownDescription: "Shared token of the control endpoints (agent, transfer, ControlService), stored in a Secret. Generated when unset.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"kubernetes": connectionResourceAttribute(),
			"timeouts":   timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
			"manifests": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Every Kubernetes object this resource owns, `apiVersion/Kind/name` -> YAML, rendered at plan time."},
			"cube_conf": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Paddle Serving's `cube.conf` (JSON) for this cube: one `http://<shard service>:<port>` per shard, which brpc re-resolves to the shard's ready replicas."},
			"endpoints":    schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Address of each shard's Service, shard by shard."},
			"transfer_url": schema.StringAttribute{Computed: true, MarkdownDescription: "In-cluster URL of the transfer's status API (`transfer_port`)."},
			"served_version": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Model version the replicas report serving, read through the transfer at refresh: the version at least one replica of every shard serves. Empty until the first model, while a shard has no replica serving, or when the transfer cannot be reached."},
			"serving_replicas": schema.ListAttribute{Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "Per shard, how many replicas serve `served_version`, as they report it at refresh (null when the transfer cannot be reached). When a shard has fewer than `replicas`, the plan shows a warning naming the replicas and what they serve; the transfer heals them by itself."},
		},
	}
}

func (m *cubeModel) known() bool {
	vals := []attr.Value{m.Name, m.Namespace, m.Stack, m.Dict, m.Shards, m.Replicas, m.Image, m.DonefileURL, m.Mode,
		m.Port, m.TransferPort, m.FilesPort, m.TransferStorage, m.NodeSelector, m.TimeoutMS, m.Retry, m.BackupRequestMS}
	vals = append(vals, m.SecurityContext.values()...)
	if p := m.NetworkPolicy; p != nil {
		vals = append(vals, p.Enabled)
		for _, peer := range p.AllowFrom {
			vals = append(vals, peer.NamespaceLabels, peer.PodLabels)
		}
	}
	for _, v := range vals {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}

func (m *cubeModel) cube(ctx context.Context) (stack.Cube, diag.Diagnostics) {
	var diags diag.Diagnostics
	c := stack.Cube{Name: m.Name.ValueString(), Namespace: m.Namespace.ValueString(), Stack: m.Stack.ValueString(), Dict: m.Dict.ValueString(),
		Shards: int32(m.Shards.ValueInt64()), Replicas: int32(m.Replicas.ValueInt64()), Image: m.Image.ValueString(),
		DonefileURL: m.DonefileURL.ValueString(), Mode: m.Mode.ValueString(), Port: int32(m.Port.ValueInt64()),
		TransferPort: int32(m.TransferPort.ValueInt64()), TransferFilesPort: int32(m.FilesPort.ValueInt64()), TransferStorage: m.TransferStorage.ValueString(),
		TimeoutMS: int32(m.TimeoutMS.ValueInt64()), Retry: int32(m.Retry.ValueInt64()), BackupRequestMS: int32(m.BackupRequestMS.ValueInt64()),
		Token: m.ControlToken.ValueString()}
	if r := m.Resources; r != nil {
		if !r.Requests.IsNull() && !r.Requests.IsUnknown() {
			diags.Append(r.Requests.ElementsAs(ctx, &c.Requests, false)...)
		}
		if !r.Limits.IsNull() && !r.Limits.IsUnknown() {
			diags.Append(r.Limits.ElementsAs(ctx, &c.Limits, false)...)
		}
	}
	if s := m.Storage; s != nil {
		c.Storage = &stack.CubeStorage{Size: s.Size.ValueString(), StorageClass: s.StorageClass.ValueString()}
	}
	if !m.NodeSelector.IsNull() && !m.NodeSelector.IsUnknown() {
		diags.Append(m.NodeSelector.ElementsAs(ctx, &c.NodeSelector, false)...)
	}
	for _, t := range m.Tolerations {
		c.Tolerations = append(c.Tolerations, stack.Toleration{Key: t.Key.ValueString(), Operator: t.Operator.ValueString(), Value: t.Value.ValueString(), Effect: t.Effect.ValueString()})
	}
	c.SecurityContext = m.SecurityContext.stack(ctx, &diags)
	if p := m.NetworkPolicy; p != nil {
		c.NetworkPolicy = &stack.NetworkPolicy{}
		if !p.Enabled.IsNull() && !p.Enabled.IsUnknown() {
			c.NetworkPolicy.Enabled = p.Enabled.ValueBoolPointer()
		}
		for _, peer := range p.AllowFrom {
			var sp stack.NetworkPeer
			if !peer.NamespaceLabels.IsNull() {
				diags.Append(peer.NamespaceLabels.ElementsAs(ctx, &sp.NamespaceLabels, false)...)
			}
			if !peer.PodLabels.IsNull() {
				diags.Append(peer.PodLabels.ElementsAs(ctx, &sp.PodLabels, false)...)
			}
			c.NetworkPolicy.AllowFrom = append(c.NetworkPolicy.AllowFrom, sp)
		}
	}
	return c, diags
}

// computed fills what the rendering determines.
func (m *cubeModel) computed(ctx context.Context, c stack.Cube, set stack.Set, diags *diag.Diagnostics) {
	d := c.Defaulted()
	m.ID = types.StringValue(c.Namespace + "/" + c.Name)
	m.CubeConf = types.StringValue(d.CubeConf())
	ep, dd := types.ListValueFrom(ctx, types.StringType, d.Endpoints())
	diags.Append(dd...)
	m.Endpoints = ep
	m.TransferURL = types.StringValue(d.TransferURL())
	if set != nil {
		m.Manifests = manifestsValue(ctx, set, diags)
	}
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
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	for _, e := range c.Validate() {
		resp.Diagnostics.AddAttributeError(fieldPath(e.Path), "Invalid Cube Setting", "Attribute "+e.Path+": "+e.Detail)
	}
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
		resp.Diagnostics.AddError("Invalid Cube", err.Error())
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
		if _, err := kc.WaitFor(ctx, o.Object, cond, progressInterval); err != nil {
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
	last := time.Time{}
	for {
		body, err := kc.ServiceProxyGet(ctx, c.Namespace, c.Name+"-transfer", fmt.Sprint(c.TransferPort), "status")
		if err != nil {
			diags.AddWarning("Removed Shards Pruned Without Confirmation",
				fmt.Sprintf("Cube %s/%s: the transfer could not be asked whether the %d-shard layout serves yet (%s); the removed shards are deleted now.",
					c.Namespace, c.Name, c.Shards, err))
			return true
		}
		ok, st, err := stack.CubeLayoutServes(body, c.Shards, before)
		if err != nil {
			diags.AddError("Apply Cube Error", err.Error())
			return false
		}
		if ok {
			tflog.Info(ctx, fmt.Sprintf("cube %s/%s: the %d-shard layout serves (%s); removing the old shards", c.Namespace, c.Name, c.Shards, st))
			return true
		}
		if time.Since(last) >= progressInterval {
			tflog.Info(ctx, fmt.Sprintf("cube %s/%s: waiting for the %d-shard layout to serve before removing shards: %s", c.Namespace, c.Name, c.Shards, st))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			diags.AddError("Apply Cube Error", fmt.Sprintf("Cube %s/%s: the %d-shard layout did not serve in time (%s); the removed shards are kept, apply again to finish.",
				c.Namespace, c.Name, c.Shards, st))
			return false
		case <-time.After(2 * time.Second):
		}
	}
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
	live, err := kc.Get(ctx, objectFromKey("apps/v1/Deployment/"+ns+"/"+name+"-transfer"))
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
	secret, err := kc.Get(ctx, objectFromKey("v1/Secret/"+ns+"/"+name+"-control"))
	if err != nil {
		diags.AddError("Import Cube Error", err.Error())
		return false
	}
	token := stack.SecretValue(secret, "token")
	st.Name, st.Namespace, st.Stack, st.Dict = types.StringValue(c.Name), types.StringValue(c.Namespace), optionalString(c.Stack), optionalString(c.Dict)
	st.Shards, st.Replicas = types.Int64Value(int64(c.Shards)), types.Int64Value(int64(c.Replicas))
	st.Image, st.DonefileURL, st.Mode = optionalString(c.Image), types.StringValue(c.DonefileURL), optionalString(c.Mode)
	st.Port, st.TransferPort = types.Int64Value(int64(c.Port)), types.Int64Value(int64(c.TransferPort))
	st.FilesPort = types.Int64Value(int64(c.Defaulted().TransferFilesPort))
	st.TransferStorage = optionalString(c.TransferStorage)
	st.TimeoutMS, st.Retry, st.BackupRequestMS = types.Int64Value(int64(c.TimeoutMS)), types.Int64Value(int64(c.Retry)), types.Int64Value(int64(c.BackupRequestMS))
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
	if err := kc.DeleteAll(ctx, ns, stack.Owner(stack.CubeType, name), stack.CubeKinds, stack.ControllerKinds, progressInterval); err != nil {
		resp.Diagnostics.AddError("Delete Cube Error", fmt.Sprintf("Could not delete everything cube %s/%s owns: %s", ns, name, err))
	}
}

func (r *cubeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || ns == "" || name == "" {
		resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("Expected NAMESPACE/NAME; got %q.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
