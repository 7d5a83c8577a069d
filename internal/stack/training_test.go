package stack

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/NAME, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./internal/stack -update")
	assert.Equal(t, string(want), got, "rendering changed; if intended, run go test ./internal/stack -update and review the diff")
}

func renderAll(t *testing.T, j TrainingJob) string {
	t.Helper()
	return setYAML(t)(RenderTrainingJob(j))
}

// setYAML returns what the golden files hold of a rendered set: every object's manifest in
// apply order, each after a comment with its key. It fails t on a render error.
func setYAML(t *testing.T) func(Set, error) string {
	return func(set Set, err error) string {
		t.Helper()
		require.NoError(t, err)
		m, err := set.Manifests()
		require.NoError(t, err)
		var b strings.Builder
		for _, o := range set {
			b.WriteString("# " + o.Key + "\n" + m[o.Key] + "---\n")
		}
		return b.String()
	}
}

func TestRenderTrainingJob_Golden(t *testing.T) {
	cases := map[string]TrainingJob{
		"training_minimal.yaml": {Name: "ctr-demo", Namespace: "default", ProviderVersion: "0.4.0"},
		"training_full.yaml": {
			Name: "fleet-ctr", Namespace: "ctr", Stack: "elastic-ctr", Image: "paddle/fleet-ctr:2.0",
			Entry: "cd workspace && python3 train_with_mlflow.py slot.conf",
			Env:   map[string]string{"CPU_NUM": "2", "GLOG_v": "3"},
			Port:  30240, Queue: "training", MinAvailable: 4, MaxRetry: 5, TTLSecondsAfterFinished: ptr.To[int32](3600),
			PServer: &Task{Replicas: 3, Requests: map[string]string{"cpu": "1", "memory": "100M"}, Limits: map[string]string{"cpu": "10", "memory": "30Gi"}},
			Trainer: &Task{Replicas: 2, Requests: map[string]string{"cpu": "1000m", "ephemeral-storage": "10Gi"}},
			Dataset: &Dataset{HDFSAddress: "hdfs://10.0.0.1:9000", HDFSUGI: "root,secret", Path: "/train_data",
				StartHour: "20200401/00", EndHour: "20200401/03", SparseDim: 1000001},
			SlotConfig:  "1\n2\n3\n",
			ModelOutput: &ModelOutput{Size: "50Gi", StorageClass: "cfs", AccessMode: AccessReadWriteMany},
			FileServer: &FileServer{Port: 9090, ServiceType: "LoadBalancer", Upload: true,
				ServiceAnnotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
				SecurityContext:    &SecurityContext{SeccompProfile: "Unconfined"}},
			SecurityContext: &SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true), AddCapabilities: []string{"CHOWN"}},
			ProviderVersion: "v1.2.3", UploadToken: "t0k3n",
		},
		// The EDL recipe: the default image trains and saves into models/ on the model volume,
		// and the model export publishes each save as a cube version.
		"training_model_export.yaml": {
			Name: "edl", Namespace: "ctr", ProviderVersion: "0.4.0",
			ModelExport: &ModelExport{ServingModel: "inference_model"},
		},
		"training_collective.yaml": {
			Name: "wide-deep", Namespace: "gpu", Mode: ModeCollective, ProviderVersion: "26a9a1d5fee3",
			Worker:      &Task{Replicas: 4, GPUs: ptr.To[int32](1), Requests: map[string]string{"cpu": "4", "memory": "16Gi"}},
			ModelOutput: &ModelOutput{ExistingClaim: "juicefs-model"},
		},
	}
	for name, j := range cases {
		t.Run(name, func(t *testing.T) { golden(t, name, renderAll(t, j)) })
	}
}

func TestRenderTrainingJob_Deterministic(t *testing.T) {
	j := TrainingJob{Name: "a", Namespace: "b", Env: map[string]string{"Z": "1", "A": "2", "M": "3"},
		Trainer: &Task{Requests: map[string]string{"memory": "1Gi", "cpu": "1", "ephemeral-storage": "1Gi"}}}
	first := renderAll(t, j)
	for i := 0; i < 20; i++ {
		require.Equal(t, first, renderAll(t, j))
	}
}

