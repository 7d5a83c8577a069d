package transfer

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
)

// fakeAgent stands in for a cube server's agent, for the transfer's own tests.
type fakeAgent struct {
	token   string        // the one bearer token it accepts; "" accepts any
	delay   time.Duration // before each answer
	skew    time.Duration // how far its clock is ahead of the real one
	failing bool          // every commit fails (its volume read-only, say)

	addr                  string
	calls, inFlight, most atomic.Int64
	fenced                atomic.Int32
}

// start serves a: status (its clock, skewed), commits (it switches at the instant by its
// clock and reports that instant, as agents do, unless failing) and fences (counted).
func (a *fakeAgent) start(t *testing.T) *fakeAgent {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.token != "" && r.Header.Get("Authorization") != "Bearer "+a.token {
			http.Error(w, "agent commands need a token", http.StatusUnauthorized)
			return
		}
		a.calls.Add(1)
		n := a.inFlight.Add(1)
		defer a.inFlight.Add(-1)
		for m := a.most.Load(); n > m && !a.most.CompareAndSwap(m, n); m = a.most.Load() {
		}
		time.Sleep(a.delay)
		st := api.AgentStatus{State: api.AgentIdle, NowUnixUs: time.Now().Add(a.skew).UnixMicro()}
		switch r.URL.Path {
		case api.AgentCommitPath:
			var req api.CommitRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if a.failing {
				http.Error(w, "write CURRENT: read-only file system", http.StatusInternalServerError)
				return
			}
			st.ServedVersion, st.SwitchedAtUnixUs = req.Version, req.AtUnixMs*1000
		case api.AgentFencePath:
			a.fenced.Add(1)
		}
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	a.addr = strings.TrimPrefix(srv.URL, "http://")
	return a
}
