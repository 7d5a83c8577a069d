package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// The lifecycle that ctr_training_job, ctr_cube and ctr_serving share, in the spirit of
// controller-runtime's small interfaces: each resource configures one workload (what it is
// called, what it owns, how it renders) and its model implements workloadModel. What is a
// resource's own (the training job's replacement, the cube's shard layout) stays in its file.

// resourceBase is what every resource of this provider embeds: the provider's data, set by
// one Configure.
type resourceBase struct{ data *providerData }

func (b *resourceBase) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return // validation before the provider is configured
	}
	data, ok := req.ProviderData.(*providerData)
	if !ok {
		resp.Diagnostics.Append(diagnostics.Failed("Unexpected Provider Data", fmt.Sprintf("Expected *providerData, got %T", req.ProviderData),
			"Please report this issue to the provider developers.", nil))
		return
	}
	b.data = data
}

// images are the provider's default images: this repository's at the provider's version
// (ctr_cube, the training job's file server) and the others, moved to image_registry.
func (b *resourceBase) images() stack.Images { return imagesOf(b.data) }

func imagesOf(data *providerData) stack.Images {
	if data == nil {
		return stack.Images{}
	}
	return stack.Images{ProviderVersion: data.version, Registry: data.imageRegistry}
}

// workloadAttrs are the attributes every workload resource has; each model embeds them.
type workloadAttrs struct {
	ID         types.String   `tfsdk:"id"`
	Name       types.String   `tfsdk:"name"`
	Namespace  types.String   `tfsdk:"namespace"`
	Stack      types.String   `tfsdk:"stack"`
	Kubernetes types.Object   `tfsdk:"kubernetes"`
	Timeouts   timeouts.Value `tfsdk:"timeouts"`
	Manifests  types.Map      `tfsdk:"manifests"`
	Adopt      types.Bool     `tfsdk:"adopt"`
}

func (a *workloadAttrs) attrs() *workloadAttrs { return a }

// justImported is the one "just imported" signal: import sets only id, namespace and name,
// and every plan and apply sets manifests.
func (a *workloadAttrs) justImported() bool { return a.Manifests.IsNull() }

func (a *workloadAttrs) describe(kind string) string {
	return fmt.Sprintf("%s %s/%s", strings.ToLower(kind), a.Namespace.ValueString(), a.Name.ValueString())
}

// workloadModel is what the shared lifecycle asks of a workload resource's model. S is the
// resource's settings in internal/stack (stack.Cube, ...).
type workloadModel[S any] interface {
	attrs() *workloadAttrs
	// settings converts the model to stack's settings, with this provider's default images.
	settings(ctx context.Context, images stack.Images) (S, diag.Diagnostics)
	// setComputed sets what rendering determines besides manifests (id, URLs, cube_conf).
	setComputed(ctx context.Context, s S, diags *diag.Diagnostics)
	// fromCluster rebuilds the configuration from the cluster after an import: the settings
	// annotation of the primary object and the Secrets it leaves out. false: not there.
	fromCluster(ctx context.Context, kc *kube.Client, diags *diag.Diagnostics) bool
	// readLive sets what the live objects report (the training job's phase, what the cube's
	// replicas serve); live holds the objects that exist, by manifests key.
	readLive(ctx context.Context, kc *kube.Client, s S, live map[string]*unstructured.Unstructured, diags *diag.Diagnostics)
}

