package stack

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// PodSettings is what a user adds to, or changes in, the pods of one workload: the same shape
// for the training tasks, the training job's file server, the cube servers and transfer, and
// Paddle Serving, applied by one function (applyPod) to every pod template the stack renders.
// What ctr sets itself (its labels, volumes, mount paths) cannot be overridden; Validate
// refuses settings that would collide with it.
//
// Env values are plain configuration: they show in the plan's manifests like every other
// field of a pod, but never in the settings annotation (see forAnnotation). Credentials go by
// reference: SecretEnv and EnvFrom name Secrets, never their values.
type PodSettings struct {
	NodeSelector map[string]string `json:"node_selector,omitempty"`
	Tolerations  []Toleration      `json:"tolerations,omitempty"`
	Affinity     *Affinity         `json:"affinity,omitempty"`
	// ServiceAccountName runs the pods as an existing ServiceAccount; their token is then
	// mounted as that ServiceAccount says (ctr's own pods do not mount one).
	ServiceAccountName string `json:"service_account_name,omitempty"`
	// ServiceAccountAnnotations go on the ServiceAccount ctr creates for the pods (IRSA's
	// eks.amazonaws.com/role-arn, GKE's iam.gke.io/gcp-service-account); refused together
	// with ServiceAccountName, whose ServiceAccount is not ctr's.
	ServiceAccountAnnotations map[string]string `json:"service_account_annotations,omitempty"`
	Labels                    map[string]string `json:"labels,omitempty"`
	Annotations               map[string]string `json:"annotations,omitempty"`
	PriorityClassName         string            `json:"priority_class_name,omitempty"`
	// Env is added to every container and wins over ctr's variables of the same name.
	Env map[string]string `json:"env,omitempty"`
	// SecretEnv sets variables from keys of Secrets (valueFrom.secretKeyRef).
	SecretEnv    map[string]KeyRef `json:"secret_env,omitempty"`
	EnvFrom      []EnvFrom         `json:"env_from,omitempty"`
	Volumes      []Volume          `json:"volumes,omitempty"`
	VolumeMounts []VolumeMount     `json:"volume_mounts,omitempty"`
	// SecurityContext overrides the hardened defaults (see hardenedPod).
	SecurityContext *SecurityContext `json:"security_context,omitempty"`
}

// Affinity is the pods' scheduling affinity. ctr's own pod affinity (trainers beside the file
// server on a ReadWriteOnce volume) is kept beside it.
type Affinity struct {
	Node *NodeAffinity `json:"node,omitempty"`
}

// NodeAffinity is Kubernetes' node affinity: Required terms are ORed, the expressions of one
// term ANDed; Preferred terms add their weight to the nodes they match.
type NodeAffinity struct {
	Required  []NodeSelectorTerm `json:"required,omitempty"`
	Preferred []PreferredTerm    `json:"preferred,omitempty"`
}

// NodeSelectorTerm is a list of node label requirements, all of which must hold.
type NodeSelectorTerm struct {
	MatchExpressions []NodeRequirement `json:"match_expressions,omitempty"`
}

// PreferredTerm is a weighted NodeSelectorTerm.
type PreferredTerm struct {
	Weight           int32             `json:"weight"`
	MatchExpressions []NodeRequirement `json:"match_expressions,omitempty"`
}

// NodeRequirement is one node label requirement.
type NodeRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// NodeOperators are what a node requirement may say.
var NodeOperators = []string{string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn), string(corev1.NodeSelectorOpExists),
	string(corev1.NodeSelectorOpDoesNotExist), string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt)}

// Bounds of a preferred term's weight, as Kubernetes takes it.
const (
	MinAffinityWeight = 1
	MaxAffinityWeight = 100
)

// KeyRef names a key of a Secret in the workload's namespace.
type KeyRef struct {
	Secret string `json:"secret"`
	Key    string `json:"key"`
}

// EnvFrom adds every key of a Secret or a ConfigMap as a variable, optionally prefixed.
type EnvFrom struct {
	Secret    string `json:"secret,omitempty"`
	ConfigMap string `json:"config_map,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
}

// Volume is an extra volume of the pods; exactly one source is set.
type Volume struct {
	Name                  string          `json:"name"`
	PersistentVolumeClaim *ClaimSource    `json:"persistent_volume_claim,omitempty"`
	Secret                *SecretSource   `json:"secret,omitempty"`
	ConfigMap             *SecretSource   `json:"config_map,omitempty"`
	CSI                   *CSISource      `json:"csi,omitempty"`
	EmptyDir              *EmptyDirSource `json:"empty_dir,omitempty"`
}

// ClaimSource is a PersistentVolumeClaim in the workload's namespace (a dataset volume).
type ClaimSource struct {
	ClaimName string `json:"claim_name"`
	ReadOnly  bool   `json:"read_only,omitempty"`
}

// SecretSource is a Secret or a ConfigMap mounted as files.
type SecretSource struct {
	Name string `json:"name"`
}

// CSISource is an inline CSI volume, e.g. a bucket mounted by a CSI driver.
type CSISource struct {
	Driver           string            `json:"driver"`
	ReadOnly         bool              `json:"read_only,omitempty"`
	VolumeAttributes map[string]string `json:"volume_attributes,omitempty"`
	// NodePublishSecret names a Secret with the driver's credentials.
	NodePublishSecret string `json:"node_publish_secret,omitempty"`
}

// EmptyDirSource is scratch space that lives as long as the pod.
type EmptyDirSource struct {
	Medium    string `json:"medium,omitempty"`
	SizeLimit string `json:"size_limit,omitempty"`
}

// EmptyDirMedia are what an emptyDir's medium may be ("" is the node's disk).
var EmptyDirMedia = []string{string(corev1.StorageMediumMemory)}

// VolumeMount mounts one of the extra volumes into every container of the pods.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mount_path"`
	SubPath   string `json:"sub_path,omitempty"`
	ReadOnly  bool   `json:"read_only,omitempty"`
}

