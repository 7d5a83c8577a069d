package provider

import (
	"context"
	"fmt"
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
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// NewQueueResource is the ctr_queue resource.
func NewQueueResource() resource.Resource { return &queueResource{} }

// queueResource creates a Volcano queue for training jobs and deletes it on destroy — only
// one it created: its owner label says so. A queue that exists already is refused, never
// taken over, as ctr_namespace refuses a namespace.
type queueResource struct{ resourceBase }

// queueTimeouts bound create (which waits until Volcano opens the queue) and delete.
var queueTimeouts = opTimeouts{Create: 5 * time.Minute, Update: 5 * time.Minute, Delete: 5 * time.Minute,
	CreateWaits: "How long to wait until Volcano has opened the queue (state `Open`), so that jobs may be submitted to it."}

func (r *queueResource) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = stack.QueueType
}

func (r *queueResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A Volcano queue (`scheduling.volcano.sh/v1beta1` `Queue`, cluster-scoped) that training jobs are submitted to, " +
			"created by ctr and deleted on destroy. Volcano's admission webhook refuses a job whose queue does not exist or is not open: " +
			"reference the queue from the job (`queue = ctr_queue.this.name`), so that Terraform creates it first (apply waits until " +
			"Volcano has opened it) and deletes it after the job. A training job whose queue is neither on the cluster nor planned in " +
			"the same run is refused at plan time when the plan can reach the cluster.\n\n" +
			"**Only what ctr created.** A queue that already exists is refused at apply, never taken over: name it in the jobs' `queue` " +
			"directly. Volcano's own `default` and `root` queues are refused at plan time. The queue carries the label `" + stack.OwnerLabel +
			" = " + stack.QueueType + ".<name>`, and destroy deletes a queue only when it still carries it. Queues are cluster-scoped: the " +
			"identity Terraform runs as needs rights on `queues.scheduling.volcano.sh` across the cluster (see the RBAC guide).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The queue's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceStr(),
				MarkdownDescription: fmt.Sprintf("Name of the queue: at most %d lowercase letters, digits and `-`, starting and ending with a letter or digit; "+
					"not %s. Changing it creates a new queue (and deletes the old one).", stack.MaxNamespaceLength, quoted(stack.ReservedQueues)),
				Validators: []validator.String{stringvalidator.RegexMatches(stack.NamespacePattern, stack.NamespaceRule)}},
			"weight": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultQueueWeight),
				MarkdownDescription: fmt.Sprintf("The queue's share of the cluster against the other queues' weights, %d to %d. Defaults to `%d`. "+
					"Changes in place.", stack.MinQueueWeight, stack.MaxQueueWeight, stack.DefaultQueueWeight),
				Validators: []validator.Int64{int64validator.Between(stack.MinQueueWeight, stack.MaxQueueWeight)}},
			"capability": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "The most the queue's jobs may use at once, by resource, e.g. `{ cpu = \"64\", memory = \"256Gi\", \"nvidia.com/gpu\" = \"8\" }` " +
					"(Kubernetes quantities). Unset: no cap beyond the cluster. Changes in place."},
			"reclaimable": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(stack.DefaultQueueReclaimable),
				MarkdownDescription: fmt.Sprintf("Whether other queues may take back (by preemption) what this queue's jobs use beyond its share. "+
					"Defaults to `%t`. Changes in place.", stack.DefaultQueueReclaimable)},
			"kubernetes": connectionResourceAttribute(),
			"timeouts":   queueTimeouts.attribute(ctx),
		},
	}
}

func (r *queueResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m queueModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !fullyKnown(m.Name) || !fullyKnown(m.Capability) {
		return
	}
	resp.Diagnostics.Append(settingErrors("Queue", m.settings(ctx, &resp.Diagnostics).Validate())...)
}

// ModifyPlan refuses, at plan time, a queue that no connection could reach, and tells the
// training jobs planned after it in this run that the queue they name is coming.
func (r *queueResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var own types.Object
	var name, prior types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("kubernetes"), &own)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("name"), &name)...)
	requireConnection(ctx, own, r.data, &resp.Diagnostics)
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("name"), &prior)...)
	}
	if r.data != nil && !name.IsUnknown() && !name.Equal(prior) {
		r.data.queues.plan(name.ValueString())
	}
}

