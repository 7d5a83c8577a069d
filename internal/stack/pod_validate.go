package stack

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
)

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
			c.bad(kp, "%q is not a valid environment variable name: use %s", k, EnvVarNameRule)
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
				c.bad(ep+".prefix", "%q is not the start of a valid environment variable name: use %s", e.Prefix, EnvVarNameRule)
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
	// An empty list of requirements is the schema's to refuse (a term without any matches no node).
	exprs := func(p string, rs []NodeRequirement) {
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
		c.bad(path, "are too large for Kubernetes: %s; keep keys and values within 256 KiB together", err)
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
			c.bad(vp+".name", "%q names two volumes; give each volume a name of its own", v.Name)
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
			c.bad(mp+".mount_path", "%q is the mount path of another mount; give each mount a path of its own", m.MountPath)
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
