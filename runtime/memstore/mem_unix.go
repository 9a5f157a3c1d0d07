//go:build unix

package memstore

import "syscall"

// sysMap maps n bytes of anonymous memory (zeroed), or reports that the
// system refused.
func sysMap(n int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	return b, err == nil
}

// sysPopulates: sysMap maps memory that the system backs on first touch,
// so the arena prepares its next region ahead (arena.prepare); where sysMap
// falls back to the Go heap (mem_other.go), make has touched it already.
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
