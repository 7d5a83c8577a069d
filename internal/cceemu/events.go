package cceemu

import "time"

// Guess: the service's step names and step statuses are not in the SDK. The emulator uses three creation
// steps, one per phase change, and the statuses below.
var creationSteps = []string{"CheckClusterParameters", "CreateInfrastructure", "DeployKubernetes"}

const (
	stepTodo   = "todo"
	stepDoing  = "doing"
	stepDone   = "done"
	stepFailed = "failed"
)

// clusterEvents serves GET /event/cluster/{id}: {status, steps[{stepName, stepStatus, errInfo...}]}.
func (s *Server) clusterEvents(c *call) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, e := s.lookupCluster(c.r.PathValue("id"), s.now())
	if e != nil {
		return nil, e
	}
	status, steps := cl.events()
	return map[string]any{"status": status, "steps": steps}, nil
}

// events derives the event status and steps from the phase: each phase change completes one step.
func (c *cluster) events() (string, []any) {
	done := map[string]int{phasePending: 0, phaseProvisioning: 1, phaseProvisioned: 2, phaseRunning: 3,
		phaseCreateFailed: 1, phaseDeleting: 3}[c.phase]
	if c.phase == phaseDeleting && c.failure != nil {
		done = 1
	}
	steps := []any{}
	for i, name := range creationSteps {
		st := map[string]any{"stepName": name, "stepStatus": stepTodo}
		switch {
		case i < done:
			st["stepStatus"] = stepDone
			st["ready"] = true
			st["finishedTime"] = c.createdAt.Add(time.Duration(i+1) * time.Second).UTC().Format(time.RFC3339)
		case i == done && c.failure != nil && (c.phase == phaseCreateFailed || c.phase == phaseDeleting):
			if c.failure.Step != "" {
				st["stepName"] = c.failure.Step
			}
			st["stepStatus"] = stepFailed
			st["errMsg"] = c.failure.Message
			st["errInfo"] = map[string]any{
				"code": c.failure.Code, "message": c.failure.Message,
				"traceID": c.traceID, "suggestion": c.failure.Suggestion,
			}
		case i == done && c.phase != phaseDeleting:
			st["stepStatus"] = stepDoing
		}
		steps = append(steps, st)
		if st["stepStatus"] == stepFailed {
			break // nothing runs after a failed step
		}
	}
	status := map[string]string{phasePending: "creating", phaseProvisioning: "creating", phaseProvisioned: "creating",
		phaseRunning: "created", phaseCreateFailed: "create_failed", phaseDeleting: "deleting"}[c.phase]
	if c.phase == phaseDeleting {
		steps = append(steps, map[string]any{"stepName": "DeleteCluster", "stepStatus": stepDoing})
	}
	return status, steps
}