// workload configures the shared lifecycle for one resource. M is its model, P *M.
type workload[S interface{ Validate() stack.FieldErrors }, M any, P interface {
	*M
	workloadModel[S]
}] struct {
	kind   string                               // in diagnostics: "Cube" -> "Invalid Cube Setting", "Apply Cube Error"
	typ    string                               // the Terraform type in owner labels: stack.CubeType
	kinds  []schema.GroupVersionKind            // what it prunes and deletes: stack.CubeKinds
	schema func(context.Context) rschema.Schema // the resource's schema: cubeSchema
	// render renders the settings: the objects, and the settings with every default filled in
	// (what callers read back, so that none needs a Defaulted() of its own).
	render func(S) (S, stack.Set, error)
	// unrendered are the attributes besides manifests that rendering sets, made unknown when
	// the plan cannot be read (a nested object, or a value inside one, known only after apply).
	unrendered map[string]attr.Value
	// Default timeouts of create (and update) and of delete.
	timeouts opTimeouts
	// defaultImage is the `image` planned when the configuration leaves it unset (not a static
	// schema default: it follows the provider's image_registry, and may depend on other
	// settings of the configuration; false when those are not known yet), and imageReplaces
	// says whether a changed image replaces the resource.
	defaultImage  func(ctx context.Context, config tfsdk.Config, images stack.Images) (string, bool)
	imageReplaces bool
	// afterDelete, if set, waits for what goes only after the deleted objects (the cube
	// servers' claims), inside the same delete timeout and with the same client.
	afterDelete func(ctx context.Context, kc *kube.Client, m P) error
	// deletedOnPurpose, if set, are the manifests keys of rendered objects that the cluster
	// deletes by itself (a finished Volcano Job with a TTL): a read that finds one gone keeps
	// the state's manifest of it, so that its absence is neither drift nor recreated.
	deletedOnPurpose func(S) []string

	// Derived by newWorkload from the schema.
	skips func() map[string]bool // the attributes rendering does not read (rendererSkips)
}

// newWorkload completes a workload with what its schema says: the attributes rendering does
// not read (see rendererSkips).
func newWorkload[S interface{ Validate() stack.FieldErrors }, M any, P interface {
	*M
	workloadModel[S]
}](w workload[S, M, P]) workload[S, M, P] {
	w.skips = sync.OnceValue(func() map[string]bool { return rendererSkips(w.schema(context.Background())) })
	return w
}

// known reports whether every value of m that rendering reads is known (not "known after
// apply"): see modelKnown.
func (w workload[S, M, P]) known(m P) bool { return modelKnown(m, w.skips()) }

// workloadResource is what the three workload resources share of the resource.Resource
// methods: each hands over to the resource's workload (w) and, for create and update, to
// the resource's own apply. A resource embeds it and adds ModifyPlan and apply.
type workloadResource[S interface{ Validate() stack.FieldErrors }, M any, P interface {
	*M
	workloadModel[S]
}] struct {
	resourceBase
	w     *workload[S, M, P]
	apply func(ctx context.Context, plan, prior P, state stateLike, diags *diag.Diagnostics)
}

// resource is the shared part of w's resource, with its apply.
func (w *workload[S, M, P]) resource(apply func(ctx context.Context, plan, prior P, state stateLike, diags *diag.Diagnostics)) workloadResource[S, M, P] {
	return workloadResource[S, M, P]{w: w, apply: apply}
}

// Metadata names the resource by the type its owner labels carry (stack.CubeType, ...).
func (r *workloadResource[S, M, P]) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = r.w.typ
}

func (r *workloadResource[S, M, P]) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = r.w.schema(ctx)
}

func (r *workloadResource[S, M, P]) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	r.w.validate(ctx, req.Config, r.images(), &resp.Diagnostics)
}

// IdentitySchema: a workload is named by its namespace and name.
func (r *workloadResource[S, M, P]) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	identitySchema(namespacedIdentity)(ctx, req, resp)
}

