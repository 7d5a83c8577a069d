package provider

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
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

// NewNamespaceResource is the ctr_namespace resource.
func NewNamespaceResource() resource.Resource { return &namespaceResource{} }

// namespaceResource creates a namespace for a stack and deletes it on destroy — only one it
// created: its owner label says so. A namespace that exists already is refused, never
// taken over, so destroy cannot delete what someone else made.
type namespaceResource struct{ resourceBase }

// importedKey marks, in private state, a namespace Read has not read since its import.
const importedKey = "imported"

// namespaceTimeouts bound create and delete (which waits until everything in it is gone).
var namespaceTimeouts = opTimeouts{Create: 10 * time.Minute, Delete: 10 * time.Minute,
	DeleteWaits: "How long to wait until the namespace and everything in it is gone."}

// Metadata names the resource by the type its owner label carries.
func (r *namespaceResource) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = stack.NamespaceType
}

func (r *namespaceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A namespace for a stack, created by ctr and deleted on destroy, for a stack that lands in its own " +
			"namespace on a cluster created in the same apply. Reference it from the workloads (`namespace = ctr_namespace.this.name`) " +
			"so that it is created before them and deleted after them.\n\n" +
			"**Only what ctr created.** A namespace that already exists is refused at apply, never taken over: use its name " +
			"directly instead. The namespace carries the label `" + stack.OwnerLabel + " = " + stack.NamespaceType + ".<name>`, and " +
			"destroy deletes a namespace only when it still carries it, so destroy never deletes a namespace ctr did not create. " +
			"Deleting a namespace deletes everything in it; destroy waits until it is gone.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The namespace's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceStr(),
				MarkdownDescription: "Name of the namespace. Changing it creates a new namespace (and deletes the old one with everything in it).",
				Validators:          []validator.String{stringvalidator.RegexMatches(stack.NamespacePattern, stack.NamespaceRule)}},
			"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Labels of the namespace (e.g. Pod Security admission's `pod-security.kubernetes.io/enforce`), besides ctr's own. " +
					"Changes in place; a value changed outside Terraform shows in the plan."},
			"annotations": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Annotations of the namespace. Changes in place."},
			"kubernetes": connectionResourceAttribute(),
			"timeouts":   namespaceTimeouts.attribute(ctx),
		},
	}
}

func (r *namespaceResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m namespaceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !modelKnown(&m, namespaceSkips()) {
		return // judged once known
	}
	resp.Diagnostics.Append(settingErrors("Namespace", m.settings(ctx, &resp.Diagnostics).Validate())...)
}

// namespaceSkips are the attributes of ctr_namespace its settings do not read.
var namespaceSkips = sync.OnceValue(func() map[string]bool {
	var resp resource.SchemaResponse
	(&namespaceResource{}).Schema(context.Background(), resource.SchemaRequest{}, &resp)
	return rendererSkips(resp.Schema)
})

// ModifyPlan refuses, at plan time, a namespace that no connection could reach.
func (r *namespaceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var own types.Object
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("kubernetes"), &own)...)
	requireConnection(ctx, own, r.data, &resp.Diagnostics)
}