func TestRenderTrainingJob_Labels(t *testing.T) {
	set, err := RenderTrainingJob(TrainingJob{Name: "ctr-demo", Namespace: "default", Stack: "shop",
		Dataset: &Dataset{HDFSUGI: "u,p"}, SlotConfig: "1"})
	require.NoError(t, err)
	require.Len(t, set, 9)
	for _, o := range set {
		l := o.Object.GetLabels()
		assert.Equal(t, ManagedBy, l[LabelManagedBy], o.Key)
		assert.Equal(t, "shop", l[LabelPartOf], o.Key)
		assert.Equal(t, "ctr_training_job.ctr-demo", l[OwnerLabel], o.Key)
		assert.NotEmpty(t, l[LabelComponent], o.Key)
		assert.Equal(t, "default", o.Object.GetNamespace(), o.Key)
	}
}

func TestRenderTrainingJob_SecretsStayOutOfSettings(t *testing.T) {
	set, err := RenderTrainingJob(TrainingJob{Name: "j", Namespace: "n", Dataset: &Dataset{HDFSUGI: "root,hunter2", Path: "/d"}})
	require.NoError(t, err)
	job := set[len(set)-1].Object
	require.Equal(t, "Job", job.GetKind())
	settings := job.GetAnnotations()[SettingsAnnotation]
	assert.Contains(t, settings, `"path":"/d"`)
	assert.NotContains(t, settings, "hunter2")
	y, err := YAML(job)
	require.NoError(t, err)
	assert.NotContains(t, y, "hunter2", "the UGI must reach pods only through the Secret")
}

func TestTrainingJob_URLs(t *testing.T) {
	j := TrainingJob{Name: "ctr", Namespace: "ads", FileServer: &FileServer{Port: 8081},
		ModelOutput: &ModelOutput{MountPath: "/data/"}}.Defaulted()
	assert.Equal(t, "http://ctr-fileserver.ads.svc:8081", j.FileServerURL())
	assert.Equal(t, "http://ctr-fileserver.ads.svc:8081/data/ctr_cube/donefile/base.txt", j.DonefileURL())
	assert.Equal(t, int32(4), j.MinAvailable, "gang defaults to every pod")
}

