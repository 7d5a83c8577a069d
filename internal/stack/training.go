package stack

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

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

// Dataset is ElasticCTR's data.config: where the trainers read their samples. The source
// is HDFS (HDFSAddress, HDFSUGI; ElasticCTR's own, and what S3 and Volume are not), an
// S3-compatible bucket (S3) or a volume (Volume); at most one of the three is set.
type Dataset struct {
	HDFSAddress string `json:"hdfs_address,omitempty"`
	// HDFSUGI is secret ("user,password"); it is never stored in the settings annotation and
	// reaches the pods only through a Secret.
	HDFSUGI string         `json:"-"`
	S3      *S3Dataset     `json:"s3,omitempty"`
	Volume  *VolumeDataset `json:"volume,omitempty"`
	// Path is where the samples are in the source: on HDFS, under the bucket, or under the
	// volume's mount path.
	Path      string `json:"path,omitempty"`
	StartHour string `json:"start_hour,omitempty"`
	EndHour   string `json:"end_hour,omitempty"`
	SparseDim int64  `json:"sparse_dim,omitempty"`
}

// S3Dataset is a bucket of an S3-compatible object store: AWS S3, or Baidu Cloud BOS through
// its S3 endpoint (https://s3.<region>.bcebos.com). Trainers get it in the variables AWS's
// SDKs and CLI read (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
// and as DATASET_URL=s3://<bucket><path>.
type S3Dataset struct {
	Bucket   string `json:"bucket"`
	Endpoint string `json:"endpoint,omitempty"`
	Region   string `json:"region,omitempty"`
	// CredentialsSecret names a Secret in the job's namespace holding the keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the trainers get them by reference, so no
	// credential passes through Terraform. Empty when the pods have credentials otherwise
	// (IRSA or Workload Identity through pod.service_account_annotations).
	CredentialsSecret string `json:"credentials_secret,omitempty"`
}

// VolumeDataset is an existing PersistentVolumeClaim holding the samples (an NFS share, a CSI
// bucket mount, a cloud file system), mounted read-only into the trainers at MountPath.
type VolumeDataset struct {
	ClaimName string `json:"claim_name"`
	MountPath string `json:"mount_path,omitempty"`
}

// Dataset sources, as DATASET_SOURCE tells the trainers (HDFS sets none, as ElasticCTR's
// images expect).
const (
	DatasetS3     = "s3"
	DatasetVolume = "volume"
	// DefaultDatasetMountPath is where a volume dataset is mounted when mount_path is unset.
	DefaultDatasetMountPath = "/dataset"
	// datasetVolumeName is the trainers' volume of a volume dataset.
	datasetVolumeName = "dataset"
)

// s3CredentialKeys are the keys of an S3 dataset's credentials Secret, and the variables the
// trainers get them in.
var s3CredentialKeys = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}

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

// RenderTrainingJob renders the objects of a training job in apply order: RBAC, Secret,
// ConfigMap, PVC, file server, then the Volcano Job. It validates first.
func RenderTrainingJob(given TrainingJob) (Set, error) {
	if errs := given.Validate(); len(errs) > 0 {
		return nil, errs
	}
	settings, err := json.Marshal(given.forAnnotation())
	if err != nil {
		return nil, err
	}
	set := given.Defaulted().objects()
	job := set[len(set)-1].Object
	ann := job.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[SettingsAnnotation] = string(settings)
	job.SetAnnotations(ann)
	return set, nil
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
	if j.FileServer.Pod.ownsServiceAccount() {
		add(j.FileServer.Pod.serviceAccount(fileServerName(j.Name), j.Namespace, j.labels(componentFileServer)))
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

func (j TrainingJob) renderClaim() *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   kindClaim,
		ObjectMeta: meta(j.claimName(), j.Namespace, j.labels(componentModelOutput)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(j.ModelOutput.AccessMode)},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(j.ModelOutput.Size)},
			},
		},
	}
	if j.ModelOutput.StorageClass != "" {
		pvc.Spec.StorageClassName = ptr.To(j.ModelOutput.StorageClass)
	}
	if j.ModelOutput.Retained() {
		pvc.Annotations = map[string]string{RetainAnnotation: "true"}
	}
	return pvc
}

