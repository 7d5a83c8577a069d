package stack

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
)

// TrainingJobType is the Terraform resource type, used in owner labels.
const TrainingJobType = "ctr_training_job"

// Defaults of a training job, applied by (*TrainingJob).Defaulted. Documented in the schema.
const (
	DefaultImage          = "volcanosh/edlctr:v1"
	DefaultPort           = 30236
	DefaultQueue          = "default"
	DefaultScheduler      = "volcano"
	DefaultMaxRetry       = 3
	DefaultReplicas       = 2
	DefaultModelSize      = "10Gi"
	DefaultModelMountPath = "/output"
	DefaultFileServerPort = 8080
	// DefaultFileServerReplicas serves the model output from one pod: enough for the
	// transfer, the only reader that matters.
	DefaultFileServerReplicas = 1
	DefaultDonefilePath       = "ctr_cube/donefile/base.txt"
	slotConfigKey             = "slot.conf"
	// SlotConfigChecksumAnnotation on the file server's pods rolls them when the slot config
	// they serve changes.
	SlotConfigChecksumAnnotation = "ctr.elasticctr.io/slot-conf-sha256"
	// datasetUGIKey is the dataset Secret's key and the trainers' variable of the HDFS UGI.
	datasetUGIKey = "HDFS_UGI"
	// SlotConfigDir is where the trainers see the slot config; SlotConfigPath is its file.
	SlotConfigDir  = "/etc/ctr"
	SlotConfigPath = SlotConfigDir + "/" + slotConfigKey
	fileServerRoot = "/web"
	uploadTokenDir = "/etc/ctr-upload"
	// UploadTokenEnv is where trainers find the upload token (and where `cube fileserver`
	// would read it from, were it not given --upload-token-file).
	UploadTokenEnv          = "CUBE_UPLOAD_TOKEN"
	ModePS                  = "ps"
	ModeCollective          = "collective"
	AccessReadWriteOnce     = "ReadWriteOnce"
	AccessReadWriteMany     = "ReadWriteMany"
	componentTraining       = "training"
	componentFileServer     = "fileserver"
	componentModelOutput    = "model-output"
	componentTrainingAccess = "training-rbac"
)

// Bounds of a training job's settings.
const (
	MinTaskReplicas = 1
	MinMaxRetry     = 1
)

// DefaultCommand is the launcher of the PaddlePaddle EDL images: it finds the other pods
// through the Kubernetes API (pod labels) and starts ENTRY in the right role.
var DefaultCommand = []string{"paddle_k8s", "start_fluid"}

// DefaultEntry is what the launcher runs in the default image (ENTRY): EDL's CTR program as
// its example runs it for pservers and trainers alike (edl example/ctr/k8s/ctr.yaml; the
// launcher runs `sh -c "$ENTRY"`, so an empty ENTRY would exit 0 and complete the job without
// training). train.py saves into ./models (models/batch-<k>, models/pass-<p>); trainers first
// point that folder at the model volume, so the saves outlive the pod and reach the model
// export (DefaultModelExportPath).
const DefaultEntry = `cd /workspace/ctr && if [ "$TRAINING_ROLE" = TRAINER ]; then mkdir -p "$MODEL_OUTPUT_DIR/` + DefaultModelExportPath +
	`" && rm -rf models && ln -s "$MODEL_OUTPUT_DIR/` + DefaultModelExportPath + `" models; fi && python train.py --is_local 0 --cloud_train 1`

