package memstore

import "unsafe"

// prefetch asks the processor to bring the cache line at p in, for
// writing, without waiting for it (a hint: it never faults).
//
//go:noescape
func prefetch(p unsafe.Pointer)
