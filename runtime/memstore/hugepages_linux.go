package memstore

import "syscall"

// sysHugePages advises transparent huge pages for b (it matters where
// /sys/kernel/mm/transparent_hugepage/enabled is "madvise"; "always" needs
// no advice and "never" ignores it).
func sysHugePages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which the syscall
// package does not name.
const madvPopulateWrite = 23

// sysPopulate has the system back b, freshly mapped, with memory, as writes
// would (one call; a write per page on kernels before 5.14).
func sysPopulate(b []byte) {
	if syscall.Madvise(b, madvPopulateWrite) != nil {
		touch(b)
	}
}
