package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
)

// ServingType is the Terraform resource type of Paddle Serving.
const ServingType = "ctr_serving"

// Defaults of a serving, applied by (*Serving).Defaulted.
const (
	// DefaultServingImage is Paddle Serving 0.9.0's CPU runtime image. The published tags
	// are listed in PaddlePaddle/Serving's doc/Docker_Images_CN.md ("运行镜像" table:
	// 0.9.0-runtime for CPU, 0.9.0-cuda*-runtime for GPUs), pulled from
	// registry.baidubce.com; there is no paddlepaddle/serving:0.9.0 tag.
	DefaultServingImage    = "registry.baidubce.com/paddlepaddle/serving:0.9.0-runtime"
	DefaultServingPort     = 8010
	DefaultServingReplicas = 1
	servingConfDir         = "/serving/conf"
	servingConfKey         = "cube.conf"
	componentServing       = "serving"
	// ServingLauncherDir is the emptyDir the init container copies the cube binary into
	// (cube install): Paddle's image has no cube, and no Python is needed.
	ServingLauncherDir = "/ctr/bin"
	// ServingLauncherPath is the launcher the default command runs: cube serving.
	ServingLauncherPath = ServingLauncherDir + "/cube"
	// ServingWorkDir is the launcher's --dir, an emptyDir: the server's configuration, the
	// unpacked models and the server's logs go below it.
	ServingWorkDir = "/ctr/serving"
	// DefaultServingBin is where Paddle Serving's runtime images keep the server binary;
	// they export SERVING_BIN only in /root/.bashrc, which no container command reads, so
	// the pods set it (as Paddle's own Kubernetes template does).
	DefaultServingBin = "/usr/local/serving_bin/serving"
	// ServingStatusPort is the launcher's status port (GET /status: its phase and the id of
	// the dense model in place), read through the API server's pod proxy.
	ServingStatusPort = 8019
	// GPUResource is the resource whose limit gives the server GPU devices (--gpu-ids).
	GPUResource = "nvidia.com/gpu"
	// CubeConfChecksumAnnotation on the pod template rolls the pods when cube.conf changes:
	// Paddle Serving reads it only at start.
	CubeConfChecksumAnnotation = "ctr.elasticctr.io/cube-conf-sha256"
)

// ModelIDPlaceholder in model_url stands for the donefile id of the version the cube serves
// (api.ModelIDPlaceholder).
const ModelIDPlaceholder = api.ModelIDPlaceholder

// DefaultServingCommand runs the launcher the init container installed.
var DefaultServingCommand = []string{ServingLauncherPath, "serving"}

