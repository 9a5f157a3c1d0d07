package memstore

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Per-principal fairness (Options.MaxPrincipalShare).
//
// Each shard accounts the records and bytes each principal
// (idem.BeginRequest.Principal, "" excepted) holds in it, in an account
// found by a hash of the principal (maphash, the store's seed: per
// process). A record carries its account's number (its tag, 0 for no
// principal) in 4 bytes stored right after its key in the key's chunk, so
// a slot stays as it is and finding the account of a record that goes is
// one read beside the key, which removing it reads anyway (to unindex it).
// An account exists while its principal holds records in the shard: the
// shard's index of accounts (see find) holds only principals with live
// records, and an account number is reused only once no record carries it.
// Every change of what a record holds (a claim, a response stored at
// Finish, a response dropped, a record removed for any reason: expiry,
// eviction, Finish past the expiry; a key taken over by another principal)
// updates the accounts in O(1), and none allocates once the index has grown
// to the most principals the shard held at once. No principal costs a
// 4-byte tag written with each key, and a look at the number of accounts
// (none: nothing more) as a record grows or goes.

// DefaultMaxPrincipalShare is the default Options.MaxPrincipalShare.
const DefaultMaxPrincipalShare = 1.0 / 8

// tagBytes is the size of the principal tag stored after each key.
const tagBytes = 4

// ErrPrincipalFull is what Begin's error is (errors.Is) when it refused a
// new record to a principal that holds more than Options.MaxPrincipalShare
// of the shard's budget while the shard is more than half full. The error
// is a *PrincipalFullError, which says when to retry; it is also
// idem.ErrQuotaExceeded (the engine answers 429 IDEMPOTENCY_QUOTA_EXCEEDED
// and never runs the request, FailOpen or not) and idem.ErrNothingDone.
var ErrPrincipalFull = fmt.Errorf("memstore: principal full: this principal holds more than its share of the store (Options.MaxPrincipalShare) while the store is under pressure: %w", idem.ErrQuotaExceeded)

// PrincipalFullError is the error of a claim refused for its principal's
// share: it is ErrPrincipalFull (errors.Is), and its RetryAfter is the
// time until the shard may next drop a record (its oldest finished record
// reaches Options.MinRetention, or its soonest expiry comes), at least a
// second and at most an hour: a lower bound, since nothing the claim
// waits for changes before then, but one record dropped may not be
// enough (the claim may be refused again, with a new hint). The engine
// (idem.RetryHint) sends it as the 429's Retry-After, capped at what a
// client waits for (the engine's cap, maxRetryHint).
type PrincipalFullError struct{ wait time.Duration }

func (e *PrincipalFullError) Error() string {
	return ErrPrincipalFull.Error() + "; retry after " + e.wait.String()
}

// Unwrap returns ErrPrincipalFull.
func (e *PrincipalFullError) Unwrap() error { return ErrPrincipalFull }

// Is reports idem.ErrNothingDone: the refused Begin claimed nothing.
func (e *PrincipalFullError) Is(target error) bool { return target == idem.ErrNothingDone }

// RetryAfter implements idem.RetryHint.
func (e *PrincipalFullError) RetryAfter() time.Duration { return e.wait }

var _ idem.RetryHint = (*PrincipalFullError)(nil)

// principals are a shard's accounts.
type principals struct {
	idx   []uint64  // open addressing: 0 empty, else hash>>32<<32 | account number, placed at hash&mask (see find)
	accts []account // by number; accts[0] is unused (tag 0: no principal)
	free  []uint32  // account numbers free for reuse
	live  int       // accounts in use (indexed): 0 spares the reads of tags

	// The rule, in the shard's terms (enabled: limEntries > 0): a
	// principal that holds more than limBytes or limEntries is refused a
	// new record while the shard holds more than pressBytes or
	// pressEntries.
	limBytes, pressBytes     int64
	limEntries, pressEntries int
}

// account is what one principal holds in a shard.
type account struct {
	hash    uint64 // the principal's
	bytes   int64  // accounted as the shard's bytes: keys, responses, EntryOverhead each
	records int
}

// setLimits sets the shard's rule from its bounds and the share (negative,
// or 1 or more: disabled; a completion may take a principal over the whole
// budget, as it may the shard; 0 or NaN: the default).
func (p *principals) setLimits(share float64, maxEntries int, maxBytes int64) {
	if share < 0 || share >= 1 {
		return
	}
	if !(share > 0) { // 0, NaN
		share = DefaultMaxPrincipalShare
	}
	p.limEntries = max(1, int(share*float64(maxEntries)))
	p.limBytes = max(EntryOverhead, int64(share*float64(maxBytes)))
	p.pressEntries, p.pressBytes = maxEntries/2, maxBytes/2
}

