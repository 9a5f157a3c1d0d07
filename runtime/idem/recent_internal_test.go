package idem

import (
	"fmt"
	"testing"
	"time"
)

// The table uses all its slots: of the last recentSlots keys made final,
// most are remembered (a direct-mapped table keeps 1-1/e of them, ~63%).
func TestRecentKeysCapacity(t *testing.T) {
	r := newRecentKeys()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	used := map[uint64]bool{}
	var ds []uint64
	for i := range 100_000 {
		d := r.digest(fmt.Sprint("scope-", i))
		if d == 0 {
			t.Fatal("a digest of 0 is an empty slot")
		}
		used[d%recentSlots] = true
		ds = append(ds, d)
		r.add(d, now.Add(time.Minute))
	}
	if len(used) < recentSlots*99/100 {
		t.Errorf("%d slots of %d used", len(used), recentSlots)
	}
	kept := 0
	for _, d := range ds[len(ds)-recentSlots:] {
		if r.has(d, clock) {
			kept++
		}
	}
	if kept < recentSlots/2 {
		t.Errorf("%d of the last %d keys remembered", kept, recentSlots)
	}
	if r.has(ds[len(ds)-1], func() time.Time { return now.Add(time.Minute) }) {
		t.Error("remembered past its expiry")
	}
	// A later expiry extends; an earlier one does not shorten.
	d := ds[len(ds)-1]
	r.add(d, now.Add(time.Hour))
	r.add(d, now.Add(time.Second))
	if !r.has(d, func() time.Time { return now.Add(30 * time.Minute) }) {
		t.Error("the later expiry was lost")
	}
}