func (r *queueResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer identityFromState(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan queueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Create, queueTimeouts.Create, &resp.Diagnostics)
	defer cancel()
	kc, set, live, ok := r.live(ctx, &plan, "Create Queue Error", &resp.Diagnostics)
	if !ok {
		return
	}
	name := plan.Name.ValueString()
	if live != nil {
		resp.Diagnostics.Append(existingQueue(name, live))
		return
	}
	if _, err := kc.Apply(ctx, set); err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Create Queue Error", "Could not create Volcano queue "+name, "", err))
		return
	}
	plan.ID = types.StringValue(name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if _, err := kc.WaitFor(ctx, set[0].Object, queueOpen); err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Create Queue Error", "Volcano queue "+name+" was created but did not open",
			"Volcano's controller opens a new queue: check that it runs (kubectl -n volcano-system get pods), or raise timeouts.create.", err))
	}
}

// queueOpen is done when Volcano's queue controller has opened the queue.
func queueOpen(u *unstructured.Unstructured) (bool, string, error) {
	s := stack.QueueState(u)
	if s == "" {
		s = "no state yet"
	}
	return s == stack.QueueOpen, s, nil
}

// existingQueue refuses to take over a queue that exists already.
func existingQueue(name string, live *unstructured.Unstructured) diag.Diagnostic {
	if stack.CreatedQueue(live) {
		return diagnostics.FailedAt(path.Root("name"), "Queue Already Exists", "Volcano queue "+name+" exists and carries the owner label "+
			"of a ctr_queue: another configuration manages it, or it lost track of it",
			"If this configuration should manage it, import it: terraform import <address> "+name+".", nil)
	}
	return diagnostics.FailedAt(path.Root("name"), "Queue Already Exists", "Volcano queue "+name+" exists and was not created by ctr; "+
		"ctr_queue creates queues and deletes them on destroy, so it never takes over one it did not create",
		"Leave this ctr_queue out and set the training jobs' queue to \""+name+"\".", nil)
}

func (r *queueResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer readIdentity(ctx, req.State, &resp.State, resp.Identity, &resp.Diagnostics)
	var st queueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() || connectionPending(ctx, st.Kubernetes, r.data) {
		return
	}
	_, _, live, ok := r.live(ctx, &queueModel{Name: st.Name, Kubernetes: st.Kubernetes}, "Read Queue Error", &resp.Diagnostics)
	if !ok {
		return
	}
	name := st.Name.ValueString()
	if live == nil {
		tflog.Warn(ctx, "Volcano queue "+name+" no longer exists; removing it from state")
		resp.State.RemoveResource(ctx)
		return
	}
	if !stack.CreatedQueue(live) {
		resp.Diagnostics.Append(diagnostics.Failed("Read Queue Error", "Volcano queue "+name+" does not carry ctr's owner label "+
			stack.OwnerLabel+"="+stack.Owner(stack.QueueType, name)+": ctr did not create it",
			"ctr_queue manages only queues it created; remove it from this configuration (a removed block with destroy = false) "+
				"and set the training jobs' queue to its name.", nil))
		return
	}
	imported := st.Weight.IsNull() // import sets only id and name
	st.fromLive(ctx, stack.QueueFromLive(live), imported, &resp.Diagnostics)
	st.ID = types.StringValue(name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *queueResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer identityFromState(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan queueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Update, queueTimeouts.Update, &resp.Diagnostics)
	defer cancel()
	set, ok := r.render(ctx, &plan, &resp.Diagnostics)
	if !ok {
		return
	}
	kc, d := kubeClient(ctx, plan.Kubernetes, r.data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Server-side apply: a capability dropped from the configuration is removed.
	if _, err := kc.Apply(ctx, set); err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Update Queue Error", "Could not update Volcano queue "+plan.Name.ValueString(), "", err))
		return
	}
	plan.ID = plan.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *queueResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st queueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, st.Timeouts.Delete, queueTimeouts.Delete, &resp.Diagnostics)
	defer cancel()
	kc, set, live, ok := r.live(ctx, &queueModel{Name: st.Name, Kubernetes: st.Kubernetes}, "Delete Queue Error", &resp.Diagnostics)
	if !ok || live == nil {
		return
	}
	name := st.Name.ValueString()
	queueKind.deleteIfCreated(ctx, kc, set, live, name, &resp.Diagnostics)
}

