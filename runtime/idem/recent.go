package idem

import (
	"hash/maphash"
	"sync/atomic"
	"time"
)

// recentKeys remembers the scope keys whose records this Engine recently
// saw final (it completed them, or replayed them), with about when those
// records expire, so that a retry with one of them reads first (see
// ReadFirst). It is a hint, never an answer: a key it remembers is read
// with Get, and whatever Get does not settle (no record, or one in flight
// or free again) goes on to Begin as usual. A wrong hint costs at most one
// round trip: a collision (another key with the same keyed 64-bit digest),
// an expiry on a clock other than the store's, or a reader that sees a slot
// half rewritten (its digest and expiry are two words) reads first in vain,
// or claims a replay with Begin.
//
// The table is direct-mapped and lock-free: a new key replaces the one in
// its slot, so it remembers about the last recentSlots keys made final.
type recentKeys struct {
	seed  maphash.Seed
	slots [recentSlots]recentSlot
}

type recentSlot struct {
	digest  atomic.Uint64
	expires atomic.Int64 // Unix ns on the Engine's clock
}

const recentSlots = 4096 // 64 KiB per Engine over a ReadFirst store

func newRecentKeys() *recentKeys {
	return &recentKeys{seed: maphash.MakeSeed()}
}

// digest returns the scope's digest. Its top bit is set, so that it is
// never 0 (an empty slot); its low bits, which place it, are the hash's.
func (r *recentKeys) digest(scope string) uint64 {
	return maphash.String(r.seed, scope) | 1<<63
}

// add remembers digest d until expires (unless it is already remembered
// until then: a hot key's replays do not write its slot again).
func (r *recentKeys) add(d uint64, expires time.Time) {
	s := &r.slots[d%recentSlots]
	exp := expires.UnixNano()
	if s.digest.Load() == d && s.expires.Load() >= exp {
		return
	}
	s.expires.Store(exp)
	s.digest.Store(d)
}

// has reports whether d is remembered with an expiry after now.
func (r *recentKeys) has(d uint64, now func() time.Time) bool {
	s := &r.slots[d%recentSlots]
	return s.digest.Load() == d && s.expires.Load() > now().UnixNano()
}
