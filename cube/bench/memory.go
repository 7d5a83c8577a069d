package bench

import (
	"math/rand/v2"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/prefetch"
)

// memoryReads is how many random lines a round of memoryReadRate reads.
const memoryReads = 1 << 22

// memoryReadRate measures what this machine's memory allows a lookup path
// over a working set of size bytes: how many random 64-byte lines per second
// one CPU reads from size bytes of anonymous memory, in huge pages (the
// huge-page copy) or in 4 KiB pages (as the file mapping's page cache has
// them). It reads them as LookupBatch reads a group's home slots:
// dict.BatchGroup lines prefetched, then read. No lookup reads fewer than
// one line at random, so none is faster here than this rate, and the ratio
// of two sizes' rates bounds how flat lookups can be between them. The
// rate is the median of three rounds; the caller pins the thread.
func memoryReadRate(size int64, huge bool) (float64, error) {
	const page = 2 << 20
	mapped := int((size + page - 1) &^ (page - 1))
	mem, err := unix.Mmap(-1, 0, mapped, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Munmap(mem) }()
	advice := unix.MADV_NOHUGEPAGE
	if huge {
		advice = unix.MADV_HUGEPAGE
	}
	_ = unix.Madvise(mem, advice) // where THP is off, both are 4 KiB pages
	for i := 0; i < len(mem); i += 4 << 10 {
		mem[i] = byte(i >> 12)
	}
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	offs := make([]int, memoryReads)
	for i := range offs {
		offs[i] = rng.IntN(len(mem)/64) * 64
	}
	rates := make([]float64, 3)
	for r := range rates {
		var sum byte
		start := time.Now()
		for g := 0; g < len(offs); g += dict.BatchGroup {
			group := offs[g:min(g+dict.BatchGroup, len(offs))]
			for _, o := range group {
				prefetch.Line(&mem[o])
			}
			for _, o := range group {
				sum += mem[o]
			}
		}
		rates[r] = float64(len(offs)) / time.Since(start).Seconds()
		runtime.KeepAlive(sum) // so that no read is left out
	}
	return spreadOfValues(rates).med, nil
}
