package memstore

import "syscall"

// sysHugePages advises transparent huge pages for b (it matters where
// /sys/kernel/mm/transparent_hugepage/enabled is "madvise"; "always" needs
// no advice and "never" ignores it).
func sysHugePages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which the syscall
// package does not name.
const madvPopulateWrite = 23

// sysPopulateWrite has the system back b with memory, as writes would, but
// changes none of its bytes (b may be in use): populated, populateFailed
// (ENOMEM, EINTR: page faults back it), or populateUnsupported (Linux
// before 5.14 says EINVAL; a sandbox that filters madvise, EPERM or ENOSYS).
func sysPopulateWrite(b []byte) int {
	if noPopulateWrite.Load() {
		return populateUnsupported
	}
	switch err := syscall.Madvise(b, madvPopulateWrite); err {
	case nil:
		return populated
	case syscall.EINVAL, syscall.EPERM, syscall.ENOSYS:
		return populateUnsupported
	default:
		return populateFailed
	}
}
