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

// TestArenaPreparesNextRegion: an arena has memory backed ahead of its
// carving one unit (a huge page) at a time, from when less than
// populateAhead of what is backed is left: the current region's second
// unit, then the first unit of the next region, which it hands out next;
// never a whole region ahead, and nothing before it has carved that far.
func TestArenaPreparesNextRegion(t *testing.T) {
	a := &arena{big: map[uintptr]bool{}}
	var held [][]byte
	defer func() {
		for _, b := range held {
			a.free(b)
		}
	}()
	carveTo := func(n int) {
		for a.cur == nil || a.cur.carved < n {
			held = append(held, a.alloc(minBlock))
		}
	}
	// waitIdle waits for the arena's populating goroutine, if any.
	waitIdle := func(what string) {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			a.mu.Lock()
			busy := a.preparing
			a.mu.Unlock()
			if !busy {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still populating after 10 s", what)
			}
		}
	}
	carveTo(populateUnit - populateAhead - minBlock)
	time.Sleep(10 * time.Millisecond)
	a.mu.Lock()
	hasSpare, preparing, mapped, populated := a.spare != nil, a.preparing, a.mapped, a.cur.populated
	a.mu.Unlock() // before t.Fatalf: the deferred frees lock a.mu
	if hasSpare || preparing || mapped != regionSize || populated != populateUnit {
		t.Fatalf("before the trigger: spare %v, preparing %v, %d bytes mapped, %d populated", hasSpare, preparing, mapped, populated)
	}
	carveTo(populateUnit - populateAhead) // the second unit, in the background
	waitIdle("the current region's second unit")
	first := a.cur
	if n := resident(t, first.mem[populateUnit:]); n != populateUnit/pageBytes {
		t.Errorf("second unit: %d of %d pages backed by memory", n, populateUnit/pageBytes)
	}
	if a.spare != nil || a.mapped != regionSize {
		t.Fatalf("a region prepared with half the current one left: spare %v, %d bytes mapped", a.spare != nil, a.mapped)
	}
	carveTo(regionSize - populateAhead) // the next region's first unit
	waitIdle("the next region")
	spare := a.spare
	if spare == nil {
		t.Fatal("no region prepared with populateAhead of the current one left")
	}
	if n := resident(t, spare.mem[:populateUnit]); n != populateUnit/pageBytes {
		t.Errorf("prepared region: %d of %d pages of its first unit backed by memory", n, populateUnit/pageBytes)
	}
	if n := resident(t, spare.mem[populateUnit:]); n != 0 {
		t.Errorf("prepared region: %d pages of its second unit backed already", n)
	}
	if a.mapped != 2*regionSize {
		t.Errorf("%d bytes mapped, want two regions", a.mapped)
	}
	for a.cur == first {
		held = append(held, a.alloc(minBlock))
	}
	if a.cur != spare {
		t.Error("the next region is not the prepared one")
	}
}

// TestArenaKeepsRegionWhilePopulating: a region whose unit is being
// populated is not unmapped when its last block is freed, but once the
// populating is done (the system must never be asked to populate memory
// that is no longer the region's).
func TestArenaKeepsRegionWhilePopulating(t *testing.T) {
	a := &arena{big: map[uintptr]bool{}}
	b := a.alloc(minBlock)
	r := a.cur
	r.carved = regionSize // full: the next allocation takes another region
	next := a.alloc(minBlock)
	defer a.free(next)
	if a.cur == r {
		t.Fatal("the full region is still the current one")
	}
	a.mu.Lock()
	a.preparing, r.populating = true, true // as alloc starts populateUnit
	a.mu.Unlock()
	a.free(b)
	a.mu.Lock()
	kept, releaseLater := a.regionOf(r.base) == r, r.releaseLater
	a.mu.Unlock() // before t.Fatalf: the deferred free locks a.mu
	if !kept || !releaseLater {
		t.Fatalf("a region being populated was released (kept %v, releaseLater %v)", kept, releaseLater)
	}
	a.populateUnit(r, populateUnit) // done: released now
	a.mu.Lock()
	populating, releaseLater, preparing, spare, kept := r.populating, r.releaseLater, a.preparing, a.spare == r, a.regionOf(r.base) == r
	a.mu.Unlock()
	if populating || releaseLater || preparing {
		t.Fatalf("after populating: populating %v, releaseLater %v, preparing %v", populating, releaseLater, preparing)
	}
	if !spare && kept {
		t.Error("the region was neither made spare nor unmapped once populated")
	}
}

// TestArenaPreparesWholeRegionWithoutPopulateWrite: without
// MADV_POPULATE_WRITE (which the arena learns when it first asks for it),
// the arena populates nothing of the current region (its blocks are in
// use, and a write per page could undo a request's); once it is half
// carved, it maps the next region and populates the whole of it before
// handing it out.
func TestArenaPreparesWholeRegionWithoutPopulateWrite(t *testing.T) {
	withoutPopulateWrite(t)
	a := &arena{big: map[uintptr]bool{}}
	var held [][]byte
	defer func() {
		for _, b := range held {
			a.free(b)
		}
	}()
	carveTo := func(n int) {
		for a.cur == nil || a.cur.carved < n {
			held = append(held, a.alloc(minBlock))
		}
	}
	carveTo(regionSize/2 - minBlock)
	waitPopulated(t, a) // the current region's second unit: refused
	a.mu.Lock()
	spare, learned := a.spare != nil, a.noPopulateWrite
	a.mu.Unlock()
	if spare || !learned {
		t.Fatalf("before half the region is carved: spare %v, MADV_POPULATE_WRITE known to be missing %v", spare, learned)
	}
	carveTo(regionSize / 2)
	waitPopulated(t, a)
	first := a.cur
	if a.spare == nil {
		t.Fatal("no region prepared with half the current one carved")
	}
	if n := resident(t, a.spare.mem); n != regionSize/pageBytes {
		t.Errorf("prepared region: %d of %d pages backed by memory", n, regionSize/pageBytes)
	}
	spareRegion := a.spare
	for a.cur == first {
		held = append(held, a.alloc(minBlock))
	}
	if a.cur != spareRegion {
		t.Error("the next region is not the prepared one")
	}
}
