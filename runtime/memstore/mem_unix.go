//go:build unix

package memstore

import (
	"sync/atomic"
	"syscall"
	"unsafe"
)

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

// touch has the system back every page of b with memory by a write to each
// (b fresh, zeroed memory, not yet handed out). The write adds 0 to the
// page's first word, atomically: were a block of b in use after all, it
// would change nothing that another goroutine wrote, where storing a zero
// would.
func touch(b []byte) {
	for i := 0; i+4 <= len(b); i += pageBytes {
		atomic.AddUint32((*uint32)(unsafe.Pointer(&b[i])), 0)
	}
}

// sysUnmap unmaps b, which sysMap returned (the same slice).
func sysUnmap(b []byte) { _ = syscall.Munmap(b) }
