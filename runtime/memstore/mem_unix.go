//go:build unix

package memstore

import "syscall"

// sysMap maps n bytes of anonymous memory (zeroed), or reports that the
// system refused.
func sysMap(n int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	return b, err == nil
}

// sysUnmap unmaps b, which sysMap returned (the same slice).
func sysUnmap(b []byte) { _ = syscall.Munmap(b) }
