package stack

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Images are the default images of one provider configuration: this repository's cube image
// at the provider's version, the seed's training image and Paddle Serving's, each moved to
// Registry when it is set (a mirror or a private registry).
type Images struct {
	ProviderVersion string
	// Registry replaces the registry of every default image, keeping its repository path and
	// tag, as Helm charts' global.imageRegistry does: "mirror.example.com:5000" turns
	// volcanosh/edlctr:v1 into mirror.example.com:5000/volcanosh/edlctr:v1.
	Registry string
}

// Cube is the default image of cube servers, the transfer and the training file server.
func (i Images) Cube() string { return MirrorImage(i.Registry, CubeImage(i.ProviderVersion)) }

// Training is the default image of the training tasks of a recipe (RecipeNames; empty or
// unknown: EDL's, the default).
func (i Images) Training(recipe string) string {
	return MirrorImage(i.Registry, TrainingJob{Recipe: recipe}.recipeOrDefault().Image)
}

// Serving is the default image of Paddle Serving.
func (i Images) Serving() string { return MirrorImage(i.Registry, DefaultServingImage) }

// RegistryPattern is what an image registry setting may be: a host (with a port), optionally
// with a path prefix, without a scheme.
var RegistryPattern = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)

// RegistryRule says what RegistryPattern allows.
const RegistryRule = "must be a registry host, optionally with a port and a path, without a scheme: e.g. registry.example.com:5000 or registry.example.com/mirror"

// MirrorImage moves an image reference to registry (unchanged when registry is empty): its
// own registry, if it names one, is replaced; a Docker Hub image keeps its path, with
// "library/" for official images, as registry mirrors lay Docker Hub out.
func MirrorImage(registry, image string) string {
	if registry == "" || image == "" {
		return image
	}
	path := image
	if i := strings.IndexByte(image, '/'); i >= 0 {
		if first := image[:i]; strings.ContainsAny(first, ".:") || first == "localhost" {
			path = image[i+1:]
		}
	} else {
		path = "library/" + image
	}
	return strings.TrimSuffix(registry, "/") + "/" + path
}

// podTemplatePaths are where the workload kinds keep their pod spec.
var podTemplatePaths = map[string][]string{
	"Pod":         {"spec"},
	"Deployment":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
}

// MirrorImages moves every container image of the set's workloads to registry: how a
// release manifest (Volcano's) is installed from a mirror.
func MirrorImages(set Set, registry string) {
	if registry == "" {
		return
	}
	for _, o := range set {
		p, ok := podTemplatePaths[o.Object.GetKind()]
		if !ok {
			continue
		}
		for _, list := range []string{"initContainers", "containers"} {
			path := append(append([]string{}, p...), list)
			containers, found, err := unstructured.NestedSlice(o.Object.Object, path...)
			if err != nil || !found {
				continue
			}
			for _, c := range containers {
				if m, ok := c.(map[string]any); ok {
					if img, ok := m["image"].(string); ok {
						m["image"] = MirrorImage(registry, img)
					}
				}
			}
			_ = unstructured.SetNestedSlice(o.Object.Object, containers, path...)
		}
	}
}

// SecretNamePattern is what a Secret's name may be (a DNS-1123 subdomain).
var SecretNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// SecretNameRule says what SecretNamePattern allows.
const SecretNameRule = "must be a Secret's name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"

// pullSecrets are a pod's imagePullSecrets.
func pullSecrets(names []string) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, n := range names {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}
