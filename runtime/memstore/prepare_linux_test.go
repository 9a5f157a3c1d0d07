package memstore

import (
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// resident returns how many of b's 4 KiB pages are backed by memory
// (mincore).
func resident(t *testing.T, b []byte) int {
	vec := make([]byte, len(b)/pageBytes)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestArenaPreparesNextRegion: an arena that has carved half its region
// has the next one mapped and backed by memory before it needs it, and
// hands it out next; one that has not grown that far maps nothing ahead.
func TestArenaPreparesNextRegion(t *testing.T) {
	a := &arena{big: map[uintptr]bool{}}
	var held [][]byte
	defer func() {
		for _, b := range held {
			a.free(b)
		}
	}()
	for a.cur == nil || a.cur.carved < regionSize/2-minBlock {
		held = append(held, a.alloc(minBlock))
	}
	time.Sleep(10 * time.Millisecond)
	a.mu.Lock()
	if a.spare != nil || a.preparing || a.mapped != regionSize {
		t.Fatalf("below half a region: spare %v, preparing %v, %d bytes mapped", a.spare != nil, a.preparing, a.mapped)
	}
	a.mu.Unlock()
	held = append(held, a.alloc(minBlock)) // half carved
	var spare *region
	for deadline := time.Now().Add(10 * time.Second); spare == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no region prepared 10 s after half the current one was carved")
		}
		a.mu.Lock()
		spare = a.spare
		a.mu.Unlock()
	}
	if n := resident(t, spare.mem); n != regionSize/pageBytes {
		t.Errorf("prepared region: %d of %d pages backed by memory", n, regionSize/pageBytes)
	}
	if a.mapped != 2*regionSize {
		t.Errorf("%d bytes mapped, want two regions", a.mapped)
	}
	first := a.cur
	for a.cur == first {
		held = append(held, a.alloc(minBlock))
	}
	if a.cur != spare {
		t.Error("the next region is not the prepared one")
	}
}
