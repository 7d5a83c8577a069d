package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// cubeModel is the Terraform state of ctr_cube.
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
		TimeoutMS: int32(m.TimeoutMS.ValueInt64()), Retry: int32Ptr(m.Retry), BackupRequestMS: int32(m.BackupRequestMS.ValueInt64()),
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
