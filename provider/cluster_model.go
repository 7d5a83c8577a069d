package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/elasticctr/terraform-provider-ctr/internal/cce"
	"github.com/elasticctr/terraform-provider-ctr/internal/volcano"
)

type clusterModel struct {
	ID             types.String   `tfsdk:"id"`
	CCE            *cceModel      `tfsdk:"cce"`
	Kubernetes     types.Object   `tfsdk:"kubernetes"`
	Volcano        *volcanoModel  `tfsdk:"volcano"`
	Timeouts       timeouts.Value `tfsdk:"timeouts"`
	ClusterID      types.String   `tfsdk:"cluster_id"`
	Phase          types.String   `tfsdk:"phase"`
	Kubeconfig     types.String   `tfsdk:"kubeconfig"`
	VolcanoState   types.String   `tfsdk:"volcano_state"`
	VolcanoVersion types.String   `tfsdk:"volcano_version"`
	VolcanoObjects types.List     `tfsdk:"volcano_objects"`
	VolcanoAdopted types.List     `tfsdk:"volcano_adopted_objects"`
	VolcanoDrift   types.List     `tfsdk:"volcano_drift"`
}

type cceModel struct {
	Name              types.String     `tfsdk:"name"`
	Description       types.String     `tfsdk:"description"`
	K8sVersion        types.String     `tfsdk:"k8s_version"`
	Runtime           types.String     `tfsdk:"runtime"`
	RuntimeVersion    types.String     `tfsdk:"runtime_version"`
	VPCID             types.String     `tfsdk:"vpc_id"`
	NetworkMode       types.String     `tfsdk:"network_mode"`
	PodCIDR           types.String     `tfsdk:"pod_cidr"`
	ServiceCIDR       types.String     `tfsdk:"service_cidr"`
	Master            *masterModel     `tfsdk:"master"`
	WorkerPool        *workerPoolModel `tfsdk:"worker_pool"`
	KubeconfigType    types.String     `tfsdk:"kubeconfig_type"`
	DeleteResource    types.Bool       `tfsdk:"delete_resource"`
	DeleteCDSSnapshot types.Bool       `tfsdk:"delete_cds_snapshot"`
}

type masterModel struct {
	Type          types.String `tfsdk:"type"`
	Flavor        types.String `tfsdk:"flavor"`
	Zone          types.String `tfsdk:"zone"`
	SubnetID      types.String `tfsdk:"subnet_id"`
	ExposedPublic types.Bool   `tfsdk:"exposed_public"`
}

type workerPoolModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Replicas        types.Int64  `tfsdk:"replicas"`
	MachineSpec     types.String `tfsdk:"machine_spec"`
	InstanceType    types.String `tfsdk:"instance_type"`
	SubnetID        types.String `tfsdk:"subnet_id"`
	SecurityGroupID types.String `tfsdk:"security_group_id"`
	Zone            types.String `tfsdk:"zone"`
	RootDiskSize    types.Int64  `tfsdk:"root_disk_size"`
	ImageID         types.String `tfsdk:"image_id"`
	Labels          types.Map    `tfsdk:"labels"`
	Taints          []taintModel `tfsdk:"taints"`
	AdminPassword   types.String `tfsdk:"admin_password"`
	SSHKeyID        types.String `tfsdk:"ssh_key_id"`
}

type taintModel struct {
	Key    types.String `tfsdk:"key"`
	Value  types.String `tfsdk:"value"`
	Effect types.String `tfsdk:"effect"`
}

type volcanoModel struct {
	Mode          types.String `tfsdk:"mode"`
	Version       types.String `tfsdk:"version"`
	ManifestURL   types.String `tfsdk:"manifest_url"`
	KeepOnDestroy types.Bool   `tfsdk:"keep_on_destroy"`
}

// justImported is the "just imported" signal of a CCE cluster: import sets only its IDs, and
// every apply sets cce (an adopted cluster is not imported).
func (m *clusterModel) justImported() bool { return m.CCE == nil && m.ClusterID.ValueString() != "" }

