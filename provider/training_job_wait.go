package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// How far apply waits for a training job (the `wait` attribute).
const (
	waitNone      = "none"
	waitSubmitted = "submitted"
	waitRunning   = "running"
	waitCompleted = "completed"
)

var waitModes = []string{waitNone, waitSubmitted, waitRunning, waitCompleted}

// phaseCollected is the phase of a job whose Volcano Job Volcano deleted after it finished
// (ttl_seconds_after_finished); tasks and last_condition stay as last read.
const phaseCollected = "Collected"

// The types of `tasks` (per task) and `last_condition`.
var (
	taskCountsType = types.ObjectType{AttrTypes: map[string]attr.Type{
		"running": types.Int64Type, "pending": types.Int64Type, "succeeded": types.Int64Type, "failed": types.Int64Type,
	}}
	lastConditionType = types.ObjectType{AttrTypes: map[string]attr.Type{
		"type": types.StringType, "reason": types.StringType, "message": types.StringType, "time": types.StringType,
	}}
)

// waitTimedOut is the summary of the warning a wait that ran out of time ends with.
const waitTimedOut = "Training Job Wait Timed Out"

// liveReadTimeout bounds the reads that set the live attributes after a wait ran out of time.
const liveReadTimeout = 10 * time.Second

// waitJob waits for what plan.Wait names, then sets the live attributes (phase, tasks,
// last_condition) from the cluster. The job was submitted, so a wait that runs out of time
// is a warning: an error would taint the job on create, and the next apply would delete a
// training that may run by then. What waiting cannot fix is an error.
func (m *trainingJobModel) waitJob(ctx context.Context, kc *kube.Client, j stack.TrainingJob, set stack.Set, diags *diag.Diagnostics) {
	mode := m.Wait.ValueString()
	fs, job := set.Find(stack.FileServerKey(j.Name)), set.Find(stack.VolcanoJobKey(j.Name))
	gang := j.MinAvailable
	what := fmt.Sprintf("Training job %s/%s", j.Namespace, j.Name)
	err := func() error {
		if mode == waitNone {
			return nil
		}
		tflog.Info(ctx, fmt.Sprintf("waiting for %s/%s: %s (wait = %q)", j.Namespace, j.Name, waitGoal(mode, gang), mode))
		if _, err := kc.WaitFor(ctx, fs, kube.DeploymentAvailable); err != nil {
			return fmt.Errorf("the file server: %w", err)
		}
		cond := map[string]kube.Condition{waitSubmitted: kube.VolcanoJobSubmitted, waitRunning: kube.VolcanoJobRunning,
			waitCompleted: kube.VolcanoJobCompleted}[mode]
		live, err := kc.WaitFor(ctx, job, cond)
		if err != nil {
			return err
		}
		if mode == waitRunning && kube.VolcanoJobPhase(live) == "Running" {
			return kc.WaitPodsReady(ctx, live, int(gang))
		}
		return nil
	}()

	// The live attributes, also when the wait ran out of time: the context may be over.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveReadTimeout)
	defer cancel()
	if live, rerr := kc.Get(rctx, job); rerr == nil {
		m.setLive(rctx, kc, live)
	}
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded):
		diags.Append(diagnostics.Warning(waitTimedOut,
			fmt.Sprintf("%s was submitted, but did not get to what wait = %q waits for (%s) within the timeout: %s. "+
				"It stays in state as it is, phase %s, and keeps going; the next apply does not replace it",
				what, mode, waitGoal(mode, gang), err, m.Phase.ValueString()),
			"Follow it with kubectl (see the resource's documentation), or raise timeouts.create (timeouts.update) to wait longer."))
	default:
		todo := kube.Hint(err)
		if todo == "" {
			todo = fmt.Sprintf("Its pods tell more: kubectl -n %s get pods -l %s=%s, and their logs.", j.Namespace, batchv1alpha1.JobNameKey, j.Name)
		}
		diags.Append(diagnostics.Failed("Apply Training Job Error",
			fmt.Sprintf("%s did not get to what wait = %q waits for (%s)", what, mode, waitGoal(mode, gang)), todo, err))
	}
}

// waitGoal says what a wait mode waits for.
func waitGoal(mode string, gang int32) string {
	switch mode {
	case waitSubmitted:
		return "the file server available and the job taken by Volcano"
	case waitCompleted:
		return "the job completed"
	case waitNone:
		return "nothing"
	}
	return fmt.Sprintf("the job running with its gang of %d pods ready", gang)
}

// setLive sets phase, tasks and last_condition from the live Volcano job (nil: it is gone).
func (m *trainingJobModel) setLive(ctx context.Context, kc *kube.Client, job *unstructured.Unstructured) {
	m.Phase, m.Tasks, m.LastCondition = types.StringValue("Missing"), types.MapValueMust(taskCountsType, nil), types.ObjectNull(lastConditionType.AttrTypes)
	if job == nil {
		return
	}
	m.Phase = types.StringValue(kube.VolcanoJobPhase(job))
	pods, err := kc.Pods(ctx, job)
	if err != nil {
		tflog.Warn(ctx, "could not count the pods of "+kube.Describe(job)+": "+err.Error())
	}
	tasks := map[string]attr.Value{}
	for name, c := range kube.VolcanoTaskCounts(job, pods) {
		tasks[name] = types.ObjectValueMust(taskCountsType.AttrTypes, map[string]attr.Value{
			"running": types.Int64Value(c.Running), "pending": types.Int64Value(c.Pending),
			"succeeded": types.Int64Value(c.Succeeded), "failed": types.Int64Value(c.Failed)})
	}
	m.Tasks = types.MapValueMust(taskCountsType, tasks)
	pg, err := kc.PodGroup(ctx, job)
	if err != nil {
		tflog.Warn(ctx, "could not read the pod group of "+kube.Describe(job)+": "+err.Error())
	}
	if c, ok := kube.LastJobCondition(job, pg); ok {
		m.LastCondition = types.ObjectValueMust(lastConditionType.AttrTypes, map[string]attr.Value{
			"type": types.StringValue(c.Type), "reason": types.StringValue(c.Reason), "message": types.StringValue(c.Message),
			"time": types.StringValue(c.Time.UTC().Format(time.RFC3339))})
	}
}

// keepLive plans the live attributes: the prior state's when the apply will change nothing
// in the cluster (unchanged), else unknown, since the apply reads them again.
func (m *trainingJobModel) keepLive(prior *trainingJobModel, unchanged bool) {
	if unchanged {
		m.Phase, m.Tasks, m.LastCondition = prior.Phase, prior.Tasks, prior.LastCondition
		return
	}
	m.Phase, m.Tasks, m.LastCondition = types.StringUnknown(), types.MapUnknown(taskCountsType), types.ObjectUnknown(lastConditionType.AttrTypes)
}
