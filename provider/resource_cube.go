package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// NewCubeResource is the ctr_cube resource.
func NewCubeResource() resource.Resource {
	r := &cubeResource{}
	r.workloadResource = cubeWorkload.resource(r.apply)
	return r
}

type cubeResource struct {
	workloadResource[stack.Cube, cubeModel, *cubeModel]
}

var cubeTimeouts = opTimeouts{Create: 20 * time.Minute, Update: 20 * time.Minute, Delete: 10 * time.Minute}

var cubeWorkload = newWorkload(workload[stack.Cube, cubeModel, *cubeModel]{
	kind: "Cube", typ: stack.CubeType, kinds: stack.CubeKinds, schema: cubeSchema, render: stack.Cube.Render,
	timeouts:    cubeTimeouts,
	afterDelete: waitServerClaimsGone,
})

// waitServerClaimsGone waits for the servers' claims (storage), which go after their
// StatefulSets by its retention policy.
func waitServerClaimsGone(ctx context.Context, kc *kube.Client, m *cubeModel) error {
	if m.Storage == nil {
		return nil
	}
	c := stack.Cube{Name: m.Name.ValueString(), Namespace: m.Namespace.ValueString()}
	if err := kc.WaitClaimsGone(ctx, c.Namespace, c.ServerClaimsSelector()); err != nil {
		return fmt.Errorf("the cube servers' claims did not go: %w", err)
	}
	return nil
}