func (j TrainingJob) fileServerSelector() map[string]string {
	return map[string]string{LabelInstance: j.Name, LabelComponent: componentFileServer}
}

func (j TrainingJob) renderFileServer() *appsv1.Deployment {
	labels := j.labels(componentFileServer)
	mounts := []corev1.VolumeMount{{Name: "model-output", MountPath: cleanJoin(fileServerRoot, j.ModelOutput.MountPath), ReadOnly: !j.FileServer.Upload}}
	volumes := []corev1.Volume{j.modelVolume()}
	var annotations map[string]string
	if j.SlotConfig != "" {
		// slot.conf at the root, where ElasticCTR's scripts fetch it. A file mounted by
		// subPath does not follow its ConfigMap, so a new slot config rolls the pod.
		mounts = append(mounts, corev1.VolumeMount{Name: "slot-conf", MountPath: cleanJoin(fileServerRoot, slotConfigKey), SubPath: slotConfigKey, ReadOnly: true})
		volumes = append(volumes, j.slotConfigVolume())
		annotations = map[string]string{SlotConfigChecksumAnnotation: checksum(j.SlotConfig)}
	}
	if j.FileServer.TokenUploads() {
		mounts = append(mounts, corev1.VolumeMount{Name: "upload-token", MountPath: uploadTokenDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "upload-token", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: uploadSecretName(j.Name)}}})
	}
	dep := &appsv1.Deployment{
		TypeMeta:   kindDeployment,
		ObjectMeta: meta(fileServerName(j.Name), j.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(j.FileServer.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: j.fileServerSelector()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					ImagePullSecrets:             pullSecrets(j.ImagePullSecrets),
					Containers: []corev1.Container{{
						Name:  "fileserver",
						Image: j.FileServer.Image,
						Args:  j.fileServerArgs(),
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: j.FileServer.Port, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")},
						}},
						VolumeMounts: mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
	ownSA := ""
	if j.FileServer.Pod.ownsServiceAccount() {
		ownSA = fileServerName(j.Name)
	}
	applyPod(&dep.Spec.Template, cubeImageUser, j.FileServer.Pod, ownSA)
	return dep
}

// renderModelExport is the model-output step: one pod (Recreate: never two exporters at once)
// of this repository's image running `cube export --watch` on the model volume, beside the
// file server (a ReadWriteOnce volume mounts on one node only).
func (j TrainingJob) renderModelExport() *appsv1.Deployment {
	labels := j.labels(componentModelExport)
	me := j.ModelExport
	root := j.ModelOutput.MountPath
	out := cleanJoin(root, strings.TrimSuffix(j.ModelOutput.DonefilePath, modelExportDonefileSuffix))
	args := []string{"export", "--watch", "--format", me.Format, "--in", cleanJoin(root, me.Path), "--out", strings.TrimSuffix(out, "/"),
		"--interval", strconv.FormatInt(me.IntervalSeconds, 10) + "s"}
	if me.Var != "" {
		args = append(args, "--var", me.Var)
	}
	if me.EmbedxDim > 0 {
		args = append(args, "--embedx-dim", strconv.FormatInt(me.EmbedxDim, 10))
	}
	if me.ServingModel != "" {
		args = append(args, "--serving-model", me.ServingModel)
	}
	dep := &appsv1.Deployment{
		TypeMeta:   kindDeployment,
		ObjectMeta: meta(modelExportName(j.Name), j.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: j.Name, LabelComponent: componentModelExport}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					ImagePullSecrets:             pullSecrets(j.ImagePullSecrets),
					Containers: []corev1.Container{{
						Name:         "export",
						Image:        j.FileServer.Image,
						Args:         args,
						VolumeMounts: []corev1.VolumeMount{{Name: "model-output", MountPath: root}},
					}},
					Volumes: []corev1.Volume{j.modelVolume()},
				},
			},
		},
	}
	if j.ModelOutput.AccessMode == AccessReadWriteOnce {
		dep.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: j.fileServerSelector()},
				TopologyKey:   "kubernetes.io/hostname",
			}},
		}}
	}
	ownSA := ""
	if j.FileServer.Pod.ownsServiceAccount() {
		ownSA = fileServerName(j.Name)
	}
	applyPod(&dep.Spec.Template, cubeImageUser, j.FileServer.Pod, ownSA)
	return dep
}