// TrainingJob is everything a `ctr_training_job` says. Zero values mean "default"; the
// settings annotation stores this struct as given, so import reproduces the configuration.
type TrainingJob struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Stack is the app.kubernetes.io/part-of label; empty means Name.
	Stack string `json:"stack,omitempty"`
	// Mode is "ps" (parameter servers + trainers) or "collective" (GPU workers).
	Mode            string `json:"mode,omitempty"`
	Image           string `json:"image,omitempty"`
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// ImagePullSecrets are Secrets (in the namespace) every pod pulls its image with: the
	// training tasks and the file server.
	ImagePullSecrets []string `json:"image_pull_secrets,omitempty"`
	// Recipe names the published training image the job runs (Recipes): its default image,
	// entry and environment. Empty means EDL's with the default image, else none.
	Recipe        string            `json:"recipe,omitempty"`
	Command       []string          `json:"command,omitempty"`
	Entry         string            `json:"entry,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Port          int32             `json:"port,omitempty"`
	Queue         string            `json:"queue,omitempty"`
	SchedulerName string            `json:"scheduler_name,omitempty"`
	// MinAvailable is the gang size; 0 means every pod of the job.
	MinAvailable int32 `json:"min_available,omitempty"`
	MaxRetry     int32 `json:"max_retry,omitempty"`
	// TTLSecondsAfterFinished, if set, has Volcano delete the Volcano Job (and its pods and
	// pod group) that long after it finished (Completed, Failed or Terminated); the rest of
	// the job's objects (the file server, the model output) stay.
	TTLSecondsAfterFinished *int32 `json:"ttl_seconds_after_finished,omitempty"`

	PServer *Task `json:"pserver,omitempty"`
	Trainer *Task `json:"trainer,omitempty"`
	Worker  *Task `json:"worker,omitempty"`
	// Policies are job-level lifecycle policies; nil means PodEvicted and PodFailed restart the job.
	Policies []Policy `json:"policies,omitempty"`

	Dataset     *Dataset     `json:"dataset,omitempty"`
	SlotConfig  string       `json:"slot_config,omitempty"`
	ModelOutput *ModelOutput `json:"model_output,omitempty"`
	FileServer  *FileServer  `json:"file_server,omitempty"`
	// ModelExport, if set, runs the model-output step: `cube export --watch` in a Deployment
	// of its own beside the file server, turning each new save of the trainers into a cube
	// version (SequenceFiles and the donefile line), so no dumper of Paddle's is needed.
	ModelExport *ModelExport `json:"model_export,omitempty"`

	// SecurityContext overrides the hardened defaults of the training pods (pserver,
	// trainer, worker); the file server has its own. Deprecated: Pod.SecurityContext.
	SecurityContext *SecurityContext `json:"security_context,omitempty"`
	// Pod is added to the training pods (pserver, trainer, worker); the file server has its
	// own. Env and SecurityContext above are its deprecated aliases.
	Pod *PodSettings `json:"pod,omitempty"`

	// ProviderVersion picks the file server's default image, CubeImage(ProviderVersion).
	// Not a setting of the resource, so not in the annotation.
	ProviderVersion string `json:"-"`
	// ImageRegistry moves the default images (training, file server) to a mirror; see Images.
	ImageRegistry string `json:"-"`
	// UploadToken is the bearer token of file server uploads (FileServer.TokenUploads); never
	// in the settings annotation.
	UploadToken string `json:"-"`
}

// Task is one Volcano task (pserver, trainer or worker).
type Task struct {
	Replicas int32             `json:"replicas,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
	// GPUs is the nvidia.com/gpu limit per pod (collective workers); nil or 0 for none. A
	// pointer, so that a configured 0 reads back as 0 at import.
	GPUs *int32 `json:"gpus,omitempty"`
	// Policies are task-level policies; nil gives trainers TaskCompleted -> CompleteJob.
	Policies []Policy `json:"policies,omitempty"`
}

// Policy is a Volcano lifecycle policy: on Event, take Action.
type Policy struct {
	Event  string `json:"event"`
	Action string `json:"action"`
}

// ModelOutput is the volume the trainers write the model (and the cube input) to.
type ModelOutput struct {
	Size          string `json:"size,omitempty"`
	StorageClass  string `json:"storage_class,omitempty"`
	AccessMode    string `json:"access_mode,omitempty"`
	ExistingClaim string `json:"existing_claim,omitempty"`
	MountPath     string `json:"mount_path,omitempty"`
	DonefilePath  string `json:"donefile_path,omitempty"`
	// Retain keeps the claim ctr creates when the job is destroyed or replaced (nil: true),
	// so that a retraining finds every model version the cube and serving may still read.
	Retain *bool `json:"retain,omitempty"`
}

// Retained reports whether the model claim outlives the job (on a defaulted job).
func (m *ModelOutput) Retained() bool { return m.Retain == nil || *m.Retain }

