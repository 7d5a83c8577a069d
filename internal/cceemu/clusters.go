package cceemu

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Cluster phases (types.ClusterPhase in bce-sdk-go). "gone" is the emulator's own: the cluster is removed.
const (
	phasePending      = "pending"
	phaseProvisioning = "provisioning"
	phaseProvisioned  = "provisioned"
	phaseRunning      = "running"
	phaseCreateFailed = "create_failed"
	phaseDeleting     = "deleting"
	phaseGone         = "gone"
)

// cluster is the emulator's state for one cluster. Guarded by Server.mu.
type cluster struct {
	id, name  string
	seq       int
	spec      map[string]any // as posted under "cluster", secrets stripped, clusterID filled in
	phase     string
	since     time.Time // when the current phase began
	createdAt time.Time
	updatedAt time.Time
	failure   *createFailure // non-nil: provisioning ends in create_failed
	traceID   string         // request id of the create, reported as the failed step's traceID
	blbID     string
	public    bool // masterConfig.exposedPublic: the cluster has an EIP and a public kubeconfig
	groups    map[string]*group
	groupSeq  int
	// deleteQuery is the raw query of the DELETE that started deletion (deleteResource, ...).
	deleteQuery string
}

// next returns the phase that follows c's current one, or "" if the phase is final.
func (c *cluster) next() string {
	switch c.phase {
	case phasePending:
		return phaseProvisioning
	case phaseProvisioning:
		if c.failure != nil {
			return phaseCreateFailed
		}
		return phaseProvisioned
	case phaseProvisioned:
		return phaseRunning
	case phaseDeleting:
		return phaseGone
	}
	return ""
}

// advance moves c through every phase change due by now, each one delay after the previous, and lets its
// instance groups catch up. It reports false when the cluster is gone.
func (c *cluster) advance(now time.Time, delay time.Duration) bool {
	for n := c.next(); n != "" && now.Sub(c.since) >= delay; n = c.next() {
		c.since = c.since.Add(delay)
		c.phase, c.updatedAt = n, c.since
		if n == phaseGone {
			return false
		}
		if n == phaseRunning {
			for _, g := range c.groups {
				g.startAt(c.since) // nodes join only once the control plane runs
			}
		}
	}
	if c.phase == phaseRunning {
		for _, g := range c.groups {
			g.advance(now, delay)
		}
	}
	return true
}

func (c *cluster) nodeNum() int {
	n := 0
	for _, g := range c.groups {
		n += g.ready
	}
	return n
}

func (c *cluster) sortedGroups() []*group {
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *group) int { return a.seq - b.seq })
	return gs
}

// advanceAll brings every cluster up to date. Callers hold s.mu.
func (s *Server) advanceAll(now time.Time) {
	for id, c := range s.clusters {
		if !c.advance(now, s.phaseDelay) {
			delete(s.clusters, id)
		}
	}
}

// lookupCluster returns an up-to-date cluster or ClusterNotFound. Callers hold s.mu.
func (s *Server) lookupCluster(id string, now time.Time) (*cluster, *apiError) {
	c, ok := s.clusters[id]
	if !ok {
		return nil, clusterNotFound(id)
	}
	if !c.advance(now, s.phaseDelay) {
		delete(s.clusters, id)
		return nil, clusterNotFound(id)
	}
	return c, nil
}

func (s *Server) sortedClusters() []*cluster {
	cs := make([]*cluster, 0, len(s.clusters))
	for _, c := range s.clusters {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b *cluster) int { return a.seq - b.seq })
	return cs
}

// createClusterBody is CreateClusterRequest (services/cce/v2/model.go) as far as the emulator reads it.
type createClusterBody struct {
	Cluster    map[string]any   `json:"cluster"`
	Masters    []map[string]any `json:"masters"`
	Nodes      []map[string]any `json:"nodes"`
	NodeGroups []map[string]any `json:"nodeGroups"`
	Options    map[string]any   `json:"options"`
}

// createCluster serves POST /cluster.
func (s *Server) createCluster(c *call) (map[string]any, *apiError) {
	var body createClusterBody
	if e := decodeInto(c.body, &body); e != nil {
		return nil, e
	}
	if e := s.validateCluster(&body); e != nil {
		return nil, e
	}
	now := s.now()
	spec := deepCopy(body.Cluster).(map[string]any)
	stripSecrets(spec)
	cl := &cluster{
		id: newID("cce-"), name: str(spec, "clusterName"), spec: spec,
		phase: phasePending, since: now, createdAt: now, updatedAt: now,
		traceID: c.requestID, blbID: newID("lb-"), groups: map[string]*group{},
	}
	cl.public, _ = lookup(spec, "masterConfig.exposedPublic").(bool)
	spec["clusterID"] = cl.id
	if str(spec, "runtimeType") == "" {
		spec["runtimeType"] = "containerd" // Guess: the service's default runtime for new clusters
	}
	for _, ng := range body.NodeGroups {
		cl.addGroup(ng, now)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	cl.seq = s.seq
	cl.failure, s.nextFailure = s.nextFailure, nil
	s.clusters[cl.id] = cl
	return map[string]any{"clusterID": cl.id, "orderID": newID("order-")}, nil
}

// getCluster serves GET /cluster/{id}.
func (s *Server) getCluster(c *call) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, e := s.lookupCluster(c.r.PathValue("id"), s.now())
	if e != nil {
		return nil, e
	}
	return map[string]any{"cluster": cl.view()}, nil
}

