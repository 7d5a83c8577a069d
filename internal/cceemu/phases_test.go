package cceemu

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

const d = 100 * time.Millisecond

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestCluster(failure *createFailure) *cluster {
	return &cluster{id: "cce-test", phase: phasePending, since: t0, createdAt: t0, failure: failure, groups: map[string]*group{}}
}

func TestCluster_PhasesAdvanceOnePerDelay(t *testing.T) {
	c := newTestCluster(nil)
	for i, want := range []string{phasePending, phaseProvisioning, phaseProvisioned, phaseRunning, phaseRunning} {
		c.advance(t0.Add(time.Duration(i)*d+d/2), d)
		if c.phase != want {
			t.Fatalf("after %d delays: phase %s, want %s", i, c.phase, want)
		}
	}
}

func TestCluster_LateObserverCatchesUp(t *testing.T) {
	c := newTestCluster(nil)
	c.advance(t0.Add(10*d), d)
	if c.phase != phaseRunning || !c.updatedAt.Equal(t0.Add(3*d)) {
		t.Fatalf("phase %s updatedAt %v, want running at %v", c.phase, c.updatedAt, t0.Add(3*d))
	}
}

func TestCluster_FailureStopsAtCreateFailed(t *testing.T) {
	c := newTestCluster(&createFailure{Step: "CreateBLB", Code: "BLB.QuotaExceeded", Message: "no quota", Suggestion: "raise it"})
	c.advance(t0.Add(10*d), d)
	if c.phase != phaseCreateFailed {
		t.Fatalf("phase %s, want create_failed", c.phase)
	}
	status, steps := c.events()
	last := steps[len(steps)-1].(map[string]any)
	if status != "create_failed" || last["stepName"] != "CreateBLB" || last["stepStatus"] != stepFailed {
		t.Fatalf("events %s %v", status, steps)
	}
	info := last["errInfo"].(map[string]any)
	if info["code"] != "BLB.QuotaExceeded" || info["message"] != "no quota" || info["suggestion"] != "raise it" {
		t.Fatalf("errInfo %v", info)
	}
}

func TestCluster_DeletingDisappears(t *testing.T) {
	c := newTestCluster(nil)
	c.advance(t0.Add(3*d), d)
	c.phase, c.since = phaseDeleting, t0.Add(5*d)
	if !c.advance(t0.Add(5*d+d/2), d) || c.phase != phaseDeleting {
		t.Fatalf("gone too early: %s", c.phase)
	}
	if c.advance(t0.Add(6*d), d) {
		t.Fatalf("still there after a delay of deleting: %s", c.phase)
	}
}

func TestGroup_NodesJoinOnlyWhenClusterRuns(t *testing.T) {
	c := newTestCluster(nil)
	g := c.addGroup(map[string]any{"instanceGroupName": "w", "replicas": jsonNum(3)}, t0)
	c.advance(t0.Add(3*d-1), d) // provisioned, not running
	if g.ready != 0 {
		t.Fatalf("ready %d before the cluster runs", g.ready)
	}
	// running at 3d; nodes at 4d, 5d, 6d
	for _, tc := range []struct {
		at    time.Duration
		ready int
	}{{4*d - 1, 0}, {4 * d, 1}, {5 * d, 2}, {9 * d, 3}} {
		c.advance(t0.Add(tc.at), d)
		if g.ready != tc.ready {
			t.Fatalf("at %v: ready %d, want %d", tc.at, g.ready, tc.ready)
		}
	}
	if c.nodeNum() != 3 {
		t.Fatalf("nodeNum %d", c.nodeNum())
	}
	g.setReplicas(1, t0.Add(10*d))
	if g.ready != 1 {
		t.Fatalf("scale down kept %d ready", g.ready)
	}
	g.setReplicas(2, t0.Add(20*d))
	c.advance(t0.Add(20*d+d/2), d)
	if g.ready != 1 {
		t.Fatalf("scale-up was instantly ready (%d): idle time must not count", g.ready)
	}
	c.advance(t0.Add(21*d), d)
	if g.ready != 2 {
		t.Fatalf("ready %d after a delay, want 2", g.ready)
	}
}

func TestValidateGroupSpec(t *testing.T) {
	ok := map[string]any{"instanceGroupName": "w", "replicas": jsonNum(1),
		"instanceTemplate": map[string]any{"instanceResource": map[string]any{"machineSpec": "bcc.g5.c4m16"}}}
	if e := validateGroupSpec(ok); e != nil {
		t.Fatalf("valid spec rejected: %v", e)
	}
	for name, mutate := range map[string]func(m map[string]any){
		"no name":          func(m map[string]any) { delete(m, "instanceGroupName") },
		"negative":         func(m map[string]any) { m["replicas"] = jsonNum(-1) },
		"no template":      func(m map[string]any) { delete(m, "instanceTemplate") },
		"no machine":       func(m map[string]any) { m["instanceTemplate"] = map[string]any{"imageID": "m-1"} },
		"master role":      func(m map[string]any) { m["clusterRole"] = "master" },
		"replicas as text": func(m map[string]any) { m["replicas"] = "2" },
	} {
		m := deepCopy(ok).(map[string]any)
		mutate(m)
		if e := validateGroupSpec(m); e == nil || e.Code != CodeInvalidParam {
			t.Errorf("%s: got %v, want %s", name, e, CodeInvalidParam)
		}
	}
}

func TestStripSecrets(t *testing.T) {
	m := map[string]any{"adminPassword": "x", "instanceTemplates": []any{map[string]any{"adminPassword": "y", "sshKeyID": "k"}}}
	stripSecrets(m)
	if _, ok := m["adminPassword"]; ok {
		t.Fatal("top-level password kept")
	}
	inner := m["instanceTemplates"].([]any)[0].(map[string]any)
	if _, ok := inner["adminPassword"]; ok || inner["sshKeyID"] != "k" {
		t.Fatalf("nested: %v", inner)
	}
}

func jsonNum(n int) any { return json.Number(strconv.Itoa(n)) }