// adoptImported is the "just imported" signal of an adopted cluster: import sets only the
// connection (and the import ID); every apply and read sets phase.
func (m *clusterModel) adoptImported() bool {
	return m.CCE == nil && m.ClusterID.IsNull() && m.Phase.IsNull() && !m.Kubernetes.IsNull()
}

// volcanoSettings are the effective Volcano settings (defaults when the block is absent).
func (m *clusterModel) volcanoSettings() (mode volcano.Mode, version, url string, keep bool) {
	mode, version = volcano.IfAbsent, DefaultVolcanoVersion
	if m.Volcano != nil {
		if v := m.Volcano.Mode.ValueString(); v != "" {
			mode = volcano.Mode(v)
		}
		if v := m.Volcano.Version.ValueString(); v != "" {
			version = v
		}
		url = m.Volcano.ManifestURL.ValueString()
		keep = m.Volcano.KeepOnDestroy.ValueBool()
	}
	if url == "" {
		url = volcanoManifestURL(version)
	}
	return mode, version, url, keep
}

func (m *cceModel) clusterSpec() cce.ClusterSpec {
	s := cce.ClusterSpec{
		Name: m.Name.ValueString(), Description: m.Description.ValueString(), K8sVersion: m.K8sVersion.ValueString(),
		Runtime: m.Runtime.ValueString(), RuntimeVersion: m.RuntimeVersion.ValueString(), VPCID: m.VPCID.ValueString(),
		NetworkMode: m.NetworkMode.ValueString(), PodCIDR: m.PodCIDR.ValueString(), ServiceCIDR: m.ServiceCIDR.ValueString(),
		MasterType: defaultMasterType, MasterFlavor: defaultMasterFlavor,
	}
	if ms := m.Master; ms != nil {
		s.MasterType, s.MasterFlavor = ms.Type.ValueString(), ms.Flavor.ValueString()
		s.MasterZone, s.MasterSubnetID, s.ExposedPublic = ms.Zone.ValueString(), ms.SubnetID.ValueString(), ms.ExposedPublic.ValueBool()
	}
	return s
}

// workerPool converts the pool; the password comes from configuration (write-only).
func (w *workerPoolModel) workerPool(ctx context.Context, password types.String) (cce.WorkerPool, diag.Diagnostics) {
	p := cce.WorkerPool{
		Name: w.Name.ValueString(), Replicas: int(w.Replicas.ValueInt64()), MachineSpec: w.MachineSpec.ValueString(),
		InstanceType: w.InstanceType.ValueString(), SubnetID: w.SubnetID.ValueString(), SecurityGroupID: w.SecurityGroupID.ValueString(),
		Zone: w.Zone.ValueString(), RootDiskSize: int(w.RootDiskSize.ValueInt64()), ImageID: w.ImageID.ValueString(),
		AdminPassword: password.ValueString(), SSHKeyID: w.SSHKeyID.ValueString(),
	}
	var diags diag.Diagnostics
	if !w.Labels.IsNull() && !w.Labels.IsUnknown() {
		diags.Append(w.Labels.ElementsAs(ctx, &p.Labels, false)...)
	}
	for _, t := range w.Taints {
		p.Taints = append(p.Taints, cce.Taint{Key: t.Key.ValueString(), Value: t.Value.ValueString(), Effect: t.Effect.ValueString()})
	}
	return p, diags
}

// fromPool sets what CCE reports of the pool's in-place settings: replicas, node labels and
// taints, root disk size. Empty labels and taints read as unset, as a configuration without
// them has them.
func (w *workerPoolModel) fromPool(ctx context.Context, p *cce.Pool) diag.Diagnostics {
	var diags diag.Diagnostics
	w.Replicas = types.Int64Value(int64(p.Replicas))
	if p.RootDiskSize > 0 {
		w.RootDiskSize = types.Int64Value(int64(p.RootDiskSize))
	}
	w.Labels = types.MapNull(types.StringType)
	if len(p.Labels) > 0 {
		lv, d := types.MapValueFrom(ctx, types.StringType, p.Labels)
		diags.Append(d...)
		w.Labels = lv
	}
	w.Taints = nil
	for _, t := range p.Taints {
		w.Taints = append(w.Taints, taintModel{Key: types.StringValue(t.Key), Value: optionalString(t.Value), Effect: types.StringValue(t.Effect)})
	}
	return diags
}