func (r *namespaceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer identityFromState(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan namespaceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(ownCredentials(plan.Kubernetes)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Create, namespaceTimeouts.Create, &resp.Diagnostics)
	defer cancel()
	kc, set, live, ok := r.live(ctx, &plan, "Create Namespace Error", &resp.Diagnostics)
	if !ok {
		return
	}
	name := plan.Name.ValueString()
	if live != nil {
		resp.Diagnostics.Append(existingNamespace(name, live))
		return
	}
	if _, err := kc.Apply(ctx, set); err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Create Namespace Error", "Could not create namespace "+name, "", err))
		return
	}
	plan.ID = types.StringValue(name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// existingNamespace refuses to take over a namespace that exists already.
func existingNamespace(name string, live *unstructured.Unstructured) diag.Diagnostic {
	if stack.CreatedNamespace(live) {
		return diagnostics.FailedAt(path.Root("name"), "Namespace Already Exists", "Namespace "+name+" exists and carries the owner label "+
			"of a ctr_namespace: another configuration manages it, or it lost track of it",
			"If this configuration should manage it, import it: terraform import <address> "+name+".", nil)
	}
	return diagnostics.FailedAt(path.Root("name"), "Namespace Already Exists", "Namespace "+name+" exists and was not created by ctr; "+
		"ctr_namespace creates namespaces and deletes them on destroy, so it never takes over one it did not create",
		"Leave ctr_namespace out and set the resources' namespace to \""+name+"\".", nil)
}

func (r *namespaceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer readIdentity(ctx, req.State, &resp.State, resp.Identity, &resp.Diagnostics)
	var st namespaceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() || connectionPending(ctx, st.Kubernetes, r.data) {
		return
	}
	imported, d := req.Private.GetKey(ctx, importedKey)
	resp.Diagnostics.Append(d...)
	_, _, live, ok := r.live(ctx, &namespaceModel{Name: st.Name, Kubernetes: st.Kubernetes}, "Read Namespace Error", &resp.Diagnostics)
	if !ok {
		return
	}
	name := st.Name.ValueString()
	if live == nil {
		tflog.Warn(ctx, "namespace "+name+" no longer exists; removing it from state")
		resp.State.RemoveResource(ctx)
		return
	}
	if !stack.CreatedNamespace(live) {
		resp.Diagnostics.Append(diagnostics.Failed("Read Namespace Error", "Namespace "+name+" does not carry ctr's owner label "+
			stack.OwnerLabel+"="+stack.Owner(stack.NamespaceType, name)+": ctr did not create it",
			"ctr_namespace manages only namespaces it created; remove it from this configuration (a removed block with destroy = false) "+
				"and set the resources' namespace to its name.", nil))
		return
	}
	if len(imported) > 0 {
		// Everything but ctr's and Kubernetes' own labels is the configuration's.
		st.Labels = liveMap(ctx, live.GetLabels(), func(k string) bool { return !stack.IsReservedLabel(k) }, &resp.Diagnostics)
		st.Annotations = liveMap(ctx, live.GetAnnotations(), func(string) bool { return true }, &resp.Diagnostics)
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, nil)...)
	} else {
		// Drift of what this configuration set; what others add is theirs.
		st.Labels = liveMap(ctx, live.GetLabels(), tracked(ctx, st.Labels, &resp.Diagnostics), &resp.Diagnostics)
		st.Annotations = liveMap(ctx, live.GetAnnotations(), tracked(ctx, st.Annotations, &resp.Diagnostics), &resp.Diagnostics)
	}
	st.ID = types.StringValue(name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

// liveMap is the part of a live label or annotation map that state tracks: the keys keep
// says. Empty is null.
func liveMap(ctx context.Context, live map[string]string, keep func(string) bool, diags *diag.Diagnostics) types.Map {
	out := map[string]string{}
	for k, v := range live {
		if keep(k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return types.MapNull(types.StringType)
	}
	return optionalStringMap(ctx, out, diags)
}

// tracked keeps the keys of a map in state.
func tracked(ctx context.Context, m types.Map, diags *diag.Diagnostics) func(string) bool {
	keys := stringMap(ctx, m, diags)
	return func(k string) bool { _, ok := keys[k]; return ok }
}

func (r *namespaceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer identityFromState(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan namespaceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(ownCredentials(plan.Kubernetes)...)
	if resp.Diagnostics.HasError() {
		return
	}
	set, ok := r.render(ctx, &plan, &resp.Diagnostics)
	if !ok {
		return
	}
	kc, d := kubeClient(ctx, plan.Kubernetes, r.data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Server-side apply: labels and annotations dropped from the configuration are removed.
	if _, err := kc.Apply(ctx, set); err != nil {
		resp.Diagnostics.Append(diagnostics.Failed("Update Namespace Error", "Could not update namespace "+plan.Name.ValueString(), "", err))
		return
	}
	plan.ID = plan.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *namespaceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st namespaceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, st.Timeouts.Delete, namespaceTimeouts.Delete, &resp.Diagnostics)
	defer cancel()
	kc, set, live, ok := r.live(ctx, &namespaceModel{Name: st.Name, Kubernetes: st.Kubernetes}, "Delete Namespace Error", &resp.Diagnostics)
	if !ok {
		return
	}
	name := st.Name.ValueString()
	if live == nil {
		return
	}
	namespaceKind.deleteIfCreated(ctx, kc, set, live, name, &resp.Diagnostics)
}

// IdentitySchema: the object is named by its name alone (it is cluster-scoped).
func (r *namespaceResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	identitySchema(namedIdentity)(ctx, req, resp)
}

// ImportState takes the name, as the import ID or (Terraform 1.12+) the identity's name.
func (r *namespaceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if namespaceKind.importByName(ctx, req, resp) {
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, []byte("true"))...)
	}
}

// namespaceKind is what ctr_namespace shares with ctr_queue.
var namespaceKind = namedKind{title: "Namespace", noun: "namespace", plural: "namespaces", idName: "a namespace name", example: "ctr-ads", created: stack.CreatedNamespace}

// render is the namespace's object set.
// live renders m's namespace and reads it through m's connection: the client, the rendered
// set, and the namespace as it is in the cluster (nil when there is none). It reports a
// failure under summary ("Read Namespace Error") and then returns ok false.
func (r *namespaceResource) live(ctx context.Context, m *namespaceModel, summary string, diags *diag.Diagnostics) (*kube.Client, stack.Set, *unstructured.Unstructured, bool) {
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
		diags.Append(diagnostics.Failed(summary, "Could not read namespace "+m.Name.ValueString(), "", err))
		return nil, nil, nil, false
	}
	return kc, set, live, true
}

func (r *namespaceResource) render(ctx context.Context, m *namespaceModel, diags *diag.Diagnostics) (stack.Set, bool) {
	set, err := stack.RenderNamespace(m.settings(ctx, diags))
	if err != nil {
		diags.Append(renderError("Namespace", err)...)
		return nil, false
	}
	return set, !diags.HasError()
}

type namespaceModel struct {
	ID          types.String   `tfsdk:"id"`
	Name        types.String   `tfsdk:"name"`
	Labels      types.Map      `tfsdk:"labels"`
	Annotations types.Map      `tfsdk:"annotations"`
	Kubernetes  types.Object   `tfsdk:"kubernetes"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
}

func (m *namespaceModel) settings(ctx context.Context, diags *diag.Diagnostics) stack.Namespace {
	return stack.Namespace{Name: m.Name.ValueString(), Labels: stringMap(ctx, m.Labels, diags), Annotations: stringMap(ctx, m.Annotations, diags)}
}
