package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
)

// worker issues one request of keys and checks the values; it returns the
// number of wrong values.
type worker func(conn int) (func(keys []uint64) (int, error), func(), error)

func cubeWorker(addr string, o Options) worker {
	return func(int) (func([]uint64) (int, error), func(), error) {
		c, err := client.Dial(addr, time.Second)
		if err != nil {
			return nil, nil, err
		}
		return func(keys []uint64) (int, error) {
			vals, _, err := c.Seek(keys, false, time.Now().Add(10*time.Second))
			if err != nil {
				return 0, err
			}
			bad := 0
			for i, v := range vals {
				if v.Status != 0 || !valueOK(v.Value, keys[i], o.ValueSize) {
					bad++
				}
			}
			return bad, nil
		}, func() { c.Close() }, nil
	}
}

// mgetConn is a peer's connection: a multi-key get, each value handed to fn by index.
type mgetConn interface {
	mget(keys []uint64, fn func(i int, v []byte)) error
	Close() error
}

// peerWorker drives a peer (Redis MGET, memcached multi-get) over connections dial opens,
// counting the values that are not what the key holds.
func peerWorker[C mgetConn](dial func() (C, error), o Options) worker {
	return func(int) (func([]uint64) (int, error), func(), error) {
		c, err := dial()
		if err != nil {
			return nil, nil, err
		}
		return func(keys []uint64) (int, error) {
			bad := 0
			err := c.mget(keys, func(i int, v []byte) {
				if !valueOK(v, keys[i], o.ValueSize) {
					bad++
				}
			})
			return bad, err
		}, func() { c.Close() }, nil
	}
}

// drive runs o.Conns connections against one server for o.Duration.
func drive(ctx context.Context, o Options, name string, pid int, newWorker worker) (Result, error) {
	res := Result{Name: name, ServerPID: pid}
	type connStats struct {
		lat              []time.Duration
		reqs, keys, errs int64
		bad              int64
	}
	stats := make([]connStats, o.Conns)
	workers := make([]func([]uint64) (int, error), o.Conns)
	for i := range workers {
		wk, closeFn, err := newWorker(i)
		if err != nil {
			return res, fmt.Errorf("%s: connect: %w", name, err)
		}
		defer closeFn()
		workers[i] = wk
	}
	// Warm up (page in the dictionary, grow buffers) for a tenth of the run.
	warm := min(o.Duration/10, 2*time.Second)
	runFor(ctx, workers, o, warm, nil)
	cpu0, self0, err := cpuTimes(pid)
	if err != nil {
		return res, err
	}
	start := time.Now()
	runFor(ctx, workers, o, o.Duration, func(i int, lat time.Duration, keys int, bad int, err error) {
		s := &stats[i]
		if err != nil {
			s.errs++
			return
		}
		s.reqs++
		s.keys += int64(keys)
		s.bad += int64(bad)
		s.lat = append(s.lat, lat)
	})
	res.Elapsed = time.Since(start)
	cpu1, self1, err := cpuTimes(pid)
	if err != nil {
		return res, err
	}
	res.CPUSeconds = cpu1 - cpu0
	res.ClientCPUSeconds = self1 - self0
	var all []time.Duration
	for _, s := range stats {
		res.Requests += s.reqs
		res.Keys += s.keys
		res.Errors += s.errs
		res.Mismatches += s.bad
		all = append(all, s.lat...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		res.P50 = all[len(all)*50/100]
		res.P99 = all[min(len(all)-1, len(all)*99/100)]
	}
	return res, nil
}

// cpuTimes returns the CPU seconds the server pid and this process (the load generator) have
// used so far.
func cpuTimes(pid int) (server, self float64, err error) {
	if server, err = processCPU(pid); err != nil {
		return 0, 0, err
	}
	self, err = processCPU(os.Getpid())
	return server, self, err
}

func runFor(ctx context.Context, workers []func([]uint64) (int, error), o Options, d time.Duration,
	record func(i int, lat time.Duration, keys, bad int, err error)) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, wk := range workers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(d)))
			keys := make([]uint64, o.Batch)
			errs := 0
			for ctx.Err() == nil && time.Now().Before(deadline) && errs < 10 {
				for j := range keys {
					keys[j] = rng.Uint64N(uint64(o.Keys))
				}
				t := time.Now()
				bad, err := wk(keys)
				if err != nil {
					errs++
				}
				if record != nil {
					record(i, time.Since(t), len(keys), bad, err)
				}
			}
		}(i)
	}
	wg.Wait()
}
