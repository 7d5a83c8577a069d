package stack

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// The requests and limits of the containers that have no setting of their own to size
// them by: small, so that they fit anywhere, but set, so that a namespace whose
// ResourceQuota requires them admits the pods and the pods are not the first evicted
// (BestEffort). A key the user gives replaces the default's. No CPU limit: throttling a
// transfer mid-rollout or a file server mid-download only makes them slower.
var (
	// The transfer mirrors a version's input to its claim and builds it streaming (the
	// builder's memory stays flat, about 26 MiB at every table size).
	DefaultTransferRequests = map[string]string{"cpu": "100m", "memory": "256Mi"}
	DefaultTransferLimits   = map[string]string{"memory": "1Gi"}
	// The file server streams files from its claim.
	DefaultFileServerRequests = map[string]string{"cpu": "50m", "memory": "64Mi"}
	DefaultFileServerLimits   = map[string]string{"memory": "256Mi"}
)

// overDefaults is defaults with given's keys replacing theirs.
func overDefaults(defaults, given map[string]string) map[string]string {
	out := maps.Clone(defaults)
	maps.Copy(out, given)
	return out
}

// sized are the requests and limits given over the defaults.
func sized(requests, limits, defRequests, defLimits map[string]string) corev1.ResourceRequirements {
	return resources(&Task{Requests: overDefaults(defRequests, requests), Limits: overDefaults(defLimits, limits)}, false)
}
