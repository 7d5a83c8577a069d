package provider

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"sigs.k8s.io/yaml"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// NewTrainingJobResource is the ctr_training_job resource.
func NewTrainingJobResource() resource.Resource {
	r := &trainingJobResource{}
	r.workloadResource = trainingJobWorkload.resource(r.apply)
	return r
}

type trainingJobResource struct {
	workloadResource[stack.TrainingJob, trainingJobModel, *trainingJobModel]
}

var trainingJobTimeouts = opTimeouts{Create: 20 * time.Minute, Update: 20 * time.Minute, Delete: 10 * time.Minute,
	CreateWaits: "How long apply waits for what `wait` names."}

var trainingJobWorkload = newWorkload(workload[stack.TrainingJob, trainingJobModel, *trainingJobModel]{
	kind: "Training Job", typ: stack.TrainingJobType, kinds: stack.TrainingJobKinds, schema: trainingJobSchema, render: stack.TrainingJob.Render,
	timeouts:     trainingJobTimeouts,
	defaultImage: trainingDefaultImage, imageReplaces: true,
	unrendered:       map[string]attr.Value{"min_available": types.Int64Unknown(), "upload_token": types.StringUnknown()},
	deletedOnPurpose: stack.TrainingJob.DeletedWhenFinished,
})

// trainingDefaultImage is the image of the configuration's recipe (EDL's without one).
func trainingDefaultImage(ctx context.Context, config tfsdk.Config, images stack.Images) (string, bool) {
	var recipe types.String
	if d := config.GetAttribute(ctx, path.Root("recipe"), &recipe); d.HasError() || recipe.IsUnknown() {
		return "", false
	}
	return images.Training(recipe.ValueString()), true
}

// ModifyPlan renders the Kubernetes objects at plan time, so that `manifests` shows the
// field-level change, and explains any replacement.
func (r *trainingJobResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	plan := trainingJobWorkload.planned(ctx, r.data, req, resp)
	if plan == nil {
		return
	}
	var config trainingJobModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The gang is the whole job unless configured: it follows replica changes.
	plan.MinAvailable = config.MinAvailable
	if !trainingJobWorkload.known(plan) {
		plan.Manifests = unknownManifests()
		plan.FileServerURL, plan.DonefileURL, plan.ExternalURL = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
		plan.UploadToken = types.StringUnknown() // whether uploads take a token may depend on what is unknown
		if config.MinAvailable.IsNull() {
			plan.MinAvailable = types.Int64Unknown()
		}
		resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
		return
	}
	if config.MinAvailable.IsNull() {
		// The whole gang, planned before rendering: the settings annotation records it, so the
		// objects must be rendered from the value the state will hold.
		j, d := plan.settings(ctx, r.images())
		resp.Diagnostics.Append(d...)
		plan.MinAvailable = types.Int64Value(int64(j.Defaulted().MinAvailable))
	}
	j, _, ok := trainingJobWorkload.rendered(ctx, plan, r.images(), &resp.Diagnostics)
	if !ok {
		return
	}
	if j.FileServer.Image == "" {
		resp.Diagnostics.Append(diagnostics.InvalidSetting("Training Job", path.Root("file_server").AtName("image"), stack.NoCubeImage))
		return
	}
	switch {
	case !plan.tokenUploads():
		plan.UploadToken = types.StringNull()
	case plan.UploadToken.IsNull():
		plan.UploadToken = types.StringUnknown() // generated at apply
	}
	var reasons []string
	state := trainingJobWorkload.prior(ctx, req.State, &resp.Diagnostics)
	if state == nil {
		plan.ExternalURL = plannedAddress(plan.fileServerServiceType(), types.StringNull(), false, types.StringNull())
	} else {
		plan.ExternalURL = plannedAddress(plan.fileServerServiceType(), state.fileServerServiceType(),
			unchanged(&state.workloadAttrs, &plan.workloadAttrs), state.ExternalURL)
		// Drift alone (no configuration change) still means an apply, after which the phase
		// may differ: Terraform must not promise the old one. Without a change in the cluster
		// (only wait or timeouts differ, as after an import) the live values stay.
		plan.keepLive(state, unchanged(&state.workloadAttrs, &plan.workloadAttrs))
		reasons = replaceReasons(state, plan)
		if state.tokenUploads() != plan.tokenUploads() {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("file_server").AtName("upload"))
		}
		tasksDiffer := volcanoTasksDiffer(state.Manifests, plan.Manifests, stack.VolcanoJobKey(j.Name))
		if tasksDiffer && !state.Recipe.Equal(plan.Recipe) {
			// A recipe replaces the job only where it renders the tasks differently: naming
			// the default image's own ("edl") changes nothing.
			reasons = append(reasons, "recipe")
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("recipe"))
		}
		if len(reasons) == 0 && tasksDiffer {
			// Volcano refuses any change to a submitted job's tasks, even one that comes from
			// a new provider version rendering them differently (e.g. hardened pods).
			reasons = append(reasons, "the training pods' template (rendered differently by this provider version)")
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("manifests"))
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
	if state == nil || len(reasons) > 0 {
		// The job is submitted by this apply: Volcano's webhook will look its queue up.
		r.checkQueue(ctx, plan.Kubernetes, j.Queue, &resp.Diagnostics)
	}

	if len(reasons) > 0 {
		keep := "The model-output volume is kept (model_output.retain): the new job takes it back with every model version on it."
		switch mo := j.ModelOutput; {
		case mo.ExistingClaim != "":
			keep = "The existing model-output claim " + mo.ExistingClaim + " is kept."
		case !mo.Retained():
			keep = "The model-output volume is recreated empty (model_output.retain = false)."
		}
		resp.Diagnostics.Append(diagnostics.Warning("Training Job Will Be Replaced",
			fmt.Sprintf("Changing %s replaces %s: Volcano does not allow changing the tasks of a submitted job "+
				"(only min_available changes in place). The running job and its pods are deleted and training starts "+
				"again from the beginning", strings.Join(reasons, ", "), plan.describe("Training Job")), keep))
	}
}

