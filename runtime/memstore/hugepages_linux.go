package memstore

import "syscall"

// sysHugePages advises transparent huge pages for b (it matters where
// /sys/kernel/mm/transparent_hugepage/enabled is "madvise"; "always" needs
// no advice and "never" ignores it).
func sysHugePages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }
