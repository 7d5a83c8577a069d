package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/bounded"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/retry"
)

// replica addresses one cube server (with --agent).
type replica struct {
	shard int
	addr  string
}

func (t *Transfer) replicas() []replica {
	var rs []replica
	for s, addrs := range t.opts.Replicas {
		for _, a := range addrs {
			rs = append(rs, replica{s, a})
		}
	}
	return rs
}

// call POSTs (or GETs, with a nil body) one agent endpoint within
// StepTimeout and decodes its status. 4xx answers are permanent, but 401: a
// rotated control token reaches each pod at its own moment, so an agent that
// refuses the current token is asked again with the previous one (within
// its grace period), and a 401 is retried.
func (t *Transfer) call(ctx context.Context, r replica, path string, body any) (api.AgentStatus, error) {
	var st api.AgentStatus
	ctx, cancel := context.WithTimeout(ctx, t.opts.StepTimeout)
	defer cancel()
	method, b := http.MethodGet, []byte(nil)
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return st, err
		}
		method = http.MethodPost
	}
	send := func(tok string) (*http.Response, error) {
		var rd io.Reader
		if b != nil {
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://"+r.addr+path, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		return t.http.Do(req)
	}
	sent := time.Now()
	resp, err := send(t.token.Current())
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		if prev, ok := t.token.Previous(); ok {
			resp.Body.Close()
			t.log.Info("an agent refused the current control token; trying the previous one (the rotation has not reached it yet)",
				"replica", r.addr, "shard", r.shard)
			resp, err = send(prev)
		}
	}
	if err != nil {
		return st, fmt.Errorf("replica %s shard %d: %w", r.addr, r.shard, err)
	}
	defer resp.Body.Close()
	raw, err := bounded.ReadAll(resp.Body, 1<<20)
	if err != nil {
		return st, fmt.Errorf("replica %s shard %d: %s: read the reply: %w", r.addr, r.shard, path, err)
	}
	if resp.StatusCode >= 300 {
		err := fmt.Errorf("replica %s shard %d: %s %s: %s", r.addr, r.shard, path, resp.Status, bytes.TrimSpace(raw))
		return st, retry.PermanentIf(resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusUnauthorized, err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("replica %s shard %d: %s: %w", r.addr, r.shard, path, err)
	}
	t.noteClock(r, st, sent, time.Now())
	return st, nil
}

// askAll asks every replica in rs for its agent status, in parallel, each
// call bounded by timeout (and StepTimeout): reports[i] and errs[i] are rs[i]'s.
func (t *Transfer) askAll(ctx context.Context, rs []replica, timeout time.Duration) (reports []api.AgentStatus, errs []error) {
	reports, errs = make([]api.AgentStatus, len(rs)), make([]error, len(rs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxFanOut)
	for i, rp := range rs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			reports[i], errs[i] = t.call(c, rp, api.AgentStatusPath, nil)
		}()
	}
	wg.Wait()
	return reports, errs
}

// maxFanOut bounds the status calls askAll makes at once (a cube has up to
// 8,192 replicas).
const maxFanOut = 64

// forEach runs f on every replica in parallel and joins the errors.
func forEach(rs []replica, f func(r replica) error) error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(r)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareAll asks every replica to download, verify and background-load its
// shard of r.Version, and waits until all report "prepared", within
// PrepareTimeout; then every replica's clock must allow the switch instant
// (checkClocks). A replica whose prepare failed (a download cut short) is
// asked again, a bounded number of times.
func (t *Transfer) prepareAll(ctx context.Context, r *api.Rollout, tm *api.Timings) error {
	rs := t.replicas()
	if err := t.prepare(ctx, r.Version, rs, tm); err != nil {
		return err
	}
	return t.checkClocks(rs) // the offsets of the prepare's last status calls
}