func TestTrainingJob_Validate(t *testing.T) {
	ok := TrainingJob{Name: "ok", Namespace: "default"}
	require.Empty(t, ok.Validate())
	cases := []struct {
		name string
		mut  func(*TrainingJob)
		path string
	}{
		{"gang too big", func(j *TrainingJob) { j.MinAvailable = 5 }, "min_available"},
		{"bad quantity", func(j *TrainingJob) { j.PServer = &Task{Requests: map[string]string{"cpu": "lots"}} }, `pserver.requests["cpu"]`},
		{"request over limit", func(j *TrainingJob) {
			j.PServer = &Task{Requests: map[string]string{"cpu": "4"}, Limits: map[string]string{"cpu": "2"}}
		}, `pserver.requests["cpu"]`},
		{"worker in ps mode", func(j *TrainingJob) { j.Worker = &Task{Replicas: 1} }, "worker"},
		{"trainer in collective mode", func(j *TrainingJob) { j.Mode = ModeCollective; j.Trainer = &Task{} }, "trainer"},
		{"hdfs url", func(j *TrainingJob) { j.Dataset = &Dataset{HDFSAddress: "http://x:9000"} }, "dataset.hdfs_address"},
		{"hour", func(j *TrainingJob) { j.Dataset = &Dataset{StartHour: "2020-04-01"} }, "dataset.start_hour"},
		{"month 13", func(j *TrainingJob) { j.Dataset = &Dataset{StartHour: "20201301/00"} }, "dataset.start_hour"},
		{"February 30", func(j *TrainingJob) { j.Dataset = &Dataset{EndHour: "20200230/00"} }, "dataset.end_hour"},
		{"hour 24", func(j *TrainingJob) { j.Dataset = &Dataset{StartHour: "20200401/24"} }, "dataset.start_hour"},
		{"stack label", func(j *TrainingJob) { j.Stack = "-x-" }, "stack"},
		{"hours reversed", func(j *TrainingJob) { j.Dataset = &Dataset{StartHour: "20200402/00", EndHour: "20200401/00"} }, "dataset.end_hour"},
		{"size", func(j *TrainingJob) { j.ModelOutput = &ModelOutput{Size: "-1Gi"} }, "model_output.size"},
		{"mount path", func(j *TrainingJob) { j.ModelOutput = &ModelOutput{MountPath: "relative"} }, "model_output.mount_path"},
		{"env name", func(j *TrainingJob) { j.Env = map[string]string{"1BAD": "x"} }, `env["1BAD"]`},
		{"two sources", func(j *TrainingJob) {
			j.Dataset = &Dataset{HDFSAddress: "hdfs://nn:9000", S3: &S3Dataset{Bucket: "ads"}}
		}, "dataset"},
		{"s3 endpoint", func(j *TrainingJob) {
			j.Dataset = &Dataset{S3: &S3Dataset{Bucket: "ads", Endpoint: "s3.bj.bcebos.com"}}
		}, "dataset.s3.endpoint"},
		{"s3 endpoint with a path", func(j *TrainingJob) {
			j.Dataset = &Dataset{S3: &S3Dataset{Bucket: "ads", Endpoint: "https://s3.bj.bcebos.com/ads"}}
		}, "dataset.s3.endpoint"},
		{"s3 credentials", func(j *TrainingJob) {
			j.Dataset = &Dataset{S3: &S3Dataset{Bucket: "ads", CredentialsSecret: "Bos_Keys"}}
		}, "dataset.s3.credentials_secret"},
		{"claim name", func(j *TrainingJob) { j.Dataset = &Dataset{Volume: &VolumeDataset{ClaimName: "Samples"}} }, "dataset.volume.claim_name"},
		{"mount path root", func(j *TrainingJob) { j.Dataset = &Dataset{Volume: &VolumeDataset{ClaimName: "s", MountPath: "/"}} }, "dataset.volume.mount_path"},
		{"mount path over the model output", func(j *TrainingJob) {
			j.Dataset = &Dataset{Volume: &VolumeDataset{ClaimName: "s", MountPath: DefaultModelMountPath + "/in"}}
		}, "dataset.volume.mount_path"},
		{"mount path holds the slot config", func(j *TrainingJob) { j.Dataset = &Dataset{Volume: &VolumeDataset{ClaimName: "s", MountPath: "/etc"}} }, "dataset.volume.mount_path"},
		{"export path", func(j *TrainingJob) { j.ModelExport = &ModelExport{Path: "../elsewhere"} }, "model_export.path"},
		{"export embedx_dim without a table", func(j *TrainingJob) { j.ModelExport = &ModelExport{EmbedxDim: 8} }, "model_export.embedx_dim"},
		{"export with another donefile", func(j *TrainingJob) {
			j.ModelExport = &ModelExport{}
			j.ModelOutput = &ModelOutput{DonefilePath: "done/base.txt"}
		}, "model_output.donefile_path"},
		{"own image, launcher, no entry", func(j *TrainingJob) { j.Image = "registry.example.com/ctr:1" }, "image"},
		{"service annotation key", func(j *TrainingJob) { j.FileServer = &FileServer{ServiceAnnotations: map[string]string{"a/b/c": "x"}} },
			`file_server.service_annotations["a/b/c"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := ok
			c.mut(&j)
			errs := j.Validate()
			require.NotEmpty(t, errs)
			assert.Equal(t, c.path, errs[0].Path, errs.Error())
			_, err := RenderTrainingJob(j)
			assert.Error(t, err, "render must refuse what Validate refuses")
		})
	}
}

func TestRenderTrainingJob_SecretRedactedInManifests(t *testing.T) {
	set, err := RenderTrainingJob(TrainingJob{Name: "j", Namespace: "n", Dataset: &Dataset{HDFSUGI: "root,hunter2"}})
	require.NoError(t, err)
	m, err := set.Manifests()
	require.NoError(t, err)
	secret := m["v1/Secret/j-dataset"]
	require.NotEmpty(t, secret)
	assert.Contains(t, secret, "HDFS_UGI: "+SensitiveValue)
	for k, y := range m {
		assert.NotContains(t, y, "hunter2", k)
		assert.NotContains(t, y, "cm9vdCxodW50ZXIy", k) // base64 of the UGI
	}
	// The object that is applied still carries the value.
	for _, o := range set {
		if o.Key == "v1/Secret/j-dataset" {
			data, _, _ := unstructuredString(o.Object.Object, "data", "HDFS_UGI")
			assert.Equal(t, "cm9vdCxodW50ZXIy", data)
		}
	}
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// FuzzTrainingJobFromSettings: the settings annotation is read from the cluster, where anyone
// with edit rights can change it. Decoding it and rendering must never panic: bad settings
// are refused with an error.
func FuzzTrainingJobFromSettings(f *testing.F) {
	for _, j := range []TrainingJob{
		{Name: "a", Namespace: "b"},
		{Name: "fleet", Namespace: "ctr", Mode: ModeCollective, Worker: &Task{Replicas: 2, GPUs: ptr.To[int32](1), Requests: map[string]string{"cpu": "1"}}},
		{Name: "x", Namespace: "y", PServer: &Task{Limits: map[string]string{"memory": "1Gi"}}, ModelOutput: &ModelOutput{Size: "1Gi"}},
	} {
		b, _ := json.Marshal(j)
		f.Add(string(b))
	}
	f.Add(`{"name":"a","namespace":"b","pserver":{"requests":{"cpu":"not-a-quantity"}}}`)
	f.Add(`{"name":"a","namespace":"b","model_output":{"size":"1Qi"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		j, err := TrainingJobFromSettings(s)
		if err != nil {
			return
		}
		set, err := RenderTrainingJob(j)
		if err != nil {
			return
		}
		if _, err := set.Manifests(); err != nil {
			t.Fatalf("rendered set has no manifests: %v", err)
		}
	})
}

// TestRenderTrainingJob_S3Dataset: the trainers get the bucket in the variables AWS's SDKs
// read and its credentials by reference to the user's Secret; ctr makes no Secret of its own
// and no credential is in the job.
func TestRenderTrainingJob_S3Dataset(t *testing.T) {
	set, err := RenderTrainingJob(TrainingJob{Name: "j", Namespace: "n", Dataset: &Dataset{Path: "/train_data",
		S3: &S3Dataset{Bucket: "ads-samples", Endpoint: "https://s3.bj.bcebos.com", Region: "bj", CredentialsSecret: "bos-keys"}}})
	require.NoError(t, err)
	assert.Nil(t, set.Find("v1/Secret/"+datasetSecretName("j")))
	trainer := podTemplates(t, set)[VolcanoJobKey("j")+"/trainer"].Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range trainer.Env {
		env[e.Name] = e
	}
	for name, want := range map[string]string{"DATASET_SOURCE": DatasetS3, "DATASET_URL": "s3://ads-samples/train_data",
		"S3_BUCKET": "ads-samples", "DATASET_PATH": "/train_data", "AWS_ENDPOINT_URL": "https://s3.bj.bcebos.com", "AWS_REGION": "bj"} {
		assert.Equal(t, want, env[name].Value, name)
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		require.NotNil(t, env[k].ValueFrom, k)
		assert.Equal(t, corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "bos-keys"}, Key: k}, *env[k].ValueFrom.SecretKeyRef)
	}
	assert.NotContains(t, env, "HDFS_ADDRESS")

	noKeys, err := RenderTrainingJob(TrainingJob{Name: "j", Namespace: "n", Dataset: &Dataset{S3: &S3Dataset{Bucket: "ads"}}})
	require.NoError(t, err)
	for _, e := range podTemplates(t, noKeys)[VolcanoJobKey("j")+"/trainer"].Spec.Containers[0].Env {
		assert.NotContains(t, []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"}, e.Name,
			"without credentials_secret the pods' own identity (IRSA, Workload Identity) is used")
	}
}