func (j TrainingJob) fileServerArgs() []string {
	args := []string{"fileserver", "--root", fileServerRoot, "--listen", "0.0.0.0:" + strconv.Itoa(int(j.FileServer.Port))}
	switch {
	case j.FileServer.TokenUploads():
		args = append(args, "--upload", "--upload-token-file", uploadTokenDir+"/"+tokenKey)
	case j.FileServer.Upload:
		// upload_insecure: anyone who reaches the file server may write the model output.
		args = append(args, "--upload", "--upload-insecure")
	}
	return args
}

func (j TrainingJob) renderFileServerService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   kindService,
		ObjectMeta: serviceMeta(meta(fileServerName(j.Name), j.Namespace, j.labels(componentFileServer)), j.FileServer.ServiceAnnotations),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceType(j.FileServer.ServiceType),
			Selector: j.fileServerSelector(),
			Ports: []corev1.ServicePort{{Name: "http", Port: j.FileServer.Port, TargetPort: intstr.FromString("http"),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// slotConfigVolume is the slot config's ConfigMap as a volume.
func (j TrainingJob) slotConfigVolume() corev1.Volume {
	return corev1.Volume{Name: "slot-conf", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: slotConfigName(j.Name)}},
	}}
}

func (j TrainingJob) modelVolume() corev1.Volume {
	return corev1.Volume{Name: "model-output", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: j.claimName()},
	}}
}

func (j TrainingJob) renderVolcanoJob() *batchv1alpha1.Job {
	job := &batchv1alpha1.Job{
		TypeMeta:   kindVolcanoJob,
		ObjectMeta: meta(j.Name, j.Namespace, j.labels(componentTraining)),
		Spec: batchv1alpha1.JobSpec{
			SchedulerName: j.SchedulerName,
			Queue:         j.Queue,
			MinAvailable:  j.MinAvailable,
			MaxRetry:      j.MaxRetry,
			Policies:      lifecycle(j.Policies),
		},
	}
	if j.Mode == ModePS {
		job.Spec.Tasks = []batchv1alpha1.TaskSpec{j.task("pserver", j.PServer, "PSERVER"), j.task("trainer", j.Trainer, "TRAINER")}
		if r := j.recipe(); r != nil && r.namedPods {
			job.Spec.Plugins = map[string][]string{"env": {}, "svc": {}}
		}
	} else {
		// Collective workers find each other through Volcano's svc plugin (headless Service and
		// hosts file) and know their rank from the env plugin (VK_TASK_INDEX).
		job.Spec.Plugins = map[string][]string{"env": {}, "svc": {}}
		job.Spec.Tasks = []batchv1alpha1.TaskSpec{j.task("worker", j.Worker, "TRAINER")}
	}
	return job
}

func lifecycle(ps []Policy) []batchv1alpha1.LifecyclePolicy {
	var out []batchv1alpha1.LifecyclePolicy
	for _, p := range ps {
		out = append(out, batchv1alpha1.LifecyclePolicy{Event: batchEvent(p.Event), Action: batchAction(p.Action)})
	}
	return out
}