// ModelExport is the model-output step: what the trainers save, and how to read it.
type ModelExport struct {
	// Format is what a save holds: "lodtensor" (one file per variable, as EDL's train.py saves
	// with save_persistables), "combined" (__params__ / *.pdiparams with its program),
	// "selectedrows", or "ps-table" (Paddle 2.x parameter-server text shards).
	Format string `json:"format,omitempty"`
	// Path is the folder, relative to the model output's mount path, that the trainers save
	// into: each sub-folder is one save (EDL: models/batch-<k>, models/pass-<p>).
	Path string `json:"path,omitempty"`
	// Var is the embedding's variable: its file in a save, or the table's folder (ps-table).
	Var string `json:"var,omitempty"`
	// EmbedxDim is a MemorySparseTable accessor's embedx_dim (ps-table part-* shards).
	EmbedxDim int64 `json:"embedx_dim,omitempty"`
	// IntervalSeconds is how often the exporter looks for a new save; a save is exported once
	// it is unchanged over one interval.
	IntervalSeconds int64 `json:"interval_seconds,omitempty"`
	// ServingModel is a folder of each save (relative to it) holding the serving model; it is
	// published with the version as serving/<id>/ beside the cube's input.
	ServingModel string `json:"serving_model,omitempty"`
	// Requests and Limits of the exporter, over DefaultModelExportResources.
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// ModelExportFormats are the formats `cube export` reads.
var ModelExportFormats = api.ExportFormats

const (
	DefaultModelExportFormat   = "lodtensor"
	DefaultModelExportPath     = "models"
	DefaultModelExportVar      = "SparseFeatFactors"
	DefaultModelExportInterval = 10
	// modelExportDonefileSuffix is where `cube export` keeps the donefile below its output
	// folder: donefile_path must end with it.
	modelExportDonefileSuffix = "donefile/base.txt"
	componentModelExport      = "model-export"
)

// FileServer publishes the model output over HTTP with directory listings: `cube fileserver`
// from this repository's image (an image given instead must take the same arguments).
type FileServer struct {
	Image string `json:"image,omitempty"`
	// Upload lets clients PUT files (ElasticCTR uploads slot.conf); read-only otherwise.
	// Uploads need the job's upload token unless UploadInsecure opens them to anyone.
	Upload         bool   `json:"upload,omitempty"`
	UploadInsecure bool   `json:"upload_insecure,omitempty"`
	Port           int32  `json:"port,omitempty"`
	ServiceType    string `json:"service_type,omitempty"`
	Replicas       int32  `json:"replicas,omitempty"`
	// ServiceAnnotations go on the file server's Service (cloud load balancers).
	ServiceAnnotations map[string]string `json:"service_annotations,omitempty"`
	// SecurityContext overrides the hardened defaults of the file server's pods.
	// Deprecated: Pod.SecurityContext.
	SecurityContext *SecurityContext `json:"security_context,omitempty"`
	// Pod is added to the file server's pods.
	Pod *PodSettings `json:"pod,omitempty"`
	// Requests and Limits of the file server, over DefaultFileServerResources.
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// TokenUploads reports whether the file server takes uploads that need the upload token
// (then an upload token Secret is rendered and trainers get the token).
func (f *FileServer) TokenUploads() bool { return f != nil && f.Upload && !f.UploadInsecure }

// Defaulted returns a copy with every default filled in. Render works on the defaulted copy;
// the settings annotation keeps the job as given.
func (j TrainingJob) Defaulted() TrainingJob {
	d := j
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&d.Stack, d.Name)
	def(&d.Mode, ModePS)
	r := j.recipe()
	if r != nil {
		def(&d.Image, MirrorImage(d.ImageRegistry, r.Image))
	}
	def(&d.ImagePullPolicy, DefaultPullPolicy)
	def(&d.Queue, DefaultQueue)
	def(&d.SchedulerName, DefaultScheduler)
	if d.Command == nil {
		d.Command = DefaultCommand
		if r != nil && r.Command != nil {
			d.Command = r.Command
		}
		if d.Entry == "" && r != nil {
			d.Entry = r.Entry
		}
	}
	if d.Port == 0 {
		d.Port = DefaultPort
	}
	if d.MaxRetry == 0 {
		d.MaxRetry = DefaultMaxRetry
	}
	task := func(t *Task, policies []Policy) *Task {
		out := Task{Replicas: DefaultReplicas}
		if t != nil {
			out = *t
			if out.Replicas == 0 {
				out.Replicas = DefaultReplicas
			}
		}
		if out.Policies == nil {
			out.Policies = policies
		}
		return &out
	}
	if d.Mode == ModePS {
		d.PServer = task(d.PServer, nil)
		d.Trainer = task(d.Trainer, []Policy{{Event: "TaskCompleted", Action: "CompleteJob"}})
		d.Worker = nil
	} else {
		d.Worker = task(d.Worker, []Policy{{Event: "TaskCompleted", Action: "CompleteJob"}})
		d.PServer, d.Trainer = nil, nil
	}
	d.Pod = mergeLegacy(d.Pod, d.Env, d.SecurityContext, nil, nil)
	d.Env, d.SecurityContext = nil, nil
	if d.Policies == nil {
		d.Policies = []Policy{{Event: "PodEvicted", Action: "RestartJob"}, {Event: "PodFailed", Action: "RestartJob"}}
	}
	if d.MinAvailable == 0 {
		d.MinAvailable = d.TotalPods()
	}
	mo := ModelOutput{}
	if d.ModelOutput != nil {
		mo = *d.ModelOutput
	}
	def(&mo.Size, DefaultModelSize)
	def(&mo.AccessMode, AccessReadWriteOnce)
	def(&mo.MountPath, DefaultModelMountPath)
	def(&mo.DonefilePath, DefaultDonefilePath)
	d.ModelOutput = &mo
	fs := FileServer{}
	if d.FileServer != nil {
		fs = *d.FileServer
	}
	def(&fs.Image, d.images().Cube())
	def(&fs.ServiceType, DefaultServiceType)
	if fs.Port == 0 {
		fs.Port = DefaultFileServerPort
	}
	if fs.Replicas == 0 {
		fs.Replicas = DefaultFileServerReplicas
	}
	fs.Pod = mergeLegacy(fs.Pod, nil, fs.SecurityContext, nil, nil)
	fs.SecurityContext = nil
	d.FileServer = &fs
	if d.ModelExport != nil {
		me := *d.ModelExport
		def(&me.Format, DefaultModelExportFormat)
		def(&me.Path, DefaultModelExportPath)
		if me.Var == "" && me.Format != "ps-table" {
			me.Var = DefaultModelExportVar
		}
		if me.IntervalSeconds == 0 {
			me.IntervalSeconds = DefaultModelExportInterval
		}
		d.ModelExport = &me
	}
	if fs.TokenUploads() && d.UploadToken == "" {
		d.UploadToken = placeholderTokenForPlans
	}
	return d
}

// defaultImage reports whether the job runs the default training image: unset, or set to it
// or a mirror's copy of it (a plan fills the default in, from the provider's image_registry).
func (j TrainingJob) defaultImage() bool {
	return j.Image == "" || j.Image == DefaultImage || strings.HasSuffix(j.Image, "/"+DefaultImage)
}

// TotalPods is the number of pods the job asks for (on a defaulted job).
func (j TrainingJob) TotalPods() int32 {
	var n int32
	for _, t := range []*Task{j.PServer, j.Trainer, j.Worker} {
		if t != nil {
			n += t.Replicas
		}
	}
	return n
}

// DeletedWhenFinished are the manifests keys of the objects that Volcano deletes by itself
// once the job has finished (TTLSecondsAfterFinished): the Volcano Job. Their absence is not
// drift, and nothing submits them again.
func (j TrainingJob) DeletedWhenFinished() []string {
	if j.TTLSecondsAfterFinished == nil {
		return nil
	}
	return []string{VolcanoJobKey(j.Name)}
}

// FileServerURL is the in-cluster URL of the file server (on a defaulted job).
func (j TrainingJob) FileServerURL() string {
	return fmt.Sprintf("http://%s:%d", j.fileServerHost(), j.FileServer.Port)
}

// DonefileURL is the URL of base.txt, the donefile the cube transfer watches. The file server
// serves the volume at the same path the trainers mount it, so the "input" paths trainers
// write into the donefile are valid URL paths on the file server, as Paddle's transfer expects.
func (j TrainingJob) DonefileURL() string {
	return j.FileServerURL() + cleanJoin(j.ModelOutput.MountPath, j.ModelOutput.DonefilePath)
}

func (j TrainingJob) owner() string { return Owner(TrainingJobType, j.Name) }
func (j TrainingJob) claimName() string {
	if j.ModelOutput.ExistingClaim != "" {
		return j.ModelOutput.ExistingClaim
	}
	return modelClaimName(j.Name)
}
func (j TrainingJob) labels(component string) map[string]string {
	return commonLabels(j.Stack, j.Name, j.owner(), component)
}

// Render is the job's objects and the settings they were rendered from, every default filled
// in: what a caller reads back (URLs, the gang size, images) comes from those, never from a
// Defaulted() of its own.
func (j TrainingJob) Render() (TrainingJob, Set, error) {
	set, err := RenderTrainingJob(j)
	return j.Defaulted(), set, err
}

// RenderTrainingJob renders the objects of a training job in apply order: RBAC, Secret,
// ConfigMap, PVC, file server, then the Volcano Job. It validates first.
func RenderTrainingJob(given TrainingJob) (Set, error) {
	return render(given, func(set Set) *unstructured.Unstructured { return set[len(set)-1].Object })
}

// forAnnotation is the job as the settings annotation stores it: as given, but without what
// import reads back from elsewhere (Secrets, and env values from the pod templates).
func (j TrainingJob) forAnnotation() TrainingJob {
	out := j
	out.Env = namesOnly(j.Env)
	out.Pod = j.Pod.forAnnotation()
	if j.FileServer != nil {
		fs := *j.FileServer
		fs.Pod = fs.Pod.forAnnotation()
		out.FileServer = &fs
	}
	return out
}

// RestoreEnv fills the env values that the settings annotation leaves out from the live
// Volcano Job (the training pods) and the live file server Deployment.
func (j *TrainingJob) RestoreEnv(job, fileServer *unstructured.Unstructured) {
	RestoreEnv(j.Env, job)
	if j.Pod != nil {
		RestoreEnv(j.Pod.Env, job)
	}
	if j.FileServer != nil && j.FileServer.Pod != nil {
		RestoreEnv(j.FileServer.Pod.Env, fileServer)
	}
}

// trainingServiceAccount is the ServiceAccount of the training pods: the one they name, or
// the job's own.
func (j TrainingJob) trainingServiceAccount() string {
	if j.Pod != nil && j.Pod.ServiceAccountName != "" {
		return j.Pod.ServiceAccountName
	}
	return j.Name
}

// objects renders a defaulted job's objects, the Volcano Job last.
func (j TrainingJob) objects() Set {
	var set Set
	add := func(o Object) { set = append(set, o) }

	// The seed images' launcher lists pods by label to find pservers and its trainer id: the
	// Role goes to the training pods' ServiceAccount, ctr's own unless they name another.
	rbac := j.labels(componentTrainingAccess)
	if j.Pod.ServiceAccountName == "" {
		sa := &corev1.ServiceAccount{TypeMeta: kindServiceAccount, ObjectMeta: meta(j.Name, j.Namespace, rbac)}
		sa.Annotations = j.Pod.ServiceAccountAnnotations
		add(toObject(sa))
	}
	add(toObject(&rbacv1.Role{
		TypeMeta:   kindRole,
		ObjectMeta: meta(j.Name, j.Namespace, rbac),
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}))
	add(toObject(&rbacv1.RoleBinding{
		TypeMeta:   kindRoleBinding,
		ObjectMeta: meta(j.Name, j.Namespace, rbac),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: j.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: j.trainingServiceAccount(), Namespace: j.Namespace}},
	}))
	if sa := j.FileServer.Pod.ownServiceAccount(fileServerName(j.Name)); sa != "" {
		add(j.FileServer.Pod.serviceAccount(sa, j.Namespace, j.labels(componentFileServer)))
	}
	if j.Dataset != nil && j.Dataset.HDFSUGI != "" {
		add(toObject(&corev1.Secret{
			TypeMeta:   kindSecret,
			ObjectMeta: meta(datasetSecretName(j.Name), j.Namespace, j.labels(componentTraining)),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{datasetUGIKey: []byte(j.Dataset.HDFSUGI)},
		}))
	}
	if j.FileServer.TokenUploads() {
		add(toObject(&corev1.Secret{
			TypeMeta:   kindSecret,
			ObjectMeta: meta(uploadSecretName(j.Name), j.Namespace, j.labels(componentFileServer)),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{tokenKey: []byte(j.UploadToken)},
		}))
	}
	if j.SlotConfig != "" {
		add(toObject(&corev1.ConfigMap{
			TypeMeta:   kindConfigMap,
			ObjectMeta: meta(slotConfigName(j.Name), j.Namespace, j.labels(componentTraining)),
			Data:       map[string]string{slotConfigKey: j.SlotConfig},
		}))
	}
	if j.ModelOutput.ExistingClaim == "" {
		add(toObject(j.renderClaim()))
	}
	add(toObject(j.renderFileServer()))
	if j.ModelExport != nil {
		add(toObject(j.renderModelExport()))
	}
	add(toObject(j.renderFileServerService()))
	add(toObject(j.renderVolcanoJob()))
	return set
}

// cleanJoin joins URL/file path parts with exactly one slash between them.
func cleanJoin(a, b string) string {
	for len(a) > 0 && a[len(a)-1] == '/' {
		a = a[:len(a)-1]
	}
	for len(b) > 0 && b[0] == '/' {
		b = b[1:]
	}
	return a + "/" + b
}

// TrainingJobFromSettings decodes the settings annotation of a training job's Volcano Job.
func TrainingJobFromSettings(s string) (TrainingJob, error) { return fromSettings[TrainingJob](s) }

// images are the job's default images.
func (j TrainingJob) images() Images {
	return Images{ProviderVersion: j.ProviderVersion, Registry: j.ImageRegistry}
}
