// Package prefetch asks the CPU to bring a cache line in ahead of its use,
// so that the misses of many independent reads overlap: the dictionary's
// batched lookups, and the benchmark's measure of what this machine's
// memory allows them.
package prefetch

// Line hints the CPU to bring the cache line at addr into the cache
// (PREFETCHT0). It never faults, so any address is fine.
//
//go:noescape
func Line(addr *byte)
