package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// cubeModel is the Terraform state of ctr_cube.
type cubeModel struct {
	workloadAttrs
	Dict             types.String          `tfsdk:"dict"`
	Shards           types.Int64           `tfsdk:"shards"`
	Replicas         types.Int64           `tfsdk:"replicas"`
	Image            types.String          `tfsdk:"image"`
	DonefileURL      types.String          `tfsdk:"donefile_url"`
	Mode             types.String          `tfsdk:"mode"`
	ServeVersion     types.String          `tfsdk:"serve_version"`
	Port             types.Int64           `tfsdk:"port"`
	TransferPort     types.Int64           `tfsdk:"transfer_port"`
	FilesPort        types.Int64           `tfsdk:"transfer_files_port"`
	Resources        *resourcesModel       `tfsdk:"resources"`
	TransferRes      *resourcesModel       `tfsdk:"transfer_resources"`
	Storage          *cubeStorageModel     `tfsdk:"storage"`
	TransferStorage  types.String          `tfsdk:"transfer_storage"`
	TransferClass    types.String          `tfsdk:"transfer_storage_class"`
	NodeSelector     types.Map             `tfsdk:"node_selector"`
	Tolerations      []tolerationModel     `tfsdk:"tolerations"`
	PullSecrets      types.List            `tfsdk:"image_pull_secrets"`
	TimeoutMS        types.Int64           `tfsdk:"timeout_ms"`
	Retry            types.Int64           `tfsdk:"retry"`
	BackupRequestMS  types.Int64           `tfsdk:"backup_request_ms"`
	SecurityContext  *securityContextModel `tfsdk:"security_context"`
	Pod              *podModel             `tfsdk:"pod"`
	NetworkPolicy    *networkPolicyModel   `tfsdk:"network_policy"`
	Spread           *spreadModel          `tfsdk:"spread"`
	DisruptionBudget types.Bool            `tfsdk:"disruption_budget"`
	Metrics          *metricsModel         `tfsdk:"metrics"`
	ControlToken     types.String          `tfsdk:"control_token"`
	CubeConf         types.String          `tfsdk:"cube_conf"`
	Endpoints        types.List            `tfsdk:"endpoints"`
	TransferURL      types.String          `tfsdk:"transfer_url"`
	ServedVersion    types.String          `tfsdk:"served_version"`
	ServingReplicas  types.List            `tfsdk:"serving_replicas"`
	KeptVersions     types.List            `tfsdk:"kept_versions"`
}

var _ workloadModel[stack.Cube] = (*cubeModel)(nil)

type cubeStorageModel struct {
	Size         types.String `tfsdk:"size"`
	StorageClass types.String `tfsdk:"storage_class"`
}

type networkPolicyModel struct {
	Enabled   types.Bool         `tfsdk:"enabled"`
	AllowFrom []networkPeerModel `tfsdk:"allow_from"`
}

type spreadModel struct {
	TopologyKey types.String `tfsdk:"topology_key"`
	Required    types.Bool   `tfsdk:"required"`
}

type metricsModel struct {
	Annotations      types.Bool         `tfsdk:"annotations"`
	PodMonitor       types.Bool         `tfsdk:"pod_monitor"`
	PodMonitorLabels types.Map          `tfsdk:"pod_monitor_labels"`
	ScrapeFrom       []networkPeerModel `tfsdk:"scrape_from"`
}

type networkPeerModel struct {
	NamespaceLabels types.Map `tfsdk:"namespace_labels"`
	PodLabels       types.Map `tfsdk:"pod_labels"`
}

