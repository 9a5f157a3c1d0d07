//go:build !amd64

package memstore

import "unsafe"

func prefetch(unsafe.Pointer) {}
