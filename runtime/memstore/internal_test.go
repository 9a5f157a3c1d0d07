package memstore

import (
	"math"
	"math/rand/v2"
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

// TestHeapOrder: the expiry heap keeps its order through pushes in and out
// of time order (the first skip their parent), removals and fixes, across
// pages.
func TestHeapOrder(t *testing.T) {
	sh := &shard{head: none, tail: none, cur: none, minExp: math.MaxInt64}
	rng := rand.New(rand.NewPCG(3, 4))
	var live []int32
	check := func(step int) {
		for j := 1; j < sh.nheap; j++ {
			if sh.hp(j).exp < sh.hp((j-1)/2).exp {
				t.Fatalf("step %d: entry %d expires before its parent", step, j)
			}
		}
		if sh.nheap > 0 && sh.minExp != sh.hp(0).exp || sh.nheap == 0 && sh.minExp != math.MaxInt64 {
			t.Fatalf("step %d: minExp %d is not the root's expiry", step, sh.minExp)
		}
		for j := 0; j < sh.nheap; j++ {
			if int(sh.at(sh.hp(j).slot).heapIdx) != j {
				t.Fatalf("step %d: slot of entry %d does not point back", step, j)
			}
		}
	}
	exp := int64(0)
	for step := 0; step < 50000; step++ {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0:
			i := sh.nslots
			if int(i)/slotsPerPage == len(sh.pages) {
				sh.pages = append(sh.pages, new(slotPage))
			}
			sh.nslots++
			if rng.IntN(3) == 0 {
				exp -= int64(rng.IntN(1000)) // out of time order
			} else {
				exp += int64(rng.IntN(10))
			}
			sh.at(i).exp = exp
			sh.heapPush(i, exp)
			live = append(live, i)
		case op < 8 && len(live) > 1:
			k := rng.IntN(len(live))
			sh.heapRemove(live[k])
			live = append(live[:k], live[k+1:]...)
		default:
			i := live[rng.IntN(len(live))]
			if rng.IntN(2) == 0 {
				sh.at(i).exp = exp + int64(rng.IntN(20)) // past every entry pushed so far
			} else {
				sh.at(i).exp += int64(rng.IntN(2000)) - 1000
			}
			sh.heapFix(i)
		}
		check(step)
	}
}