// connectionFromKubeconfig turns a kubeconfig into the `kubernetes` connection object that
// workload resources take: host, CA and the current context's credentials.
func connectionFromKubeconfig(kubeconfig string) (types.Object, error) {
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return types.ObjectNull(connectionAttrTypes), fmt.Errorf("parse kubeconfig: %w", err)
	}
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if !ok {
		return types.ObjectNull(connectionAttrTypes), fmt.Errorf("kubeconfig has no current context %q", ctxName)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return types.ObjectNull(connectionAttrTypes), fmt.Errorf("kubeconfig context %q names no cluster", ctxName)
	}
	user := cfg.AuthInfos[kctx.AuthInfo]
	str := func(s string) attr.Value {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	vals := map[string]attr.Value{}
	for name, typ := range connectionAttrTypes {
		vals[name] = nullOf(typ)
	}
	vals["host"] = types.StringValue(cluster.Server)
	vals["cluster_ca_certificate"] = str(string(cluster.CertificateAuthorityData))
	vals["insecure"] = types.BoolValue(cluster.InsecureSkipTLSVerify)
	vals["tls_server_name"] = str(cluster.TLSServerName)
	vals["proxy_url"] = str(cluster.ProxyURL)
	if user != nil {
		vals["token"] = str(user.Token)
		vals["client_certificate"] = str(string(user.ClientCertificateData))
		vals["client_key"] = str(string(user.ClientKeyData))
		if e := user.Exec; e != nil {
			exec, err := execValue(e)
			if err != nil {
				return types.ObjectNull(connectionAttrTypes), err
			}
			vals["exec"] = exec
		}
	}
	obj, d := types.ObjectValue(connectionAttrTypes, vals)
	if d.HasError() {
		return types.ObjectNull(connectionAttrTypes), fmt.Errorf("build connection: %v", d)
	}
	return obj, nil
}

// nullOf is the null value of a connection attribute's type.
func nullOf(t attr.Type) attr.Value {
	switch t := t.(type) {
	case types.ListType:
		return types.ListNull(t.ElemType)
	case types.MapType:
		return types.MapNull(t.ElemType)
	case types.ObjectType:
		return types.ObjectNull(t.AttrTypes)
	case basetypes.BoolType:
		return types.BoolNull()
	}
	return types.StringNull()
}

// execValue is a kubeconfig's exec plugin as the connection's `exec`.
func execValue(e *clientcmdapi.ExecConfig) (attr.Value, error) {
	args := []attr.Value{}
	for _, a := range e.Args {
		args = append(args, types.StringValue(a))
	}
	env := map[string]attr.Value{}
	for _, v := range e.Env {
		env[v.Name] = types.StringValue(v.Value)
	}
	al, d := types.ListValue(types.StringType, args)
	if d.HasError() {
		return nil, fmt.Errorf("exec args: %v", d)
	}
	em, d := types.MapValue(types.StringType, env)
	if d.HasError() {
		return nil, fmt.Errorf("exec env: %v", d)
	}
	if len(e.Args) == 0 {
		al = types.ListNull(types.StringType)
	}
	if len(e.Env) == 0 {
		em = types.MapNull(types.StringType)
	}
	o, d := types.ObjectValue(execAttrTypes, map[string]attr.Value{
		"api_version": types.StringValue(e.APIVersion), "command": types.StringValue(e.Command), "args": al, "env": em,
	})
	if d.HasError() {
		return nil, fmt.Errorf("exec: %v", d)
	}
	return o, nil
}
