package stack

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
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

// ownsServiceAccount reports whether ctr renders a ServiceAccount for these pods: when it
// must carry annotations and the pods name none of their own.
func (p *PodSettings) ownsServiceAccount() bool {
	return p != nil && p.ServiceAccountName == "" && len(p.ServiceAccountAnnotations) > 0
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
	switch {
	case p.ServiceAccountName != "":
		spec.ServiceAccountName = p.ServiceAccountName
		spec.AutomountServiceAccountToken = nil
	case ownSA != "":
		spec.ServiceAccountName = ownSA
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

// podTarget says which pod settings (at path) apply to the pods of a component.
type podTarget struct {
	path string
	pod  *PodSettings
}

// checkPodCollisions renders set's pods as ctr makes them (the set is rendered without pod
// settings) and refuses pod settings that would collide with them: a volume name, a mount
// path inside one of ctr's, a label or annotation key ctr or Volcano sets.
func (c *checker) checkPodCollisions(set Set, targets map[string]podTarget) {
	var found checker
	for _, o := range set {
		t, ok := targets[o.Object.GetLabels()[LabelComponent]]
		if !ok || t.pod == nil {
			continue
		}
		for _, tmpl := range templatesOf(o.Object) {
			found.podAgainst(t.path, t.pod, tmpl)
		}
	}
	// Several pods (shards, tasks) share one pod block: say each problem once.
	seen := map[FieldError]bool{}
	for _, e := range found.errs {
		if !seen[e] {
			seen[e] = true
			c.errs = append(c.errs, e)
		}
	}
}

func (c *checker) podAgainst(path string, p *PodSettings, own corev1.PodTemplateSpec) {
	for i, v := range p.Volumes {
		if slices.ContainsFunc(own.Spec.Volumes, func(o corev1.Volume) bool { return o.Name == v.Name }) {
			c.bad(fmt.Sprintf("%s.volumes[%d].name", path, i), "%q is the name of a volume ctr mounts into these pods; choose another name", v.Name)
		}
	}
	for i, m := range p.VolumeMounts {
		for _, ctn := range own.Spec.Containers {
			for _, o := range ctn.VolumeMounts {
				if m.MountPath == o.MountPath || strings.HasPrefix(m.MountPath, strings.TrimSuffix(o.MountPath, "/")+"/") {
					c.bad(fmt.Sprintf("%s.volume_mounts[%d].mount_path", path, i),
						"%q is (inside) %s, where ctr mounts its volume %q; choose a path outside it", m.MountPath, o.MountPath, o.Name)
				}
			}
		}
	}
	for _, k := range sortedKeys(p.Labels) {
		if _, ok := own.Labels[k]; ok {
			c.bad(fmt.Sprintf("%s.labels[%q]", path, k), "%q is a label ctr sets on these pods (it selects them); choose another key", k)
		}
	}
	for _, k := range sortedKeys(p.Annotations) {
		if _, ok := own.Annotations[k]; ok {
			c.bad(fmt.Sprintf("%s.annotations[%q]", path, k), "%q is an annotation ctr sets on these pods; choose another key", k)
		}
	}
}

// pod checks pod settings at path on their own; checkPodCollisions checks them against
// what ctr renders.
func (c *checker) pod(path string, p *PodSettings) {
	if p == nil {
		return
	}
	at := func(field string) string { return path + "." + field }
	c.labels(at("node_selector"), p.NodeSelector)
	c.tolerations(at("tolerations"), p.Tolerations)
	c.affinity(at("affinity"), p.Affinity)
	c.dnsSubdomain(at("service_account_name"), p.ServiceAccountName, "ServiceAccount")
	if p.ServiceAccountName != "" && len(p.ServiceAccountAnnotations) > 0 {
		c.bad(at("service_account_annotations"), "go on the ServiceAccount ctr creates for these pods, and there is none with service_account_name = %q: "+
			"annotate that ServiceAccount where it is managed, or drop service_account_name", p.ServiceAccountName)
	}
	c.annotationKeys(at("service_account_annotations"), p.ServiceAccountAnnotations, nil)
	c.labels(at("labels"), p.Labels)
	c.reserved(at("labels"), p.Labels, ReservedLabelPrefixes, "label")
	c.annotationKeys(at("annotations"), p.Annotations, ReservedAnnotationPrefixes)
	c.dnsSubdomain(at("priority_class_name"), p.PriorityClassName, "PriorityClass")
	c.envNames(at("env"), p.Env)
	for _, k := range sortedKeys(p.SecretEnv) {
		kp := fmt.Sprintf("%s[%q]", at("secret_env"), k)
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			c.bad(kp, "%q is not a valid environment variable name", k)
		}
		if _, dup := p.Env[k]; dup {
			c.bad(kp, "%q is also in env; set a variable in one of them", k)
		}
		c.dnsSubdomain(kp+".secret", p.SecretEnv[k].Secret, "Secret")
		if msgs := validation.IsConfigMapKey(p.SecretEnv[k].Key); len(msgs) > 0 {
			c.bad(kp+".key", "%q is not a Secret key: %s", p.SecretEnv[k].Key, strings.Join(msgs, "; "))
		}
	}
	for i, e := range p.EnvFrom {
		ep := fmt.Sprintf("%s[%d]", at("env_from"), i)
		if (e.Secret == "") == (e.ConfigMap == "") {
			c.bad(ep, "needs exactly one of secret and config_map")
		}
		c.dnsSubdomain(ep+".secret", e.Secret, "Secret")
		c.dnsSubdomain(ep+".config_map", e.ConfigMap, "ConfigMap")
		if e.Prefix != "" {
			if msgs := validation.IsEnvVarName(e.Prefix); len(msgs) > 0 {
				c.bad(ep+".prefix", "%q is not the start of a valid environment variable name", e.Prefix)
			}
		}
	}
	c.volumes(path, p.Volumes, p.VolumeMounts)
	c.securityContext(at("security_context"), p.SecurityContext)
}

func (c *checker) affinity(path string, a *Affinity) {
	if a == nil || a.Node == nil {
		return
	}
	exprs := func(p string, rs []NodeRequirement) {
		if len(rs) == 0 {
			c.bad(p, "needs at least one requirement: a term without any matches no node")
		}
		for i, r := range rs {
			rp := fmt.Sprintf("%s[%d]", p, i)
			if msgs := validation.IsQualifiedName(r.Key); len(msgs) > 0 {
				c.bad(rp+".key", "%q is not a node label key: %s", r.Key, strings.Join(msgs, "; "))
			}
			switch corev1.NodeSelectorOperator(r.Operator) {
			case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
				if len(r.Values) == 0 {
					c.bad(rp+".values", "needs at least one value with operator = %q", r.Operator)
				}
			case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
				if len(r.Values) > 0 {
					c.bad(rp+".values", "must be empty with operator = %q", r.Operator)
				}
			case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
				if len(r.Values) != 1 {
					c.bad(rp+".values", "needs exactly one integer with operator = %q", r.Operator)
				}
			}
		}
	}
	for i, t := range a.Node.Required {
		exprs(fmt.Sprintf("%s.node.required[%d].match_expressions", path, i), t.MatchExpressions)
	}
	for i, t := range a.Node.Preferred {
		exprs(fmt.Sprintf("%s.node.preferred[%d].match_expressions", path, i), t.MatchExpressions)
	}
}

// reserved refuses keys under prefixes that ctr or Volcano own.
func (c *checker) reserved(path string, m map[string]string, prefixes []string, what string) {
	for _, k := range sortedKeys(m) {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				c.bad(fmt.Sprintf("%s[%q]", path, k), "%q is under %s, which ctr and Volcano keep for their own %ss; choose another key", k, p, what)
			}
		}
	}
}

