package dict

// prefetch hints the CPU to bring the cache line at addr into the cache
// (PREFETCHT0). It never faults, so any address is fine.
//
//go:noescape
func prefetch(addr *byte)
