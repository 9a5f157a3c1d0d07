package idem

import (
	"hash/maphash"
	"sync/atomic"
)

// recentKeys remembers the scope keys whose records this Engine recently
// saw final (it completed them, or replayed them), so that a retry with one
// of them reads first (see ReadFirst). It is a hint, never an answer: a key
// it remembers is read with Get, and whatever Get does not settle (no
// record, or one in flight or free again) goes on to Begin as usual. A
// collision (another key with the same keyed 64-bit digest) costs a Get.
//
// The table is direct-mapped and lock-free: a new key replaces the one in
// its slot, so it remembers about the last recentSlots keys made final.
type recentKeys struct {
	seed  maphash.Seed
	slots [recentSlots]atomic.Uint64
}

const recentSlots = 4096 // 32 KiB per Engine over a ReadFirst store

func newRecentKeys() *recentKeys {
	return &recentKeys{seed: maphash.MakeSeed()}
}

// digest returns the scope's digest, never 0 (an empty slot).
func (r *recentKeys) digest(scope string) uint64 {
	return maphash.String(r.seed, scope) | 1
}

func (r *recentKeys) add(d uint64) { r.slots[d%recentSlots].Store(d) }

func (r *recentKeys) has(d uint64) bool { return r.slots[d%recentSlots].Load() == d }
