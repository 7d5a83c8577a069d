package pipeline

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
)

// PaddleStats are what a client that fans out the way Paddle Serving's
// cube-api does (one request per shard, replicas in turn, no version checks,
// no re-asks) sees during rollouts.
type PaddleStats struct {
	Requests int64
	Failed   int64 // errors, or keys missing / wrong
	Mixed    int64 // batches whose shards answered from different versions
	// FlipBacks counts answers from a shard in an older version than one
	// that shard had already answered before the request was sent (a
	// replica that switched later than its sibling).
	FlipBacks int64
	FirstErr  string
	// Windows holds, per version switched to, how long both versions were
	// seen: from the first answer of the new version to the last answer of
	// the old one (0 when they do not overlap), in request order of versions.
	Windows []time.Duration
	// Steady is the latency of every request; FirstAfterSwitch that of each
	// worker's first request answered wholly from a version it had not seen.
	Steady, FirstAfterSwitch []time.Duration
}

// MaxWindow returns the largest window.
func (s *PaddleStats) MaxWindow() time.Duration {
	var m time.Duration
	for _, w := range s.Windows {
		m = max(m, w)
	}
	return m
}

// Percentile returns the p-th percentile (0..100) of ds, or 0.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

// versionSeen is what the observer keeps per version.
type versionSeen struct {
	first, last time.Time   // first and last receipt of an answer from it, any shard
	shardFirst  []time.Time // first receipt per shard (zero: not yet)
}

// paddleObserver correlates answers across workers.
type paddleObserver struct {
	mu       sync.Mutex
	shards   int
	versions map[string]*versionSeen
	st       PaddleStats
}

func (o *paddleObserver) seen(v string) *versionSeen {
	vs := o.versions[v]
	if vs == nil {
		vs = &versionSeen{shardFirst: make([]time.Time, o.shards)}
		o.versions[v] = vs
	}
	return vs
}

// record takes one request's shard answers, sent at sent and received at recv.
func (o *paddleObserver) record(sent, recv time.Time, answers []client.ShardAnswer, failed bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.st.Requests++
	o.st.Steady = append(o.st.Steady, recv.Sub(sent))
	if failed {
		o.st.Failed++
		if o.st.FirstErr == "" && err != nil {
			o.st.FirstErr = err.Error()
		}
	}
	mixed := false
	for _, a := range answers {
		if a.Err != nil {
			continue
		}
		if a.Version != answers[0].Version {
			mixed = true
		}
		// A flip-back: this shard had already answered a newer version
		// before this request was sent.
		for v, vs := range o.versions {
			if newer(v, a.Version) && !vs.shardFirst[a.Shard].IsZero() && vs.shardFirst[a.Shard].Before(sent) {
				o.st.FlipBacks++
				break
			}
		}
		vs := o.seen(a.Version)
		if vs.first.IsZero() || recv.Before(vs.first) {
			vs.first = recv
		}
		if recv.After(vs.last) {
			vs.last = recv
		}
		if vs.shardFirst[a.Shard].IsZero() || recv.Before(vs.shardFirst[a.Shard]) {
			vs.shardFirst[a.Shard] = recv
		}
	}
	if mixed {
		o.st.Mixed++
	}
}

// newer compares version names: base versions are unix seconds, a patch
// "<base>_<seconds>" sorts after its base.
func newer(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

func (o *paddleObserver) finish() *PaddleStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	names := make([]string, 0, len(o.versions))
	for v := range o.versions {
		names = append(names, v)
	}
	sort.Slice(names, func(i, j int) bool { return newer(names[j], names[i]) })
	for i := 1; i < len(names); i++ {
		prev, cur := o.versions[names[i-1]], o.versions[names[i]]
		o.st.Windows = append(o.st.Windows, max(0, prev.last.Sub(cur.first)))
	}
	st := o.st
	return &st
}

// LoadPaddle runs workers goroutines of batch-key lookups through the
// cube.conf client fanning out as Paddle's cube-api does, until ctx ends,
// and reports what such a client sees: mixed batches, flip-backs, the
// window of each switch and the first request after a switch.
func (c *Cluster) LoadPaddle(ctx context.Context, workers, batch int) (*PaddleStats, error) {
	cl, err := client.New(c.Conf)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	o := &paddleObserver{shards: c.opts.Shards, versions: map[string]*versionSeen{}}
	l := Loader{Conf: c.Conf, Keys: c.opts.Keys, ValueSize: c.opts.ValueSize}
	seed := func(w int) uint64 { return uint64(w*104729 + 17) }
	l.lookups(ctx, workers, batch, seed, func() func([]uint64) {
		newest := "" // the newest version this worker has seen every shard answer from
		return func(keys []uint64) {
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			sent := time.Now()
			res, answers, err := cl.SeekShards(rctx, keys)
			recv := time.Now()
			cancel()
			failed := err != nil
			for i, r := range res {
				if failed {
					break
				}
				if err = l.checkValue(keys[i], r); err != nil {
					failed = true
				}
			}
			o.record(sent, recv, answers, failed, err)
			if oldest, ok := allAnswered(answers); ok && newer(oldest, newest) {
				if newest != "" {
					o.mu.Lock()
					o.st.FirstAfterSwitch = append(o.st.FirstAfterSwitch, recv.Sub(sent))
					o.mu.Unlock()
				}
				newest = oldest
			}
		}
	})
	return o.finish(), nil
}

// allAnswered returns the oldest version among the answers, if every shard
// answered.
func allAnswered(answers []client.ShardAnswer) (string, bool) {
	oldest := ""
	for i, a := range answers {
		if a.Err != nil {
			return "", false
		}
		if i == 0 || newer(oldest, a.Version) {
			oldest = a.Version
		}
	}
	return oldest, len(answers) > 0
}
