package cceemu

import "time"

// group is the emulator's state for one instance group. Guarded by Server.mu.
type group struct {
	id, name  string
	seq       int
	spec      map[string]any // as posted, secrets stripped
	replicas  int            // desired
	ready     int            // readyReplicas
	since     time.Time      // when the node now coming up started; meaningful while ready < replicas
	createdAt time.Time
}

// addGroup creates a group in c from a validated spec. Callers hold Server.mu or own c exclusively.
func (c *cluster) addGroup(spec map[string]any, now time.Time) *group {
	spec = deepCopy(spec).(map[string]any)
	stripSecrets(spec)
	replicas, _, _ := integer(spec, "replicas")
	c.groupSeq++
	g := &group{id: newID("cce-ig-"), name: str(spec, "instanceGroupName"), seq: c.groupSeq,
		spec: spec, replicas: replicas, since: now, createdAt: now}
	c.groups[g.id] = g
	return g
}

// startAt makes nodes start coming up no earlier than t (the moment the cluster runs).
func (g *group) startAt(t time.Time) {
	if g.since.Before(t) {
		g.since = t
	}
}

// advance makes one more node ready per delay until ready reaches replicas. Scaling down is immediate.
func (g *group) advance(now time.Time, delay time.Duration) {
	for g.ready < g.replicas && now.Sub(g.since) >= delay {
		g.ready++
		g.since = g.since.Add(delay)
	}
	g.ready = min(g.ready, g.replicas)
}

// setReplicas changes the desired size. A group that was idle starts its next node now, not at the time
// it last finished, so that a scale-up is never instantly "ready".
func (g *group) setReplicas(n int, now time.Time) {
	if g.ready >= g.replicas {
		g.since = now
	}
	g.replicas = n
	g.ready = min(g.ready, n)
}

// view is the group as GetInstanceGroupResponse.InstanceGroup.
func (g *group) view(clusterID string) map[string]any {
	spec := deepCopy(g.spec).(map[string]any)
	spec["cceInstanceGroupID"] = g.id
	spec["clusterID"] = clusterID
	spec["replicas"] = g.replicas
	if str(spec, "clusterRole") == "" {
		spec["clusterRole"] = "node"
	}
	return map[string]any{
		"spec":      spec,
		"status":    map[string]any{"readyReplicas": g.ready, "pause": map[string]any{"paused": false, "reason": ""}},
		"createdAt": g.createdAt.UTC().Format(time.RFC3339),
	}
}

// groupCluster looks up the cluster of a group route and refuses clusters that cannot take changes.
func (s *Server) groupCluster(c *call, changing bool) (*cluster, *apiError) {
	cl, e := s.lookupCluster(c.r.PathValue("id"), s.now())
	if e != nil {
		return nil, e
	}
	if changing && (cl.phase == phaseDeleting || cl.phase == phaseCreateFailed) {
		return nil, invalidParam("cluster %s is %s", cl.id, cl.phase) // Guess: code
	}
	return cl, nil
}

// pathGroup is the cluster and the instance group the path names ({id}, {gid}), as
// groupCluster finds the cluster. The caller holds s.mu.
func (s *Server) pathGroup(c *call, changing bool) (*cluster, *group, *apiError) {
	cl, e := s.groupCluster(c, changing)
	if e != nil {
		return nil, nil, e
	}
	g, ok := cl.groups[c.r.PathValue("gid")]
	if !ok {
		return nil, nil, groupNotFound(c.r.PathValue("gid"))
	}
	return cl, g, nil
}

// createGroup serves POST /cluster/{id}/instancegroup.
func (s *Server) createGroup(c *call) (map[string]any, *apiError) {
	var spec map[string]any
	if e := decodeInto(c.body, &spec); e != nil {
		return nil, e
	}
	if e := validateGroupSpec(spec); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, e := s.groupCluster(c, true)
	if e != nil {
		return nil, e
	}
	if cid := str(spec, "clusterID"); cid != "" && cid != cl.id {
		return nil, invalidParam("clusterID %q in the body does not match the path's %q", cid, cl.id)
	}
	g := cl.addGroup(spec, s.now())
	return map[string]any{"instanceGroupID": g.id}, nil
}

// getGroup serves GET /cluster/{id}/instancegroup/{gid}.
func (s *Server) getGroup(c *call) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, g, e := s.pathGroup(c, false)
	if e != nil {
		return nil, e
	}
	return map[string]any{"instanceGroup": g.view(cl.id)}, nil
}

