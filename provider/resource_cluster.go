package provider

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/elasticctr/terraform-provider-ctr/internal/cce"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// NewClusterResource is the ctr_cluster resource.
// clusterTimeouts bound create, update and delete of a cluster unless timeouts says otherwise.
var clusterTimeouts = opTimeouts{Create: time.Hour, Update: time.Hour, Delete: time.Hour,
	CreateWaits: "How long to wait for the cluster, its workers and Volcano."}

func NewClusterResource() resource.Resource { return &clusterResource{} }

type clusterResource struct{ resourceBase }

// defaultCCEInterval is how often CCE is polled unless the provider's cce_poll_interval says
// otherwise: CCE has no watch API.
const defaultCCEInterval = 5 * time.Second

func (r *clusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

func (r *clusterResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = clusterSchema(ctx)
}

// ModifyPlan keeps a plan empty when only the write-only admin password is in the
// configuration: the framework compares the proposed state (which still carries write-only
// values) with the prior state (which never does), sees a change, and marks every computed
// attribute unknown. Here the comparison is made without it, and the prior values stay.
// It also says what an apply does to Volcano (planVolcano): drift a refresh found shows as
// volcano_drift going to [].
func (r *clusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	if req.State.Raw.IsNull() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("volcano_drift"), keyList(nil))...)
		return
	}
	warnReplacement(ctx, req, resp)
	if !readable[clusterModel](req.Plan.Raw) {
		return
	}
	var plan, state clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	switch {
	case plan.CCE != nil && state.CCE != nil && !plan.CCE.KubeconfigType.Equal(state.CCE.KubeconfigType):
		// Another kubeconfig is read: the connection that workloads take changes with it.
		plan.Kubeconfig, plan.Kubernetes = types.StringUnknown(), types.ObjectUnknown(connectionAttrTypes)
		plan.Phase = state.Phase
	case !sameSettings(&plan, &state):
		// Update keeps the phase (read at refresh).
		plan.Phase = state.Phase
	default:
		timeouts := plan.Timeouts
		plan = state
		plan.Timeouts = timeouts
	}
	planVolcano(ctx, &plan, &state)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// clusterReplacing are the attributes of ctr_cluster whose change replaces it, from its schema.
var clusterReplacing = replacingAttributes(clusterSchema(context.Background()).Attributes, "")

// warnReplacement warns, in the plan, that a change replaces a CCE cluster, naming the
// attributes that force it and what goes with the cluster: Terraform itself shows only
// "# forces replacement". An adopted cluster is never deleted, so it gets no warning.
func warnReplacement(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	var id, name types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("cluster_id"), &id)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("cce").AtName("name"), &name)...)
	if id.ValueString() == "" {
		return
	}
	changed := changedReplacing(ctx, resp.Plan, req.State, clusterReplacing)
	if len(changed) == 0 {
		return
	}
	resp.Diagnostics.Append(diagnostics.Warning("CCE Cluster Will Be Replaced",
		fmt.Sprintf("Changing %s replaces CCE cluster %s (%s): CCE cannot change it in place, so it deletes the cluster and creates a new, "+
			"empty one. Everything on the cluster goes with it: Volcano and its queues, every namespace, every training job, cube and serving "+
			"(of this configuration or any other), their Services and load balancers, and their volume claims with the model versions and "+
			"dictionaries on them; the new cluster has a new API server address and kubeconfig", strings.Join(changed, ", "), id.ValueString(), name.ValueString()),
		"If that is not what you want, undo the change. To have Terraform refuse any plan that deletes the cluster, set "+
			"lifecycle { prevent_destroy = true } on this ctr_cluster."))
}