// task renders one Volcano task. Pod labels are what Paddle's k8s_tools.py selects on:
// paddle-job=<job> for trainers and paddle-job-pserver=<job> for parameter servers.
func (j TrainingJob) task(name string, t *Task, role string) batchv1alpha1.TaskSpec {
	labels := j.labels(componentTraining)
	labels["ctr.elasticctr.io/task"] = name
	if role == "PSERVER" {
		labels["paddle-job-pserver"] = j.Name
	} else {
		labels["paddle-job"] = j.Name
	}
	c := corev1.Container{
		Name:            name,
		Image:           j.Image,
		ImagePullPolicy: corev1.PullPolicy(j.ImagePullPolicy),
		Command:         j.Command,
		Env:             append(j.env(role), corev1.EnvVar{Name: "CPU_NUM", Value: strconv.FormatInt(cpuNum(t), 10)}),
		Ports:           []corev1.ContainerPort{{Name: "paddle", ContainerPort: j.Port, Protocol: corev1.ProtocolTCP}},
		Resources:       resources(t, true),
	}
	spec := corev1.PodSpec{
		ServiceAccountName: j.Name,
		RestartPolicy:      corev1.RestartPolicyOnFailure,
		ImagePullSecrets:   pullSecrets(j.ImagePullSecrets),
	}
	if j.SlotConfig != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "slot-conf", MountPath: SlotConfigDir, ReadOnly: true})
		spec.Volumes = append(spec.Volumes, j.slotConfigVolume())
	}
	if j.Mode == ModeCollective {
		// NCCL exchanges data through shared memory, and a container's /dev/shm is 64 MiB
		// unless a memory volume replaces it (it counts against the pod's memory limit).
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "dshm", MountPath: "/dev/shm"})
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "dshm", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	}
	// Trainers write the model output, and parameter servers where they save their own part
	// of a table (a recipe's pserversSave). A ReadWriteOnce volume can only be mounted on one
	// node, so they then run beside the file server (required pod affinity); a ReadWriteMany
	// volume lets them spread.
	r := j.recipe()
	saves := role == "TRAINER" || (r != nil && r.pserversSave)
	if saves {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "model-output", MountPath: j.ModelOutput.MountPath})
		spec.Volumes = append(spec.Volumes, j.modelVolume())
	}
	if role == "TRAINER" {
		// Trainers (collective workers too) read the samples.
		j.Dataset.mountVolume(&c, &spec)
	}
	if saves {
		if j.ModelOutput.AccessMode == AccessReadWriteOnce {
			spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: j.fileServerSelector()},
					TopologyKey:   "kubernetes.io/hostname",
				}},
			}}
		}
	}
	spec.Containers = []corev1.Container{c}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
	applyPod(&tmpl, trainingImageUser, j.Pod, j.Name)
	return batchv1alpha1.TaskSpec{
		Name:     name,
		Replicas: t.Replicas,
		// Volcano's admission webhook fills these two on create. Setting them ourselves keeps
		// server-side apply from removing them on the next apply, which the webhook would
		// refuse as a change to the tasks of a submitted job.
		MinAvailable: ptr.To(t.Replicas),
		MaxRetry:     j.MaxRetry,
		Policies:     lifecycle(t.Policies),
		Template:     tmpl,
	}
}

// env is the environment PaddlePaddle's launcher and the ElasticCTR scripts read.
func (j TrainingJob) env(role string) []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	val := func(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }
	pservers, trainers := int32(0), int32(0)
	if j.PServer != nil {
		pservers = j.PServer.Replicas
	}
	if j.Trainer != nil {
		trainers = j.Trainer.Replicas
	}
	if j.Worker != nil {
		trainers = j.Worker.Replicas
	}
	env := []corev1.EnvVar{
		field("NAMESPACE", "metadata.namespace"),
		field("POD_NAME", "metadata.name"),
		field("POD_IP", "status.podIP"),
		field("PADDLE_CURRENT_IP", "status.podIP"),
		val("PADDLE_JOB_NAME", j.Name),
		val("PADDLE_IS_LOCAL", "0"),
		val("PADDLE_PORT", strconv.Itoa(int(j.Port))),
		val("PADDLE_PSERVERS_NUM", strconv.Itoa(int(pservers))),
		val("PADDLE_TRAINERS_NUM", strconv.Itoa(int(trainers))),
		val("PADDLE_TRAINING_ROLE", role),
		val("TRAINING_ROLE", role),
		val("TRAINER_PACKAGE", "/workspace"),
		val("FLAGS_rpc_deadline", "36000000"),
		val("GLOG_v", "0"),
		val("GLOG_logtostderr", "1"),
		val("MODEL_OUTPUT_DIR", j.ModelOutput.MountPath),
	}
	if j.Entry != "" {
		env = append(env, val("ENTRY", j.Entry))
	}
	if j.SlotConfig != "" {
		env = append(env, val("SLOT_CONF", SlotConfigPath))
	}
	if ds := j.Dataset; ds != nil {
		env = append(env, ds.sourceEnv()...)
		env = append(env,
			val("START_DATE_HR", ds.StartHour),
			val("END_DATE_HR", ds.EndHour))
		if ds.SparseDim > 0 {
			env = append(env, val("SPARSE_DIM", strconv.FormatInt(ds.SparseDim, 10)))
		}
		if ds.HDFSUGI != "" {
			env = append(env, corev1.EnvVar{Name: datasetUGIKey, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: datasetSecretName(j.Name)}, Key: datasetUGIKey}}})
		}
	}
	if r := j.recipe(); r != nil && r.env != nil {
		env = setEnv(env, r.env(j))
	}
	if j.Mode == ModeCollective {
		env = setEnv(env, j.collectiveEnv())
	}
	if role == "TRAINER" && j.FileServer.TokenUploads() {
		// Trainers may upload to the file server: the token by reference, never its value.
		env = append(env, corev1.EnvVar{Name: UploadTokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: uploadSecretName(j.Name)}, Key: tokenKey}}})
	}
	// The user's variables (pod.env) are added by applyPod, and win over ours.
	return env
}

