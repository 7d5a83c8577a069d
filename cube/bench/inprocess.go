package bench

import (
	"math/rand/v2"
	"os"
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
	took  time.Duration // how long a round takes
}

// It opens the file as the server does, verification included: that pass
// touches every record, so the mapping's pages are in place before the
// first round, as they are in the server.
func openInProcess(path string, o Options, serverCPUs []int) (*inProcess, error) {
	d, err := dict.Open(path, dict.Options{InMemory: o.InMemory})
	if err != nil {
		return nil, err
	}
	return &inProcess{d: d, o: o, cpus: serverCPUs, took: time.Second}, nil
}

func (p *inProcess) Close() error { return p.d.Close() }

// measure runs one round of p.took and leaves this process pinned to back
// (nil: every CPU).
func (p *inProcess) measure(back []int) (float64, error) {
	if len(p.cpus) > 0 {
		if err := pinSelf(p.cpus); err != nil {
			return 0, err
		}
	}
	p.round++
	rate := lookupRound(p.d, p.o, p.round, p.took)
	if len(p.cpus) > 0 || len(back) > 0 {
		if err := pinSelf(back); err != nil {
			return 0, err
		}
	}
	return rate, nil
}

// besideMemoryRounds is how many rounds of in-process lookups and of memory
// reads inProcessBesideMemory takes in turn, after a warm-up round of each:
// rounds of a second, or of the lookups' duration if shorter.
const besideMemoryRounds = 4

// besideMemory is in-process lookups measured in turn with what the memory
// allows at the dictionary's size.
type besideMemory struct {
	lookups spread // keys/s
	memory  spread // lines/s (memoryReader)
	// perLine is the median over the rounds of keys/s over the lines/s of
	// the memory round just after: lookups in units of what the memory
	// allowed at that moment.
	perLine float64
}

// inProcessBesideMemory measures in-process lookups on the dictionary at
// path and what this machine's memory allows at its size in the same pages
// (huge pages for the copy, 4 KiB for the mapping): rounds of each in turn,
// so that both see the machine in the same state. On a VM the rate of random
// reads over gigabytes swings with the host (here between 20M and 60M
// lines/s from one tenth of a second to the next), so figures taken minutes
// apart do not compare.
func inProcessBesideMemory(path string, o Options, serverCPUs []int) (besideMemory, error) {
	var b besideMemory
	st, err := os.Stat(path)
	if err != nil {
		return b, err
	}
	p, err := openInProcess(path, o, serverCPUs)
	if err != nil {
		return b, err
	}
	defer p.Close()
	p.took = min(time.Second, o.Duration)
	m, err := newMemoryReader(st.Size(), o.InMemory)
	if err != nil {
		return b, err
	}
	defer m.Close()
	if len(serverCPUs) > 0 {
		if err := pinSelf(serverCPUs); err != nil {
			return b, err
		}
		defer func() { _ = pinSelf(nil) }()
	}
	var keys, lines, per []float64
	for i := range besideMemoryRounds + 1 {
		k, err := p.measure(serverCPUs)
		if err != nil {
			return b, err
		}
		l := m.round(p.took)
		if i == 0 {
			continue // warm-up
		}
		keys, lines, per = append(keys, k), append(lines, l), append(per, k/l)
	}
	b.lookups, b.memory, b.perLine = spreadOfValues(keys), spreadOfValues(lines), spreadOfValues(per).med
	return b, nil
}

// lookupRound runs LookupBatch for took on every GOMAXPROCS and returns
// keys/s. The random keys are drawn before the clock starts (a ring of
// inProcessKeys per goroutine, reused batch after batch), so the rate is of
// lookups and copies alone.
func lookupRound(d batchLooker, o Options, round uint64, took time.Duration) float64 {
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
	deadline := time.Now().Add(took)
	start := time.Now()
	for _, ring := range rings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, o.Batch*(o.ValueSize+8))
			n := int64(0)
			// At least one batch: a goroutine first scheduled after a short round's deadline
			// (on a busy machine) would otherwise make the round's rate 0.
			for off := 0; n == 0 || time.Now().Before(deadline); off = (off + o.Batch) % len(ring) {
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
