package idem

import (
	"encoding/binary"
	"hash/maphash"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// fpCache memoizes canonical fingerprints, so that a retry (a duplicate
// whose bytes are those of the request before it, the common case) is not
// canonicalized again: canonicalizing a 1 KB JSON body costs a few
// microseconds, hashing its bytes a few tens of nanoseconds.
//
// An entry is found by a 128-bit digest of everything fingerprint.Hasher.Sum
// reads (the policy, which fixes the operation and the hasher's options; the
// method, the raw query, the Content-Type, the values of the policy's
// fingerprinted headers, the body), made of two 64-bit maphash digests with
// independent random seeds of this process. The cache only ever answers
// with the fingerprint Sum computed for an input with the same digest;
// a collision of both digests (about 2^-128 for two given inputs, with
// seeds an attacker does not know) would give a request the fingerprint of
// another of the same policy, and could at worst answer a principal with
// its own earlier response under its own key.
//
// The table is direct-mapped (a new entry replaces the one in its slot) and
// lock-free: each slot is a seqlock of atomic words, so readers never block
// and a reader that overlaps a writer just misses.
type fpCache struct {
	seed1, seed2 maphash.Seed
	slots        [fpCacheSlots]fpSlot
}

const fpCacheSlots = 1024 // 72 KiB per Engine

type fpSlot struct {
	seq atomic.Uint64 // odd while written
	// h1, h2, the policy id, then the fingerprint's 33 bytes in 5 words.
	w [8]atomic.Uint64
}

const fpWords = (len(Fingerprint{}) + 7) / 8

func newFPCache() *fpCache {
	return &fpCache{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed()}
}

// policyIDs numbers compiled policies for the cache.
var policyIDs atomic.Uint64

// sum returns p's fingerprint of in, from the cache when it holds it.
func (c *fpCache) sum(p *Policy, in *fingerprint.Input) Fingerprint {
	h1, h2 := c.digest(c.seed1, p, in), c.digest(c.seed2, p, in)
	s := &c.slots[h1%fpCacheSlots]
	if fp, ok := s.get(h1, h2, p.id); ok {
		return fp
	}
	fp := p.hasher.Sum(in)
	s.put(h1, h2, p.id, &fp)
	return fp
}

func (c *fpCache) digest(seed maphash.Seed, p *Policy, in *fingerprint.Input) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var n [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		_, _ = h.Write(n[:])
	}
	str := func(s string) {
		num(uint64(len(s)))
		_, _ = h.WriteString(s)
	}
	num(p.id)
	str(in.Method)
	str(in.RawQuery)
	str(in.ContentType)
	for _, name := range p.fpHeaders {
		vals := in.Header[name]
		num(uint64(len(vals)))
		for _, v := range vals {
			str(v)
		}
	}
	num(uint64(len(in.Body)))
	num(maphash.Bytes(seed, in.Body)) // in one pass: faster than Write for a large body
	return h.Sum64()
}

func (s *fpSlot) get(h1, h2, id uint64) (Fingerprint, bool) {
	var fp Fingerprint
	seq := s.seq.Load()
	if seq&1 != 0 || s.w[0].Load() != h1 || s.w[1].Load() != h2 || s.w[2].Load() != id {
		return fp, false
	}
	var words [fpWords]uint64
	for i := range words {
		words[i] = s.w[3+i].Load()
	}
	if s.seq.Load() != seq {
		return fp, false // written meanwhile
	}
	var b [fpWords * 8]byte
	for i, w := range words {
		binary.LittleEndian.PutUint64(b[i*8:], w)
	}
	copy(fp[:], b[:])
	return fp, true
}

func (s *fpSlot) put(h1, h2, id uint64, fp *Fingerprint) {
	seq := s.seq.Load()
	if seq&1 != 0 || !s.seq.CompareAndSwap(seq, seq+1) {
		return // another writer has the slot: the cache is best effort
	}
	var b [fpWords * 8]byte
	copy(b[:], fp[:])
	s.w[0].Store(h1)
	s.w[1].Store(h2)
	s.w[2].Store(id)
	for i := 0; i < fpWords; i++ {
		s.w[3+i].Store(binary.LittleEndian.Uint64(b[i*8:]))
	}
	s.seq.Store(seq + 2)
}