// cpuNum is CPU_NUM, how many copies of the program Fluid runs (unset, it takes the node's
// cores, not the pod's): the task's whole CPUs, from its limit, else its request, at least 1.
func cpuNum(t *Task) int64 {
	for _, m := range []map[string]string{t.Limits, t.Requests} {
		if v, ok := m[string(corev1.ResourceCPU)]; ok {
			if q, err := resource.ParseQuantity(v); err == nil {
				return max(q.MilliValue()/1000, 1)
			}
		}
	}
	return 1
}

// collectiveEnv is what Paddle's collective launchers read to run one process group over
// several pods, from the names Volcano's svc plugin gives the workers (hostname
// <job>-worker-<i>, subdomain <job>: <job>-worker-<i>.<job> resolves through the job's
// headless Service) and the index its job controller puts on each pod (the annotation
// volcano.sh/task-index):
//   - paddle.distributed.fleet.launch (2.1-2.3) takes cloud mode when POD_IP,
//     PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS and TRAINER_PORTS_NUM are set and there is
//     more than one trainer, and finds its rank as the index of POD_IP among the endpoints'
//     hosts: so POD_IP is the worker's own name here, as the endpoints are;
//   - Paddle 2.0's launcher reads PADDLE_TRAINERS (the hosts) instead of the endpoints;
//   - paddle.distributed.launch (2.3+) reads PADDLE_MASTER (worker 0), PADDLE_NNODES and
//     PADDLE_RANK.
func (j TrainingJob) collectiveEnv() []corev1.EnvVar {
	val := func(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }
	n := j.Worker.Replicas
	port := strconv.Itoa(int(j.Port))
	hosts, endpoints := j.taskHosts("worker", n, ""), j.taskHosts("worker", n, ":"+port)
	procs := int32(1)
	if g := j.Worker.GPUs; g != nil && *g > 1 {
		procs = *g
	}
	return []corev1.EnvVar{
		podNameAsIP(j.Name),
		{Name: "PADDLE_TRAINER_ID", ValueFrom: taskIndex()},
		{Name: "PADDLE_RANK", ValueFrom: taskIndex()},
		val("PADDLE_TRAINER_ENDPOINTS", strings.Join(endpoints, ",")),
		val("PADDLE_TRAINERS", strings.Join(hosts, ",")),
		val("TRAINER_PORTS_NUM", strconv.Itoa(int(procs))),
		val("PADDLE_NNODES", strconv.Itoa(int(n))),
		val("PADDLE_MASTER", endpoints[0]),
		val("FLAGS_START_PORT", port),
		val("PADDLE_START_PORT", port),
	}
}

// taskHosts are the names Volcano's svc plugin gives a task's pods (hostname
// <job>-<task>-<i>, subdomain <job>: <job>-<task>-<i>.<job> resolves through the job's
// headless Service), each followed by suffix (":port").
func (j TrainingJob) taskHosts(task string, n int32, suffix string) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s-%s-%d.%s%s", j.Name, task, i, j.Name, suffix)
	}
	return out
}

// taskIndex is the pod's index in its task, which Volcano's job controller annotates.
func taskIndex() *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + batchv1alpha1.TaskIndex + "']"}}
}