// claimant is the principal of a claim, as admit found it.
type claimant struct {
	named bool   // a principal (not ""), and the rule is enabled
	hash  uint64 // the principal's hash
	tag   uint32 // its account's number when admit looked (0: none)
}

// admit decides whether principal may make a new record in the shard: its
// claimant when it may, else a *PrincipalFullError. A principal is refused
// only when the shard holds more than half its share of MaxEntries or
// MaxBytes and the principal more than its own share of them
// (Options.MaxPrincipalShare of the shard's). No principal ("") and a
// disabled rule make an unnamed claimant, never refused (inlined: no call).
func (sh *shard) admit(s *Store, principal string, now int64) (claimant, error) {
	if principal == "" {
		return claimant{}, nil
	}
	return sh.admitNamed(s, principal, now)
}

func (sh *shard) admitNamed(s *Store, principal string, now int64) (claimant, error) {
	p := &sh.pr
	if p.limEntries == 0 {
		return claimant{}, nil
	}
	who := claimant{named: true, hash: maphash.String(s.seed, principal)}
	who.tag = p.find(who.hash)
	if who.tag == 0 || !p.refuses(sh, who.tag) {
		return who, nil
	}
	// Before refusing, drop what may go (expired records, reclaimable
	// FAILED ones, finished ones older than MinRetention: what makeRoom
	// would drop once the shard is full) until the shard is back under
	// the pressure line or the principal within its share: pressure is
	// what eviction may not relieve. Each record is dropped once, so this
	// is amortized O(1) per claim (one call may drop what the other
	// principals' claims added since the shard last went under the line).
	// The account stays where it is meanwhile (accounts are opened only
	// by enter): a closed one is zeroed, within its share.
	for p.refuses(sh, who.tag) {
		if !sh.freeOne(s, now, none) {
			s.principalFull.Add(1)
			// What is left may not go: the shard holds PENDING records
			// and finished ones younger than MinRetention. Nothing
			// changes before it may next drop a record.
			return claimant{}, &PrincipalFullError{wait: sh.nextRoom(s, now)}
		}
	}
	if p.accts[who.tag].records == 0 {
		who.tag = 0 // closed
	}
	return who, nil
}

// refuses reports whether the shard is under pressure and account t's
// principal over its share.
func (p *principals) refuses(sh *shard, t uint32) bool {
	a := &p.accts[t]
	return (sh.count > p.pressEntries || sh.bytes > p.pressBytes) &&
		(a.records > p.limEntries || a.bytes > p.limBytes)
}

// claimantOf is principal's claimant, unchecked (for a claim that adds no
// record: a takeover, a reclaim).
func (sh *shard) claimantOf(s *Store, principal string) claimant {
	if principal == "" || sh.pr.limEntries == 0 {
		return claimant{}
	}
	return claimant{named: true, hash: maphash.String(s.seed, principal)}
}

// enter accounts a new record of size bytes to who (whose
// account admit found may have been closed since, by evictions), and
// returns the tag to store with it: its account's number, 0 for no
// principal.
func (sh *shard) enter(who claimant, size int64) uint32 {
	if !who.named {
		return 0
	}
	return sh.enterNamed(who, size)
}

func (sh *shard) enterNamed(who claimant, size int64) uint32 {
	p := &sh.pr
	tag := who.tag
	if tag == 0 || p.accts[tag].hash != who.hash || p.accts[tag].records == 0 {
		tag = p.open(who.hash)
	}
	a := &p.accts[tag]
	a.records++
	a.bytes += size
	return tag
}

// open returns the number of ph's account, made (empty) if it has none.
func (p *principals) open(ph uint64) uint32 {
	if tag := p.find(ph); tag != 0 {
		return tag
	}
	if (p.live+1)*4 > len(p.idx)*3 {
		p.grow()
	}
	if len(p.accts) == 0 {
		p.accts = append(p.accts, account{}) // number 0: no principal
	}
	var tag uint32
	if n := len(p.free); n > 0 {
		tag = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		tag = uint32(len(p.accts))
		p.accts = append(p.accts, account{})
	}
	p.accts[tag] = account{hash: ph}
	p.insert(ph>>32<<32 | uint64(tag))
	p.live++
	return tag
}

// The index of accounts by principal hash: a pointer-free open-addressing
// table, as the shard's index of records (linear probing, backward-shift
// deletion, no tombstones), so that principals coming and going allocate
// nothing once it has grown to the most accounts the shard held at once
// (at least 8 entries, at most 3/4 full; it never shrinks).