func (c *checker) annotationKeys(path string, m map[string]string, reservedPrefixes []string) {
	for _, k := range sortedKeys(m) {
		if msgs := validation.IsQualifiedName(strings.ToLower(k)); len(msgs) > 0 {
			c.bad(fmt.Sprintf("%s[%q]", path, k), "%q is not an annotation key: %s", k, strings.Join(msgs, "; "))
		}
	}
	c.reserved(path, m, reservedPrefixes, "annotation")
}

// annotations checks annotations that ctr puts on an object as given (a Service's): keys as
// Kubernetes takes them, not under a prefix ctr or Volcano keep, and a total size the API
// server accepts.
func (c *checker) annotations(path string, m map[string]string) {
	c.annotationKeys(path, m, ReservedAnnotationPrefixes)
	if err := apivalidation.ValidateAnnotationsSize(m); err != nil {
		c.bad(path, "are too large for Kubernetes: %s", err)
	}
}

func (c *checker) volumes(path string, vs []Volume, mounts []VolumeMount) {
	names := map[string]bool{}
	for i, v := range vs {
		vp := fmt.Sprintf("%s.volumes[%d]", path, i)
		if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 {
			c.bad(vp+".name", "%q is not a volume name (lowercase letters, digits and '-', at most 63): %s", v.Name, strings.Join(msgs, "; "))
		}
		if names[v.Name] {
			c.bad(vp+".name", "%q names two volumes", v.Name)
		}
		names[v.Name] = true
		sources := 0
		for _, set := range []bool{v.PersistentVolumeClaim != nil, v.Secret != nil, v.ConfigMap != nil, v.CSI != nil, v.EmptyDir != nil} {
			if set {
				sources++
			}
		}
		if sources != 1 {
			c.bad(vp, "needs exactly one of persistent_volume_claim, secret, config_map, csi and empty_dir")
		}
		if s := v.PersistentVolumeClaim; s != nil {
			c.dnsSubdomain(vp+".persistent_volume_claim.claim_name", s.ClaimName, "PersistentVolumeClaim")
		}
		if s := v.Secret; s != nil {
			c.dnsSubdomain(vp+".secret.name", s.Name, "Secret")
		}
		if s := v.ConfigMap; s != nil {
			c.dnsSubdomain(vp+".config_map.name", s.Name, "ConfigMap")
		}
		if s := v.CSI; s != nil {
			c.dnsSubdomain(vp+".csi.driver", s.Driver, "CSI driver")
			c.dnsSubdomain(vp+".csi.node_publish_secret", s.NodePublishSecret, "Secret")
		}
		if s := v.EmptyDir; s != nil {
			c.quantity(vp+".empty_dir.size_limit", s.SizeLimit, "1Gi")
		}
	}
	paths := map[string]bool{}
	for i, m := range mounts {
		mp := fmt.Sprintf("%s.volume_mounts[%d]", path, i)
		if !names[m.Name] {
			c.bad(mp+".name", "%q is not one of this block's volumes; mount only volumes declared in volumes", m.Name)
		}
		if !strings.HasPrefix(m.MountPath, "/") || m.MountPath == "/" || strings.Contains(m.MountPath, "..") || strings.Contains(m.MountPath, ":") {
			c.bad(mp+".mount_path", "%q must be an absolute path other than /, without .. or ':'", m.MountPath)
		} else if paths[m.MountPath] {
			c.bad(mp+".mount_path", "%q is the mount path of another mount", m.MountPath)
		}
		paths[m.MountPath] = true
		if strings.HasPrefix(m.SubPath, "/") || strings.Contains(m.SubPath, "..") {
			c.bad(mp+".sub_path", "%q must be a relative path without ..", m.SubPath)
		}
	}
}

// legacy refuses a deprecated resource-level attribute set together with the pod attribute
// that replaces it.
func (c *checker) legacy(path string, set bool, podPath string, podSet bool) {
	if set && podSet {
		c.bad(path, "is replaced by %s; set only %s", podPath, podPath)
	}
}
