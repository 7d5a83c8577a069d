package bench

import (
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/anonmem"
	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/prefetch"
)

// memoryReads is how many random line offsets a memoryReader draws; a round
// goes through them in turn, starting again from the first.
const memoryReads = 1 << 22

// memoryReader measures what this machine's memory allows a lookup path over
// a working set of one size: how many random 64-byte lines per second one
// CPU reads from that many bytes of anonymous memory, in huge pages (as the
// huge-page copy has them) or in 4 KiB pages (as the file mapping's page
// cache has them). It reads them as LookupBatch reads a group's home slots:
// dict.BatchGroup lines prefetched, then read. No lookup reads fewer than
// one line at random, so none is faster here than this rate, and the ratio
// of two sizes' rates bounds how flat lookups can be between them.
type memoryReader struct {
	mem  []byte
	offs []int
	next int // where in offs the next round starts
}

// newMemoryReader maps size bytes as the dictionary's huge-page copy maps
// them (anonmem), in huge pages or not, touches every page and draws the
// offsets.
func newMemoryReader(size int64, huge bool) (*memoryReader, error) {
	mem, err := anonmem.Map(int(size), huge)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(mem); i += 4 << 10 { // where the kernel did not populate them
		mem[i] = byte(i >> 12)
	}
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	offs := make([]int, memoryReads)
	for i := range offs {
		offs[i] = rng.IntN(len(mem)/64) * 64
	}
	return &memoryReader{mem: mem, offs: offs}, nil
}

// round reads lines for d on the calling goroutine and returns lines/s; the
// caller pins the thread.
func (m *memoryReader) round(d time.Duration) float64 {
	var sum byte
	lines := 0
	start := time.Now()
	deadline := start.Add(d)
	for lines == 0 || time.Now().Before(deadline) { // at least once, so a rate is never 0
		for range 64 { // groups between clock reads
			if m.next+dict.BatchGroup > len(m.offs) {
				m.next = 0
			}
			group := m.offs[m.next : m.next+dict.BatchGroup]
			m.next += dict.BatchGroup
			for _, o := range group {
				prefetch.Line(&m.mem[o])
			}
			for _, o := range group {
				sum += m.mem[o]
			}
			lines += len(group)
		}
	}
	runtime.KeepAlive(sum) // so that no read is left out
	return float64(lines) / time.Since(start).Seconds()
}

func (m *memoryReader) Close() error { return anonmem.Unmap(m.mem) }