// TestRenderTrainingJob_VolumeDataset: a volume dataset is mounted read-only into the
// trainers (not the parameter servers), and DATASET_PATH points into it.
func TestRenderTrainingJob_VolumeDataset(t *testing.T) {
	for _, tc := range []struct{ mount, want string }{{"", DefaultDatasetMountPath}, {"/samples", "/samples"}} {
		set, err := RenderTrainingJob(TrainingJob{Name: "j", Namespace: "n", Dataset: &Dataset{Path: "/day1",
			Volume: &VolumeDataset{ClaimName: "samples", MountPath: tc.mount}}})
		require.NoError(t, err)
		pods := podTemplates(t, set)
		trainer := pods[VolcanoJobKey("j")+"/trainer"].Spec
		assert.Contains(t, trainer.Containers[0].VolumeMounts, corev1.VolumeMount{Name: datasetVolumeName, MountPath: tc.want, ReadOnly: true})
		assert.Contains(t, trainer.Volumes, corev1.Volume{Name: datasetVolumeName, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "samples", ReadOnly: true}}})
		assert.Contains(t, trainer.Containers[0].Env, corev1.EnvVar{Name: "DATASET_PATH", Value: tc.want + "/day1"})
		assert.Contains(t, trainer.Containers[0].Env, corev1.EnvVar{Name: "DATASET_SOURCE", Value: DatasetVolume})
		for _, v := range pods[VolcanoJobKey("j")+"/pserver"].Spec.Volumes {
			assert.NotEqual(t, datasetVolumeName, v.Name, "parameter servers read no samples")
		}
	}
}

