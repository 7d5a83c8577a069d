//go:build !amd64

// Package prefetch asks the CPU to bring a cache line in ahead of its use,
// so that the misses of many independent reads overlap: the dictionary's
// batched lookups, and the benchmark's measure of what this machine's
// memory allows them.
package prefetch

// Line is a no-op where no prefetch instruction is wired up; reading in two
// passes (all addresses first, then all reads) still lets the CPU overlap
// misses.
func Line(*byte) {}