// view is the cluster as GetClusterResponse.Cluster.
func (c *cluster) view() map[string]any {
	reached := func(phases ...string) bool { return slices.Contains(phases, c.phase) }
	blb := map[string]any{"id": c.blbID, "vpcIP": "", "eip": ""}
	if reached(phaseProvisioned, phaseRunning, phaseDeleting) {
		blb["vpcIP"] = "192.168.0.10"
		if c.public {
			blb["eip"] = "180.76.0.10"
		}
	}
	return map[string]any{
		"spec": deepCopy(c.spec),
		"status": map[string]any{
			"clusterBLB":                      blb,
			"infrastructureReady":             reached(phaseProvisioned, phaseRunning, phaseDeleting),
			"apiServerAccessSuccess":          reached(phaseRunning, phaseDeleting),
			"k8sPluginDeploySuccess":          reached(phaseRunning, phaseDeleting),
			"clusterPhase":                    c.phase,
			"nodeNum":                         c.nodeNum(),
			"problemDetectorServiceSourceBCM": false,
		},
		"createdAt": c.createdAt.UTC().Format(time.RFC3339),
		"updatedAt": c.updatedAt.UTC().Format(time.RFC3339),
	}
}

// listClusters serves GET /clusters.
func (s *Server) listClusters(c *call) (map[string]any, *apiError) {
	q := c.r.URL.Query()
	no, size, e := page(c.r, true)
	if e != nil {
		return nil, e
	}
	kt, kw := q.Get("keywordType"), q.Get("keyword")
	if kt != "" && kt != "clusterName" && kt != "clusterID" {
		return nil, invalidParam("keywordType %q is not clusterName or clusterID", kt)
	}
	orderBy, order := q.Get("orderBy"), strings.ToUpper(q.Get("order"))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceAll(s.now())
	var matched []*cluster
	for _, cl := range s.sortedClusters() {
		field := cl.name
		if kt == "clusterID" {
			field = cl.id
		}
		if kw == "" || strings.Contains(field, kw) {
			matched = append(matched, cl)
		}
	}
	sortClusters(matched, orderBy, order)
	list := []any{}
	for _, cl := range paginate(matched, no, size) {
		list = append(list, cl.view())
	}
	return map[string]any{"clusterPage": map[string]any{
		"keywordType": kt, "keyword": kw, "orderBy": orderBy, "order": order,
		"pageNo": no, "pageSize": size, "totalCount": len(matched), "clusterList": list,
	}}, nil
}

// sortClusters orders by clusterName, clusterID or creation (the default), descending unless ASC.
func sortClusters(cs []*cluster, orderBy, order string) {
	key := func(c *cluster) string { return fmt.Sprintf("%012d", c.seq) }
	switch orderBy {
	case "clusterName":
		key = func(c *cluster) string { return c.name }
	case "clusterID":
		key = func(c *cluster) string { return c.id }
	}
	slices.SortStableFunc(cs, func(a, b *cluster) int {
		r := strings.Compare(key(a), key(b))
		if order != "ASC" {
			r = -r
		}
		return r
	})
}

// deleteCluster serves DELETE /cluster/{id}. The cluster goes to deleting and disappears one phase later.
func (s *Server) deleteCluster(c *call) (map[string]any, *apiError) {
	for _, p := range []string{"deleteResource", "deleteCDSSnapshot", "batchRefundResource", "moveOut"} {
		if e := queryBool(c.r, p); e != nil {
			return nil, e
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cl, e := s.lookupCluster(c.r.PathValue("id"), now)
	if e != nil {
		return nil, e
	}
	if forbid, _ := cl.spec["forbidDelete"].(bool); forbid {
		return nil, invalidParam("cluster %s has forbidDelete set", cl.id) // Guess: code and status
	}
	if cl.phase != phaseDeleting {
		cl.phase, cl.since, cl.updatedAt, cl.deleteQuery = phaseDeleting, now, now, c.r.URL.RawQuery
	}
	return map[string]any{}, nil
}