// TestRenderTrainingJob_EntryAndCPUNum: the launcher always has a program to run (the
// default image's, or the user's), and Fluid's CPU_NUM follows each task's CPUs, not the
// node's; pod.env still wins.
func TestRenderTrainingJob_EntryAndCPUNum(t *testing.T) {
	env := func(t *testing.T, j TrainingJob, task string) map[string]string {
		t.Helper()
		set, err := RenderTrainingJob(j)
		require.NoError(t, err)
		out := map[string]string{}
		for _, e := range podTemplates(t, set)[VolcanoJobKey(j.Name)+"/"+task].Spec.Containers[0].Env {
			out[e.Name] = e.Value
		}
		return out
	}
	def := env(t, TrainingJob{Name: "j", Namespace: "n"}, "trainer")
	assert.Equal(t, DefaultEntry, def["ENTRY"], "the default image's launcher needs its program")
	assert.Equal(t, "1", def["CPU_NUM"], "no CPU set: one copy")

	mirrored := env(t, TrainingJob{Name: "j", Namespace: "n", Image: "mirror.example:5000/" + DefaultImage}, "trainer")
	assert.Equal(t, DefaultEntry, mirrored["ENTRY"], "a mirror's copy of the default image is the default image")
	own := env(t, TrainingJob{Name: "j", Namespace: "n", Image: "mine:1", Entry: "python3 train.py"}, "pserver")
	assert.Equal(t, "python3 train.py", own["ENTRY"])
	custom := env(t, TrainingJob{Name: "j", Namespace: "n", Image: "mine:1", Command: []string{"/train"}}, "trainer")
	assert.NotContains(t, custom, "ENTRY", "a command of the user's own needs no ENTRY")

	cpus := TrainingJob{Name: "j", Namespace: "n",
		PServer: &Task{Requests: map[string]string{"cpu": "500m"}},
		Trainer: &Task{Requests: map[string]string{"cpu": "2"}, Limits: map[string]string{"cpu": "3500m"}}}
	assert.Equal(t, "1", env(t, cpus, "pserver")["CPU_NUM"], "half a CPU: at least one copy")
	assert.Equal(t, "3", env(t, cpus, "trainer")["CPU_NUM"], "the limit, in whole CPUs, before the request")
	cpus.Pod = &PodSettings{Env: map[string]string{"CPU_NUM": "8"}}
	assert.Equal(t, "8", env(t, cpus, "trainer")["CPU_NUM"], "pod.env wins")
}

