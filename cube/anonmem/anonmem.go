// Package anonmem maps anonymous memory in huge pages or in base pages,
// faulted in: the dictionary's in-memory copy, and the benchmark's measure
// of what memory of the same kind allows a lookup.
package anonmem

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// HugePage is the transparent huge page size on x86-64 and arm64 (4 KiB
// base pages).
const HugePage = 2 << 20

// Map maps size bytes of private anonymous memory, read-write, rounded up to
// whole huge pages (and so is the returned slice), advised to use huge pages
// (huge) or not to, and faulted in with one call where the kernel has
// MADV_POPULATE_WRITE (Linux 5.14+; elsewhere pages fault in on first use).
// Where transparent huge pages are off, both are base pages.
//
// It maps with package syscall, as the dictionary maps its files, so that
// syscall.Munmap (Unmap) releases either: x/sys/unix keeps a registry of
// its own mappings and refuses to unmap the others.
func Map(size int, huge bool) ([]byte, error) {
	mapped := (size + HugePage - 1) &^ (HugePage - 1)
	mem, err := syscall.Mmap(-1, 0, mapped, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, err
	}
	advice := syscall.MADV_NOHUGEPAGE
	if huge {
		advice = syscall.MADV_HUGEPAGE
	}
	_ = syscall.Madvise(mem, advice) // ignored where THP is off
	_ = syscall.Madvise(mem, unix.MADV_POPULATE_WRITE)
	return mem, nil
}

// Unmap releases memory from Map.
func Unmap(mem []byte) error { return syscall.Munmap(mem) }
