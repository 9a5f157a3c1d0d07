package idem

import (
	"testing"
	"unsafe"
)

// The recorder is part of every Call (and of the handout Engine.Handler
// allocates per request): it keeps to 128 bytes, so what holds it keeps
// its size class.
func TestRecorderSize(t *testing.T) {
	if n := unsafe.Sizeof(recorder{}); n > 128 {
		t.Errorf("recorder is %d bytes, more than 128", n)
	}
}
