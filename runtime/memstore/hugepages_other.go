//go:build !linux

package memstore

func sysHugePages([]byte) {}

// sysPopulate has the system back b, freshly mapped, with memory: a write
// per page.
func sysPopulate(b []byte) { touch(b) }
