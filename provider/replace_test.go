package provider

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestReplaceReasons_NameEveryAttributeThatReplaces ties the training job's replace warning to
// its schema: every attribute that may force replacement has a change here, and the warning
// names it. A new replacing attribute fails this test until both know it.
func TestReplaceReasons_NameEveryAttributeThatReplaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := stack.TrainingJob{Name: "j", Namespace: "n", Image: "i:1", Entry: "e", Port: 1, Queue: "q", SchedulerName: "s", MaxRetry: 3,
		Command: []string{"c"}, ImagePullSecrets: []string{"p"}, Env: map[string]string{"A": "1"}, ImagePullPolicy: "Always", Mode: stack.ModePS,
		PServer: &stack.Task{Replicas: 1}, Trainer: &stack.Task{Replicas: 1},
		Dataset:     &stack.Dataset{HDFSAddress: "hdfs://a:1", Path: "/p", StartHour: "20200101/00", EndHour: "20200101/01", SparseDim: 10},
		ModelOutput: &stack.ModelOutput{StorageClass: "sc", AccessMode: stack.AccessReadWriteOnce, ExistingClaim: "c", MountPath: "/o"},
		FileServer:  &stack.FileServer{}}
	changes := map[string]func(j *stack.TrainingJob){
		"name":                        func(j *stack.TrainingJob) { j.Name = "k" },
		"namespace":                   func(j *stack.TrainingJob) { j.Namespace = "m" },
		"mode":                        func(j *stack.TrainingJob) { j.Mode = stack.ModeCollective },
		"image":                       func(j *stack.TrainingJob) { j.Image = "i:2" },
		"image_pull_policy":           func(j *stack.TrainingJob) { j.ImagePullPolicy = "Never" },
		"image_pull_secrets":          func(j *stack.TrainingJob) { j.ImagePullSecrets = []string{"q"} },
		"command":                     func(j *stack.TrainingJob) { j.Command = []string{"d"} },
		"entry":                       func(j *stack.TrainingJob) { j.Entry = "f" },
		"env":                         func(j *stack.TrainingJob) { j.Env = map[string]string{"A": "2"} },
		"port":                        func(j *stack.TrainingJob) { j.Port = 2 },
		"queue":                       func(j *stack.TrainingJob) { j.Queue = "r" },
		"scheduler_name":              func(j *stack.TrainingJob) { j.SchedulerName = "t" },
		"max_retry":                   func(j *stack.TrainingJob) { j.MaxRetry = 4 },
		"ttl_seconds_after_finished":  func(j *stack.TrainingJob) { j.TTLSecondsAfterFinished = ptr.To[int32](60) },
		"slot_config":                 func(j *stack.TrainingJob) { j.SlotConfig = "1" },
		"pserver":                     func(j *stack.TrainingJob) { j.PServer = &stack.Task{Replicas: 2} },
		"trainer":                     func(j *stack.TrainingJob) { j.Trainer = &stack.Task{Replicas: 2} },
		"worker":                      func(j *stack.TrainingJob) { j.Worker = &stack.Task{Replicas: 2} },
		"policies":                    func(j *stack.TrainingJob) { j.Policies = []stack.Policy{{Event: "PodFailed", Action: "RestartJob"}} },
		"security_context":            func(j *stack.TrainingJob) { j.SecurityContext = &stack.SecurityContext{RunAsUser: ptr.To(int64(1))} },
		"pod":                         func(j *stack.TrainingJob) { j.Pod = &stack.PodSettings{Labels: map[string]string{"a": "b"}} },
		"dataset.hdfs_address":        func(j *stack.TrainingJob) { j.Dataset.HDFSAddress = "hdfs://b:1" },
		"dataset.path":                func(j *stack.TrainingJob) { j.Dataset.Path = "/q" },
		"dataset.start_hour":          func(j *stack.TrainingJob) { j.Dataset.StartHour = "20200102/00" },
		"dataset.end_hour":            func(j *stack.TrainingJob) { j.Dataset.EndHour = "20200102/01" },
		"dataset.sparse_dim":          func(j *stack.TrainingJob) { j.Dataset.SparseDim = 11 },
		"dataset.s3":                  func(j *stack.TrainingJob) { j.Dataset.S3 = &stack.S3Dataset{Bucket: "b"} },
		"dataset.volume":              func(j *stack.TrainingJob) { j.Dataset.Volume = &stack.VolumeDataset{ClaimName: "v"} },
		"model_output.storage_class":  func(j *stack.TrainingJob) { j.ModelOutput.StorageClass = "sd" },
		"model_output.access_mode":    func(j *stack.TrainingJob) { j.ModelOutput.AccessMode = stack.AccessReadWriteMany },
		"model_output.existing_claim": func(j *stack.TrainingJob) { j.ModelOutput.ExistingClaim = "d" },
		"model_output.mount_path":     func(j *stack.TrainingJob) { j.ModelOutput.MountPath = "/p" },
	}
	model := func(j stack.TrainingJob) *trainingJobModel {
		var m trainingJobModel
		var diags diag.Diagnostics
		m.fromJob(ctx, j, &diags)
		if diags.HasError() {
			t.Fatal(diags)
		}
		return &m
	}
	var s = trainingJobSchema(ctx)
	for _, p := range replacingAttributes(s.Attributes, "") {
		change, ok := changes[p]
		if !ok {
			t.Errorf("%s may force replacement: give it a change here, and make replaceReasons name it", p)
			continue
		}
		plan := base
		plan.Dataset, plan.ModelOutput, plan.FileServer = ptr.To(*base.Dataset), ptr.To(*base.ModelOutput), ptr.To(*base.FileServer)
		change(&plan)
		reasons := replaceReasons(model(base), model(plan))
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, p) || strings.HasPrefix(p, strings.Fields(r)[0]) }) {
			t.Errorf("changing %s replaces the job, but the warning names %q", p, reasons)
		}
	}
}
