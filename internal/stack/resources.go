package stack

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Sizing is the requests and limits of a container, resource name -> quantity, e.g.
// {"cpu": "100m", "memory": "256Mi"}.
type Sizing struct {
	Requests map[string]string
	Limits   map[string]string
}

// The defaults of every container ctr renders: each has a CPU and a memory request and limit,
// so that a namespace whose ResourceQuota requires them (requests.cpu, limits.memory, ...)
// admits its pods, and no pod is BestEffort (the first evicted under node pressure). A
// resource the user gives replaces the default's (see Sizing.Over). The requests are small, so
// that a default stack fits a small cluster; the limits leave room above them.
var (
	// DefaultTaskResources are a training task's (pserver, trainer, worker): one CPU, the
	// CPU_NUM of a task that sets no CPU.
	DefaultTaskResources = Sizing{Requests: map[string]string{"cpu": "500m", "memory": "1Gi"}, Limits: map[string]string{"cpu": "1", "memory": "4Gi"}}
	// DefaultFileServerResources are the file server's: it streams files from its claim.
	DefaultFileServerResources = Sizing{Requests: map[string]string{"cpu": "50m", "memory": "64Mi"}, Limits: map[string]string{"cpu": "500m", "memory": "256Mi"}}
	// DefaultModelExportResources are the model export's: it streams a save's rows into
	// SequenceFiles (its memory stays flat as the table grows).
	DefaultModelExportResources = Sizing{Requests: map[string]string{"cpu": "100m", "memory": "128Mi"}, Limits: map[string]string{"cpu": "1", "memory": "512Mi"}}
	// DefaultTransferResources are the transfer's: it mirrors a version's input to its claim
	// and builds it streaming (the builder's memory stays flat at every table size).
	DefaultTransferResources = Sizing{Requests: map[string]string{"cpu": "100m", "memory": "256Mi"}, Limits: map[string]string{"cpu": "2", "memory": "1Gi"}}
	// DefaultCubeServerResources are a cube server's; see Cube.serverResources for how
	// memory follows a request.
	DefaultCubeServerResources = Sizing{Requests: map[string]string{"cpu": "100m", "memory": DefaultCubeMemory}, Limits: map[string]string{"cpu": "2", "memory": DefaultCubeMemory}}
	// DefaultServingResources are a Paddle Serving pod's.
	DefaultServingResources = Sizing{Requests: map[string]string{"cpu": "250m", "memory": "512Mi"}, Limits: map[string]string{"cpu": "2", "memory": "4Gi"}}
	// LauncherResources are the serving pods' init container's, which copies the launcher
	// (a few MB) once: small, so that it never decides the pod's size. Not a setting.
	LauncherResources = Sizing{Requests: map[string]string{"cpu": "10m", "memory": "32Mi"}, Limits: map[string]string{"cpu": "100m", "memory": "128Mi"}}
)

// Over is the sizing of a container given requests and limits over the defaults d: what is
// given stays; a resource not given takes d's request and limit, except that a default
// request above the given limit is lowered to that limit, and a default limit below the
// given request is raised to that request (so the defaults never make a request exceed its
// limit). Values are as given (Validate judges them); one that does not parse counts as zero.
func (d Sizing) Over(requests, limits map[string]string) Sizing {
	req, lim := maps.Clone(requests), maps.Clone(limits)
	if req == nil {
		req = map[string]string{}
	}
	if lim == nil {
		lim = map[string]string{}
	}
	for k, def := range d.Requests {
		if _, ok := req[k]; ok {
			continue
		}
		if l, ok := lim[k]; ok && less(l, def) {
			def = l
		}
		req[k] = def
	}
	for k, def := range d.Limits {
		if _, ok := lim[k]; ok {
			continue
		}
		if r, ok := req[k]; ok && less(def, r) {
			def = r
		}
		lim[k] = def
	}
	return Sizing{Requests: req, Limits: lim}
}

// less reports whether quantity a is less than b; one that does not parse counts as zero.
func less(a, b string) bool {
	qa, _ := resource.ParseQuantity(a)
	qb, _ := resource.ParseQuantity(b)
	return qa.Cmp(qb) < 0
}

// requirements are s as a container's resources.
func (s Sizing) requirements() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: resourceList(s.Requests), Limits: resourceList(s.Limits)}
}

// resourceList converts a name -> quantity map (values Validate accepted); nil when empty.
func resourceList(m map[string]string) corev1.ResourceList {
	if len(m) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range m {
		out[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}