// ReservedLabelPrefixes and ReservedAnnotationPrefixes are keys a user may not put on pods:
// ctr's own, and those Volcano stamps on the pods it creates.
var (
	ReservedLabelPrefixes      = []string{"ctr.elasticctr.io/", "volcano.sh/"}
	ReservedAnnotationPrefixes = []string{"ctr.elasticctr.io/", "volcano.sh/", "scheduling.k8s.io/"}
)

// mergeLegacy returns pod settings with the resource-level attributes that pod replaces
// (deprecated aliases) folded in. Validate refuses both set, so nothing is overwritten.
func mergeLegacy(p *PodSettings, env map[string]string, sc *SecurityContext, nodeSelector map[string]string, tol []Toleration) *PodSettings {
	out := PodSettings{}
	if p != nil {
		out = *p
	}
	if out.Env == nil {
		out.Env = env
	}
	if out.SecurityContext == nil {
		out.SecurityContext = sc
	}
	if out.NodeSelector == nil {
		out.NodeSelector = nodeSelector
	}
	if out.Tolerations == nil {
		out.Tolerations = tol
	}
	return &out
}

// DefaultServiceAccount is the ServiceAccount that Kubernetes makes in every namespace: the
// one pods run as when they name none and ctr renders none for them.
const DefaultServiceAccount = "default"

// ownServiceAccount is name when ctr renders a ServiceAccount, of that name, for these pods:
// when it must carry annotations and the pods name none of their own. Else "".
func (p *PodSettings) ownServiceAccount(name string) string {
	if p != nil && p.ServiceAccountName == "" && len(p.ServiceAccountAnnotations) > 0 {
		return name
	}
	return ""
}

// serviceAccount renders the ServiceAccount ctr creates for pods that ask for annotations.
func (p *PodSettings) serviceAccount(name, namespace string, labels map[string]string) Object {
	sa := &corev1.ServiceAccount{TypeMeta: kindServiceAccount, ObjectMeta: meta(name, namespace, labels)}
	sa.Annotations = maps.Clone(p.ServiceAccountAnnotations)
	return toObject(sa)
}

// applyPod applies a workload's pod settings to a pod template that ctr rendered: the
// hardened security context for img with its overrides, scheduling, metadata, environment,
// volumes and mounts. ownSA is the ServiceAccount ctr made for the pods ("" for none); a
// ServiceAccount named in p wins.
func applyPod(t *corev1.PodTemplateSpec, img imageUser, p *PodSettings, ownSA string) {
	if p == nil {
		p = &PodSettings{}
	}
	spec := &t.Spec
	podSec, ctrSec := hardenedPod(img, p.SecurityContext)
	spec.SecurityContext = podSec
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.SecurityContext = ctrSec.DeepCopy()
		c.Env = withEnv(c.Env, p)
		for _, e := range p.EnvFrom {
			src := corev1.EnvFromSource{Prefix: e.Prefix}
			if e.Secret != "" {
				src.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: e.Secret}}
			} else {
				src.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: e.ConfigMap}}
			}
			c.EnvFrom = append(c.EnvFrom, src)
		}
		for _, m := range p.VolumeMounts {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, ReadOnly: m.ReadOnly})
		}
	}
	for _, v := range p.Volumes {
		spec.Volumes = append(spec.Volumes, v.render())
	}
	// Always named: an apply that left serviceAccountName out would not reset it, as the API
	// server keeps the deprecated serviceAccount field it copied the name into and reads the
	// name back from there, so a template would go on naming a ServiceAccount that the same
	// apply pruned (service_account_annotations removed), and no new pod could be created.
	switch {
	case p.ServiceAccountName != "":
		spec.ServiceAccountName = p.ServiceAccountName
		spec.AutomountServiceAccountToken = nil
	case ownSA != "":
		spec.ServiceAccountName = ownSA
	default:
		spec.ServiceAccountName = DefaultServiceAccount
	}
	if len(p.NodeSelector) > 0 {
		spec.NodeSelector = maps.Clone(p.NodeSelector)
	}
	spec.Tolerations = append(spec.Tolerations, tolerations(p.Tolerations)...)
	if na := p.Affinity.nodeAffinity(); na != nil {
		if spec.Affinity == nil {
			spec.Affinity = &corev1.Affinity{}
		}
		spec.Affinity.NodeAffinity = na
	}
	spec.PriorityClassName = p.PriorityClassName
	t.Labels = union(t.Labels, p.Labels)
	t.Annotations = union(t.Annotations, p.Annotations)
}