// queueCheckTimeout bounds the plan's look at the job's queue: a cluster that does not answer
// by then leaves the queue unknown, as if there were no connection.
const queueCheckTimeout = 10 * time.Second

// checkQueue refuses, at plan time, a job whose Volcano queue is missing or not open, which
// Volcano's admission webhook would refuse at apply. It says so only where that can be known:
// the connection is known, the cluster answers, Volcano serves queues and Terraform may read
// them, and no ctr_queue of this run plans to create the queue. Anything else leaves it to
// the apply.
func (r *trainingJobResource) checkQueue(ctx context.Context, own types.Object, queue string, diags *diag.Diagnostics) {
	if r.data == nil || r.data.queues.planned(queue) {
		return
	}
	if _, st, _ := connection(ctx, own, r.data); st != connectionSet {
		return
	}
	kc, d := kubeClient(ctx, own, r.data)
	if d.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, queueCheckTimeout)
	defer cancel()
	live, err := kc.GetByResource(ctx, stack.QueueResource, queue)
	switch {
	case err != nil:
		tflog.Info(ctx, fmt.Sprintf("Volcano queue %q not checked at plan time: %v", queue, err))
	case live == nil:
		diags.Append(diagnostics.FailedAt(path.Root("queue"), "Volcano Queue Not Found",
			fmt.Sprintf("Volcano queue %q does not exist on the cluster, and Volcano's admission webhook refuses a job whose queue is missing", queue),
			"Declare it with a ctr_queue in this configuration and reference it (queue = ctr_queue.<name>.name), so that Terraform creates "+
				"the queue before the job; or name an existing queue (kubectl get queues.scheduling.volcano.sh), or leave queue unset for "+
				"Volcano's \""+stack.DefaultQueue+"\".", nil))
	case stack.QueueState(live) != "" && stack.QueueState(live) != stack.QueueOpen:
		diags.Append(diagnostics.FailedAt(path.Root("queue"), "Volcano Queue Not Open",
			fmt.Sprintf("Volcano queue %q is %s, and Volcano's admission webhook refuses a job whose queue is not %s", queue, stack.QueueState(live), stack.QueueOpen),
			"Open the queue again (vcctl queue operate --name "+queue+" --action open), or name another queue.", nil))
	}
}