// ModifyPlan renders the objects at plan time and says when the cube will be re-sharded.
func (r *cubeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	plan := cubeWorkload.planned(ctx, r.data, req, resp)
	if plan == nil {
		return
	}
	state := cubeWorkload.prior(ctx, req.State, &resp.Diagnostics)
	var configured types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("image"), &configured)...)
	if plan.Image.IsUnknown() && configured.IsNull() && state == nil { // unset, not known only later
		plan.Image = types.StringValue(r.images().Cube())
		if plan.Image.ValueString() == "" {
			resp.Diagnostics.Append(diagnostics.InvalidSetting("Cube", path.Root("image"), stack.NoCubeImage))
			return
		}
	}
	if !cubeWorkload.known(plan) {
		plan.Manifests, plan.CubeConf = unknownManifests(), types.StringUnknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
		return
	}
	if _, _, ok := cubeWorkload.rendered(ctx, plan, r.images(), &resp.Diagnostics); !ok {
		return
	}
	if state == nil && plan.ServeVersion.ValueString() != "" {
		resp.Diagnostics.Append(diagnostics.InvalidSetting("Cube", path.Root("serve_version"),
			"a new cube keeps no version to pin yet: create it without serve_version, and pin one of its kept_versions later"))
		return
	}
	if state != nil {
		if unchanged(&state.workloadAttrs, &plan.workloadAttrs) {
			// Nothing changes in the cluster (only timeouts, as after an import): what the
			// replicas serve is what was last read.
			plan.ServedVersion, plan.ServingReplicas, plan.KeptVersions = state.ServedVersion, state.ServingReplicas, state.KeptVersions
		} else {
			plan.ServedVersion, plan.ServingReplicas, plan.KeptVersions = types.StringUnknown(), types.ListUnknown(types.Int64Type), types.ListUnknown(types.StringType)
		}
		if !planPin(ctx, plan, state, &resp.Diagnostics) {
			return
		}
		if o, n := state.Shards.ValueInt64(), plan.Shards.ValueInt64(); o != n {
			resp.Diagnostics.Append(diagnostics.Warning("Cube Will Be Re-sharded",
				fmt.Sprintf("Changing shards from %d to %d re-shards %s: keys move between shards (shard = key %% shards). "+
					"The transfer restarts and rebuilds every shard from the last model; cube.conf changes, so ctr_serving pods roll. "+
					"Until the new layout serves, Paddle Serving may miss keys", o, n, plan.describe("Cube")),
				"Removed shards are deleted once the new layout serves."))
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
}

// apply converges and waits until every cube pod exists at the current revision and the
// transfer is available. Pods turn Ready only once they serve a model, which may be later.
// Shrinking keeps the removed shards until the new layout serves (waitNewLayout).
func (r *cubeResource) apply(ctx context.Context, plan, prior *cubeModel, state stateLike, diags *diag.Diagnostics) {
	if plan.ControlToken.IsUnknown() || plan.ControlToken.IsNull() {
		tok, err := newToken()
		if err != nil {
			diags.Append(diagnostics.Failed("Apply Cube Error", "Could not generate the control token", "", err))
			return
		}
		plan.ControlToken = types.StringValue(tok)
	}
	kc, c, set, ok := cubeWorkload.converge(ctx, r.data, plan, r.images(), prior == nil, false, state, diags)
	if !ok {
		return
	}
	plan.ServedVersion, plan.ServingReplicas, plan.KeptVersions = types.StringValue(""), types.ListNull(types.Int64Type), types.ListNull(types.StringType)
	diags.Append(state.Set(ctx, plan)...)
	if prior != nil && !rollOut(ctx, kc, plan, set, diags) {
		return
	}
	for _, o := range set {
		cond, what := kube.StatefulSetRolledOut, "The cube servers did not roll out"
		switch o.Object.GetKind() {
		case "StatefulSet":
		case "Deployment":
			cond, what = kube.DeploymentAvailable, "The transfer did not become available"
		default:
			continue
		}
		notYet := func(err error) diag.Diagnostic {
			// A cube created in the same apply as its cluster's nodes or its training job may
			// take longer than the timeout to place.
			return diagnostics.Warning("Cube Not Serving Yet", fmt.Sprintf("%s is created but not ready within the create timeout: %s",
				plan.describe("Cube"), err), "The resource is kept, not tainted: its pods keep starting, and a later refresh shows "+
				"served_version once the transfer rolls out the first line of donefile_url.")
		}
		if _, ok := cubeWorkload.wait(ctx, kc, set, o.Key, cond, what, prior == nil, notYet, diags); !ok {
			return
		}
	}
	if prior != nil && prior.Shards.ValueInt64() > plan.Shards.ValueInt64() && prior.ServedVersion.ValueString() != "" {
		if !waitNewLayout(ctx, kc, c, prior.ServedVersion.ValueString(), diags) {
			return
		}
	}
	if !cubeWorkload.prune(ctx, kc, plan, set, diags) {
		return
	}
	pin := plan.ServeVersion.ValueString()
	if pin != "" && (prior == nil || prior.ServeVersion.ValueString() != pin) && !waitPinned(ctx, kc, c, pin, diags) {
		return
	}
	var read diag.Diagnostics // a fresh apply's pods may not serve yet: no warning of that here
	readServing(ctx, kc, c, plan, &read)
	for _, d := range read {
		if d.Summary() == statusNotReadableSummary { // but a refused identity stays refused
			diags.Append(d)
		}
	}
	diags.Append(state.Set(ctx, plan)...)
}

// rollOut replaces the cube servers whose pod template changed, every shard at once, never
// the last serving replica of a shard (kube.RollOut; the StatefulSets are OnDelete).
func rollOut(ctx context.Context, kc *kube.Client, plan *cubeModel, set stack.Set, diags *diag.Diagnostics) bool {
	var sets []*unstructured.Unstructured
	for _, o := range set {
		if o.Object.GetKind() == "StatefulSet" {
			sets = append(sets, o.Object)
		}
	}
	if err := kc.RollOut(ctx, sets); err != nil {
		diags.Append(diagnostics.Failed("Apply Cube Error", plan.describe("Cube")+": the cube servers did not roll out",
			kube.Hint(err)+" The replicas not replaced yet keep serving; the next plan shows the rest of the rollout as drift, and the next apply finishes it.", err))
		return false
	}
	return true
}

// planPin judges a changed serve_version against the versions the cube kept at the last
// refresh, and says what the pin does. It returns false when the plan is refused.
func planPin(ctx context.Context, plan, state *cubeModel, diags *diag.Diagnostics) bool {
	pin := plan.ServeVersion.ValueString()
	if pin == "" || pin == state.ServeVersion.ValueString() {
		return true
	}
	if !state.KeptVersions.IsNull() && !state.KeptVersions.IsUnknown() {
		var kept []string
		diags.Append(state.KeptVersions.ElementsAs(ctx, &kept, false)...)
		if !slices.Contains(kept, pin) {
			diags.Append(diagnostics.InvalidSetting("Cube", path.Root("serve_version"), fmt.Sprintf(
				"%s does not keep version %q: it keeps %q (kept_versions at the last refresh: the served version and the one before it)",
				plan.describe("Cube"), pin, kept)))
			return false
		}
	}
	diags.Append(diagnostics.Warning("Cube Will Be Pinned", fmt.Sprintf("%s will serve version %q: the transfer restarts, switches every replica to it at one instant, "+
		"and rolls no new line of donefile_url out until serve_version is removed.", plan.describe("Cube"), pin), ""))
	return true
}

// waitPinned waits until the transfer, restarted with the pin, reports every replica serving
// the pinned version; it fails at once when the transfer says the version is not kept.
func waitPinned(ctx context.Context, kc *kube.Client, c stack.Cube, pin string, diags *diag.Diagnostics) bool {
	what := fmt.Sprintf("cube %s/%s", c.Namespace, c.Name)
	var last string
	_, err := kc.Poll(ctx, 2*time.Second, func(ctx context.Context) (bool, string, error) {
		body, err := transferStatus(ctx, kc, c)
		if kube.IsForbidden(err) {
			return false, "", err // no wait grants it
		}
		if err != nil {
			last = fmt.Sprintf("the transfer could not be asked: %v", err)
			return false, fmt.Sprintf("%s: waiting for every replica to serve the pinned version %q: %s", what, pin, last), nil
		}
		st, err := stack.DecodeTransferStatus(body)
		if err != nil {
			return false, "", err
		}
		switch {
		case st.Pinned != pin:
			last = fmt.Sprintf("the transfer is not pinned to it yet (pinned: %q)", st.Pinned)
		case st.PinError != "":
			return false, "", errors.New(st.PinError)
		case st.DecidedVersion == pin && st.ServedVersion == pin && len(st.Lagging()) == 0:
			return true, "", nil
		default:
			last = fmt.Sprintf("decided %q, served %q, phase %q", st.DecidedVersion, st.ServedVersion, st.Phase)
		}
		return false, fmt.Sprintf("%s: waiting for every replica to serve the pinned version %q: %s", what, pin, last), nil
	})
	switch {
	case wait.Interrupted(err):
		diags.Append(diagnostics.Failed("Apply Cube Error", fmt.Sprintf("Cube %s/%s: not every replica serves the pinned version %q in time (%s)", c.Namespace, c.Name, pin, last),
			"The transfer keeps rolling it out: a later refresh shows served_version. Its /status (transfer_url) and log say why it takes long.", nil))
		return false
	case kube.IsForbidden(err):
		diags.Append(diagnostics.Failed("Apply Cube Error", fmt.Sprintf("Cube %s/%s: whether every replica serves the pinned version %q cannot be seen", c.Namespace, c.Name, pin),
			grantStatusReads("this namespace", stack.ServiceProxy), err))
		return false
	case err != nil:
		diags.Append(diagnostics.Failed("Apply Cube Error", fmt.Sprintf("Cube %s/%s: the pinned version %q cannot be served", c.Namespace, c.Name, pin),
			"Set serve_version to one of kept_versions, or remove it.", err))
		return false
	}
	return true
}

// waitNewLayout waits, on a shrinking cube, until the transfer serves a model rebuilt for the
// new shard count, so that no key of a removed shard misses meanwhile. A transfer that cannot
// be asked (restarting, unreachable) is asked again until the timeout: the removed shards are
// never deleted without its word; at the timeout they are kept and the apply fails, saying
// why. It returns whether the removed shards may go.
func waitNewLayout(ctx context.Context, kc *kube.Client, c stack.Cube, before string, diags *diag.Diagnostics) bool {
	what := fmt.Sprintf("cube %s/%s", c.Namespace, c.Name)
	var st string // what the transfer last said, or why it could not be asked
	_, err := kc.Poll(ctx, 2*time.Second, func(ctx context.Context) (bool, string, error) {
		body, err := transferStatus(ctx, kc, c)
		if kube.IsForbidden(err) {
			return false, "", err // no wait grants it
		}
		if err != nil {
			st = fmt.Sprintf("the transfer could not be asked: %v", err)
			return false, fmt.Sprintf("%s: waiting for the %d-shard layout to serve before removing shards: %s", what, c.Shards, st), nil
		}
		var ok bool
		ok, st, err = stack.CubeLayoutServes(body, c.Shards, before)
		if ok {
			tflog.Info(ctx, fmt.Sprintf("%s: the %d-shard layout serves (%s); removing the old shards", what, c.Shards, st))
		}
		return ok, fmt.Sprintf("%s: waiting for the %d-shard layout to serve before removing shards: %s", what, c.Shards, st), err
	})
	switch {
	case wait.Interrupted(err):
		diags.Append(diagnostics.Failed("Apply Cube Error", fmt.Sprintf("Cube %s/%s: the %d-shard layout was not seen serving in time (%s)", c.Namespace, c.Name, c.Shards, st),
			"The removed shards are kept, so no key misses; apply again to finish once the transfer serves the new layout. The transfer is asked "+
				"through the API server's service proxy: where the API server cannot reach Services, check the transfer's /status yourself and delete the "+
				"removed shards' StatefulSets and Services by hand.", nil))
		return false
	case err != nil:
		diags.Append(diagnostics.Failed("Apply Cube Error", "Could not read the transfer's status", "", err))
		return false
	}
	return true
}