func (r *workloadResource[S, M, P]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer identityFromState(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	r.w.create(ctx, req, resp, r.apply)
}

func (r *workloadResource[S, M, P]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer readIdentity(ctx, req.State, &resp.State, resp.Identity, &resp.Diagnostics)
	r.w.read(ctx, r.data, r.images(), req, resp)
}

func (r *workloadResource[S, M, P]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer identityFromState(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	r.w.update(ctx, req, resp, r.apply)
}

func (r *workloadResource[S, M, P]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	r.w.delete(ctx, r.data, req, resp)
}

func (r *workloadResource[S, M, P]) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByNamespaceName(ctx, req, resp)
}

// stateLike is the part of tfsdk.State that apply needs.
type stateLike interface {
	Set(context.Context, any) diag.Diagnostics
}

// validate is ValidateConfig: what the schema cannot check (see internal/stack/validate.go),
// each error at its attribute. Values not known until apply are checked when they are.
func (w workload[S, M, P]) validate(ctx context.Context, config tfsdk.Config, images stack.Images, diags *diag.Diagnostics) {
	if !readable[M](config.Raw) {
		return
	}
	var m M
	diags.Append(config.Get(ctx, &m)...)
	if diags.HasError() || !w.known(&m) {
		return
	}
	s, d := P(&m).settings(ctx, images)
	diags.Append(d...)
	if !d.HasError() {
		diags.Append(settingErrors(w.kind, s.Validate())...)
	}
}

// planned reads ModifyPlan's plan, or nil when there is nothing to render: a destroy, or a
// nested object (or a value inside one) or the provider's image_registry known only after
// apply (then manifests are unknown; see readable). A resource that has no connection anywhere is refused here, at plan time.
func (w workload[S, M, P]) planned(ctx context.Context, data *providerData, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) P {
	if req.Plan.Raw.IsNull() {
		return nil
	}
	var own types.Object
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("kubernetes"), &own)...)
	requireConnection(ctx, own, data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return nil
	}
	w.planDefaultImage(ctx, data, req, resp)
	if !readable[M](req.Plan.Raw) || (data != nil && data.registryUnknown) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("manifests"), unknownManifests())...)
		for name, v := range w.unrendered {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(name), v)...)
		}
		return nil
	}
	var m M
	resp.Diagnostics.Append(resp.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return nil
	}
	return &m
}

// planDefaultImage plans the provider's default image (moved to image_registry) for an
// `image` the configuration leaves unset.
func (w workload[S, M, P]) planDefaultImage(ctx context.Context, data *providerData, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if w.defaultImage == nil {
		return
	}
	var configured, prior types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("image"), &configured)...)
	if !configured.IsNull() || resp.Diagnostics.HasError() {
		return
	}
	name, known := w.defaultImage(ctx, req.Config, imagesOf(data))
	image := types.StringValue(name)
	if !known || (data != nil && data.registryUnknown) {
		image = types.StringUnknown()
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("image"), image)...)
	if w.imageReplaces && !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("image"), &prior)...)
		if !prior.Equal(image) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("image"))
		}
	}
}

// prior reads the state a plan or an update starts from; nil on create.
func (w workload[S, M, P]) prior(ctx context.Context, state tfsdk.State, diags *diag.Diagnostics) P {
	if state.Raw.IsNull() {
		return nil
	}
	var m M
	diags.Append(state.Get(ctx, &m)...)
	return &m
}

// rendered renders a model: its settings, its objects, and its manifests and computed
// attributes set from them.
func (w workload[S, M, P]) rendered(ctx context.Context, m P, images stack.Images, diags *diag.Diagnostics) (S, stack.Set, bool) {
	s, set, ok := w.objects(ctx, m, images, diags)
	if !ok {
		return s, nil, false
	}
	m.attrs().Manifests = manifestsValue(ctx, set, diags)
	return s, set, !diags.HasError()
}

// objects is rendered without the manifests, which are most of its time: for a read, which
// shows the live objects instead, and for an apply, whose plan has them already.
func (w workload[S, M, P]) objects(ctx context.Context, m P, images stack.Images, diags *diag.Diagnostics) (S, stack.Set, bool) {
	s, d := m.settings(ctx, images)
	diags.Append(d...)
	if d.HasError() {
		return s, nil, false
	}
	defaulted, set, err := w.render(s)
	if err != nil {
		diags.Append(renderError(w.kind, err)...)
		return s, nil, false
	}
	m.setComputed(ctx, defaulted, diags)
	return defaulted, set, !diags.HasError()
}

// create and update read the plan (and the prior state), bound the context by the
// resource's timeouts, and hand over to the resource's apply.
func (w workload[S, M, P]) create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse,
	apply func(ctx context.Context, plan, prior P, state stateLike, diags *diag.Diagnostics)) {
	var plan M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, P(&plan).attrs().Timeouts.Create, w.timeouts.Create, &resp.Diagnostics)
	defer cancel()
	apply(ctx, &plan, nil, &resp.State, &resp.Diagnostics)
}

