package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// NewServingResource is the ctr_serving resource.
func NewServingResource() resource.Resource {
	r := &servingResource{}
	r.workloadResource = servingWorkload.resource(r.apply)
	return r
}

type servingResource struct {
	workloadResource[stack.Serving, servingModel, *servingModel]
}

var servingTimeouts = opTimeouts{Create: 15 * time.Minute, Update: 15 * time.Minute, Delete: 10 * time.Minute}

var servingWorkload = newWorkload(workload[stack.Serving, servingModel, *servingModel]{
	kind: "Serving", typ: stack.ServingType, kinds: stack.ServingKinds, schema: servingSchema, render: stack.Serving.Render,
	timeouts:     servingTimeouts,
	defaultImage: func(_ context.Context, _ tfsdk.Config, i stack.Images) (string, bool) { return i.Serving(), true },
})

// ModifyPlan renders the objects at plan time, so that `manifests` shows the field-level change.
func (r *servingResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	plan := servingWorkload.planned(ctx, r.data, req, resp)
	if plan == nil {
		return
	}
	if servingWorkload.known(plan) {
		s, _, ok := servingWorkload.rendered(ctx, plan, r.images(), &resp.Diagnostics)
		if !ok {
			return
		}
		if s.LauncherImage == "" {
			resp.Diagnostics.Append(diagnostics.InvalidSetting("Serving", path.Root("launcher_image"), stack.NoCubeImage))
			return
		}
	} else {
		plan.Manifests = unknownManifests()
	}
	prior := servingWorkload.prior(ctx, req.State, &resp.Diagnostics)
	if prior == nil {
		prior = &servingModel{}
	}
	same := unchanged(&prior.workloadAttrs, &plan.workloadAttrs)
	plan.LoadBalancer = plannedAddress(plan.ServiceType, prior.ServiceType, same, prior.LoadBalancer)
	if same && !prior.ModelID.IsNull() {
		// Nothing changes in the cluster (only timeouts, as after an import): the pods have
		// what was last read.
		plan.ModelID = prior.ModelID
	} else {
		plan.ModelID = types.StringUnknown()
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
}

// apply converges, saves the state, and waits (wait = "available") for the rollout: a failed
// wait leaves a resource Terraform knows about (tainted) rather than orphaned objects, except
// a create whose wait runs out of time, which is a warning (the pods wait for a first model
// that takes minutes). Then, if the plan does not know it, it waits (bounded) for the load
// balancer's address.
func (r *servingResource) apply(ctx context.Context, plan, prior *servingModel, state stateLike, diags *diag.Diagnostics) {
	kc, s, set, ok := servingWorkload.converge(ctx, r.data, plan, r.images(), prior == nil, true, state, diags)
	if !ok {
		return
	}
	awaitLB := plan.LoadBalancer.IsUnknown()
	if awaitLB {
		plan.LoadBalancer = types.StringNull() // until it comes
	}
	plan.ModelID = types.StringValue("")
	diags.Append(state.Set(ctx, plan)...)
	dep := set.Find(stack.ServingDeploymentKey(s.Name))
	if s.Wait != stack.WaitNone {
		notYet := func(err error) diag.Diagnostic { return notReadyYet(context.WithoutCancel(ctx), kc, s, dep, err) }
		stop := logLaunchers(ctx, kc, s, dep)
		live, ok := servingWorkload.wait(ctx, kc, set, stack.ServingDeploymentKey(s.Name), kube.DeploymentAvailable, "Paddle Serving did not roll out",
			prior == nil, notYet, diags)
		stop()
		if !ok {
			return // the state holds what was applied
		}
		dep = live
	}
	plan.ModelID = types.StringValue(readModelID(context.WithoutCancel(ctx), kc, s, dep, &diag.Diagnostics{}))
	diags.Append(state.Set(ctx, plan)...)
	if !awaitLB || ctx.Err() != nil {
		return
	}
	plan.LoadBalancer = awaitAddress(ctx, kc, set.Find(stack.ServingServiceKey(s.Name)), hostPort, diags)
	diags.Append(state.Set(ctx, plan)...)
}

// launcherLogEvery is how often a wait for the serving pods logs what their launchers say.
const launcherLogEvery = 30 * time.Second

// logLaunchers logs, every launcherLogEvery until stop, what each serving pod's launcher says
// it does (waiting for the cube, for the model, serving): the progress lines say why pods are
// not ready yet.
func logLaunchers(ctx context.Context, kc *kube.Client, s stack.Serving, dep *unstructured.Unstructured) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(launcherLogEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			live, err := kc.Get(ctx, dep)
			if err != nil || live == nil {
				continue
			}
			states, _ := launcherStates(ctx, kc, live) // a refusal shows at the read after the wait
			for pod, st := range states {
				line := fmt.Sprintf("serving %s/%s: pod %s: launcher %s", s.Namespace, s.Name, pod, st.Phase)
				if st.ModelID != "" {
					line += ", model " + st.ModelID
				}
				tflog.Info(ctx, line)
			}
		}
	}()
	return func() { close(done) }
}

// notReadyYet is the warning of a create whose wait ran out: what each pod's launcher says
// it waits for.
func notReadyYet(ctx context.Context, kc *kube.Client, s stack.Serving, dep *unstructured.Unstructured, err error) diag.Diagnostic {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var pods []string
	what := "The pods' launchers did not answer."
	if live, gerr := kc.Get(ctx, dep); gerr == nil && live != nil {
		states, forbidden := launcherStates(ctx, kc, live)
		if forbidden != nil {
			what = "The pods' launchers could not be asked: " + forbidden.Error() + "."
		}
		for pod, st := range states {
			line := pod + ": " + st.Phase
			if st.ModelID != "" {
				line += " (model " + st.ModelID + ")"
			}
			pods = append(pods, line)
		}
	}
	slices.Sort(pods)
	if len(pods) > 0 {
		what = "The pods' launchers say: " + strings.Join(pods, "; ") + "."
	}
	return diagnostics.Warning("Paddle Serving Not Ready Yet", fmt.Sprintf("Serving %s/%s is created but not ready within the create timeout: %s. %s",
		s.Namespace, s.Name, err, what), "The pods keep waiting for the model (a trainer's first model takes minutes) and become ready once it "+
		"serves; the resource is kept, not tainted. A later refresh shows model_id; set wait = \"none\" not to wait at all.")
}