func (r *clusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer setClusterIdentity(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Create, clusterTimeouts.Create, &resp.Diagnostics)
	defer cancel()

	if plan.CCE == nil {
		r.adopt(ctx, &plan, &resp.State, &resp.Diagnostics)
		return
	}
	c := r.cce(&resp.Diagnostics)
	if c == nil {
		return
	}
	var password types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("cce").AtName("worker_pool").AtName("admin_password"), &password)...)
	id, err := c.CreateCluster(ctx, plan.CCE.clusterSpec())
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FailedAt(path.Root("cce"), "Create Cluster Error", "CCE did not create the cluster", "", err))
		return
	}
	// Saved at once: whatever happens next, Terraform knows the cluster and can delete it.
	plan.ID, plan.ClusterID, plan.Phase = types.StringValue(id), types.StringValue(id), types.StringValue("pending")
	plan.Kubeconfig, plan.Kubernetes = types.StringNull(), types.ObjectNull(connectionAttrTypes)
	plan.clearVolcano()
	plan.CCE.WorkerPool.ID = types.StringNull()
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	tflog.Info(ctx, "CCE cluster "+id+" requested; waiting until it runs")

	cl, err := c.WaitRunning(ctx, id, r.interval(), progress(ctx))
	if err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Create Cluster Error", "CCE cluster "+id+" did not reach running", "", err))
		return
	}
	plan.Phase = types.StringValue(cl.Phase)
	pool, diags := plan.CCE.WorkerPool.workerPool(ctx, password)
	resp.Diagnostics.Append(diags...)
	poolID, err := c.CreateWorkerPool(ctx, id, pool)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FailedAt(path.Root("cce").AtName("worker_pool"), "Create Worker Pool Error", "CCE did not create the worker pool", "", err))
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	plan.CCE.WorkerPool.ID = types.StringValue(poolID)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if _, err := c.WaitPoolReady(ctx, id, poolID, r.interval(), progress(ctx)); err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Create Worker Pool Error", "Worker pool "+poolID+" did not become ready", "", err))
		return
	}
	if !r.connect(ctx, c, &plan, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	r.applyVolcano(ctx, &plan, nil, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *clusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer func() {
		st := &resp.State
		if st.Raw.IsNull() {
			st = &req.State // removed: the identity of what was there
		}
		setClusterIdentity(ctx, st, resp.Identity, &resp.Diagnostics)
	}()
	var st clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if st.adoptImported() {
		r.readAdoptedImport(ctx, &st, &resp.Diagnostics)
		if !resp.Diagnostics.HasError() {
			resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
		}
		return
	}
	if st.ClusterID.ValueString() == "" {
		// Adopted cluster: only Volcano is ctr_cluster's.
		r.refreshVolcano(ctx, &st, &resp.Diagnostics)
		resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
		return
	}
	c := r.cce(&resp.Diagnostics)
	if c == nil {
		return
	}
	id := st.ClusterID.ValueString()
	cl, err := c.GetCluster(ctx, id)
	if cce.IsNotFound(err) {
		tflog.Warn(ctx, "CCE cluster "+id+" no longer exists; removing it from state")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Read Cluster Error", "Could not read CCE cluster "+id, "", err))
		return
	}
	st.Phase = types.StringValue(cl.Phase)
	imported := st.justImported()
	if imported {
		// CCE tells what it knows of the cluster.
		r.importCCE(ctx, c, cl, &st, &resp.Diagnostics)
	}
	if st.CCE != nil && st.CCE.WorkerPool != nil && st.CCE.WorkerPool.ID.ValueString() != "" {
		p, err := c.GetWorkerPool(ctx, id, st.CCE.WorkerPool.ID.ValueString())
		switch {
		case cce.IsNotFound(err):
			st.CCE.WorkerPool.Replicas = types.Int64Value(0)
		case err != nil:
			resp.Diagnostics.Append(diagnostics.Failed("Read Cluster Error", "Could not read the worker pool of CCE cluster "+id, "", err))
			return
		default:
			// Drift: someone scaled or edited the pool in the console.
			resp.Diagnostics.Append(st.CCE.WorkerPool.fromPool(ctx, p)...)
		}
	}
	if !imported && cl.Phase == "running" {
		r.refreshVolcano(ctx, &st, &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *clusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer setClusterIdentity(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan, state clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Update, clusterTimeouts.Update, &resp.Diagnostics)
	defer cancel()

	// Values that only the last apply or read know.
	plan.ID, plan.ClusterID, plan.Kubeconfig, plan.Phase = state.ID, state.ClusterID, state.Kubeconfig, state.Phase
	if plan.CCE != nil && state.CCE != nil {
		plan.Kubernetes = state.Kubernetes
		plan.CCE.WorkerPool.ID = state.CCE.WorkerPool.ID
		if !r.updatePool(ctx, &plan, &state, &resp.Diagnostics) {
			resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
			return
		}
		if plan.CCE.KubeconfigType.ValueString() != state.CCE.KubeconfigType.ValueString() {
			c := r.cce(&resp.Diagnostics)
			if c == nil || !r.connect(ctx, c, &plan, &resp.Diagnostics) {
				return
			}
			tflog.Info(ctx, "read the "+plan.CCE.KubeconfigType.ValueString()+" kubeconfig of CCE cluster "+plan.ClusterID.ValueString())
		}
	}
	// Volcano changes when the plan says so (planVolcano), or to repair drift.
	if plan.VolcanoState.IsUnknown() || state.drifted() {
		r.applyVolcano(ctx, &plan, &state, &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// updatePool changes the worker pool in place: its replicas, then (CCE's configure call
// takes the replica count as it is) the nodes' labels and taints and the root disk size of
// new machines. false: it failed, as diags says.
func (r *clusterResource) updatePool(ctx context.Context, plan, state *clusterModel, diags *diag.Diagnostics) bool {
	want, have := plan.CCE.WorkerPool, state.CCE.WorkerPool
	scale := want.Replicas.ValueInt64() != have.Replicas.ValueInt64()
	configure := !want.Labels.Equal(have.Labels) || !reflect.DeepEqual(want.Taints, have.Taints) || !want.RootDiskSize.Equal(have.RootDiskSize)
	if !scale && !configure {
		return true
	}
	c := r.cce(diags)
	if c == nil {
		return false
	}
	id, pool := state.ClusterID.ValueString(), state.CCE.WorkerPool.ID.ValueString()
	at := path.Root("cce").AtName("worker_pool")
	if scale {
		tflog.Info(ctx, fmt.Sprintf("scaling worker pool %s from %d to %d", pool, have.Replicas.ValueInt64(), want.Replicas.ValueInt64()))
		if err := c.ScaleWorkerPool(ctx, id, pool, int(want.Replicas.ValueInt64())); err != nil {
			diags.Append(diagnostics.FailedAt(at.AtName("replicas"), "Scale Worker Pool Error", "CCE did not scale worker pool "+pool, "", err))
			return false
		}
		if _, err := c.WaitPoolReady(ctx, id, pool, r.interval(), progress(ctx)); err != nil {
			diags.Append(diagnostics.Failed("Scale Worker Pool Error", "Worker pool "+pool+" did not become ready", "", err))
			return false
		}
		state.CCE.WorkerPool.Replicas = want.Replicas
	}
	if configure {
		p, d := want.workerPool(ctx, types.StringNull())
		diags.Append(d...)
		tflog.Info(ctx, "configuring worker pool "+pool+": node labels and taints, root disk size of new machines")
		if err := c.ConfigureWorkerPool(ctx, id, pool, p); err != nil {
			diags.Append(diagnostics.FailedAt(at, "Configure Worker Pool Error", "CCE did not change the labels, taints or root disk size of worker pool "+pool, "", err))
			return false
		}
	}
	return true
}

func (r *clusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, st.Timeouts.Delete, clusterTimeouts.Delete, &resp.Diagnostics)
	defer cancel()

	if st.ClusterID.ValueString() == "" {
		// Adopted: the cluster stays; what ctr_cluster installed of Volcano goes unless asked to stay.
		if _, _, _, keep := st.volcanoSettings(); !keep {
			r.uninstallVolcano(ctx, &st, &resp.Diagnostics)
		}
		return
	}
	// A CCE cluster takes Volcano with it.
	c := r.cce(&resp.Diagnostics)
	if c == nil {
		return
	}
	o := cce.DeleteOptions{DeleteResource: true, DeleteCDSSnapshot: true}
	if st.CCE != nil {
		o = cce.DeleteOptions{DeleteResource: st.CCE.DeleteResource.ValueBool(), DeleteCDSSnapshot: st.CCE.DeleteCDSSnapshot.ValueBool()}
	}
	if err := c.DeleteCluster(ctx, st.ClusterID.ValueString(), o, r.interval(), progress(ctx)); err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Delete Cluster Error", "Could not delete CCE cluster "+st.ClusterID.ValueString(), "", err))
	}
}

// IdentitySchema: a CCE cluster is named by its ID, an adopted one by its API server.
func (r *clusterResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	identitySchema(clusterIdentity)(ctx, req, resp)
}

func (r *clusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	// An adopted cluster is named by the kubeconfig that reaches it; a CCE cluster by its ID.
	if ident, ok := importedIdentity(ctx, req, &resp.Diagnostics); ok {
		// By identity (Terraform 1.12+): a CCE cluster's ID. An adopted cluster's API server
		// says where it is, not how to reach it.
		if ident["cluster_id"] == "" {
			resp.Diagnostics.Append(diagnostics.Failed("Invalid Import Identity",
				"An import by identity takes cluster_id, the ID of a CCE cluster; an adopted cluster's api_server says where it is, not how to reach it",
				`Import a CCE cluster with identity = { cluster_id = "cce-..." }, and an adopted cluster by the kubeconfig that reaches it: `+
					`id = "kubeconfig:PATH" or "kubeconfig:PATH#CONTEXT".`, nil))
			return
		}
		req.ID = ident["cluster_id"]
	}
	if rest, ok := strings.CutPrefix(req.ID, adoptImportPrefix); ok {
		kubeconfig, kctx, _ := strings.Cut(rest, "#")
		if kubeconfig == "" {
			resp.Diagnostics.Append(diagnostics.InvalidImportID(req.ID, importIDForms))
			return
		}
		vals := map[string]attr.Value{}
		for name, typ := range connectionAttrTypes {
			vals[name] = nullOf(typ)
		}
		vals["config_path"] = types.StringValue(kubeconfig)
		if kctx != "" {
			vals["config_context"] = types.StringValue(kctx)
		}
		conn, d := types.ObjectValue(connectionAttrTypes, vals)
		resp.Diagnostics.Append(d...)
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("kubernetes"), conn)...)
		return
	}
	if req.ID == "" || strings.ContainsAny(req.ID, "/ \t\n") {
		resp.Diagnostics.Append(diagnostics.InvalidImportID(req.ID, importIDForms))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster_id"), req.ID)...)
}

// adoptedIDPrefix starts the ID of an adopted cluster, "existing/<API server host>".
const adoptedIDPrefix = "existing/"

// adoptImportPrefix starts the import ID of an adopted cluster: kubeconfig:PATH[#CONTEXT].
const adoptImportPrefix = "kubeconfig:"

// importIDForms is what an import ID may be, for the error that refuses another.
const importIDForms = "a CCE cluster ID, e.g. cce-abcd1234, or for an existing cluster the kubeconfig that reaches it, " +
	"kubeconfig:PATH or kubeconfig:PATH#CONTEXT"

// readAdoptedImport finishes the import of an adopted cluster: the connection from the import
// ID reaches the cluster, and what ctr_cluster installed on it is read back (importVolcano).
func (r *clusterResource) readAdoptedImport(ctx context.Context, st *clusterModel, diags *diag.Diagnostics) {
	id, ok := adoptedID(ctx, st.Kubernetes, diags)
	if !ok {
		return
	}
	st.ID, st.ClusterID, st.Phase, st.Kubeconfig = types.StringValue(id), types.StringValue(""), types.StringValue("adopted"), types.StringValue("")
	st.clearVolcano()
	r.importVolcano(ctx, st, diags)
}

// sameSettings compares what configuration controls, leaving out computed values (unknown in
// a plan) and the write-only password.
func sameSettings(plan, state *clusterModel) bool {
	norm := func(m *clusterModel) clusterModel {
		c := *m
		c.ID, c.ClusterID, c.Phase, c.Kubeconfig = types.StringNull(), types.StringNull(), types.StringNull(), types.StringNull()
		c.clearVolcano()
		c.Timeouts = timeouts.Value{}
		if c.CCE != nil {
			cc := *c.CCE
			if cc.WorkerPool != nil {
				wp := *cc.WorkerPool
				wp.ID, wp.AdminPassword = types.StringNull(), types.StringNull()
				cc.WorkerPool = &wp
			}
			c.CCE = &cc
			c.Kubernetes = types.ObjectNull(connectionAttrTypes) // computed from the cluster
		}
		return c
	}
	return reflect.DeepEqual(norm(plan), norm(state))
}

func (r *clusterResource) cce(diags *diag.Diagnostics) *cce.Client {
	b := baiduCredentials{}
	if r.data != nil {
		b = r.data.baidu
	}
	endpoint := b.CCEEndpoint
	if endpoint == "" {
		endpoint = cce.EndpointFor(b.Region)
	}
	c, err := cce.New(cce.Config{AccessKey: b.AccessKey, SecretKey: b.SecretKey, SessionToken: b.SessionToken, Endpoint: endpoint})
	if err != nil {
		diags.Append(diagnostics.Failed("CCE Configuration Error", "Could not configure the CCE client", "Check the provider's credentials and region.", err))
		return nil
	}
	return c
}

// interval is how often CCE is polled: the provider's cce_poll_interval, else the default.
func (r *clusterResource) interval() time.Duration {
	if r.data != nil && r.data.baidu.PollInterval > 0 {
		return r.data.baidu.PollInterval
	}
	return defaultCCEInterval
}

func progress(ctx context.Context) func(string) { return func(s string) { tflog.Info(ctx, s) } }

// connect reads the kubeconfig of a running CCE cluster into kubeconfig and kubernetes.
func (r *clusterResource) connect(ctx context.Context, c *cce.Client, m *clusterModel, diags *diag.Diagnostics) bool {
	kc, err := c.Kubeconfig(ctx, m.ClusterID.ValueString(), m.CCE.KubeconfigType.ValueString())
	if err != nil {
		diags.Append(diagnostics.Failed("Read Kubeconfig Error", "Could not read the kubeconfig of CCE cluster "+m.ClusterID.ValueString(), "", err))
		return false
	}
	conn, err := connectionFromKubeconfig(kc)
	if err != nil {
		diags.Append(diagnostics.Failed("Read Kubeconfig Error", "The kubeconfig of CCE cluster "+m.ClusterID.ValueString()+" is not usable", "", err))
		return false
	}
	m.Kubeconfig, m.Kubernetes = types.StringValue(kc), conn
	return true
}

// adoptedID is the ID of an adopted cluster, "existing/<API server host>", from its connection.
func adoptedID(ctx context.Context, kubernetes types.Object, diags *diag.Diagnostics) (string, bool) {
	conn, _, d := connection(ctx, kubernetes, nil)
	diags.Append(d...)
	if d.HasError() {
		return "", false
	}
	cfg, err := conn.RESTConfig()
	if err != nil {
		diags.Append(diagnostics.FailedAt(path.Root("kubernetes"), "Invalid Cluster Connection", "Could not configure the connection to the cluster", "", err))
		return "", false
	}
	host := cfg.Host
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		host = u.Host
	}
	return adoptedIDPrefix + host, true
}

// adopt manages only Volcano on an existing cluster.
func (r *clusterResource) adopt(ctx context.Context, plan *clusterModel, state stateLike, diags *diag.Diagnostics) {
	if diags.Append(ownCredentials(plan.Kubernetes)...); diags.HasError() {
		return
	}
	id, ok := adoptedID(ctx, plan.Kubernetes, diags)
	if !ok {
		return
	}
	plan.ID, plan.ClusterID = types.StringValue(id), types.StringValue("")
	plan.Phase, plan.Kubeconfig = types.StringValue("adopted"), types.StringValue("")
	plan.clearVolcano()
	r.applyVolcano(ctx, plan, nil, diags)
	diags.Append(state.Set(ctx, plan)...)
}

func (r *clusterResource) importCCE(ctx context.Context, c *cce.Client, cl *cce.Cluster, st *clusterModel, diags *diag.Diagnostics) {
	spec, pools, err := c.Describe(ctx, cl.ID)
	if err != nil {
		diags.Append(diagnostics.Failed("Import Cluster Error", "Could not describe CCE cluster "+cl.ID, "", err))
		return
	}
	st.CCE = &cceModel{
		Name: types.StringValue(spec.Name), Description: optionalString(spec.Description), K8sVersion: types.StringValue(spec.K8sVersion),
		Runtime: optionalString(spec.Runtime), RuntimeVersion: optionalString(spec.RuntimeVersion), VPCID: types.StringValue(spec.VPCID),
		NetworkMode: optionalString(spec.NetworkMode), PodCIDR: optionalString(spec.PodCIDR), ServiceCIDR: optionalString(spec.ServiceCIDR),
		KubeconfigType: types.StringValue(defaultKubeconfigType), DeleteResource: types.BoolValue(true), DeleteCDSSnapshot: types.BoolValue(true),
	}
	// A master with the defaults is what a configuration without a master block creates.
	if !(spec.MasterType == defaultMasterType && spec.MasterFlavor == defaultMasterFlavor && spec.MasterZone == "" && spec.MasterSubnetID == "" && !spec.ExposedPublic) {
		st.CCE.Master = &masterModel{Type: optionalString(spec.MasterType), Flavor: optionalString(spec.MasterFlavor), Zone: optionalString(spec.MasterZone),
			SubnetID: optionalString(spec.MasterSubnetID), ExposedPublic: types.BoolValue(spec.ExposedPublic)}
	}
	if len(pools) > 0 {
		p := pools[0]
		st.CCE.WorkerPool = &workerPoolModel{ID: types.StringValue(p.ID), Name: types.StringValue(p.Name), Replicas: types.Int64Value(int64(p.Replicas)),
			MachineSpec: optionalString(p.MachineSpec), InstanceType: optionalString(p.InstanceType), SubnetID: optionalString(p.SubnetID), SecurityGroupID: optionalString(p.SecurityGroupID),
			Zone: optionalString(p.Zone), RootDiskSize: types.Int64Value(int64(p.RootDiskSize)), ImageID: optionalString(p.ImageID), SSHKeyID: optionalString(p.SSHKeyID),
			Labels: types.MapNull(types.StringType), AdminPassword: types.StringNull()}
		if len(p.Labels) > 0 {
			lv, d := types.MapValueFrom(ctx, types.StringType, p.Labels)
			diags.Append(d...)
			st.CCE.WorkerPool.Labels = lv
		}
		for _, t := range p.Taints {
			st.CCE.WorkerPool.Taints = append(st.CCE.WorkerPool.Taints, taintModel{Key: types.StringValue(t.Key), Value: optionalString(t.Value), Effect: types.StringValue(t.Effect)})
		}
	}
	if cl.Phase == "running" && r.connect(ctx, c, st, diags) {
		r.importVolcano(ctx, st, diags)
	}
}