// TestDefaultEntryPutsSavesOnTheModelVolume runs the default ENTRY as paddle_k8s does
// (`sh -c "$ENTRY"`), with EDL's train.py replaced by a stand-in that saves into ./models as
// train.py does: a trainer's save lands on the model volume, where the model export finds
// it; a pserver trains without touching the volume.
func TestDefaultEntryPutsSavesOnTheModelVolume(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, role := range []string{"TRAINER", "PSERVER"} {
		dir := t.TempDir()
		work, volume := filepath.Join(dir, "workspace", "ctr"), filepath.Join(dir, "output")
		require.NoError(t, os.MkdirAll(filepath.Join(work, "models"), 0o755))
		require.NoError(t, os.MkdirAll(volume, 0o755))
		entry := strings.ReplaceAll(DefaultEntry, "/workspace/ctr", work)
		entry = strings.Replace(entry, "python train.py --is_local 0 --cloud_train 1", "mkdir -p models/pass-0 && echo saved > models/pass-0/SparseFeatFactors", 1)
		require.NotEqual(t, DefaultEntry, entry)
		cmd := exec.Command(sh, "-c", entry)
		cmd.Env = append(os.Environ(), "TRAINING_ROLE="+role, "MODEL_OUTPUT_DIR="+volume)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", role, out)
		_, onVolume := os.Stat(filepath.Join(volume, DefaultModelExportPath, "pass-0", "SparseFeatFactors"))
		if role == "TRAINER" {
			assert.NoError(t, onVolume, "a trainer's save is on the model volume")
		} else {
			assert.Error(t, onVolume, "a pserver does not write the volume (it does not mount it)")
		}
	}
}

// paddleLegacyCloudRank is what paddle.distributed.fleet.launch (2.1-2.3, cloud_utils.py)
// makes of a pod's environment: cloud mode only when POD_IP, PADDLE_TRAINER_ID,
// PADDLE_TRAINER_ENDPOINTS and TRAINER_PORTS_NUM are all set and PADDLE_TRAINERS_NUM is not
// 1; then POD_IP must be one of the endpoints' hosts, and its index there is the node's rank.
func paddleLegacyCloudRank(env map[string]string) (int, error) {
	for _, k := range []string{"POD_IP", "PADDLE_TRAINER_ID", "PADDLE_TRAINER_ENDPOINTS", "TRAINER_PORTS_NUM"} {
		if env[k] == "" {
			return 0, fmt.Errorf("%s unset: the launcher runs on one node only", k)
		}
	}
	if env["PADDLE_TRAINERS_NUM"] == "1" {
		return 0, fmt.Errorf("PADDLE_TRAINERS_NUM = 1: one node")
	}
	var hosts []string
	for _, ep := range strings.Split(env["PADDLE_TRAINER_ENDPOINTS"], ",") {
		h, _, _ := strings.Cut(ep, ":")
		hosts = append(hosts, h)
	}
	i := slices.Index(hosts, env["POD_IP"])
	if i < 0 {
		return 0, fmt.Errorf("POD_IP %q is not among the endpoints' hosts %v", env["POD_IP"], hosts)
	}
	return i, nil
}

// podEnv is a container's environment as the kubelet gives it to the process of pod
// <job>-worker-<index> that Volcano made (its name, and the task-index annotation), with
// $(VAR) expanded from variables before it.
func podEnv(t *testing.T, c corev1.Container, podName, index string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			// Kubernetes expands $(VAR) of a variable defined before; any other stays as written.
			env[e.Name] = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(e.Value, func(m string) string {
				if v, ok := env[m[2:len(m)-1]]; ok {
					return v
				}
				return m
			})
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = podName
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['volcano.sh/task-index']":
			env[e.Name] = index
		}
	}
	return env
}

