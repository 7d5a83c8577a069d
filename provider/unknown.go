package provider

import (
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// unknownAttrs reports whether any of the named top-level attributes of a configuration or
// plan is unknown as a whole — a nested object assigned from a value known only after
// apply (a module variable during validate, another resource's attribute). Such objects
// cannot be read into the Go structs of the models; validation skips them and the plan
// marks what depends on them unknown.
func unknownAttrs(raw tftypes.Value, names ...string) bool {
	if !raw.IsKnown() {
		return true
	}
	var attrs map[string]tftypes.Value
	if err := raw.As(&attrs); err != nil {
		return false
	}
	for _, n := range names {
		if v, ok := attrs[n]; ok && !v.IsKnown() {
			return true
		}
	}
	return false
}

// Nested objects of each resource, as read into struct pointers or slices.
var (
	trainingJobObjects = []string{"pserver", "trainer", "worker", "policies", "dataset", "model_output", "file_server", "security_context", "pod"}
	cubeObjects        = []string{"resources", "storage", "tolerations", "security_context", "pod", "network_policy"}
	servingObjects     = []string{"resources", "security_context", "pod"}
	clusterObjects     = []string{"cce", "volcano"}
)