func (m *cubeModel) settings(ctx context.Context, _ stack.Images) (stack.Cube, diag.Diagnostics) {
	var diags diag.Diagnostics
	c := stack.Cube{Name: m.Name.ValueString(), Namespace: m.Namespace.ValueString(), Stack: m.Stack.ValueString(), Dict: m.Dict.ValueString(),
		Shards: int32(m.Shards.ValueInt64()), Replicas: int32(m.Replicas.ValueInt64()), Image: m.Image.ValueString(),
		DonefileURL: m.DonefileURL.ValueString(), Mode: m.Mode.ValueString(), ServeVersion: m.ServeVersion.ValueString(), Port: int32(m.Port.ValueInt64()),
		TransferPort: int32(m.TransferPort.ValueInt64()), TransferFilesPort: int32(m.FilesPort.ValueInt64()), TransferStorage: m.TransferStorage.ValueString(),
		TransferStorageClass: m.TransferClass.ValueString(),
		TimeoutMS:            int32(m.TimeoutMS.ValueInt64()), Retry: int32Ptr(m.Retry), BackupRequestMS: int32(m.BackupRequestMS.ValueInt64()),
		Token: m.ControlToken.ValueString(), NodeSelector: stringMap(ctx, m.NodeSelector, &diags), Tolerations: tolerations(m.Tolerations),
		ImagePullSecrets: stringList(ctx, m.PullSecrets, &diags)}
	c.Requests, c.Limits = m.Resources.stack(ctx, &diags)
	c.TransferRequests, c.TransferLimits = m.TransferRes.stack(ctx, &diags)
	if s := m.Storage; s != nil {
		c.Storage = &stack.CubeStorage{Size: s.Size.ValueString(), StorageClass: s.StorageClass.ValueString()}
	}
	c.SecurityContext = m.SecurityContext.stack(ctx, &diags)
	c.Pod = m.Pod.stack(ctx, &diags)
	if p := m.NetworkPolicy; p != nil {
		c.NetworkPolicy = &stack.NetworkPolicy{}
		if !p.Enabled.IsNull() && !p.Enabled.IsUnknown() {
			c.NetworkPolicy.Enabled = p.Enabled.ValueBoolPointer()
		}
		c.NetworkPolicy.AllowFrom = peersToStack(ctx, p.AllowFrom, &diags)
	}
	c.Metrics = m.Metrics.stack(ctx, &diags)
	if s := m.Spread; s != nil {
		c.Spread = &stack.Spread{TopologyKey: s.TopologyKey.ValueString(), Required: s.Required.ValueBool()}
	}
	if b := m.DisruptionBudget; !b.IsNull() && !b.IsUnknown() {
		c.DisruptionBudget = b.ValueBoolPointer()
	}
	return c, diags
}

// setComputed sets what the rendering determines, from the settings it rendered (defaulted).
func (m *cubeModel) setComputed(ctx context.Context, c stack.Cube, diags *diag.Diagnostics) {
	m.ID = namespaceName(c.Namespace, c.Name)
	m.CubeConf = types.StringValue(c.CubeConf())
	ep, d := types.ListValueFrom(ctx, types.StringType, c.Endpoints())
	diags.Append(d...)
	m.Endpoints = ep
	m.TransferURL = types.StringValue(c.TransferURL())
}

// fromCluster rebuilds the configuration from the transfer's settings and the control Secret.
func (m *cubeModel) fromCluster(ctx context.Context, kc *kube.Client, diags *diag.Diagnostics) bool {
	ns, name := m.Namespace.ValueString(), m.Name.ValueString()
	c, live, ok := settingsFromCluster(ctx, kc, stack.CubeTransferRef(ns, name), "Cube", stack.CubeFromSettings, diags)
	if !ok {
		return false
	}
	c.RestoreEnv(live)
	ref := stack.CubeControlSecretRef(ns, name)
	secret, err := kc.Get(ctx, ref)
	if err != nil {
		diags.Append(diagnostics.Failed("Import Cube Error", "Could not read "+kube.Describe(ref), "", err))
		return false
	}
	d := c.Defaulted() // numbers the schema defaults are always in the settings; older settings left out zeros
	m.Name, m.Namespace, m.Stack, m.Dict = types.StringValue(c.Name), types.StringValue(c.Namespace), optionalString(c.Stack), optionalString(c.Dict)
	m.Shards, m.Replicas = types.Int64Value(int64(c.Shards)), types.Int64Value(int64(c.Replicas))
	m.Image, m.DonefileURL, m.Mode = optionalString(c.Image), types.StringValue(c.DonefileURL), optionalString(c.Mode)
	m.ServeVersion = optionalString(c.ServeVersion)
	m.Port, m.TransferPort, m.FilesPort = types.Int64Value(int64(c.Port)), types.Int64Value(int64(c.TransferPort)), types.Int64Value(int64(d.TransferFilesPort))
	m.TransferStorage, m.TransferClass = optionalString(c.TransferStorage), optionalString(c.TransferStorageClass)
	m.TimeoutMS, m.Retry, m.BackupRequestMS = types.Int64Value(int64(d.TimeoutMS)), types.Int64Value(int64(*d.Retry)), types.Int64Value(int64(c.BackupRequestMS))
	m.NodeSelector, m.ControlToken = optionalStringMap(ctx, c.NodeSelector, diags), optionalString(stack.ControlToken(secret))
	m.Resources = resourcesFromStack(ctx, c.Requests, c.Limits, diags)
	m.TransferRes = resourcesFromStack(ctx, c.TransferRequests, c.TransferLimits, diags)
	m.Storage = nil
	if c.Storage != nil {
		m.Storage = &cubeStorageModel{Size: optionalString(c.Storage.Size), StorageClass: optionalString(c.Storage.StorageClass)}
	}
	m.Tolerations = tolerationsFromStack(c.Tolerations)
	m.PullSecrets = optionalStringList(ctx, c.ImagePullSecrets, diags)
	m.SecurityContext = securityContextFromStack(ctx, c.SecurityContext, diags)
	m.Pod = podFromStack(ctx, c.Pod, diags)
	m.NetworkPolicy = nil
	if p := c.NetworkPolicy; p != nil {
		m.NetworkPolicy = &networkPolicyModel{Enabled: types.BoolValue(p.Enabled == nil || *p.Enabled)}
		m.NetworkPolicy.AllowFrom = peersFromStack(ctx, p.AllowFrom, diags)
	}
	m.Metrics = metricsFromStack(ctx, c.Metrics, diags)
	m.Spread = nil
	if s := c.Spread; s != nil {
		m.Spread = &spreadModel{TopologyKey: types.StringValue(s.TopologyKey), Required: types.BoolValue(s.Required)}
		if s.TopologyKey == "" {
			m.Spread.TopologyKey = types.StringValue(stack.DefaultSpreadTopologyKey)
		}
	}
	m.DisruptionBudget = types.BoolValue(c.DisruptionBudget == nil || *c.DisruptionBudget)
	return !diags.HasError()
}

