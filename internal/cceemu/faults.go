package cceemu

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// createFailure makes a cluster end in create_failed; its fields become the failed event step.
type createFailure struct {
	Step, Code, Message, Suggestion string
}

// faultRule fails the next Remaining requests matching Method and a path prefix.
type faultRule struct {
	Method    string // "" matches any method
	Prefix    string
	Status    int
	Code      string
	Remaining int
}

// FailNextCreate makes the next cluster created by POST /cluster end in create_failed instead of running.
// The failed event step carries step as its name and code, message and suggestion as its errInfo.
// An empty step names the step the cluster was in when it failed.
func (s *Server) FailNextCreate(step, code, message, suggestion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFailure = &createFailure{Step: step, Code: code, Message: message, Suggestion: suggestion}
}

// FailRequests makes the next n authenticated requests whose method is method ("" for any) and whose path
// starts with pathPrefix answer status with error code code. pathPrefix may include APIPrefix or start after
// it ("/cluster" and "/api/cce/service/v2/cluster" are the same). Rules are tried in the order they were added.
func (s *Server) FailRequests(method, pathPrefix string, status int, code string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultRule{Method: method, Prefix: pathPrefix, Status: status, Code: code, Remaining: n})
}

// injectedFault consumes one matching fault rule, if any.
func (s *Server) injectedFault(r *http.Request) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if f.Remaining <= 0 || (f.Method != "" && f.Method != r.Method) || !pathHasPrefix(r.URL.Path, f.Prefix) {
			continue
		}
		f.Remaining--
		return errorf(f.Status, f.Code, "injected fault: %s (%d left)", http.StatusText(f.Status), f.Remaining)
	}
	return nil
}

// pathHasPrefix matches prefix against path with or without APIPrefix.
func pathHasPrefix(path, prefix string) bool {
	return strings.HasPrefix(path, prefix) || strings.HasPrefix(strings.TrimPrefix(path, APIPrefix), prefix)
}

// SetPhaseDelay changes the time each phase step takes, from now on and for steps already under way
// (a step ends at its start plus the delay in force when it is looked at). d <= 0 restores the default.
func (s *Server) SetPhaseDelay(d time.Duration) {
	if d <= 0 {
		d = defaultPhaseDelay
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Bring everything up to date under the old delay first, so that a slowdown cannot undo progress
	// that has already been due.
	s.advanceAll(s.now())
	s.phaseDelay = d
}

// DeleteClusterOutOfBand removes a cluster and its instance groups at once, as if someone had deleted it
// in the console: the next GET answers cce.warning.ClusterNotFound.
func (s *Server) DeleteClusterOutOfBand(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clusters[id]; !ok {
		return fmt.Errorf("cceemu: cluster %q not found", id)
	}
	delete(s.clusters, id)
	return nil
}

// group is an instance group by its cluster's and its own ID, for the faults a test injects.
// The caller holds s.mu.
func (s *Server) group(clusterID, groupID string) (*group, error) {
	c, ok := s.clusters[clusterID]
	if !ok {
		return nil, fmt.Errorf("cceemu: cluster %q not found", clusterID)
	}
	g, ok := c.groups[groupID]
	if !ok {
		return nil, fmt.Errorf("cceemu: instance group %q not found in cluster %q", groupID, clusterID)
	}
	return g, nil
}

// SetReplicasOutOfBand changes an instance group's desired replicas as if someone had scaled it in the
// console; readyReplicas then follows as it would after PUT .../replicas.
func (s *Server) SetReplicasOutOfBand(clusterID, groupID string, n int) error {
	if n < 0 {
		return fmt.Errorf("cceemu: replicas %d < 0", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.advanceAll(now)
	g, err := s.group(clusterID, groupID)
	if err != nil {
		return err
	}
	g.setReplicas(n, now)
	return nil
}

// SetTemplateOutOfBand changes an instance group's node labels, as someone editing the group in the
// console would: the next read shows the drift.
func (s *Server) SetTemplateOutOfBand(clusterID, groupID string, labels map[string]string) error {
	return s.EditTemplateOutOfBand(clusterID, groupID, func(t map[string]any) {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		t["labels"] = l
	})
}

// EditTemplateOutOfBand changes an instance group's template (its JSON form: labels, taints,
// instanceResource.rootDiskSize, ...) as someone editing the group in the console would: the
// next read shows the drift.
func (s *Server) EditTemplateOutOfBand(clusterID, groupID string, edit func(template map[string]any)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.group(clusterID, groupID)
	if err != nil {
		return err
	}
	t, _ := g.spec["instanceTemplate"].(map[string]any)
	if t == nil {
		t = map[string]any{}
		g.spec["instanceTemplate"] = t
	}
	edit(t)
	return nil
}
