package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// ErrMixedVersions says shards kept answering from different versions for
// longer than SeekConsistent's wait.
var ErrMixedVersions = errors.New("cube: shards answered from different versions")

// SeekConsistent is Seek for callers that must never combine values of two
// versions. A rollout switches all shards at one instant, but a request in
// flight at that instant can still reach one shard before and another
// after it. Every shard reports its version (version_required), so when the
// answers disagree every shard is asked again (each switches within the
// rollout window; which side is behind is not known, since a rollback switches
// to an older version) until all agree or wait has passed; then the keys are
// marked Failed and ErrMixedVersions returned.
// firstMixed tells whether the first answers disagreed.
func (c *Client) SeekConsistent(ctx context.Context, keys []uint64, wait time.Duration) (res []Result, version string, firstMixed bool, err error) {
	n := len(c.shards)
	perShard, pos := c.byShard(keys)
	vals := make([][]proto.Value, n)
	vers := make([]string, n)
	// answered[s] is the replica whose answer is in vals[s]. A shard asked again is asked
	// from the next replica: under concurrent clients the shared
	// round-robin could otherwise send the re-ask to the same lagging replica (one that
	// restarted mid-commit, say) until the wait runs out.
	answered := make([]int, n)
	for s := range answered {
		answered[s] = int(c.rr.Add(1)) - 1
	}
	ask := func(shards []int) error {
		errs := make([]error, len(shards))
		var wg sync.WaitGroup
		for i, s := range shards {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var e error
				vals[s], vers[s], answered[s], e = c.seekShardFrom(ctx, s, perShard[s], answered[s]+1)
				if e != nil {
					errs[i] = fmt.Errorf("shard %d: %w", s, e)
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	var all []int
	for s := range perShard {
		if len(perShard[s]) > 0 {
			all = append(all, s)
		}
	}
	deadline := time.Now().Add(wait)
	err = ask(all)
	for round := 0; err == nil; round++ {
		newest := ""
		for _, s := range all {
			if newerVersion(vers[s], newest) {
				newest = vers[s]
			}
		}
		if !slices.ContainsFunc(all, func(s int) bool { return vers[s] != newest }) {
			version = newest
			break
		}
		if round == 0 {
			firstMixed = true
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("%w: %v", ErrMixedVersions, vers)
			break
		}
		time.Sleep(time.Millisecond)
		err = ask(all)
	}
	res = make([]Result, len(keys))
	for _, s := range all {
		for j, p := range pos[s] {
			if err != nil {
				res[p] = Result{Status: proto.StatusMiss, Failed: true}
			} else {
				res[p] = Result{Status: vals[s][j].Status, Value: vals[s][j].Value}
			}
		}
	}
	return res, version, firstMixed, err
}

// newerVersion orders cube version names by build time, then depend; names
// that do not parse compare as strings.
func newerVersion(a, b string) bool {
	ad, ab, okA := layout.ParseVersion(a)
	bd, bb, okB := layout.ParseVersion(b)
	if !okA || !okB {
		return a > b
	}
	if ab != bb {
		return ab > bb
	}
	return ad > bd
}
