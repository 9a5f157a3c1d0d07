package memstore

import (
	"testing"
	"unsafe"
)

// TestSlotSize: a record's slot is what every record costs beside its key
// and response; keep it at 96 bytes.
func TestSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(slot{}); n != 96 {
		t.Fatalf("slot is %d bytes, want 96", n)
	}
}
