package idem

import (
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// fpCache memoizes canonical fingerprints, so that a retry (a duplicate
// whose bytes are those of the request before it, the common case) is not
// canonicalized again: canonicalizing a 1 KB JSON body costs a few
// microseconds, hashing its bytes a few tens of nanoseconds.
//
// An entry is found by a 64-bit maphash digest, with a random seed of this
// process, of everything fingerprint.Hasher.Sum reads (the policy, which
// fixes the operation and the hasher's options; the method, the path, the
// raw query, the Content-Type, the values of the policy's fingerprinted headers, the
// body), and by the body's length. The cache only ever answers with the
// fingerprint Sum computed for an input with the same digest, length and
// policy. A collision (about 2^-64 for two given inputs of one length, with
// a seed an attacker does not know) would give a request the fingerprint of
// another request of the same operation; since records are scoped by
// principal and key, the consequence stays inside the requester's own key:
// a spurious conflict, or a replay of the response to its own first request.
//
// The table is direct-mapped (a new entry replaces the one in its slot) and
// lock-free: each slot is a seqlock of atomic words, so readers never block
// and a reader that overlaps a writer just misses.
//
// A cache belongs to one Engine, and so to one fingerprint version (its
// Options.FingerprintVersion, in its process-local variant over a
// LocalReader store, fingerprint.Local, for a keyed request): the version
// is not part of the digest, but a keyless request's key is told from a
// keyed one's when they get different versions (keylessKey). It holds the fingerprints under the policy's current settings only: those
// under its compatible settings (Spec.CompatibleFingerprints), which may read headers the
// digest does not cover, are computed when a record differs and never
// cached (Call.sameCompatible).
//
// Over a LocalReader store the key (digest, length, policy, folded into one
// word: tagKey) also tags the records the Engine writes, with the cache's
// domain, a name of its seed (recordTag), so that a request whose entry
// left the cache is recognized by its record when it has the bytes of the
// request that made it (Call.readLocal). A tag matches only under the same
// domain, so a record of another Engine or process is never matched by its
// digest. Under one domain the tag is that one 64-bit word: two requests
// under one key match by accident with about 2^-64 chance per pair,
// whatever their lengths (tagKey folds the length in, so unlike the
// cache's key it does not tell inputs of different lengths apart for
// certain); the consequence is the cache's (the record is the requester's
// key's: a replay of the response to its own first request). A record claimed with the request's fingerprint
// under a compatible setting is not tagged: that fingerprint may depend on
// headers the digest does not cover.
type fpCache struct {
	seed    maphash.Seed
	domain  uint64 // names seed in records (recordTag): unique in the process, random across processes
	version int    // the fingerprint version computed (fingerprint.Local(v) over a LocalReader)
	// keyless is the version computed for a request without a key: the
	// SHA-256 version (Options.FingerprintVersion) always. Such a request
	// names its record by its fingerprint, across the callers of a scope,
	// which a process-local fingerprint is not trusted with (see the
	// fingerprint package's "Process-local fingerprints"). When it is not
	// version, a keyless request's key carries keylessKey in its policy
	// word, so that the cache never answers one variant for the other.
	keyless int
	slots   [fpCacheSlots]fpSlot
}

// keylessKey marks the policy word of a keyless request's fpKey when the
// cache computes another version for it (fpCache.keyless): policy ids
// count up from 1 and never reach it.
const keylessKey = 1 << 63

const fpCacheSlots = 1024 // 72 KiB per Engine

type fpSlot struct {
	seq atomic.Uint64 // odd while written
	// digest, body length, policy id, then the fingerprint's 33 bytes in 5 words.
	w [8]atomic.Uint64
}

const fpWords = (len(Fingerprint{}) + 7) / 8

// newFPCache returns a cache computing version for keyed requests and
// keyless for requests without a key.
func newFPCache(version, keyless int) *fpCache {
	return &fpCache{seed: maphash.MakeSeed(), domain: fpDomainBase + fpDomains.Add(1), version: version, keyless: keyless}
}

// sumHook, when set, is called with the cache of every fingerprint
// computed (not of one a cache answers). Only tests set it
// (export_test.go's OnFingerprint).
var sumHook atomic.Pointer[func(*fpCache)]

// policyIDs numbers compiled policies for the cache.
var policyIDs atomic.Uint64

// fpDomains numbers the caches of the process from a random base, so that
// two caches (two Engines) never share a domain, and a cache of another
// process shares one only by chance (2^-64).
var (
	fpDomainBase = rand.Uint64()
	fpDomains    atomic.Uint64
)

// fpKey is what the cache finds a fingerprint by: the input's keyed
// digest, the body's length and the policy's id.
type fpKey struct{ digest, n, policy uint64 }

// key returns in's key in the cache; keyless: the request has no
// idempotency key (its fingerprint is of version c.keyless).
func (c *fpCache) key(p *Policy, in *fingerprint.Input, keyless bool) fpKey {
	k := fpKey{c.digest(p, in), uint64(len(in.Body)), p.id}
	if keyless && c.keyless != c.version {
		k.policy |= keylessKey
	}
	return k
}

// get returns the fingerprint cached under k, if any.
func (c *fpCache) get(k fpKey) (Fingerprint, bool) {
	return c.slots[k.digest%fpCacheSlots].get(k.digest, k.n, k.policy)
}

// compute computes p's fingerprint of in, whose key is k, and caches it.
func (c *fpCache) compute(p *Policy, in *fingerprint.Input, k fpKey) Fingerprint {
	if h := sumHook.Load(); h != nil {
		(*h)(c)
	}
	v := c.version
	if k.policy&keylessKey != 0 {
		v = c.keyless
	}
	fp, _ := p.hasher.SumVersion(in, v) // a version New checked
	c.slots[k.digest%fpCacheSlots].put(k.digest, k.n, k.policy, &fp)
	return fp
}

func (c *fpCache) digest(p *Policy, in *fingerprint.Input) uint64 {
	// The small fields, length-prefixed, go through one buffer on the stack
	// and one maphash.Bytes; the streaming Hash (slower per field) takes
	// over when they do not fit. Either way the digest is a keyed hash of
	// an injective encoding of the input, and the same input always takes
	// the same way.
	var buf [256]byte
	b := binary.LittleEndian.AppendUint64(buf[:0], p.id)
	b, ok := appendDigestStr(b, in.Method)
	if ok {
		b, ok = appendDigestStr(b, in.Path)
	}
	if ok {
		b, ok = appendDigestStr(b, in.RawQuery)
	}
	if ok {
		b, ok = appendDigestStr(b, in.ContentType)
	}
	for _, name := range p.fpHeaders {
		if !ok {
			break
		}
		vals := in.Header[name]
		b = binary.LittleEndian.AppendUint64(b, uint64(len(vals)))
		for _, v := range vals {
			if b, ok = appendDigestStr(b, v); !ok {
				break
			}
		}
	}
	if ok && len(b)+16 <= len(buf) {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(in.Body)))
		b = binary.LittleEndian.AppendUint64(b, maphash.Bytes(c.seed, in.Body))
		return maphash.Bytes(c.seed, b)
	}
	return c.digestStream(p, in)
}

