package cceemu

import (
	"fmt"
	"slices"
	"strings"
)

// Validation of request bodies, as far as the service's rules are known.

// validateCluster checks a create body the way the service does, as far as is known. Enumerations that
// change over time (versions, runtimes, network modes) come from Options, never from constants.
func (s *Server) validateCluster(b *createClusterBody) *apiError {
	if b.Cluster == nil {
		return invalidParam("cluster is required")
	}
	name := str(b.Cluster, "clusterName")
	if strings.TrimSpace(name) == "" {
		return invalidParam("cluster.clusterName is required")
	}
	if len([]rune(name)) > 65 { // Guess: the console's limit
		return invalidParam("cluster.clusterName %q is longer than 65 characters", name)
	}
	if e := oneOf("cluster.k8sVersion", str(b.Cluster, "k8sVersion"), s.opts.K8sVersions, true); e != nil {
		return e
	}
	if e := oneOf("cluster.runtimeType", str(b.Cluster, "runtimeType"), s.opts.RuntimeTypes, false); e != nil {
		return e
	}
	if e := oneOf("cluster.containerNetworkConfig.mode", str(b.Cluster, "containerNetworkConfig.mode"), s.opts.NetworkModes, false); e != nil {
		return e
	}
	switch mt := str(b.Cluster, "masterConfig.masterType"); mt {
	case "managed", "managedPro":
		if len(b.Masters) > 0 {
			return invalidParam("masters must be empty for masterType %s", mt)
		}
	case "custom":
		if len(b.Masters) == 0 {
			return invalidParam("masters are required for masterType custom")
		}
	case "":
		return invalidParam("cluster.masterConfig.masterType is required")
	default:
		return invalidParam("cluster.masterConfig.masterType %q is not supported; use managed, managedPro or custom", mt)
	}
	for i, ng := range b.NodeGroups {
		if e := validateGroupSpec(ng); e != nil {
			e.Message = fmt.Sprintf("nodeGroups[%d]: %s", i, e.Message)
			return e
		}
	}
	return nil
}

// oneOf checks v against the supported values; the message names the value so that a user can act on it.
func oneOf(field, v string, supported []string, required bool) *apiError {
	if v == "" {
		if required {
			return invalidParam("%s is required", field)
		}
		return nil
	}
	if !slices.Contains(supported, v) {
		return invalidParam("%s %q is not supported; supported: %s", field, v, strings.Join(supported, ", "))
	}
	return nil
}

// validateGroupSpec checks an InstanceGroupSpec body (POST .../instancegroup, or a create's nodeGroups[]).
func validateGroupSpec(m map[string]any) *apiError {
	if str(m, "instanceGroupName") == "" {
		return invalidParam("instanceGroupName is required")
	}
	if role := str(m, "clusterRole"); role != "" && role != "node" {
		return invalidParam("clusterRole %q is not supported for an instance group; use node", role)
	}
	if n, _, err := integer(m, "replicas"); err != nil || n < 0 {
		return invalidParam("replicas must be a non-negative integer")
	}
	templates := []map[string]any{}
	if t, ok := m["instanceTemplate"].(map[string]any); ok && len(t) > 0 {
		templates = append(templates, t)
	}
	if ts, ok := m["instanceTemplates"].([]any); ok {
		for _, t := range ts {
			if tm, ok := t.(map[string]any); ok {
				templates = append(templates, tm)
			}
		}
	}
	if len(templates) == 0 {
		return invalidParam("instanceTemplate is required")
	}
	for i, t := range templates {
		if !hasMachine(t) {
			return invalidParam("instanceTemplate[%d]: instanceResource.machineSpec (or cpu and mem) is required", i)
		}
	}
	return nil
}

// hasMachine reports whether a template says what machine to buy. Guess: the service wants machineSpec, or
// the older instanceType with cpu and mem.
func hasMachine(t map[string]any) bool {
	if str(t, "instanceResource.machineSpec") != "" {
		return true
	}
	cpu, _, _ := integer(t, "instanceResource.cpu")
	mem, _, _ := integer(t, "instanceResource.mem")
	return cpu > 0 && mem > 0
}
