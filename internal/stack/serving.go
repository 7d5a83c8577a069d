package stack

import (
	"crypto/sha256"
	_ "embed" // the serving launcher
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

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
	// ServingLauncherPath is where the launcher (launcher/serve_ctr.py) is mounted from the
	// serving ConfigMap; the default command runs it.
	ServingLauncherPath = "/serving/bin/" + servingLauncherKey
	servingLauncherKey  = "serve_ctr.py"
	// CubeConfChecksumAnnotation on the pod template rolls the pods when cube.conf changes:
	// Paddle Serving reads it only at start.
	CubeConfChecksumAnnotation = "ctr.elasticctr.io/cube-conf-sha256"
	// LauncherChecksumAnnotation rolls the pods when the launcher changes (a provider
	// upgrade): a file mounted with subPath is not updated in running pods.
	LauncherChecksumAnnotation = "ctr.elasticctr.io/launcher-sha256"
)

// ServingLauncher starts Paddle Serving with the model from MODEL_URL and the cube.conf at
// CUBE_CONF (see the script's header for its arguments).
//
//go:embed launcher/serve_ctr.py
var ServingLauncher string

// DefaultServingCommand runs the launcher with the image's python3.
var DefaultServingCommand = []string{"python3", ServingLauncherPath}

// Serving is everything a `ctr_serving` says. Zero values mean "default".
type Serving struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	Stack           string `json:"stack,omitempty"`
	Image           string `json:"image,omitempty"`
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// ImagePullSecrets are Secrets (in the namespace) the serving pods pull with.
	ImagePullSecrets []string `json:"image_pull_secrets,omitempty"`
	Replicas         int32    `json:"replicas,omitempty"`
	Port             int32    `json:"port,omitempty"`
	ServiceType      string   `json:"service_type,omitempty"`
	// ServiceAnnotations go on the Service: cloud load balancers are configured by them.
	ServiceAnnotations map[string]string `json:"service_annotations,omitempty"`
	ModelURL           string            `json:"model_url,omitempty"`
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
	if d.Replicas == 0 {
		d.Replicas = DefaultServingReplicas
	}
	if d.Port == 0 {
		d.Port = DefaultServingPort
	}
	if d.Command == nil {
		d.Command = DefaultServingCommand
	}
	if d.Args == nil {
		// The launcher's arguments: the port, and cube lookups on (it passes CUBE_CONF to
		// Serving, which writes its place into resource.prototxt).
		d.Args = []string{"--port=" + strconv.Itoa(int(d.Port)), "--enable_cube=true"}
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
	env := []corev1.EnvVar{{Name: "CUBE_CONF", Value: servingConfDir + "/" + servingConfKey}}
	if s.ModelURL != "" {
		env = append(env, corev1.EnvVar{Name: "MODEL_URL", Value: s.ModelURL})
	}
	var set Set
	if sa := s.Pod.ownServiceAccount(s.Name); sa != "" {
		set = append(set, s.Pod.serviceAccount(sa, s.Namespace, labels))
	}
	set = append(set, toObject(&corev1.ConfigMap{
		TypeMeta:   kindConfigMap,
		ObjectMeta: meta(servingConfName(s.Name), s.Namespace, labels),
		Data:       map[string]string{servingConfKey: s.CubeConf, servingLauncherKey: ServingLauncher},
	}))
	dep := &appsv1.Deployment{
		TypeMeta:   kindDeployment,
		ObjectMeta: meta(s.Name, s.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(s.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{CubeConfChecksumAnnotation: hex.EncodeToString(sum[:]),
					LauncherChecksumAnnotation: checksum(ServingLauncher)}},
				Spec: corev1.PodSpec{
					ImagePullSecrets: pullSecrets(s.ImagePullSecrets),
					Containers: []corev1.Container{{
						Name: "serving", Image: s.Image, ImagePullPolicy: corev1.PullPolicy(s.ImagePullPolicy),
						WorkingDir: "/serving", Command: s.Command, Args: s.Args, Env: env,
						Ports:          []corev1.ContainerPort{{Name: "serving", ContainerPort: s.Port, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("serving")}}},
						Resources:      resources(&Task{Requests: s.Requests, Limits: s.Limits}, false),
						VolumeMounts: []corev1.VolumeMount{{Name: "cube-conf", MountPath: servingConfDir + "/" + servingConfKey, SubPath: servingConfKey, ReadOnly: true},
							{Name: "cube-conf", MountPath: ServingLauncherPath, SubPath: servingLauncherKey, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "cube-conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: servingConfName(s.Name)}}}}},
				},
			},
		},
	}
	applyPod(&dep.Spec.Template, servingImageUser, s.Pod, s.Pod.ownServiceAccount(s.Name))
	set = append(set, toObject(dep))
	set = append(set, toObject(&corev1.Service{
		TypeMeta:   kindService,
		ObjectMeta: serviceMeta(meta(s.Name, s.Namespace, labels), s.ServiceAnnotations),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceType(s.ServiceType), Selector: selector,
			Ports: []corev1.ServicePort{{Name: "serving", Port: s.Port, TargetPort: intstr.FromString("serving"), Protocol: corev1.ProtocolTCP}}},
	}))
	return set
}

func checksum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// ServingFromSettings decodes the settings annotation of a serving's Deployment.
func ServingFromSettings(s string) (Serving, error) { return fromSettings[Serving](s) }

// Validate checks what the schema cannot (see validate.go) and returns every problem found.
func (s Serving) Validate() FieldErrors {
	var c checker
	c.labelValue("stack", s.Stack)
	var conf []api.DictConf
	if err := json.Unmarshal([]byte(s.CubeConf), &conf); err != nil {
		c.bad("cube_conf", "is not the JSON array Paddle Serving reads (use ctr_cube.<name>.cube_conf): %s", err)
	} else if len(conf) == 0 || conf[0].DictName == "" || conf[0].Shard < 1 {
		c.bad("cube_conf", "needs at least one dictionary with dict_name and shard >= 1")
	}
	c.resources("resources", s.Requests, s.Limits)
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