// listGroups serves GET /cluster/{id}/instancegroups.
func (s *Server) listGroups(c *call) (map[string]any, *apiError) {
	no, size, e := page(c.r, false)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, e := s.groupCluster(c, false)
	if e != nil {
		return nil, e
	}
	all := cl.sortedGroups()
	list := []any{}
	for _, g := range paginate(all, no, size) {
		list = append(list, g.view(cl.id))
	}
	return map[string]any{"page": map[string]any{"pageNo": no, "pageSize": size, "totalCount": len(all), "list": list}}, nil
}

// replicasBody is UpdateInstanceGroupReplicasRequest.
type replicasBody struct {
	Replicas       *int           `json:"replicas"`
	InstanceIDs    []string       `json:"instanceIDs"`
	DeleteInstance bool           `json:"deleteInstance"`
	DeleteOption   map[string]any `json:"deleteOption"`
}

// updateReplicas serves PUT /cluster/{id}/instancegroup/{gid}/replicas.
func (s *Server) updateReplicas(c *call) (map[string]any, *apiError) {
	var b replicasBody
	if e := decodeInto(c.body, &b); e != nil {
		return nil, e
	}
	if b.Replicas == nil || *b.Replicas < 0 {
		return nil, invalidParam("replicas must be a non-negative integer")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, g, e := s.pathGroup(c, true)
	if e != nil {
		return nil, e
	}
	g.setReplicas(*b.Replicas, s.now())
	return map[string]any{}, nil
}

// configureBody is UpdateInstanceGroupConfigure: two flags and the whole InstanceGroupSpec.
type configureBody struct {
	PasswordNeedUpdate *bool `json:"passwordNeedUpdate"`
	SyncMeta           *bool `json:"syncMeta"`
}

// configureGroup serves PUT /cluster/{id}/instancegroup/{gid}/configure: the group's spec
// (its name and instance template: labels, taints, disks) replaced by the one sent. Guess:
// like the console's "edit node group", the replica count is not changed here (that is the
// replicas API), so a body that asks for another count is refused; an admin password is
// taken only with passwordNeedUpdate; labels and taints reach the existing nodes only with
// syncMeta, which the emulator records but has no nodes to apply to.
func (s *Server) configureGroup(c *call) (map[string]any, *apiError) {
	var flags configureBody
	if e := decodeInto(c.body, &flags); e != nil {
		return nil, e
	}
	if flags.PasswordNeedUpdate == nil || flags.SyncMeta == nil {
		return nil, invalidParam("passwordNeedUpdate and syncMeta are required")
	}
	var spec map[string]any
	if e := decodeInto(c.body, &spec); e != nil {
		return nil, e
	}
	delete(spec, "passwordNeedUpdate")
	delete(spec, "syncMeta")
	if e := validateGroupSpec(spec); e != nil {
		return nil, e
	}
	if !*flags.PasswordNeedUpdate && str(spec, "instanceTemplate.adminPassword") != "" {
		return nil, invalidParam("instanceTemplate.adminPassword is set but passwordNeedUpdate is false")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, g, e := s.pathGroup(c, true)
	if e != nil {
		return nil, e
	}
	if cid := str(spec, "clusterID"); cid != "" && cid != cl.id {
		return nil, invalidParam("clusterID %q in the body does not match the path's %q", cid, cl.id)
	}
	if n, _, _ := integer(spec, "replicas"); n != g.replicas {
		return nil, invalidParam("replicas %d differs from the group's %d: change it with the replicas API", n, g.replicas)
	}
	spec = deepCopy(spec).(map[string]any)
	stripSecrets(spec)
	g.spec, g.name = spec, str(spec, "instanceGroupName")
	return map[string]any{}, nil
}

// deleteGroup serves DELETE /cluster/{id}/instancegroup/{gid}. The group disappears at once.
// Guess: the service deletes asynchronously; the baiducloud provider does not wait, so neither need we.
func (s *Server) deleteGroup(c *call) (map[string]any, *apiError) {
	for _, p := range []string{"deleteInstances", "releaseAllResources"} {
		if e := queryBool(c.r, p); e != nil {
			return nil, e
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, g, e := s.pathGroup(c, false)
	if e != nil {
		return nil, e
	}
	delete(cl.groups, g.id)
	return map[string]any{}, nil
}
