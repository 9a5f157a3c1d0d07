//go:build unix

package memstore

import "syscall"

// sysMap maps n bytes of anonymous memory (zeroed), or reports that the
// system refused.
func sysMap(n int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	return b, err == nil
}

// sysPopulates: sysMap maps memory that the system backs on first touch
// (see arena.prepare).
const sysPopulates = true

// touch writes a zero to every page of b (fresh, zeroed memory: nothing
// changes but that the system backs the pages).
func touch(b []byte) {
	for i := 0; i < len(b); i += pageBytes {
		b[i] = 0
	}
}

// sysUnmap unmaps b, which sysMap returned (the same slice).
func sysUnmap(b []byte) { _ = syscall.Munmap(b) }