// apply converges the cluster to the plan: server-side apply, prune, then wait as far as
// plan.Wait says. State is saved before waiting: a wait that fails leaves a resource
// Terraform knows about rather than orphaned objects (see waitJob).
func (r *trainingJobResource) apply(ctx context.Context, plan, prior *trainingJobModel, state stateLike, diags *diag.Diagnostics) {
	switch {
	case !plan.tokenUploads():
		plan.UploadToken = types.StringNull()
	case plan.UploadToken.IsUnknown() || plan.UploadToken.IsNull():
		tok, err := newToken()
		if err != nil {
			diags.Append(diagnostics.Failed("Apply Training Job Error", "Could not generate the upload token", "", err))
			return
		}
		plan.UploadToken = types.StringValue(tok)
	}
	// A Volcano Job that Volcano deleted after it finished is not submitted again by an
	// update in place (the file server's, say): the training is over.
	var collected []string
	if prior != nil && prior.Phase.ValueString() == phaseCollected {
		collected = []string{stack.VolcanoJobKey(plan.Name.ValueString())}
	}
	kc, j, set, ok := trainingJobWorkload.converge(ctx, r.data, plan, r.images(), prior == nil, true, state, diags, collected...)
	if !ok {
		return
	}
	if collected != nil {
		plan.Phase, plan.Tasks, plan.LastCondition = prior.Phase, prior.Tasks, prior.LastCondition
	} else {
		plan.setLive(ctx, kc, nil)
		plan.Phase = types.StringValue("Pending")
	}
	awaitLB := plan.ExternalURL.IsUnknown()
	if awaitLB {
		plan.ExternalURL = types.StringNull() // until it comes
	}
	diags.Append(state.Set(ctx, plan)...)
	switch {
	case collected == nil:
		plan.waitJob(ctx, kc, j, set, diags)
	case plan.Wait.ValueString() != waitNone:
		// The training is over: only the file server is left to wait for.
		trainingJobWorkload.wait(ctx, kc, set, stack.FileServerKey(j.Name), kube.DeploymentAvailable,
			"The file server of "+plan.describe("Training Job")+" did not become available", false, nil, diags)
	}
	if awaitLB && !diags.HasError() {
		lctx := ctx
		if ctx.Err() != nil { // the job's wait used up the timeout: look once
			var cancel context.CancelFunc
			lctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), liveReadTimeout)
			defer cancel()
		}
		plan.ExternalURL = awaitAddress(lctx, kc, set.Find(stack.FileServerServiceKey(j.Name)), httpURL, diags)
	}
	diags.Append(state.Set(ctx, plan)...)
}

// volcanoTasksDiffer reports whether the tasks of the Volcano Job (manifests key) differ
// between the state's manifests and the plan's. Unknown or missing manifests do not differ.
func volcanoTasksDiffer(state, plan types.Map, key string) bool {
	tasks := func(m types.Map) (any, bool) {
		if m.IsNull() || m.IsUnknown() {
			return nil, false
		}
		v, ok := m.Elements()[key].(types.String)
		if !ok || v.IsNull() || v.IsUnknown() {
			return nil, false
		}
		var job struct {
			Spec struct {
				Tasks any `json:"tasks"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(v.ValueString()), &job); err != nil {
			return nil, false
		}
		return job.Spec.Tasks, true
	}
	a, okA := tasks(state)
	b, okB := tasks(plan)
	return okA && okB && !reflect.DeepEqual(a, b)
}
