package api

import "time"

// ModelIDPlaceholder in a serving's model URL stands for the donefile id of the version the
// cube serves: the launcher (cube serving) then follows the cube, and each version's dense
// model (serving/<id>.tar.gz, as cube export and cube model publish it beside data/<id>/)
// reaches the server.
const ModelIDPlaceholder = "{id}"

// LauncherStatusPath is the serving launcher's status document (LauncherState), GET on its
// --status-listen port.
const LauncherStatusPath = "/status"

// LauncherState is what the serving launcher reports.
type LauncherState struct {
	// Phase is waiting-for-cube, waiting-for-model or serving.
	Phase string `json:"phase"`
	// ModelID is the donefile id of the dense model in place ("" when not following).
	ModelID string `json:"model_id,omitempty"`
	// Since is when that model was put in place: the server reloads it within its
	// reload interval.
	Since time.Time `json:"since,omitzero"`
}

// Phases of LauncherState.
const (
	PhaseWaitingForCube  = "waiting-for-cube"
	PhaseWaitingForModel = "waiting-for-model"
	PhaseServing         = "serving"
)
