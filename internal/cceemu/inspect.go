package cceemu

import (
	"net/http"
	"slices"
)

// maxRecorded bounds the request log so that a long demo does not grow without limit.
const maxRecorded = 10000

// RecordedRequest is one request as the emulator received it, for tests to assert on.
type RecordedRequest struct {
	Method string
	Path   string // URL path, including APIPrefix
	Query  string // raw query
	Body   string // raw body, exactly as sent (secrets included: that is what tests look for)
	Status int    // HTTP status answered
	Code   string // error code answered, "" on success
	Route  string // matched route, e.g. "GET /cluster/{id}"; "" if the request never reached routing
}

// Requests returns the recorded requests whose method is method ("" for any) and whose path starts with
// pathPrefix (with or without APIPrefix), oldest first.
func (s *Server) Requests(method, pathPrefix string) []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RecordedRequest
	for _, r := range s.requests {
		if (method == "" || r.Method == method) && pathHasPrefix(r.Path, pathPrefix) {
			out = append(out, r)
		}
	}
	return out
}

// LastRequest returns the most recent request matching method and pathPrefix, as Requests does.
func (s *Server) LastRequest(method, pathPrefix string) (RecordedRequest, bool) {
	reqs := s.Requests(method, pathPrefix)
	if len(reqs) == 0 {
		return RecordedRequest{}, false
	}
	return reqs[len(reqs)-1], true
}

// RouteCounts returns how many requests reached each route, keyed like RecordedRequest.Route.
func (s *Server) RouteCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, r := range s.requests {
		if r.Route != "" {
			out[r.Route]++
		}
	}
	return out
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func (s *Server) record(r *http.Request, c *call, status int) {
	rec := RecordedRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(c.body), Status: status, Route: c.route}
	if c.err != nil {
		rec.Code = c.err.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) >= maxRecorded {
		s.requests = slices.Delete(s.requests, 0, len(s.requests)/2)
	}
	s.requests = append(s.requests, rec)
}

// ClusterInfo is a test's view of one cluster.
type ClusterInfo struct {
	ID, Name, Phase string
	NodeNum         int
	// DeleteQuery is the query of the DELETE that started deleting the cluster, "" otherwise.
	DeleteQuery string
}

// GroupInfo is a test's view of one instance group.
type GroupInfo struct {
	ID, ClusterID, Name     string
	Replicas, ReadyReplicas int
}

// Clusters lists the clusters the emulator knows, in creation order, phases brought up to date.
func (s *Server) Clusters() []ClusterInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceAll(s.now())
	var out []ClusterInfo
	for _, c := range s.sortedClusters() {
		out = append(out, ClusterInfo{ID: c.id, Name: c.name, Phase: c.phase, NodeNum: c.nodeNum(), DeleteQuery: c.deleteQuery})
	}
	return out
}

// InstanceGroups lists a cluster's instance groups in creation order; nil if the cluster does not exist.
func (s *Server) InstanceGroups(clusterID string) []GroupInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceAll(s.now())
	c, ok := s.clusters[clusterID]
	if !ok {
		return nil
	}
	var out []GroupInfo
	for _, g := range c.sortedGroups() {
		out = append(out, GroupInfo{ID: g.id, ClusterID: c.id, Name: g.name, Replicas: g.replicas, ReadyReplicas: g.ready})
	}
	return out
}