// IdentitySchema: the object is named by its name alone (it is cluster-scoped).
func (r *queueResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	identitySchema(namedIdentity)(ctx, req, resp)
}

// ImportState takes the name, as the import ID or (Terraform 1.12+) the identity's name.
func (r *queueResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	queueKind.importByName(ctx, req, resp)
}

// queueKind is what ctr_queue shares with ctr_namespace.
var queueKind = namedKind{title: "Queue", noun: "Volcano queue", plural: "queues", idName: "a queue name", example: "training", created: stack.CreatedQueue}

// live renders m's queue and reads it through m's connection: the client, the rendered set,
// and the queue as it is in the cluster (nil when there is none). It reports a failure under
// summary ("Read Queue Error") and then returns ok false.
func (r *queueResource) live(ctx context.Context, m *queueModel, summary string, diags *diag.Diagnostics) (*kube.Client, stack.Set, *unstructured.Unstructured, bool) {
	set, ok := r.render(ctx, m, diags)
	if !ok {
		return nil, nil, nil, false
	}
	kc, d := kubeClient(ctx, m.Kubernetes, r.data)
	diags.Append(d...)
	if diags.HasError() {
		return nil, nil, nil, false
	}
	live, err := kc.Get(ctx, set[0].Object)
	if err != nil {
		diags.Append(diagnostics.Failed(summary, "Could not read Volcano queue "+m.Name.ValueString(), kube.Hint(err), err))
		return nil, nil, nil, false
	}
	return kc, set, live, true
}

// render is the queue's object set.
func (r *queueResource) render(ctx context.Context, m *queueModel, diags *diag.Diagnostics) (stack.Set, bool) {
	set, err := stack.RenderQueue(m.settings(ctx, diags))
	if err != nil {
		diags.Append(renderError("Queue", err)...)
		return nil, false
	}
	return set, !diags.HasError()
}

type queueModel struct {
	ID          types.String   `tfsdk:"id"`
	Name        types.String   `tfsdk:"name"`
	Weight      types.Int64    `tfsdk:"weight"`
	Capability  types.Map      `tfsdk:"capability"`
	Reclaimable types.Bool     `tfsdk:"reclaimable"`
	Kubernetes  types.Object   `tfsdk:"kubernetes"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
}

func (m *queueModel) settings(ctx context.Context, diags *diag.Diagnostics) stack.Queue {
	q := stack.Queue{Name: m.Name.ValueString(), Weight: int32(m.Weight.ValueInt64()), Capability: stringMap(ctx, m.Capability, diags)}
	if !m.Reclaimable.IsNull() && !m.Reclaimable.IsUnknown() {
		q.Reclaimable = m.Reclaimable.ValueBoolPointer()
	}
	return q
}

// fromLive sets the settings from the live queue. After an import every capability is the
// configuration's; else only those it sets (someone else's show no drift), each kept as the
// configuration spells it while the live quantity is the same ("1000m" stays, not "1").
func (m *queueModel) fromLive(ctx context.Context, q stack.Queue, imported bool, diags *diag.Diagnostics) {
	m.Weight, m.Reclaimable = types.Int64Value(int64(q.Weight)), types.BoolPointerValue(q.Reclaimable)
	if !imported && m.Capability.IsNull() {
		return // none configured, none tracked
	}
	mine := stringMap(ctx, m.Capability, diags)
	out := map[string]attr.Value{}
	for k, v := range q.Capability {
		was, ok := mine[k]
		if !imported && !ok {
			continue
		}
		if ok && stack.SameQuantity(was, v) {
			v = was
		}
		out[k] = types.StringValue(v)
	}
	if imported && len(out) == 0 {
		m.Capability = types.MapNull(types.StringType)
		return
	}
	m.Capability = types.MapValueMust(types.StringType, out)
}
