//go:build !unix

package memstore

// Where memory cannot be mapped, the arena's regions are Go heap memory,
// and the garbage collector frees them once unmapped.

func sysMap(n int) ([]byte, bool) { return make([]byte, n), true }

func sysUnmap([]byte) {}

// sysPopulates: regions are Go heap memory, which make has written already.
const sysPopulates = false

func touch([]byte) {}