// podNameAsIP is POD_IP set to the pod's own name under the svc plugin, for Paddle's role
// makers that find themselves by looking POD_IP up among endpoints given as names. POD_NAME
// comes before it in the list, so Kubernetes expands it.
func podNameAsIP(job string) corev1.EnvVar {
	return corev1.EnvVar{Name: "POD_IP", Value: "$(POD_NAME)." + job}
}

// setEnv replaces the variables of env that add names (in place), and appends the others.
func setEnv(env []corev1.EnvVar, add []corev1.EnvVar) []corev1.EnvVar {
	for _, e := range add {
		if i := slices.IndexFunc(env, func(x corev1.EnvVar) bool { return x.Name == e.Name }); i >= 0 {
			env[i] = e
		} else {
			env = append(env, e)
		}
	}
	return env
}

func resources(t *Task, gpu bool) corev1.ResourceRequirements {
	conv := func(m map[string]string) corev1.ResourceList {
		if len(m) == 0 {
			return nil
		}
		out := corev1.ResourceList{}
		for k, v := range m {
			out[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	r := corev1.ResourceRequirements{Requests: conv(t.Requests), Limits: conv(t.Limits)}
	if gpu && t.GPUs != nil && *t.GPUs > 0 {
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits["nvidia.com/gpu"] = *resource.NewQuantity(int64(*t.GPUs), resource.DecimalSI)
	}
	return r
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

// UploadToken returns the token stored in the upload token Secret ("" when there is none).
func UploadToken(secret *unstructured.Unstructured) string { return SecretValue(secret, tokenKey) }

// sourceEnv tells the trainers where the samples are: ElasticCTR's HDFS variables, or
// DATASET_SOURCE with the variables of an S3 bucket or a volume.
func (ds *Dataset) sourceEnv() []corev1.EnvVar {
	val := func(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }
	switch {
	case ds.S3 != nil:
		s3 := ds.S3
		env := []corev1.EnvVar{val("DATASET_SOURCE", DatasetS3), val("DATASET_URL", "s3://"+s3.Bucket+ds.Path),
			val("S3_BUCKET", s3.Bucket), val("DATASET_PATH", ds.Path)}
		if s3.Endpoint != "" {
			env = append(env, val("AWS_ENDPOINT_URL", s3.Endpoint))
		}
		if s3.Region != "" {
			env = append(env, val("AWS_REGION", s3.Region))
		}
		if s3.CredentialsSecret != "" {
			for _, k := range s3CredentialKeys {
				env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: s3.CredentialsSecret}, Key: k}}})
			}
		}
		return env
	case ds.Volume != nil:
		return []corev1.EnvVar{val("DATASET_SOURCE", DatasetVolume), val("DATASET_PATH", cleanJoin(ds.volumeMountPath(), ds.Path))}
	default:
		return []corev1.EnvVar{val("HDFS_ADDRESS", ds.HDFSAddress), val("DATASET_PATH", ds.Path)}
	}
}

func (ds *Dataset) volumeMountPath() string {
	if ds.Volume.MountPath != "" {
		return ds.Volume.MountPath
	}
	return DefaultDatasetMountPath
}

// mountVolume mounts a volume dataset read-only into a trainer's pod.
func (ds *Dataset) mountVolume(c *corev1.Container, spec *corev1.PodSpec) {
	if ds == nil || ds.Volume == nil {
		return
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: datasetVolumeName, MountPath: ds.volumeMountPath(), ReadOnly: true})
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: datasetVolumeName, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ds.Volume.ClaimName, ReadOnly: true}}})
}

// DatasetUGI returns the UGI stored in the dataset Secret ("" when there is none).
func DatasetUGI(secret *unstructured.Unstructured) string { return SecretValue(secret, datasetUGIKey) }

// SecretValue returns the decoded value of key in a Secret ("" when absent).
func SecretValue(secret *unstructured.Unstructured, key string) string {
	if secret == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(secret.Object, "data", key)
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// TrainingJobFromSettings decodes the settings annotation of a training job's Volcano Job.
func TrainingJobFromSettings(s string) (TrainingJob, error) { return fromSettings[TrainingJob](s) }

// images are the job's default images.
func (j TrainingJob) images() Images {
	return Images{ProviderVersion: j.ProviderVersion, Registry: j.ImageRegistry}
}