// Serving is everything a `ctr_serving` says. Zero values mean "default".
type Serving struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	Stack           string `json:"stack,omitempty"`
	Image           string `json:"image,omitempty"`
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// ImagePullSecrets are Secrets (in the namespace) the serving pods pull with.
	ImagePullSecrets []string `json:"image_pull_secrets,omitempty"`
	// Replicas is the Deployment's size; with Autoscaling it must be 0 (the autoscaler sizes it).
	Replicas int32 `json:"replicas,omitempty"`
	// Autoscaling, when set, renders a HorizontalPodAutoscaler that sizes the Deployment.
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
	Port        int32        `json:"port,omitempty"`
	ServiceType string       `json:"service_type,omitempty"`
	// ServiceAnnotations go on the Service: cloud load balancers are configured by them.
	ServiceAnnotations map[string]string `json:"service_annotations,omitempty"`
	ModelURL           string            `json:"model_url,omitempty"`
	// CubeTransferURL is ctr_cube's transfer_url: with it the launcher follows the cube, and
	// an IDPlaceholder in ModelURL is the donefile id of the version the cube serves.
	CubeTransferURL string `json:"cube_transfer_url,omitempty"`
	// Wait is how far apply waits (ServingWaits); "" is WaitAvailable.
	Wait string `json:"wait,omitempty"`
	// LauncherImage is the image the init container copies the launcher (cube) from;
	// empty: the cube image of the provider's version (Images.Cube).
	LauncherImage string `json:"launcher_image,omitempty"`
	// ProviderVersion and ImageRegistry pick the default LauncherImage (see Images).
	ProviderVersion string `json:"-"`
	ImageRegistry   string `json:"-"`
	// Command replaces the image\'s entrypoint; nil: DefaultServingCommand.
	Command  []string          `json:"command,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
	// CubeConf is ctr_cube's cube_conf.
	CubeConf string `json:"cube_conf"`
	// SecurityContext overrides the hardened defaults of the serving pods. Deprecated, like
	// Env: Pod.
	SecurityContext *SecurityContext `json:"security_context,omitempty"`
	// Pod is added to the serving pods.
	Pod *PodSettings `json:"pod,omitempty"`
}

// Defaulted returns a copy with every default filled in.
func (s Serving) Defaulted() Serving {
	d := s
	d.Stack = orDefault(d.Stack, d.Name)
	d.Image = orDefault(d.Image, DefaultServingImage)
	d.ImagePullPolicy = orDefault(d.ImagePullPolicy, DefaultPullPolicy)
	d.ServiceType = orDefault(d.ServiceType, DefaultServiceType)
	if d.Autoscaling != nil {
		a := d.Autoscaling.Defaulted()
		d.Autoscaling = &a
	} else if d.Replicas == 0 {
		d.Replicas = DefaultServingReplicas
	}
	if d.Port == 0 {
		d.Port = DefaultServingPort
	}
	d.Wait = orDefault(d.Wait, WaitAvailable)
	if d.Command == nil {
		d.Command = DefaultServingCommand
	}
	d.LauncherImage = orDefault(d.LauncherImage, Images{ProviderVersion: d.ProviderVersion, Registry: d.ImageRegistry}.Cube())
	if d.Args == nil {
		// The launcher's arguments: the port, its working directory, and the GPUs the pod
		// is given (a GPU limit of N: the devices 0..N-1 the container sees).
		d.Args = []string{"--port=" + strconv.Itoa(int(d.Port)), "--dir=" + ServingWorkDir, "--status-listen=:" + strconv.Itoa(ServingStatusPort)}
		if ids := gpuIDs(d.Limits[GPUResource]); ids != "" {
			d.Args = append(d.Args, "--gpu-ids="+ids)
		}
	}
	d.Pod = mergeLegacy(d.Pod, d.Env, d.SecurityContext, nil, nil)
	d.Env, d.SecurityContext = nil, nil
	return d
}

// forAnnotation is the serving as the settings annotation stores it: without env values.
func (s Serving) forAnnotation() Serving {
	out := s
	out.Env = namesOnly(s.Env)
	out.Pod = s.Pod.forAnnotation()
	return out
}

// RestoreEnv fills the env values the settings annotation leaves out from the live Deployment.
func (s *Serving) RestoreEnv(dep *unstructured.Unstructured) {
	RestoreEnv(s.Env, dep)
	if s.Pod != nil {
		RestoreEnv(s.Pod.Env, dep)
	}
}

// URL is the in-cluster URL of the serving Service.
func (s Serving) URL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", s.Name, s.Namespace, s.Port)
}

// Render is the serving's objects and the settings they were rendered from, every default
// filled in (see TrainingJob.Render).
func (s Serving) Render() (Serving, Set, error) {
	set, err := RenderServing(s)
	return s.Defaulted(), set, err
}

// RenderServing renders a serving's ConfigMap (cube.conf), Deployment and Service.
func RenderServing(given Serving) (Set, error) {
	return render(given, func(set Set) *unstructured.Unstructured { return set.Find(ServingDeploymentKey(given.Name)) })
}

// objects renders a defaulted serving's objects.
func (s Serving) objects() Set {
	labels := commonLabels(s.Stack, s.Name, Owner(ServingType, s.Name), componentServing)
	selector := map[string]string{LabelInstance: s.Name, LabelComponent: componentServing}
	sum := sha256.Sum256([]byte(s.CubeConf))
	env := []corev1.EnvVar{{Name: "CUBE_CONF", Value: servingConfDir + "/" + servingConfKey}, {Name: "SERVING_BIN", Value: DefaultServingBin}}
	if s.ModelURL != "" {
		env = append(env, corev1.EnvVar{Name: "MODEL_URL", Value: s.ModelURL})
	}
	if s.CubeTransferURL != "" {
		env = append(env, corev1.EnvVar{Name: "CUBE_STATUS_URL", Value: strings.TrimSuffix(s.CubeTransferURL, "/") + "/" + TransferStatusPath})
	}
	var set Set
	if sa := s.Pod.ownServiceAccount(s.Name); sa != "" {
		set = append(set, s.Pod.serviceAccount(sa, s.Namespace, labels))
	}
	set = append(set, toObject(&corev1.ConfigMap{
		TypeMeta:   kindConfigMap,
		ObjectMeta: meta(servingConfName(s.Name), s.Namespace, labels),
		Data:       map[string]string{servingConfKey: s.CubeConf},
	}))
	if s.maxPods() > 1 {
		set = append(set, toObject(s.disruptionBudget(labels, selector)))
	}
	dep := &appsv1.Deployment{
		TypeMeta:   kindDeployment,
		ObjectMeta: meta(s.Name, s.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			// With autoscaling, spec.replicas is not ours: left out of what we apply, it is
			// the autoscaler's to set, and neither an apply nor the drift check touches it.
			Replicas: s.fixedReplicas(),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: s.podLabels(labels), Annotations: map[string]string{CubeConfChecksumAnnotation: hex.EncodeToString(sum[:])}},
				Spec: corev1.PodSpec{
					ImagePullSecrets: pullSecrets(s.ImagePullSecrets),
					InitContainers: []corev1.Container{{
						Name: "install-launcher", Image: s.LauncherImage, ImagePullPolicy: corev1.PullPolicy(s.ImagePullPolicy),
						Args:         []string{"install", ServingLauncherDir}, // the cube image's entrypoint is the binary
						Resources:    LauncherResources.requirements(),
						VolumeMounts: []corev1.VolumeMount{{Name: "launcher", MountPath: ServingLauncherDir}},
					}},
					Containers: []corev1.Container{{
						Name: "serving", Image: s.Image, ImagePullPolicy: corev1.PullPolicy(s.ImagePullPolicy),
						Command: s.Command, Args: s.Args, Env: env,
						Ports: []corev1.ContainerPort{{Name: "serving", ContainerPort: s.Port, Protocol: corev1.ProtocolTCP},
							{Name: "launcher", ContainerPort: ServingStatusPort, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("serving")}}},
						Resources:      DefaultServingResources.Over(s.Requests, s.Limits).requirements(),
						VolumeMounts: []corev1.VolumeMount{{Name: "cube-conf", MountPath: servingConfDir + "/" + servingConfKey, SubPath: servingConfKey, ReadOnly: true},
							{Name: "launcher", MountPath: ServingLauncherDir, ReadOnly: true},
							{Name: "work", MountPath: ServingWorkDir}},
					}},
					Volumes: []corev1.Volume{{Name: "cube-conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: servingConfName(s.Name)}}}},
						{Name: "launcher", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	applyPod(&dep.Spec.Template, servingImageUser, s.Pod, s.Pod.ownServiceAccount(s.Name))
	// The init container runs the cube image, whatever the serving image allows: its own
	// non-root user and a read-only root filesystem.
	cubePod, cubeCtr := hardenedPod(cubeImageUser, nil)
	cubeCtr.RunAsNonRoot, cubeCtr.RunAsUser, cubeCtr.RunAsGroup = cubePod.RunAsNonRoot, cubePod.RunAsUser, cubePod.RunAsGroup
	dep.Spec.Template.Spec.InitContainers[0].SecurityContext = cubeCtr
	set = append(set, toObject(dep))
	if s.Autoscaling != nil {
		set = append(set, toObject(s.Autoscaling.autoscaler(meta(s.Name, s.Namespace, labels))))
	}
	set = append(set, toObject(&corev1.Service{
		TypeMeta:   kindService,
		ObjectMeta: serviceMeta(meta(s.Name, s.Namespace, labels), s.ServiceAnnotations),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceType(s.ServiceType), Selector: selector,
			Ports: []corev1.ServicePort{{Name: "serving", Port: s.Port, TargetPort: intstr.FromString("serving"), Protocol: corev1.ProtocolTCP}}},
	}))
	return set
}

// gpuIDs is the --gpu-ids of a GPU limit of n devices: "0,1,…,n-1", the ids the container
// sees; "" for none (or a limit that is not a whole number, which Validate refuses).
func gpuIDs(limit string) string {
	n, err := strconv.Atoi(limit)
	if err != nil || n < 1 {
		return ""
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return strings.Join(ids, ",")
}

// Serving waits: how far apply waits for a serving.
const (
	// WaitAvailable waits for the Deployment's pods to be ready: the server answers, which
	// it does once its model is in place. A create whose wait runs out is a warning.
	WaitAvailable = "available"
	// WaitNone does not wait: the pods wait for the model on their own.
	WaitNone = "none"
)

// ServingWaits are the values of Serving.Wait.
var ServingWaits = []string{WaitAvailable, WaitNone}

// FollowsCube says whether the serving's launcher follows the cube's served version.
func (s Serving) FollowsCube() bool { return s.CubeTransferURL != "" }

// ServingFromSettings decodes the settings annotation of a serving's Deployment.
func ServingFromSettings(s string) (Serving, error) { return fromSettings[Serving](s) }

// podLabels are the pods' labels: labels, and CubeClientLabel for each cube cube_conf names,
// so that the cube's NetworkPolicy admits them whatever their stack.
func (s Serving) podLabels(labels map[string]string) map[string]string {
	var conf []api.DictConf
	if json.Unmarshal([]byte(s.CubeConf), &conf) != nil {
		return labels // refused by Validate
	}
	out := maps.Clone(labels)
	for cube, ns := range confCubes(conf) {
		out[CubeClientLabel(cube)] = ns
	}
	return out
}

// Validate checks what the schema cannot (see validate.go) and returns every problem found.
func (s Serving) Validate() FieldErrors {
	var c checker
	c.labelValue("stack", s.Stack)
	var conf []api.DictConf
	if err := json.Unmarshal([]byte(s.CubeConf), &conf); err != nil {
		c.bad("cube_conf", "is not the JSON array Paddle Serving reads (use ctr_cube.<name>.cube_conf): %s", err)
	} else if len(conf) == 0 || conf[0].DictName == "" || conf[0].Shard < 1 {
		c.bad("cube_conf", "needs at least one dictionary with dict_name and shard >= 1")
	} else {
		seen := map[string]string{}
		for _, d := range conf {
			for cube, ns := range confCubes([]api.DictConf{d}) {
				if other, ok := seen[cube]; ok && other != ns {
					c.bad("cube_conf", "names two cubes called %q (in namespaces %q and %q): their network policies tell their clients apart by name, so one serving can use one of them", cube, other, ns)
				}
				seen[cube] = ns
			}
		}
	}
	c.resources("resources", s.Requests, s.Limits)
	c.autoscaling(s)
	if strings.Contains(s.ModelURL, ModelIDPlaceholder) && s.CubeTransferURL == "" {
		c.bad("model_url", "has %s, the donefile id of the version the cube serves: set cube_transfer_url (ctr_cube.<name>.transfer_url) "+
			"so that the pods know which version that is", ModelIDPlaceholder)
	}
	if s.Port == ServingStatusPort {
		c.bad("port", "%d is the launcher's status port: choose another", ServingStatusPort)
	}
	if gpus, ok := s.Limits[GPUResource]; ok && gpuIDs(gpus) == "" {
		c.bad(fmt.Sprintf("resources.limits[%q]", GPUResource), "%q: a GPU limit must be a whole number of devices, e.g. 1", gpus)
	}
	if _, ok := s.Limits[GPUResource]; ok && s.Args == nil && (s.Image == "" || strings.HasSuffix(s.Image, ":0.9.0-runtime")) {
		c.bad("image", "is Paddle Serving's CPU image, but resources.limits asks for %s: use a GPU runtime image (a 0.9.0-cuda*-runtime tag), "+
			"or set args to run the launcher without --gpu-ids", GPUResource)
	}
	c.annotations("service_annotations", s.ServiceAnnotations)
	c.securityContext("security_context", s.SecurityContext)
	c.envNames("env", s.Env)
	p := s.Pod
	c.legacy("security_context", s.SecurityContext != nil, "pod.security_context", p != nil && p.SecurityContext != nil)
	c.legacy("env", s.Env != nil, "pod.env", p != nil && p.Env != nil)
	c.pod("pod", p)
	if len(c.errs) == 0 && p != nil {
		bare := s
		bare.Pod, bare.Env, bare.SecurityContext = nil, nil, nil
		c.checkPodCollisions(bare.Defaulted().objects(), map[string]podTarget{componentServing: {"pod", p}})
	}
	return c.errs
}

func checksum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