func (w workload[S, M, P]) update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse,
	apply func(ctx context.Context, plan, prior P, state stateLike, diags *diag.Diagnostics)) {
	var plan, prior M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if unchanged(P(&prior).attrs(), P(&plan).attrs()) {
		// Only what is not rendered changed (timeouts, a training job's wait): nothing to do
		// in the cluster, and the plan kept the live values (ModifyPlan).
		tflog.Info(ctx, P(&plan).attrs().describe(w.kind)+": no object changes; only the state is updated")
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	ctx, cancel := withTimeout(ctx, P(&plan).attrs().Timeouts.Update, w.timeouts.Update, &resp.Diagnostics)
	defer cancel()
	apply(ctx, &plan, &prior, &resp.State, &resp.Diagnostics)
}

// unchanged reports whether applying plan over prior changes nothing in the cluster: the
// same objects through the same connection. ModifyPlan then keeps the live attributes of the
// prior state, and Update only saves the plan.
func unchanged(prior, plan *workloadAttrs) bool {
	return prior != nil && !plan.Manifests.IsUnknown() && plan.Manifests.Equal(prior.Manifests) &&
		!plan.Kubernetes.IsUnknown() && plan.Kubernetes.Equal(prior.Kubernetes)
}

// converge renders the plan and server-side applies its objects, pruning the owned objects
// no longer rendered unless the resource prunes later itself (prune false). creating: the
// resource does not exist yet, so an apply that fails half-way removes what it created
// (cleanUp) instead of leaving objects that no state names.
// Objects of the keys in gone are not applied (objects the cluster deleted on purpose, see
// deletedOnPurpose) and not pruned either.
func (w workload[S, M, P]) converge(ctx context.Context, data *providerData, plan P, images stack.Images, creating, prune bool, state stateLike, diags *diag.Diagnostics,
	gone ...string) (*kube.Client, S, stack.Set, bool) {
	// Known manifests in the plan are what ModifyPlan rendered from these very settings
	// (rendering is deterministic); unknown ones (settings known only now) are rendered here.
	render := w.objects
	if plan.attrs().Manifests.IsUnknown() || plan.attrs().Manifests.IsNull() {
		render = w.rendered
	}
	s, set, ok := render(ctx, plan, images, diags)
	if !ok {
		return nil, s, nil, false
	}
	diags.Append(ownCredentials(plan.attrs().Kubernetes)...)
	if diags.HasError() {
		return nil, s, nil, false
	}
	kc, d := kubeClient(ctx, plan.attrs().Kubernetes, data)
	diags.Append(d...)
	if diags.HasError() {
		return nil, s, nil, false
	}
	what := plan.attrs().describe(w.kind)
	if ops, err := kc.ApplyOwned(ctx, set.Without(gone...), stack.Owner(w.typ, plan.attrs().Name.ValueString()), plan.attrs().Adopt.ValueBool()); err != nil {
		todo := ""
		if creating {
			todo = w.cleanUp(ctx, kc, plan, kube.CreatedBy(set, ops), state, diags)
		}
		diags.Append(diagnostics.Failed(w.summary("Apply"), "Could not apply the objects of "+what, todo, err))
		return nil, s, nil, false
	}
	if prune && !w.prune(ctx, kc, plan, set, diags) {
		return nil, s, nil, false
	}
	return kc, s, set, true
}

// cleanUp removes the objects that a failed create made (created), and says so for the
// error's detail. When it cannot, it saves the plan as the state (Terraform keeps it,
// tainted), so that destroy, or the next apply, which replaces it, removes them.
func (w workload[S, M, P]) cleanUp(ctx context.Context, kc *kube.Client, plan P, created stack.Set, state stateLike, diags *diag.Diagnostics) string {
	if len(created) == 0 {
		return "Nothing was created."
	}
	// The create's context may be what ran out: the clean-up gets its own, as long as a delete.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.timeouts.Delete)
	defer cancel()
	what := plan.attrs().describe(w.kind)
	tflog.Info(ctx, fmt.Sprintf("%s: removing the %d objects the failed apply created", what, len(created)))
	err := kc.DeleteSet(ctx, created)
	if err == nil {
		return fmt.Sprintf("The %d objects it had created were removed; nothing of it is left.", len(created))
	}
	diags.Append(state.Set(ctx, plan)...)
	left := "objects still being deleted"
	if l := kc.Left(ctx, created); len(l) > 0 {
		left = strings.Join(l, ", ")
	}
	return fmt.Sprintf("The objects it had created could not all be removed (%s). Left behind: %s. The resource is kept in state, tainted, "+
		"so that terraform destroy, or the next apply, which replaces it, removes them.", err, left)
}

// prune deletes the owned objects that set no longer renders and waits until they are gone.
func (w workload[S, M, P]) prune(ctx context.Context, kc *kube.Client, m P, set stack.Set, diags *diag.Diagnostics) bool {
	a := m.attrs()
	if _, err := kc.Prune(ctx, a.Namespace.ValueString(), stack.Owner(w.typ, a.Name.ValueString()), w.kinds, set); err != nil {
		diags.Append(diagnostics.Failed(w.summary("Apply"), "Could not remove the objects of "+a.describe(w.kind)+" that are no longer rendered", "", err))
		return false
	}
	return true
}

// wait waits for one object of the set, by manifests key. A create whose wait runs out of
// time with nothing permanently wrong is the warning notYet makes of it (the resource is
// kept, not tainted: a first model takes minutes); anything else fails with happened. ok
// says the object is ready.
func (w workload[S, M, P]) wait(ctx context.Context, kc *kube.Client, set stack.Set, key string, cond kube.Condition, happened string,
	create bool, notYet func(err error) diag.Diagnostic, diags *diag.Diagnostics) (live *unstructured.Unstructured, ok bool) {
	live, err := kc.WaitFor(ctx, set.Find(key), cond)
	var failed *kube.FailedError
	switch {
	case err == nil:
		return live, true
	case create && notYet != nil && ctx.Err() != nil && !errors.As(err, &failed):
		diags.Append(notYet(err))
	default:
		diags.Append(diagnostics.Failed(w.summary("Apply"), happened, kube.Hint(err), err))
	}
	return nil, false
}

// read is Read: after an import it rebuilds the configuration from the cluster; then it
// reads every object back (projected on the fields we set, so that drift shows in the plan)
// and what the live objects report. None of the objects left means the resource is gone.
func (w workload[S, M, P]) read(ctx context.Context, data *providerData, images stack.Images, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st M
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m := P(&st)
	if connectionPending(ctx, m.attrs().Kubernetes, data) {
		// The cluster is created or replaced in this run: there is nothing to read yet.
		tflog.Warn(ctx, m.attrs().describe(w.kind)+": the connection is known only after apply; not refreshed")
		return
	}
	kc, d := kubeClient(ctx, m.attrs().Kubernetes, data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.attrs().justImported() && !m.fromCluster(ctx, kc, &resp.Diagnostics) {
		if !resp.Diagnostics.HasError() {
			resp.State.RemoveResource(ctx)
		}
		return
	}
	s, set, ok := w.objects(ctx, m, images, &resp.Diagnostics)
	if !ok {
		return
	}
	manifests, live := readSet(ctx, kc, set, w.summary("Read"), &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if len(live) == 0 {
		tflog.Warn(ctx, m.attrs().describe(w.kind)+": none of its objects exist any more; removing it from state")
		resp.State.RemoveResource(ctx)
		return
	}
	if w.deletedOnPurpose != nil {
		manifests = keepDeleted(m.attrs().Manifests, manifests, live, w.deletedOnPurpose(s))
	}
	m.attrs().Manifests = manifests
	m.readLive(ctx, kc, s, live, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

// delete is Delete: every object the resource owns, and what controllers made of them, gone.
func (w workload[S, M, P]) delete(ctx context.Context, data *providerData, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st M
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	a := P(&st).attrs()
	ctx, cancel := withTimeout(ctx, a.Timeouts.Delete, w.timeouts.Delete, &resp.Diagnostics)
	defer cancel()
	kc, d := kubeClient(ctx, a.Kubernetes, data)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := a.Namespace.ValueString(), a.Name.ValueString()
	kept, foreign, err := kc.DeleteAll(ctx, ns, stack.Owner(w.typ, name), w.kinds, stack.ControllerKinds, stateObjects(a))
	if err != nil {
		resp.Diagnostics.Append(diagnostics.Failed(w.summary("Delete"), "Could not delete everything "+a.describe(w.kind)+" owns", "", err))
		return
	}
	if w.afterDelete != nil {
		if err := w.afterDelete(ctx, kc, &st); err != nil {
			resp.Diagnostics.Append(diagnostics.Failed(w.summary("Delete"), "Not everything "+a.describe(w.kind)+" owns went", "", err))
		}
	}
	// What destroy left on purpose, named, with how to remove it.
	for _, u := range foreign {
		resp.Diagnostics.Append(diagnostics.Warning("Left "+kube.Describe(u),
			kube.Describe(u)+" is named in the state of "+a.describe(w.kind)+" but does not carry its owner label ("+stack.OwnerLabel+"="+stack.Owner(w.typ, name)+
				"): someone took it off, or the object is not ctr's. ctr deletes only what it owns.",
			"Delete it with kubectl if it should go."))
	}
	for _, u := range kept {
		resp.Diagnostics.Append(diagnostics.Warning("Kept "+kube.Describe(u),
			kube.Describe(u)+" was kept ("+stack.RetainAnnotation+"): the model versions it holds outlive "+a.describe(w.kind)+", and a resource of the same name takes it back.",
			"Delete it with kubectl once nothing needs it, or set model_output.retain = false and apply before destroying."))
	}
}

// stateObjects are the objects the state says the resource owns: the keys of its manifests,
// in its namespace.
func stateObjects(a *workloadAttrs) stack.Set {
	var set stack.Set
	if a.Manifests.IsNull() || a.Manifests.IsUnknown() {
		return nil
	}
	for key := range a.Manifests.Elements() {
		if u := kube.RefFromManifestKey(key); u != nil {
			u.SetNamespace(a.Namespace.ValueString())
			set = append(set, stack.Object{Key: key, Object: u})
		}
	}
	sort.Slice(set, func(i, j int) bool { return set[i].Key < set[j].Key })
	return set
}

func (w workload[S, M, P]) summary(op string) string { return op + " " + w.kind + " Error" }

// readSet reads every object of the set back, projected onto the fields we set, as the
// `manifests` value. live holds the objects that exist; none existing means the resource is gone.
func readSet(ctx context.Context, c *kube.Client, set stack.Set, summary string, diags *diag.Diagnostics) (types.Map, map[string]*unstructured.Unstructured) {
	manifests := map[string]string{}
	live := map[string]*unstructured.Unstructured{}
	for _, o := range set {
		u, err := c.Get(ctx, o.Object)
		if err != nil {
			diags.Append(diagnostics.Failed(summary, "Could not read "+kube.Describe(o.Object), "", err))
			return types.MapNull(types.StringType), nil
		}
		if u == nil {
			continue
		}
		y, err := stack.YAML(kube.Project(o.Object, u))
		if err != nil {
			diags.Append(diagnostics.Failed(summary, "Could not show "+kube.Describe(o.Object), "", err))
			return types.MapNull(types.StringType), nil
		}
		manifests[o.Key] = y
		live[o.Key] = u
	}
	mv, d := types.MapValueFrom(ctx, types.StringType, manifests)
	diags.Append(d...)
	return mv, live
}

// keepDeleted is read's manifests with the state's (prior) manifest of each object of keys
// that is gone: objects the cluster deleted on purpose.
func keepDeleted(prior, read types.Map, live map[string]*unstructured.Unstructured, keys []string) types.Map {
	if prior.IsNull() || prior.IsUnknown() || read.IsNull() {
		return read
	}
	out := read.Elements()
	for _, k := range keys {
		if v, ok := prior.Elements()[k]; ok && live[k] == nil {
			out[k] = v
		}
	}
	return types.MapValueMust(types.StringType, out)
}

// manifestsValue renders a set's manifests for the plan.
func manifestsValue(ctx context.Context, set stack.Set, diags *diag.Diagnostics) types.Map {
	m, err := set.Manifests()
	if err != nil {
		diags.Append(diagnostics.Failed("Render Error", "Could not show the Kubernetes objects", "", err))
		return types.MapUnknown(types.StringType)
	}
	mv, d := types.MapValueFrom(ctx, types.StringType, m)
	diags.Append(d...)
	return mv
}