// prepare prepares version on the replicas rs; see prepareAll.
// layersUnder returns the manifests of the versions version is served
// over, newest first (none unless it is layered).
func (t *Transfer) layersUnder(version string) ([]*layout.Manifest, error) {
	chain, err := layers.Chain(t.outputDir(), version)
	if err != nil {
		return nil, err
	}
	var ms []*layout.Manifest
	for _, v := range chain[1:] {
		m, err := layout.ReadManifest(t.outputDir(), v)
		if err != nil {
			return nil, err
		}
		if len(m.Shards) != t.shards() {
			return nil, fmt.Errorf("version %q (a layer of %q) has %d shards, want %d", v, version, len(m.Shards), t.shards())
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// layerRef is shard's file of the version m describes, as agents fetch it.
func (t *Transfer) layerRef(m *layout.Manifest, shard int) api.LayerRef {
	sm := m.Shards[shard]
	return api.LayerRef{Version: m.Version, Layered: m.Layered, Base: m.Base,
		URL: fmt.Sprintf("%s/files/%s/%s", t.opts.PublicURL, m.Version, sm.File), SHA256: sm.SHA256, Size: sm.Size}
}

func (t *Transfer) prepare(ctx context.Context, version string, rs []replica, tm *api.Timings) error {
	m, err := layout.ReadManifest(t.outputDir(), version)
	if err != nil {
		return err
	}
	if len(m.Shards) != t.shards() {
		return fmt.Errorf("version %q has %d shards, want %d", version, len(m.Shards), t.shards())
	}
	under, err := t.layersUnder(version)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.PrepareTimeout)
	defer cancel()
	var mu sync.Mutex
	return forEach(rs, func(rp replica) error {
		top := t.layerRef(m, rp.shard)
		req := api.PrepareRequest{Version: version, Dict: t.opts.Dict, Shard: rp.shard,
			URL: top.URL, SHA256: top.SHA256, Size: top.Size, Layered: top.Layered, Base: top.Base}
		for _, l := range under {
			req.Layers = append(req.Layers, t.layerRef(l, rp.shard))
		}
		send := func() error {
			return retry.Do(ctx, t.opts.Retries, t.opts.Backoff, func() error {
				_, err := t.call(ctx, rp, api.AgentPreparePath, req)
				return err
			})
		}
		if err := send(); err != nil {
			return err
		}
		resent := 0
		for {
			st, err := t.call(ctx, rp, api.AgentStatusPath, nil)
			switch {
			case err == nil && (st.ServedVersion == version || (st.Version == version && st.State == api.AgentPrepared)):
				mu.Lock()
				tm.DistribMs = max(tm.DistribMs, st.DownloadMs)
				tm.LoadMs = max(tm.LoadMs, st.LoadMs)
				mu.Unlock()
				return nil
			case err == nil && (st.Version != version || st.State == api.AgentFailed || st.State == api.AgentIdle):
				// Failed, or the agent restarted and forgot: ask again, boundedly.
				if resent >= t.opts.Retries {
					return fmt.Errorf("replica %s shard %d: prepare %s: %s %s", rp.addr, rp.shard, version, st.State, st.Error)
				}
				resent++
				t.log.Warn("replica not preparing; asking again", "replica", rp.addr, "shard", rp.shard, "state", st.State, "err", st.Error)
				if err := send(); err != nil {
					return err
				}
			case err != nil:
				t.log.Debug("agent status", "replica", rp.addr, "err", err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("replica %s shard %d: prepare %s: %w (deadline %s)", rp.addr, rp.shard, version, ctx.Err(), t.opts.PrepareTimeout)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// commitAll tells every replica to switch to r.Version at one instant
// SwitchDelay ahead, and retries (boundedly per round; the phase persists)
// until every replica serves it; it returns the replicas that did not, with
// why. A replica that lost its prepared copy (a
// restart with an empty disk) is prepared again first.
func (t *Transfer) commitAll(ctx context.Context, r *api.Rollout, tm *api.Timings) (stuck map[replica]error, err error) {
	at := r.CommitAt
	if at == 0 { // state written before CommitAt existed
		at = time.Now().Add(t.opts.SwitchDelay).UnixMilli()
	}
	var (
		mu       sync.Mutex
		switched = map[replica]int64{}
	)
	stuck = map[replica]error{}
	err = forEach(t.replicas(), func(rp replica) (err error) {
		defer func() {
			if err != nil {
				mu.Lock()
				stuck[rp] = err
				mu.Unlock()
			}
		}()
		return retry.Do(ctx, t.opts.Retries, t.opts.Backoff, func() error {
			st, err := t.call(ctx, rp, api.AgentCommitPath, api.CommitRequest{Version: r.Version, AtUnixMs: at})
			if retry.IsPermanent(err) {
				// 409: not prepared here any more. Prepare it again (the
				// decision is taken), then let the retry commit.
				t.log.Warn("replica cannot commit; preparing it again", "replica", rp.addr, "err", err)
				var discard api.Timings
				if perr := t.prepare(ctx, r.Version, []replica{rp}, &discard); perr != nil {
					return perr
				}
				// Not wrapped: what was permanent before the re-prepare is worth a retry now.
				return fmt.Errorf("retry commit after re-prepare: %v", err)
			}
			if err != nil {
				return err
			}
			if st.ServedVersion != r.Version {
				return fmt.Errorf("replica %s shard %d: serves %q after commit", rp.addr, rp.shard, st.ServedVersion)
			}
			mu.Lock()
			switched[rp] = st.SwitchedAtUnixUs
			mu.Unlock()
			return nil
		})
	})
	tm.WindowUs = t.windowOnTransferClock(switched)
	return stuck, err
}

// fence takes the replicas that could not switch to version out of service (best effort:
// one that cannot be reached is likely out of service already) and records them, so that
// /status names them until the heal pass brings each back.
func (t *Transfer) fence(ctx context.Context, version string, stuck map[replica]error) {
	reasons := map[string]string{}
	for rp, cause := range stuck {
		reason := fmt.Sprintf("shard %d could not switch to %s within --commit-timeout %s: %v", rp.shard, version, t.opts.CommitTimeout, cause)
		reasons[rp.addr] = reason
		if _, err := t.call(ctx, rp, api.AgentFencePath, api.FenceRequest{Version: version, Reason: reason}); err != nil {
			t.log.Warn("could not fence a replica that did not switch (it is likely out of service already)", "replica", rp.addr, "err", err)
		}
		t.log.Error("replica out of service until the heal pass switches it", "replica", rp.addr, "shard", rp.shard, "version", version, "cause", cause)
	}
	if err := t.update(func(s *State) {
		if s.Fenced == nil {
			s.Fenced = map[string]string{}
		}
		maps.Copy(s.Fenced, reasons)
	}); err != nil {
		t.log.Error("persist", "err", err)
	}
}

// abortAll tells every replica to drop version v (bounded retries); a
// replica that cannot be reached drops it when it restarts (it serves the
// committed version from its VERSION file) or at the next abort.
func (t *Transfer) abortAll(ctx context.Context, v string) {
	err := forEach(t.replicas(), func(rp replica) error {
		return retry.Do(ctx, t.opts.Retries, t.opts.Backoff, func() error {
			_, err := t.call(ctx, rp, api.AgentAbortPath, api.AbortRequest{Version: v})
			return err
		})
	})
	if err != nil {
		t.log.Warn("abort did not reach every replica", "version", v, "err", err)
	}
}

// everyShardSwitched reports whether every shard has a replica not in stuck: the decided
// version serves every key, so the stuck replicas can be taken out of service.
func (t *Transfer) everyShardSwitched(stuck map[replica]error) bool {
	ok := make([]bool, t.shards())
	for _, rp := range t.replicas() {
		if _, bad := stuck[rp]; !bad {
			ok[rp.shard] = true
		}
	}
	return !slices.Contains(ok, false)
}