// union adds extra's entries to ctr's (Validate refused every collision).
func union(own, extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return own
	}
	out := maps.Clone(extra)
	maps.Copy(out, own)
	return out
}

// withEnv adds the user's variables after ctr's; a user variable replaces ctr's of the same name.
func withEnv(own []corev1.EnvVar, p *PodSettings) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range own {
		_, plain := p.Env[e.Name]
		_, secret := p.SecretEnv[e.Name]
		if !plain && !secret {
			out = append(out, e)
		}
	}
	for _, k := range sortedKeys(p.Env) {
		out = append(out, corev1.EnvVar{Name: k, Value: p.Env[k]})
	}
	for _, k := range sortedKeys(p.SecretEnv) {
		r := p.SecretEnv[k]
		out = append(out, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: r.Secret}, Key: r.Key}}})
	}
	return out
}

func (a *Affinity) nodeAffinity() *corev1.NodeAffinity {
	if a == nil || a.Node == nil || (len(a.Node.Required) == 0 && len(a.Node.Preferred) == 0) {
		return nil
	}
	reqs := func(rs []NodeRequirement) []corev1.NodeSelectorRequirement {
		var out []corev1.NodeSelectorRequirement
		for _, r := range rs {
			out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values})
		}
		return out
	}
	na := &corev1.NodeAffinity{}
	if len(a.Node.Required) > 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		for _, t := range a.Node.Required {
			na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: reqs(t.MatchExpressions)})
		}
	}
	for _, t := range a.Node.Preferred {
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: t.Weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: reqs(t.MatchExpressions)}})
	}
	return na
}

func (v Volume) render() corev1.Volume {
	out := corev1.Volume{Name: v.Name}
	switch {
	case v.PersistentVolumeClaim != nil:
		out.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName, ReadOnly: v.PersistentVolumeClaim.ReadOnly}
	case v.Secret != nil:
		out.Secret = &corev1.SecretVolumeSource{SecretName: v.Secret.Name}
	case v.ConfigMap != nil:
		out.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: v.ConfigMap.Name}}
	case v.CSI != nil:
		out.CSI = &corev1.CSIVolumeSource{Driver: v.CSI.Driver, VolumeAttributes: maps.Clone(v.CSI.VolumeAttributes)}
		if v.CSI.ReadOnly {
			out.CSI.ReadOnly = ptr.To(true)
		}
		if v.CSI.NodePublishSecret != "" {
			out.CSI.NodePublishSecretRef = &corev1.LocalObjectReference{Name: v.CSI.NodePublishSecret}
		}
	case v.EmptyDir != nil:
		out.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(v.EmptyDir.Medium)}
		if v.EmptyDir.SizeLimit != "" {
			if q, err := resource.ParseQuantity(v.EmptyDir.SizeLimit); err == nil {
				out.EmptyDir.SizeLimit = &q
			}
		}
	}
	return out
}

// forAnnotation is the pod settings as the settings annotation stores them: env names
// without their values (import reads the values back from the pod template, RestoreEnv).
func (p *PodSettings) forAnnotation() *PodSettings {
	if p == nil {
		return nil
	}
	out := *p
	out.Env = namesOnly(p.Env)
	return &out
}

// namesOnly keeps a map's keys and drops its values.
func namesOnly(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

// RestoreEnv fills the values of env (names from the settings annotation) from the first
// container of the object's pod template: how import gets back values the annotation leaves
// out. A name the container does not set as a plain value keeps "".
func RestoreEnv(env map[string]string, obj *unstructured.Unstructured) {
	if len(env) == 0 || obj == nil {
		return
	}
	for _, t := range templatesOf(obj) {
		if len(t.Spec.Containers) == 0 {
			continue
		}
		for _, e := range t.Spec.Containers[0].Env {
			if _, ok := env[e.Name]; ok && e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
		return
	}
}

// templatesOf returns the pod templates of a workload object: a Deployment's or a
// StatefulSet's, or each task's of a Volcano Job.
func templatesOf(obj *unstructured.Unstructured) []corev1.PodTemplateSpec {
	var raw []any
	if t, ok, _ := unstructured.NestedMap(obj.Object, "spec", "template"); ok {
		raw = append(raw, t)
	}
	if tasks, ok, _ := unstructured.NestedSlice(obj.Object, "spec", "tasks"); ok {
		for _, task := range tasks {
			if m, ok := task.(map[string]any); ok {
				if t, ok := m["template"].(map[string]any); ok {
					raw = append(raw, t)
				}
			}
		}
	}
	var out []corev1.PodTemplateSpec
	for _, r := range raw {
		var t corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.(map[string]any), &t); err == nil {
			out = append(out, t)
		}
	}
	return out
}
