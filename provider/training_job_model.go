package provider

import (
	"context"
	"reflect"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// trainingJobModel is the Terraform state of ctr_training_job.
type trainingJobModel struct {
	workloadAttrs
	Mode            types.String          `tfsdk:"mode"`
	Recipe          types.String          `tfsdk:"recipe"`
	Image           types.String          `tfsdk:"image"`
	ImagePullPolicy types.String          `tfsdk:"image_pull_policy"`
	PullSecrets     types.List            `tfsdk:"image_pull_secrets"`
	Command         types.List            `tfsdk:"command"`
	Entry           types.String          `tfsdk:"entry"`
	Env             types.Map             `tfsdk:"env"`
	Port            types.Int64           `tfsdk:"port"`
	Queue           types.String          `tfsdk:"queue"`
	SchedulerName   types.String          `tfsdk:"scheduler_name"`
	MinAvailable    types.Int64           `tfsdk:"min_available"`
	MaxRetry        types.Int64           `tfsdk:"max_retry"`
	TTLAfterFinish  types.Int64           `tfsdk:"ttl_seconds_after_finished"`
	PServer         *taskModel            `tfsdk:"pserver"`
	Trainer         *taskModel            `tfsdk:"trainer"`
	Worker          *taskModel            `tfsdk:"worker"`
	Policies        []policyModel         `tfsdk:"policies"`
	Dataset         *datasetModel         `tfsdk:"dataset"`
	SlotConfig      types.String          `tfsdk:"slot_config"`
	ModelOutput     *modelOutputMdl       `tfsdk:"model_output"`
	FileServer      *fileServerModel      `tfsdk:"file_server"`
	ModelExport     *modelExportModel     `tfsdk:"model_export"`
	SecurityContext *securityContextModel `tfsdk:"security_context"`
	Pod             *podModel             `tfsdk:"pod"`
	UploadToken     types.String          `tfsdk:"upload_token"`

	Wait          types.String `tfsdk:"wait"`
	Phase         types.String `tfsdk:"phase"`
	Tasks         types.Map    `tfsdk:"tasks"`
	LastCondition types.Object `tfsdk:"last_condition"`
	FileServerURL types.String `tfsdk:"file_server_url"`
	DonefileURL   types.String `tfsdk:"donefile_url"`
	ExternalURL   types.String `tfsdk:"file_server_external_url"`
}

var _ workloadModel[stack.TrainingJob] = (*trainingJobModel)(nil)

type taskModel struct {
	Replicas types.Int64   `tfsdk:"replicas"`
	Requests types.Map     `tfsdk:"requests"`
	Limits   types.Map     `tfsdk:"limits"`
	GPUs     types.Int64   `tfsdk:"gpus"`
	Policies []policyModel `tfsdk:"policies"`
}

type policyModel struct {
	Event  types.String `tfsdk:"event"`
	Action types.String `tfsdk:"action"`
}

type datasetModel struct {
	HDFSAddress types.String        `tfsdk:"hdfs_address"`
	HDFSUGI     types.String        `tfsdk:"hdfs_ugi"`
	S3          *s3DatasetModel     `tfsdk:"s3"`
	Volume      *volumeDatasetModel `tfsdk:"volume"`
	Path        types.String        `tfsdk:"path"`
	StartHour   types.String        `tfsdk:"start_hour"`
	EndHour     types.String        `tfsdk:"end_hour"`
	SparseDim   types.Int64         `tfsdk:"sparse_dim"`
}

type s3DatasetModel struct {
	Bucket            types.String `tfsdk:"bucket"`
	Endpoint          types.String `tfsdk:"endpoint"`
	Region            types.String `tfsdk:"region"`
	CredentialsSecret types.String `tfsdk:"credentials_secret"`
}

type volumeDatasetModel struct {
	ClaimName types.String `tfsdk:"claim_name"`
	MountPath types.String `tfsdk:"mount_path"`
}

type modelOutputMdl struct {
	Size          types.String `tfsdk:"size"`
	StorageClass  types.String `tfsdk:"storage_class"`
	AccessMode    types.String `tfsdk:"access_mode"`
	ExistingClaim types.String `tfsdk:"existing_claim"`
	MountPath     types.String `tfsdk:"mount_path"`
	DonefilePath  types.String `tfsdk:"donefile_path"`
	Retain        types.Bool   `tfsdk:"retain"`
}

type modelExportModel struct {
	Format          types.String    `tfsdk:"format"`
	Path            types.String    `tfsdk:"path"`
	Var             types.String    `tfsdk:"var"`
	EmbedxDim       types.Int64     `tfsdk:"embedx_dim"`
	IntervalSeconds types.Int64     `tfsdk:"interval_seconds"`
	ServingModel    types.String    `tfsdk:"serving_model"`
	Resources       *resourcesModel `tfsdk:"resources"`
}

type fileServerModel struct {
	Image           types.String          `tfsdk:"image"`
	Upload          types.Bool            `tfsdk:"upload"`
	UploadInsecure  types.Bool            `tfsdk:"upload_insecure"`
	Port            types.Int64           `tfsdk:"port"`
	ServiceType     types.String          `tfsdk:"service_type"`
	ServiceAnnots   types.Map             `tfsdk:"service_annotations"`
	Replicas        types.Int64           `tfsdk:"replicas"`
	SecurityContext *securityContextModel `tfsdk:"security_context"`
	Pod             *podModel             `tfsdk:"pod"`
	Resources       *resourcesModel       `tfsdk:"resources"`
}

// settings converts the model to the stack's settings. A min_available left to its default
// is null here (ModifyPlan sets the plan's from the configuration), so that it follows the
// replicas.
func (m *trainingJobModel) settings(ctx context.Context, images stack.Images) (stack.TrainingJob, diag.Diagnostics) {
	var diags diag.Diagnostics
	j := stack.TrainingJob{
		Name:                    m.Name.ValueString(),
		Namespace:               m.Namespace.ValueString(),
		Stack:                   m.Stack.ValueString(),
		Mode:                    m.Mode.ValueString(),
		Recipe:                  m.Recipe.ValueString(),
		Image:                   m.Image.ValueString(),
		ImagePullPolicy:         m.ImagePullPolicy.ValueString(),
		Entry:                   m.Entry.ValueString(),
		Port:                    int32(m.Port.ValueInt64()),
		Queue:                   m.Queue.ValueString(),
		SchedulerName:           m.SchedulerName.ValueString(),
		MinAvailable:            int32(m.MinAvailable.ValueInt64()),
		MaxRetry:                int32(m.MaxRetry.ValueInt64()),
		TTLSecondsAfterFinished: int32Ptr(m.TTLAfterFinish),
		SlotConfig:              m.SlotConfig.ValueString(),
		Policies:                policies(m.Policies),
		UploadToken:             m.UploadToken.ValueString(),
		ProviderVersion:         images.ProviderVersion,
		ImageRegistry:           images.Registry,
		Command:                 stringList(ctx, m.Command, &diags),
		ImagePullSecrets:        stringList(ctx, m.PullSecrets, &diags),
		Env:                     stringMap(ctx, m.Env, &diags),
	}
	j.SecurityContext = m.SecurityContext.stack(ctx, &diags)
	j.Pod = m.Pod.stack(ctx, &diags)
	task := func(t *taskModel) *stack.Task {
		if t == nil {
			return nil
		}
		return &stack.Task{Replicas: int32(t.Replicas.ValueInt64()), GPUs: int32Ptr(t.GPUs), Policies: policies(t.Policies),
			Requests: stringMap(ctx, t.Requests, &diags), Limits: stringMap(ctx, t.Limits, &diags)}
	}
	j.PServer, j.Trainer, j.Worker = task(m.PServer), task(m.Trainer), task(m.Worker)
	if d := m.Dataset; d != nil {
		j.Dataset = &stack.Dataset{HDFSAddress: d.HDFSAddress.ValueString(), HDFSUGI: d.HDFSUGI.ValueString(),
			Path: d.Path.ValueString(), StartHour: d.StartHour.ValueString(), EndHour: d.EndHour.ValueString(),
			SparseDim: d.SparseDim.ValueInt64()}
		if s3 := d.S3; s3 != nil {
			j.Dataset.S3 = &stack.S3Dataset{Bucket: s3.Bucket.ValueString(), Endpoint: s3.Endpoint.ValueString(), Region: s3.Region.ValueString(),
				CredentialsSecret: s3.CredentialsSecret.ValueString()}
		}
		if v := d.Volume; v != nil {
			j.Dataset.Volume = &stack.VolumeDataset{ClaimName: v.ClaimName.ValueString(), MountPath: v.MountPath.ValueString()}
		}
	}
	if o := m.ModelOutput; o != nil {
		j.ModelOutput = &stack.ModelOutput{Size: o.Size.ValueString(), StorageClass: o.StorageClass.ValueString(),
			AccessMode: o.AccessMode.ValueString(), ExistingClaim: o.ExistingClaim.ValueString(),
			MountPath: o.MountPath.ValueString(), DonefilePath: o.DonefilePath.ValueString()}
		if !o.Retain.IsNull() && !o.Retain.IsUnknown() {
			j.ModelOutput.Retain = o.Retain.ValueBoolPointer()
		}
	}
	if e := m.ModelExport; e != nil {
		j.ModelExport = &stack.ModelExport{Format: e.Format.ValueString(), Path: e.Path.ValueString(), Var: e.Var.ValueString(),
			EmbedxDim: e.EmbedxDim.ValueInt64(), IntervalSeconds: e.IntervalSeconds.ValueInt64(), ServingModel: e.ServingModel.ValueString()}
		j.ModelExport.Requests, j.ModelExport.Limits = e.Resources.stack(ctx, &diags)
	}
	if f := m.FileServer; f != nil {
		j.FileServer = &stack.FileServer{Image: f.Image.ValueString(), Upload: f.Upload.ValueBool(), UploadInsecure: f.UploadInsecure.ValueBool(),
			Port: int32(f.Port.ValueInt64()), ServiceType: f.ServiceType.ValueString(), Replicas: int32(f.Replicas.ValueInt64()),
			ServiceAnnotations: stringMap(ctx, f.ServiceAnnots, &diags),
			SecurityContext:    f.SecurityContext.stack(ctx, &diags), Pod: f.Pod.stack(ctx, &diags)}
		j.FileServer.Requests, j.FileServer.Limits = f.Resources.stack(ctx, &diags)
	}
	return j, diags
}

func policies(ps []policyModel) []stack.Policy {
	if ps == nil {
		return nil
	}
	out := make([]stack.Policy, len(ps))
	for i, p := range ps {
		out[i] = stack.Policy{Event: p.Event.ValueString(), Action: p.Action.ValueString()}
	}
	return out
}

// setComputed sets what the rendering determines, from the settings it rendered (defaulted).
func (m *trainingJobModel) setComputed(_ context.Context, j stack.TrainingJob, _ *diag.Diagnostics) {
	m.ID = namespaceName(j.Namespace, j.Name)
	m.FileServerURL, m.DonefileURL = types.StringValue(j.FileServerURL()), types.StringValue(j.DonefileURL())
}

// readLive sets phase, tasks and last_condition from the Volcano job ("Missing" when it is
// gone) and the file server's external URL from its Service.
func (m *trainingJobModel) readLive(ctx context.Context, kc *kube.Client, j stack.TrainingJob, live map[string]*unstructured.Unstructured, _ *diag.Diagnostics) {
	key := stack.VolcanoJobKey(j.Name)
	if live[key] == nil && slices.Contains(j.DeletedWhenFinished(), key) {
		m.Phase = types.StringValue(phaseCollected) // tasks and last_condition as last read
	} else {
		m.setLive(ctx, kc, live[key])
	}
	m.ExternalURL = liveAddress(live[stack.FileServerServiceKey(j.Name)], httpURL)
}

// fileServerServiceType is the type of the file server's Service.
func (m *trainingJobModel) fileServerServiceType() types.String {
	if m.FileServer == nil {
		return types.StringValue(stack.DefaultServiceType)
	}
	return m.FileServer.ServiceType
}

// fromCluster rebuilds the configuration from the Volcano job's settings and the Secrets
// with what they leave out (the HDFS UGI, the upload token).
func (m *trainingJobModel) fromCluster(ctx context.Context, kc *kube.Client, diags *diag.Diagnostics) bool {
	ns, name := m.Namespace.ValueString(), m.Name.ValueString()
	j, live, ok := settingsFromCluster(ctx, kc, stack.VolcanoJobRef(ns, name), "Training Job", stack.TrainingJobFromSettings, diags)
	if !ok {
		return false
	}
	fileServer, err := kc.Get(ctx, stack.FileServerRef(ns, name))
	if err != nil {
		diags.Append(diagnostics.Failed("Import Training Job Error", "Could not read "+kube.Describe(stack.FileServerRef(ns, name)), "", err))
		return false
	}
	j.RestoreEnv(live, fileServer)
	secret := func(ref *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
		u, err := kc.Get(ctx, ref)
		if err != nil {
			diags.Append(diagnostics.Failed("Import Training Job Error", "Could not read "+kube.Describe(ref), "", err))
			return nil, false
		}
		return u, true
	}
	if j.Dataset != nil {
		s, ok := secret(stack.DatasetSecretRef(ns, name))
		if !ok {
			return false
		}
		j.Dataset.HDFSUGI = stack.DatasetUGI(s)
	}
	if j.FileServer.TokenUploads() {
		s, ok := secret(stack.UploadSecretRef(ns, name))
		if !ok {
			return false
		}
		j.UploadToken = stack.UploadToken(s)
	}
	m.fromJob(ctx, j, diags)
	m.Wait = types.StringValue(waitRunning) // how far apply waits is configuration, not in the cluster: the default
	return !diags.HasError()
}

// fromJob fills the configuration attributes from settings read back from the cluster.
func (m *trainingJobModel) fromJob(ctx context.Context, j stack.TrainingJob, diags *diag.Diagnostics) {
	m.Name, m.Namespace = types.StringValue(j.Name), types.StringValue(j.Namespace)
	m.Stack, m.Mode, m.Image, m.ImagePullPolicy = optionalString(j.Stack), optionalString(j.Mode), optionalString(j.Image), optionalString(j.ImagePullPolicy)
	m.Recipe = optionalString(j.Recipe)
	m.Entry, m.Queue, m.SchedulerName, m.SlotConfig = optionalString(j.Entry), optionalString(j.Queue), optionalString(j.SchedulerName), optionalString(j.SlotConfig)
	m.Port, m.MinAvailable, m.MaxRetry = optionalInt64(int64(j.Port)), optionalInt64(int64(j.MinAvailable)), optionalInt64(int64(j.MaxRetry))
	m.TTLAfterFinish = optionalInt32(j.TTLSecondsAfterFinished)
	m.Env = optionalStringMap(ctx, j.Env, diags)
	m.Command = optionalStringList(ctx, j.Command, diags)
	m.PullSecrets = optionalStringList(ctx, j.ImagePullSecrets, diags)
	toPolicies := func(ps []stack.Policy) []policyModel {
		if ps == nil {
			return nil
		}
		out := make([]policyModel, len(ps))
		for i, p := range ps {
			out[i] = policyModel{Event: types.StringValue(p.Event), Action: types.StringValue(p.Action)}
		}
		return out
	}
	m.Policies = toPolicies(j.Policies)
	task := func(t *stack.Task) *taskModel {
		if t == nil {
			return nil
		}
		return &taskModel{Replicas: optionalInt64(int64(t.Replicas)), Requests: optionalStringMap(ctx, t.Requests, diags), Limits: optionalStringMap(ctx, t.Limits, diags),
			GPUs: optionalInt32(t.GPUs), Policies: toPolicies(t.Policies)}
	}
	m.PServer, m.Trainer, m.Worker = task(j.PServer), task(j.Trainer), task(j.Worker)
	m.Dataset = nil
	if d := j.Dataset; d != nil {
		m.Dataset = &datasetModel{HDFSAddress: optionalString(d.HDFSAddress), HDFSUGI: optionalString(d.HDFSUGI), Path: optionalString(d.Path),
			StartHour: optionalString(d.StartHour), EndHour: optionalString(d.EndHour), SparseDim: optionalInt64(d.SparseDim)}
		if s3 := d.S3; s3 != nil {
			m.Dataset.S3 = &s3DatasetModel{Bucket: types.StringValue(s3.Bucket), Endpoint: optionalString(s3.Endpoint), Region: optionalString(s3.Region),
				CredentialsSecret: optionalString(s3.CredentialsSecret)}
		}
		if v := d.Volume; v != nil {
			m.Dataset.Volume = &volumeDatasetModel{ClaimName: types.StringValue(v.ClaimName), MountPath: optionalString(v.MountPath)}
		}
	}
	m.ModelOutput = nil
	if o := j.ModelOutput; o != nil {
		m.ModelOutput = &modelOutputMdl{Size: optionalString(o.Size), StorageClass: optionalString(o.StorageClass), AccessMode: optionalString(o.AccessMode),
			ExistingClaim: optionalString(o.ExistingClaim), MountPath: optionalString(o.MountPath), DonefilePath: optionalString(o.DonefilePath),
			Retain: types.BoolValue(o.Retained())}
	}
	m.ModelExport = nil
	if e := j.ModelExport; e != nil {
		m.ModelExport = &modelExportModel{Format: optionalString(e.Format), Path: optionalString(e.Path), Var: optionalString(e.Var),
			EmbedxDim: optionalInt64(e.EmbedxDim), IntervalSeconds: optionalInt64(e.IntervalSeconds), ServingModel: optionalString(e.ServingModel),
			Resources: resourcesFromStack(ctx, e.Requests, e.Limits, diags)}
	}
	m.FileServer = nil
	if f := j.FileServer; f != nil {
		m.FileServer = &fileServerModel{Image: optionalString(f.Image), Upload: types.BoolValue(f.Upload), UploadInsecure: types.BoolValue(f.UploadInsecure),
			Port: optionalInt64(int64(f.Port)), ServiceType: optionalString(f.ServiceType), Replicas: optionalInt64(int64(f.Replicas)),
			ServiceAnnots:   optionalStringMap(ctx, f.ServiceAnnotations, diags),
			SecurityContext: securityContextFromStack(ctx, f.SecurityContext, diags), Pod: podFromStack(ctx, f.Pod, diags),
			Resources: resourcesFromStack(ctx, f.Requests, f.Limits, diags)}
	}
	m.SecurityContext = securityContextFromStack(ctx, j.SecurityContext, diags)
	m.Pod = podFromStack(ctx, j.Pod, diags)
	m.UploadToken = optionalString(j.UploadToken)
}

// replaceReasons names the changed attributes that force replacement, mirroring the
// RequiresReplace plan modifiers of the schema, for the plan's warning.
func replaceReasons(state, plan *trainingJobModel) []string {
	var out []string
	diff := func(name string, a, b attr.Value) {
		if !a.Equal(b) {
			out = append(out, name)
		}
	}
	diff("name", state.Name, plan.Name)
	diff("namespace", state.Namespace, plan.Namespace)
	diff("mode", state.Mode, plan.Mode)
	diff("image", state.Image, plan.Image)
	diff("image_pull_policy", state.ImagePullPolicy, plan.ImagePullPolicy)
	diff("image_pull_secrets", state.PullSecrets, plan.PullSecrets)
	diff("command", state.Command, plan.Command)
	diff("entry", state.Entry, plan.Entry)
	diff("env", state.Env, plan.Env)
	diff("port", state.Port, plan.Port)
	diff("queue", state.Queue, plan.Queue)
	diff("scheduler_name", state.SchedulerName, plan.SchedulerName)
	diff("max_retry", state.MaxRetry, plan.MaxRetry)
	diff("ttl_seconds_after_finished", state.TTLAfterFinish, plan.TTLAfterFinish)
	if state.SlotConfig.IsNull() != plan.SlotConfig.IsNull() {
		out = append(out, "slot_config (added or removed)")
	}
	for _, t := range []struct {
		name string
		a, b *taskModel
	}{{"pserver", state.PServer, plan.PServer}, {"trainer", state.Trainer, plan.Trainer}, {"worker", state.Worker, plan.Worker}} {
		if !reflect.DeepEqual(t.a, t.b) {
			out = append(out, t.name)
		}
	}
	if !reflect.DeepEqual(state.Policies, plan.Policies) {
		out = append(out, "policies")
	}
	if !reflect.DeepEqual(state.SecurityContext, plan.SecurityContext) {
		out = append(out, "security_context")
	}
	if !reflect.DeepEqual(state.Pod, plan.Pod) {
		out = append(out, "pod")
	}
	if state.tokenUploads() != plan.tokenUploads() {
		out = append(out, "file_server.upload or upload_insecure (trainers get or lose the upload token)")
	}
	a, b := state.Dataset, plan.Dataset
	if (a == nil) != (b == nil) {
		out = append(out, "dataset")
	} else if a != nil {
		diff("dataset.hdfs_address", a.HDFSAddress, b.HDFSAddress)
		diff("dataset.path", a.Path, b.Path)
		diff("dataset.start_hour", a.StartHour, b.StartHour)
		diff("dataset.end_hour", a.EndHour, b.EndHour)
		diff("dataset.sparse_dim", a.SparseDim, b.SparseDim)
		if !reflect.DeepEqual(a.S3, b.S3) {
			out = append(out, "dataset.s3")
		}
		if !reflect.DeepEqual(a.Volume, b.Volume) {
			out = append(out, "dataset.volume")
		}
	}
	if mo, mn := state.ModelOutput, plan.ModelOutput; mo != nil && mn != nil {
		diff("model_output.storage_class", mo.StorageClass, mn.StorageClass)
		diff("model_output.access_mode", mo.AccessMode, mn.AccessMode)
		diff("model_output.existing_claim", mo.ExistingClaim, mn.ExistingClaim)
		diff("model_output.mount_path", mo.MountPath, mn.MountPath)
	}
	return out
}

// tokenUploads reports whether the file server takes uploads with the upload token.
func (m *trainingJobModel) tokenUploads() bool {
	f := m.FileServer
	return f != nil && f.Upload.ValueBool() && !f.UploadInsecure.ValueBool()
}