// readLive asks the transfer what the replicas serve.
func (m *cubeModel) readLive(ctx context.Context, kc *kube.Client, c stack.Cube, _ map[string]*unstructured.Unstructured, diags *diag.Diagnostics) {
	readServing(ctx, kc, c, m, diags)
}

// peersToStack are NetworkPolicy peers as the stack takes them: nil for none given (null),
// empty for an empty list, which metrics.scrape_from tells apart.
func peersToStack(ctx context.Context, peers []networkPeerModel, diags *diag.Diagnostics) []stack.NetworkPeer {
	if peers == nil {
		return nil
	}
	out := make([]stack.NetworkPeer, 0, len(peers))
	for _, p := range peers {
		out = append(out, stack.NetworkPeer{NamespaceLabels: stringMap(ctx, p.NamespaceLabels, diags), PodLabels: stringMap(ctx, p.PodLabels, diags)})
	}
	return out
}

// peersFromStack is peersToStack's inverse, for import.
func peersFromStack(ctx context.Context, peers []stack.NetworkPeer, diags *diag.Diagnostics) []networkPeerModel {
	if peers == nil {
		return nil
	}
	out := make([]networkPeerModel, 0, len(peers))
	for _, p := range peers {
		out = append(out, networkPeerModel{NamespaceLabels: optionalStringMap(ctx, p.NamespaceLabels, diags), PodLabels: optionalStringMap(ctx, p.PodLabels, diags)})
	}
	return out
}

// stack is the metrics settings as the stack takes them (nil when unset).
func (m *metricsModel) stack(ctx context.Context, diags *diag.Diagnostics) *stack.Metrics {
	if m == nil {
		return nil
	}
	out := &stack.Metrics{PodMonitor: m.PodMonitor.ValueBool(), PodMonitorLabels: stringMap(ctx, m.PodMonitorLabels, diags),
		ScrapeFrom: peersToStack(ctx, m.ScrapeFrom, diags)}
	if !m.Annotations.IsNull() && !m.Annotations.IsUnknown() {
		out.Annotations = m.Annotations.ValueBoolPointer()
	}
	return out
}

// metricsFromStack is the metrics block import reads back from the settings, each default
// the schema fills in filled in.
func metricsFromStack(ctx context.Context, s *stack.Metrics, diags *diag.Diagnostics) *metricsModel {
	if s == nil {
		return nil
	}
	return &metricsModel{Annotations: types.BoolValue(s.Annotations == nil || *s.Annotations), PodMonitor: types.BoolValue(s.PodMonitor),
		PodMonitorLabels: optionalStringMap(ctx, s.PodMonitorLabels, diags), ScrapeFrom: peersFromStack(ctx, s.ScrapeFrom, diags)}
}
