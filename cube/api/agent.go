// Package api declares the JSON documents that cube processes exchange over
// HTTP: the agent's requests and status (cube server --agent) and the
// transfer's GET /status. Writers and readers (the transfer, the pipeline
// harness, the Terraform provider) all import these; none keeps a copy.
package api

import "time"

// The agent's endpoints, on the cube server's port (cube server --agent).
const (
	AgentPreparePath = "/agent/prepare" // POST PrepareRequest
	AgentCommitPath  = "/agent/commit"  // POST CommitRequest
	AgentAbortPath   = "/agent/abort"   // POST AbortRequest
	AgentFencePath   = "/agent/fence"   // POST FenceRequest
	AgentStatusPath  = "/agent/status"  // GET; every endpoint answers AgentStatus
)

// FenceRequest takes a replica out of service: its /readyz answers 503 (so its shard's
// Service stops sending it lookups) until it serves Version, or a commit succeeds. The
// transfer fences a replica that could not switch to a decided version in time.
type FenceRequest struct {
	Version string `json:"version"`
	Reason  string `json:"reason"`
}

// ControlTokenGrace is how long the cube's processes (servers, agents, the
// transfer) still accept, and offer, a control token after a rotation
// replaced it in their mounted Secret: each pod sees the update at its own
// moment, within a minute or two of the kubelet's sync.
const ControlTokenGrace = 10 * time.Minute

// MaxCommitAhead bounds how far ahead of the agent's clock a commit instant
// may lie; a commit further ahead is refused (a clock that far off is a
// fault to fix, not to wait out).
const MaxCommitAhead = 5 * time.Second

// Agent states reported by GET /agent/status.
const (
	AgentIdle      = "idle"
	AgentPreparing = "preparing"
	AgentPrepared  = "prepared"
	AgentFailed    = "failed"
)

// PrepareRequest is the body of POST /agent/prepare: where shard Shard of
// Version is, and what it must hash to.
type PrepareRequest struct {
	Version string `json:"version"`
	Dict    string `json:"dict"`
	Shard   int    `json:"shard"`
	URL     string `json:"url"`    // the shard file; must be under --source-url
	SHA256  string `json:"sha256"` // hex, required
	Size    int64  `json:"size"`   // bytes, required
	// Layered: the version holds only its patch's keys and is served over
	// Base; Layers are the versions under it, newest first (Layers[0] is
	// Base), down to one that holds every key. The agent fetches those it
	// does not have, as it fetches the version.
	Layered bool       `json:"layered,omitempty"`
	Base    string     `json:"base,omitempty"`
	Layers  []LayerRef `json:"layers,omitempty"`
}

// LayerRef is a version under a layered one in a PrepareRequest: its shard
// file, and whether it is layered itself over the next one.
type LayerRef struct {
	Version string `json:"version"`
	Layered bool   `json:"layered,omitempty"`
	Base    string `json:"base,omitempty"`
	URL     string `json:"url"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
}

// CommitRequest is the body of POST /agent/commit. AtUnixMs, if set, is the
// wall-clock instant to switch at (at most MaxCommitAhead ahead): the
// transfer gives every replica the same instant, and each serves every
// request that arrives from that instant on from the new version, so the
// replicas switch together to within their clocks' skew.
type CommitRequest struct {
	Version  string `json:"version"`
	AtUnixMs int64  `json:"at_unix_ms,omitempty"`
}

// AbortRequest is the body of POST /agent/abort; an empty Version aborts
// whatever is in flight.
type AbortRequest struct {
	Version string `json:"version"`
}

// AgentStatus is the reply of every agent endpoint.
type AgentStatus struct {
	Shard             int    `json:"shard"`
	State             string `json:"state"`
	Version           string `json:"version"` // in flight (preparing, prepared or failed)
	Error             string `json:"error,omitempty"`
	ServedVersion     string `json:"served_version"`
	BackgroundVersion string `json:"background_version"`
	PreviousVersion   string `json:"previous_version"`
	SwitchedAtUnixUs  int64  `json:"switched_at_unix_us,omitempty"`
	// NowUnixUs is the agent's clock when it answered: the transfer measures the
	// replica's clock offset from it.
	NowUnixUs int64 `json:"now_unix_us,omitempty"`
	// Fenced is the version this replica must serve to be in service again (FenceRequest).
	Fenced     string   `json:"fenced,omitempty"`
	DownloadMs int64    `json:"download_ms"` // last prepare: download + sha256
	LoadMs     int64    `json:"load_ms"`     // last prepare: map + checksums`
	OnDisk     []string `json:"on_disk"`
}