// TestRenderTrainingJob_VolcanoJobSettings: the Volcano Job itself carries the training pods'
// priority class (Volcano orders and preempts jobs by the job's, not the pods') and the TTL
// after which Volcano deletes it once finished; neither is set unless asked for.
func TestRenderTrainingJob_VolcanoJobSettings(t *testing.T) {
	spec := func(j TrainingJob) map[string]any {
		set, err := RenderTrainingJob(j)
		require.NoError(t, err)
		return set.Find(VolcanoJobKey(j.Name)).Object["spec"].(map[string]any)
	}
	plain := spec(TrainingJob{Name: "j", Namespace: "n"})
	assert.NotContains(t, plain, "priorityClassName")
	assert.NotContains(t, plain, "ttlSecondsAfterFinished")

	s := spec(TrainingJob{Name: "j", Namespace: "n", Pod: &PodSettings{PriorityClassName: "training-high"}, TTLSecondsAfterFinished: ptr.To[int32](0)})
	assert.Equal(t, "training-high", s["priorityClassName"])
	assert.EqualValues(t, 0, s["ttlSecondsAfterFinished"], "0 is a TTL (delete at once), not unset")
	for _, task := range s["tasks"].([]any) {
		pod := task.(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		assert.Equal(t, "training-high", pod["priorityClassName"], "the pods keep the class")
	}
}

// TestRenderTrainingJob_CollectiveRunsOnEveryWorker: every worker of a collective job gets
// what Paddle's launchers need to form one group (the names Volcano's svc plugin gives the
// pods), each its own rank; NCCL gets a memory /dev/shm; GPUs asked for are rendered in ps
// mode too, and refused on parameter servers.
func TestRenderTrainingJob_CollectiveRunsOnEveryWorker(t *testing.T) {
	j := TrainingJob{Name: "wd", Namespace: "n", Mode: ModeCollective, Worker: &Task{Replicas: 3, GPUs: ptr.To[int32](2)}}
	set, err := RenderTrainingJob(j)
	require.NoError(t, err)
	tmpl := podTemplates(t, set)[VolcanoJobKey("wd")+"/worker"]
	c := tmpl.Spec.Containers[0]
	for i := range 3 {
		env := podEnv(t, c, fmt.Sprintf("wd-worker-%d", i), fmt.Sprint(i))
		rank, err := paddleLegacyCloudRank(env)
		require.NoError(t, err, "worker %d", i)
		assert.Equal(t, i, rank, "the legacy launcher's rank of worker %d", i)
		assert.Equal(t, fmt.Sprint(i), env["PADDLE_RANK"], "the new launcher's rank")
		assert.Equal(t, "wd-worker-0.wd:30236", env["PADDLE_MASTER"])
		assert.Equal(t, "3", env["PADDLE_NNODES"])
		assert.Equal(t, "2", env["TRAINER_PORTS_NUM"], "one process per GPU")
		assert.Equal(t, "wd-worker-0.wd,wd-worker-1.wd,wd-worker-2.wd", env["PADDLE_TRAINERS"])
	}
	names := map[string]int{}
	for _, e := range c.Env {
		names[e.Name]++
		assert.Equal(t, 1, names[e.Name], "%s twice: server-side apply refuses a duplicate key", e.Name)
	}
	assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "dshm", MountPath: "/dev/shm"})
	assert.Equal(t, "2", c.Resources.Limits.Name("nvidia.com/gpu", "").String())

	// ps mode: trainers' GPUs are rendered, not dropped; pservers' are refused.
	ps, err := RenderTrainingJob(TrainingJob{Name: "ps", Namespace: "n", Trainer: &Task{GPUs: ptr.To[int32](1)}})
	require.NoError(t, err)
	trainer := podTemplates(t, ps)[VolcanoJobKey("ps")+"/trainer"].Spec.Containers[0]
	assert.Equal(t, "1", trainer.Resources.Limits.Name("nvidia.com/gpu", "").String())
	assert.NotContains(t, trainer.Env, corev1.EnvVar{Name: "PADDLE_MASTER"}, "ps mode has no collective env")
	errs := TrainingJob{Name: "ps", Namespace: "n", PServer: &Task{GPUs: ptr.To[int32](1)}}.Validate()
	require.NotEmpty(t, errs)
	assert.Equal(t, "pserver.gpus", errs[0].Path)
}