// appendDigestStr appends len(s) and s to b when it fits in b's capacity
// (leaving room for the numbers that follow).
func appendDigestStr(b []byte, s string) ([]byte, bool) {
	if len(b)+8+len(s)+24 > cap(b) {
		return b, false
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...), true
}

// digestStream is digest for inputs whose small fields do not fit its buffer.
func (c *fpCache) digestStream(p *Policy, in *fingerprint.Input) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
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
	str(in.Path)
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
	num(maphash.Bytes(c.seed, in.Body)) // in one pass: faster than Write for a large body
	return h.Sum64()
}

func (s *fpSlot) get(h, n, id uint64) (Fingerprint, bool) {
	var fp Fingerprint
	seq := s.seq.Load()
	if seq&1 != 0 || s.w[0].Load() != h || s.w[1].Load() != n || s.w[2].Load() != id {
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

func (s *fpSlot) put(h, n, id uint64, fp *Fingerprint) {
	seq := s.seq.Load()
	if seq&1 != 0 || !s.seq.CompareAndSwap(seq, seq+1) {
		return // another writer has the slot: the cache is best effort
	}
	var b [fpWords * 8]byte
	copy(b[:], fp[:])
	s.w[0].Store(h)
	s.w[1].Store(n)
	s.w[2].Store(id)
	for i := 0; i < fpWords; i++ {
		s.w[3+i].Store(binary.LittleEndian.Uint64(b[i*8:]))
	}
	s.seq.Store(seq + 2)
}
