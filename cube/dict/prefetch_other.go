//go:build !amd64

package dict

// prefetch is a no-op where we have no prefetch instruction wired up; the
// two-pass structure of LookupBatch still lets the CPU overlap misses.
func prefetch(*byte) {}