// find returns the number of the account of hash ph, or 0.
func (p *principals) find(ph uint64) uint32 {
	if p.live == 0 {
		return 0
	}
	mask := uint64(len(p.idx) - 1)
	for i := ph & mask; ; i = (i + 1) & mask {
		w := p.idx[i]
		if w == 0 {
			return 0
		}
		if w>>32 == ph>>32 && p.accts[uint32(w)].hash == ph {
			return uint32(w)
		}
	}
}

// insert puts index word w (hash>>32<<32 | number) at its place; the
// account's hash is already set.
func (p *principals) insert(w uint64) {
	mask := uint64(len(p.idx) - 1)
	i := p.accts[uint32(w)].hash & mask
	for p.idx[i] != 0 {
		i = (i + 1) & mask
	}
	p.idx[i] = w
}

func (p *principals) grow() {
	old := p.idx
	p.idx = make([]uint64, max(8, 2*len(old)))
	for _, w := range old {
		if w != 0 {
			p.insert(w)
		}
	}
}

// unindex removes account t (of hash ph) from the index.
func (p *principals) unindex(t uint32, ph uint64) {
	mask := uint64(len(p.idx) - 1)
	want := ph>>32<<32 | uint64(t)
	i := ph & mask
	for p.idx[i] != want {
		i = (i + 1) & mask
	}
	for q := i; ; {
		q = (q + 1) & mask
		w := p.idx[q]
		if w == 0 {
			break
		}
		home := p.accts[uint32(w)].hash & mask
		if (q-home)&mask >= (q-i)&mask {
			p.idx[i] = w
			i = q
		}
	}
	p.idx[i] = 0
}

// tagOf returns the principal tag of slot i (stored after its key).
func (sh *shard) tagOf(i int32) uint32 {
	e := sh.at(i)
	return binary.LittleEndian.Uint32(sh.chunks[e.keyChunk][e.keyOff+e.keyLen:])
}

// charge adds n bytes (a response stored, or dropped: n < 0) to slot i's
// principal.
func (sh *shard) charge(i int32, n int64) {
	if sh.pr.live == 0 {
		return
	}
	if t := sh.tagOf(i); t != 0 {
		sh.pr.accts[t].bytes += n
	}
}

// leave takes slot i, about to be removed, out of its principal's account
// (its response, if any, was dropped already), and closes the account
// when it was the principal's last record in the shard.
func (sh *shard) leave(i int32) {
	if sh.pr.live == 0 {
		return
	}
	sh.leaveNamed(i)
}

func (sh *shard) leaveNamed(i int32) {
	t := sh.tagOf(i)
	if t == 0 {
		return
	}
	p := &sh.pr
	a := &p.accts[t]
	a.records--
	a.bytes -= int64(sh.at(i).keyLen) + EntryOverhead
	if a.records == 0 {
		p.unindex(t, a.hash)
		*a = account{}
		p.free = append(p.free, t)
		p.live--
	}
}

// retag moves slot i, taken over (or reclaimed) by a claim of who, to
// who's account when it is another's. Its response was dropped. Only a
// store used directly, or a key shared between principals
// (idem.ScopeShared), sees a key change hands.
func (sh *shard) retag(i int32, who claimant) {
	if !who.named && sh.pr.live == 0 {
		return // no principal, and no record of one (inlined: no call)
	}
	sh.retagNamed(i, who)
}

func (sh *shard) retagNamed(i int32, who claimant) {
	old := sh.tagOf(i)
	if who.named && old != 0 && sh.pr.accts[old].hash == who.hash || !who.named && old == 0 {
		return
	}
	e := sh.at(i)
	sh.leave(i)
	who.tag = 0
	tag := sh.enter(who, int64(e.keyLen)+EntryOverhead)
	binary.LittleEndian.PutUint32(sh.chunks[e.keyChunk][e.keyOff+e.keyLen:], tag)
}

// storeKey appends key and its principal tag to a chunk and returns where
// the key lies (the tag follows it).
func (sh *shard) storeKey(key string, tag uint32) (int32, uint32) {
	c := sh.reserve(len(key) + tagBytes) // room in the chunk's capacity
	buf := sh.chunks[c]
	off := len(buf)
	buf = buf[:off+len(key)+tagBytes]
	copy(buf[off:], key)
	binary.LittleEndian.PutUint32(buf[off+len(key):], tag)
	sh.chunks[c] = buf
	return c, uint32(off)
}
