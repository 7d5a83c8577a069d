package stack

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

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
			// The job's own priority orders it in its queue and lets it preempt or be
			// preempted as a whole (the pod group takes it); the pods carry the same class.
			PriorityClassName:       j.Pod.PriorityClassName,
			TTLSecondsAfterFinished: j.TTLSecondsAfterFinished,
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
		Resources:       t.resources(),
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
	s := t.sizing()
	for _, m := range []map[string]string{s.Limits, s.Requests} {
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

// sizing is the task's requests and limits over DefaultTaskResources.
func (t *Task) sizing() Sizing { return DefaultTaskResources.Over(t.Requests, t.Limits) }

// resources are a task's requests and limits (sizing), with its GPUs as the nvidia.com/gpu limit.
func (t *Task) resources() corev1.ResourceRequirements {
	r := t.sizing().requirements()
	if t.GPUs != nil && *t.GPUs > 0 {
		r.Limits[GPUResource] = *resource.NewQuantity(int64(*t.GPUs), resource.DecimalSI)
	}
	return r
}
