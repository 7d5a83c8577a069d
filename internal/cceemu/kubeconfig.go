package cceemu

import (
	"fmt"
	"net/http"
)

// kubeconfig serves GET /kubeconfig/{id}/{type}.
func (s *Server) kubeconfig(c *call) (map[string]any, *apiError) {
	typ := c.r.PathValue("type")
	if typ != "vpc" && typ != "public" && typ != "internal" {
		return nil, invalidParam("kubeConfigType %q is not vpc, public or internal", typ)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, e := s.lookupCluster(c.r.PathValue("id"), s.now())
	if e != nil {
		return nil, e
	}
	if cl.phase != phaseRunning {
		return nil, errorf(http.StatusConflict, CodeClusterNotRunning, "cluster %s is %s, not running; its kubeconfig is not available", cl.id, cl.phase)
	}
	// Guess: a public kubeconfig needs the BLB's EIP, which only exposedPublic clusters get.
	if typ == "public" && !cl.public {
		return nil, invalidParam("cluster %s has no EIP (masterConfig.exposedPublic is false); use kubeConfigType vpc", cl.id)
	}
	kc := s.opts.Kubeconfig
	if kc == "" {
		kc = stubKubeconfig(cl.id)
	}
	return map[string]any{"kubeConfigType": typ, "kubeConfig": kc}, nil
}

// stubKubeconfig is returned when Options.Kubeconfig is empty: well-formed, pointing nowhere real.
func stubKubeconfig(id string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://192.168.0.10:6443
    insecure-skip-tls-verify: true
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: %[1]s-admin}
current-context: %[1]s
users:
- name: %[1]s-admin
  user: {token: cceemu-stub}
`, id)
}
