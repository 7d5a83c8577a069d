package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
)

// IDPlaceholder in a model URL: see api.ModelIDPlaceholder.
const IDPlaceholder = api.ModelIDPlaceholder

// maxStatusBytes bounds the transfer's status document (8,192 replicas' worth).
const maxStatusBytes = 16 << 20

// follows says whether the model URL follows the cube's served version.
func (o Options) follows() bool { return strings.Contains(o.ModelURL, IDPlaceholder) }

func (o Options) modelURL(id string) string { return strings.ReplaceAll(o.ModelURL, IDPlaceholder, id) }

// servedID is the donefile id of the version every shard of the cube serves, from the
// transfer's status: the history record of the served version. "" while none is served.
func servedID(ctx context.Context, client *http.Client, statusURL string) (string, error) {
	resp, err := get(ctx, client, statusURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", statusURL, resp.Status)
	}
	b, err := bounded.ReadAll(resp.Body, maxStatusBytes)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", statusURL, err)
	}
	var st api.Status
	if err := json.Unmarshal(b, &st); err != nil {
		return "", fmt.Errorf("GET %s: %w", statusURL, err)
	}
	id := st.ServedID()
	if id == "" && st.ServedVersion != "" {
		return "", fmt.Errorf("the cube serves %s, which its transfer's history does not name", st.ServedVersion)
	}
	return id, nil
}

// State is what the launcher reports on its status port (api.LauncherStatusPath).
type State = api.LauncherState

// Phases of State.
const (
	PhaseWaitingForCube  = api.PhaseWaitingForCube
	PhaseWaitingForModel = api.PhaseWaitingForModel
	PhaseServing         = api.PhaseServing
)

// status is the launcher's State, safe for the status server to read.
type status struct {
	mu sync.Mutex
	s  State
}

func (s *status) set(st State) { s.mu.Lock(); s.s = st; s.mu.Unlock() }
func (s *status) get() State   { s.mu.Lock(); defer s.mu.Unlock(); return s.s }

func (s *status) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.get())
}

// waitForServedID asks the transfer every Poll until the cube serves a version.
func waitForServedID(ctx context.Context, o Options, client *http.Client) (string, error) {
	started := time.Now()
	for attempt := 1; ; attempt++ {
		id, err := servedID(ctx, client, o.CubeStatus)
		switch {
		case err == nil && id != "":
			return id, nil
		case err != nil:
			o.Log.Warn("could not read the cube's status; trying again", "url", o.CubeStatus, "err", err)
		case attempt == 1 || attempt%6 == 0:
			o.Log.Info("waiting for the cube to serve a first version: the dense model of that version follows", "status", o.CubeStatus,
				"waited", time.Since(started).Round(time.Second).String())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(o.poll()):
		}
	}
}

// follow keeps the dense model in live on the version the cube serves until ctx ends: a new
// served id's model is fetched, moved into live file by file, and the timestamp bumped last,
// so that the server's next reload check loads it whole (§3). A model whose feeds or fetches
// differ cannot be reloaded (Serving reads general_model.prototxt only at start): errRestart.
func follow(ctx context.Context, o Options, client *http.Client, live, id string, st *status) error {
	conf, err := servingconf.ReadModelConf(live)
	if err != nil {
		return err
	}
	stamp := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.poll()):
		}
		next, err := servedID(ctx, client, o.CubeStatus)
		if err != nil {
			o.Log.Warn("could not read the cube's status", "url", o.CubeStatus, "err", err)
			continue
		}
		if next == "" || next == id {
			continue
		}
		url := o.modelURL(next)
		model, err := FetchModel(ctx, client, url, filepath.Join(o.Dir, modelsDir), o.maxModelBytes())
		if errors.Is(err, ErrNoModel) {
			o.Log.Warn("the cube serves a version without a dense model (404): keeping the one in place", "id", next, "url", url, "in_place", id)
			id = next // not asked again until the cube moves on
			continue
		}
		if err != nil {
			o.Log.Warn("could not fetch the dense model of the version the cube serves; trying again", "id", next, "err", err)
			continue
		}
		nconf, err := servingconf.ReadModelConf(model)
		if err == nil && !proto.Equal(conf, nconf) {
			err = fmt.Errorf("%w: model %s has other feeds or fetches than the one the server started with", errRestart, next)
		}
		if err == nil {
			err = replaceFiles(live, model)
		}
		os.RemoveAll(filepath.Dir(model))
		if err != nil {
			return err
		}
		// The reload rule compares whole seconds: the new mtime must differ from the last.
		now, after := time.Now().Truncate(time.Second), stamp.Truncate(time.Second).Add(time.Second)
		stamp = now
		if now.Before(after) {
			stamp = after
		}
		if err := os.Chtimes(filepath.Join(live, servingconf.TimestampFile), stamp, stamp); err != nil {
			return err
		}
		o.Log.Info("dense model in place: the server reloads it at its next check", "id", next, "was", id)
		id = next
		st.set(State{Phase: PhaseServing, ModelID: id, Since: time.Now()})
	}
}

// errRestart ends the launcher with ExitRestart: the container restarts with the new model.
var errRestart = errors.New("the server must restart")

// ExitRestart is the launcher's status when the server must start again to serve the new
// model (Kubernetes restarts the container).
const ExitRestart = 3

// replaceFiles moves every file of next into live (renames, one file at a time, never the
// timestamp file), then removes what live holds that next does not.
func replaceFiles(live, next string) error {
	keep := map[string]bool{servingconf.TimestampFile: true}
	err := filepath.WalkDir(next, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(next, p)
		if rel == servingconf.TimestampFile {
			return nil
		}
		keep[rel] = true
		to := filepath.Join(live, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.Rename(p, to)
	})
	if err != nil {
		return err
	}
	return filepath.WalkDir(live, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel, _ := filepath.Rel(live, p); !keep[rel] {
			return os.Remove(p)
		}
		return nil
	})
}
