//go:build !linux

package memstore

func sysHugePages([]byte) {}

// sysPopulateWrite: only Linux has MADV_POPULATE_WRITE; elsewhere the arena
// populates by a write per page (touch), and only memory not yet in use.
func sysPopulateWrite([]byte) int { return populateUnsupported }
