package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
)

// DefaultValueSize is the bytes per value of a synthetic model (cube model, the demo), as
// Paddle's demos.
const DefaultValueSize = 40

// LoadStats count the outcome of the lookups of a Load.
type LoadStats struct {
	Requests   int64
	Failed     int64 // errors, or keys missing / wrong
	Mixed      int64 // responses combining values of two versions
	FirstMixed int64 // first answers disagreed (reconciled by SeekConsistent)
	FirstErr   string
	// TookOver, with Loader.UntilGen: from the start to the first answer of
	// the run of that generation's answers that ended the lookups.
	TookOver time.Duration
}

// TakeOverFor is how long every answer must be of Loader.UntilGen before
// the lookups end.
const TakeOverFor = 5 * time.Second

// Load runs workers goroutines of batch-key lookups through the cube.conf
// client until ctx ends.
func (c *Cluster) Load(ctx context.Context, workers, batch int) (*LoadStats, error) {
	return Loader{Conf: c.Conf, Keys: c.opts.Keys, ValueSize: c.opts.ValueSize}.Run(ctx, workers, batch)
}

// Loader looks keys of a model written by WriteModel (cube model) up through
// a cube.conf entry, checking every answer: each key is found, its value is
// ValueSize bytes starting with the key, and no response combines values of
// two versions (two generations among the keys patches hold, or among the
// others).
type Loader struct {
	Conf      client.DictConf
	Keys      int // keys 0..Keys-1 exist
	ValueSize int
	// UntilGen, if not 0, ends the lookups early: once, after an answer of
	// another generation, every answer for TakeOverFor has been of
	// generation UntilGen (a rollout to it seen through).
	UntilGen byte
}

// Run runs workers goroutines of batch-key lookups of random keys until ctx
// ends, and counts what it saw.
func (l Loader) Run(ctx context.Context, workers, batch int) (*LoadStats, error) {
	if l.Keys < 1 || workers < 1 || batch < 1 {
		return nil, fmt.Errorf("load: keys %d, workers %d, batch %d: each must be at least 1", l.Keys, workers, batch)
	}
	cl, err := client.New(l.Conf)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		st       LoadStats
		sawOther bool      // an answer of a generation other than UntilGen
		since    time.Time // of the current run of UntilGen's answers
	)
	start := time.Now()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	seed := func(w int) uint64 { return uint64(w*7919 + 1) }
	l.lookups(ctx, workers, batch, seed, func() func([]uint64) {
		return func(keys []uint64) {
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			res, _, firstMixed, err := cl.SeekConsistent(rctx, keys, time.Second)
			cancel()
			failed, mixed := err != nil, false
			// The keys a patch holds (every PatchStride-th) and the others each
			// have one generation in any version: a response holding two among
			// either combines versions.
			var gen [2]byte
			var seen [2]bool
			for i, r := range res {
				if err != nil {
					break
				}
				if err = l.checkValue(keys[i], r); err != nil {
					failed = true
					break
				}
				g, _ := GenOf(keys[i], r.Value)
				class := min(keys[i]%PatchStride, 1)
				if !seen[class] {
					gen[class], seen[class] = g, true
				} else if g != gen[class] {
					mixed = true
				}
			}
			mu.Lock()
			st.Requests++
			if failed {
				st.Failed++
				if st.FirstErr == "" {
					st.FirstErr = err.Error()
				}
			}
			if mixed {
				st.Mixed++
			}
			if firstMixed {
				st.FirstMixed++
			}
			if l.UntilGen != 0 && !failed {
				// The generation of the keys patches do not hold, where the
				// batch has any.
				g := gen[0]
				if seen[1] {
					g = gen[1]
				}
				switch now := time.Now(); {
				case mixed || g != l.UntilGen:
					sawOther, since = true, time.Time{}
				case !sawOther:
				case since.IsZero():
					since = now
				case now.Sub(since) >= TakeOverFor && st.TookOver == 0:
					st.TookOver = since.Sub(start)
					stop()
				}
			}
			mu.Unlock()
		}
	})
	return &st, nil
}

// lookups runs workers goroutines until ctx ends, each drawing batches of batch random keys
// of the model (from its own seed, seed(w)) and handing each to the lookup newLookup made for
// it; it returns once all have stopped.
func (l Loader) lookups(ctx context.Context, workers, batch int, seed func(w int) uint64, newLookup func() func(keys []uint64)) {
	var wg sync.WaitGroup
	for w := range workers {
		lookup := newLookup()
		wg.Go(func() {
			keys := make([]uint64, batch)
			seed := seed(w)
			for ctx.Err() == nil {
				l.randomKeys(keys, &seed)
				lookup(keys)
			}
		})
	}
	wg.Wait()
}

// randomKeys fills keys with keys of the model, drawn from seed.
func (l Loader) randomKeys(keys []uint64, seed *uint64) {
	for i := range keys {
		*seed = *seed*6364136223846793005 + 1442695040888963407
		keys[i] = (*seed >> 33) % uint64(l.Keys)
	}
}

// checkValue says what is wrong with key's result, if anything: every key
// exists and its value is what some generation of WriteModel wrote for it.
func (l Loader) checkValue(key uint64, r client.Result) error {
	if _, ok := GenOf(key, r.Value); !r.Found() || len(r.Value) != l.ValueSize || !ok {
		return fmt.Errorf("key %d: status %d, %d bytes", key, r.Status, len(r.Value))
	}
	return nil
}
