package bench

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
)

// inProcess measures batched lookups (LookupBatch, copying every value, as
// the server does) on the dictionary loaded as the server loads it: the
// ceiling any RPC path can reach. With server CPUs given, each round runs
// pinned to them with one goroutine per CPU (what the server has); without,
// on every CPU with GOMAXPROCS goroutines.
type inProcess struct {
	d     *dict.Dict
	o     Options
	cpus  []int // the server CPUs; nil: unpinned
	round uint64
}

// It opens the file as the server does, verification included: that pass
// touches every record, so the mapping's pages are in place before the
// first round, as they are in the server.
func openInProcess(path string, o Options, serverCPUs []int) (*inProcess, error) {
	d, err := dict.Open(path, dict.Options{InMemory: o.InMemory})
	if err != nil {
		return nil, err
	}
	return &inProcess{d: d, o: o, cpus: serverCPUs}, nil
}

func (p *inProcess) Close() error { return p.d.Close() }

// measure runs one one-second round and leaves this process pinned to back
// (nil: every CPU).
func (p *inProcess) measure(back []int) (float64, error) {
	if len(p.cpus) > 0 {
		if err := pinSelf(p.cpus); err != nil {
			return 0, err
		}
	}
	p.round++
	rate := lookupRound(p.d, p.o, p.round)
	if len(p.cpus) > 0 || len(back) > 0 {
		if err := pinSelf(back); err != nil {
			return 0, err
		}
	}
	return rate, nil
}

// inProcessRate is the median of three rounds after a warm-up round.
func inProcessRate(path string, o Options, serverCPUs []int) (float64, error) {
	p, err := openInProcess(path, o, serverCPUs)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	rates := make([]float64, 4)
	for i := range rates {
		if rates[i], err = p.measure(nil); err != nil {
			return 0, err
		}
	}
	return spreadOfValues(rates[1:]).med, nil
}

// lookupRound runs LookupBatch for one second on every GOMAXPROCS and returns
// keys/s. The random keys are drawn before the clock starts (a ring of
// inProcessKeys per goroutine, reused batch after batch), so the rate is of
// lookups and copies alone.
func lookupRound(d batchLooker, o Options, round uint64) float64 {
	procs := runtime.GOMAXPROCS(0)
	rings := make([][]uint64, procs)
	for g := range rings {
		rng := rand.New(rand.NewPCG(uint64(g), round))
		rings[g] = make([]uint64, max(inProcessKeys/o.Batch, 1)*o.Batch)
		for i := range rings[g] {
			rings[g][i] = rng.Uint64N(uint64(o.Keys))
		}
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	start := time.Now()
	for _, ring := range rings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, o.Batch*(o.ValueSize+8))
			n := int64(0)
			for off := 0; time.Now().Before(deadline); off = (off + o.Batch) % len(ring) {
				buf = buf[:0]
				d.LookupBatch(ring[off:off+o.Batch], func(_ int, v []byte, _ bool) { buf = append(buf, v...) })
				n += int64(o.Batch)
			}
			total.Add(n)
		}()
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// batchLooker is a dictionary, or a stack of them.
type batchLooker interface {
	LookupBatch(keys []uint64, fn func(i int, value []byte, ok bool))
}

// inProcessKeys is about the keys in each in-process ring: 8 MiB of keys,
// far more distinct keys than a cache holds lines.
const inProcessKeys = 1 << 20
