// Package memstore is the in-memory idem.Store: the embedded default for a
// single process (tests, development, one-instance services). Records live
// only as long as the process; use a shared store (Redis, PostgreSQL) when
// several instances serve the same API.
//
// The store is sharded (a power of two of shards, chosen by a seeded hash of
// the key, each with its own lock), implements idem.Watcher (a waiting
// duplicate is woken when the record changes), idem.LeaseExtender and
// idem.LocalReader (a retry is recognised by its bytes, without its
// fingerprint), and is safe for concurrent use.
//
// # Memory layout
//
// A store holds up to millions of records for the length of their window,
// and whatever the garbage collector must trace it traces again on every
// cycle. So a shard keeps no pointer per record: records are fixed-size
// slots in one pointer-free table, found through a flat open-addressing
// index of 64-bit words (a hash tag and a slot number, linear probing,
// backward-shift deletion), with their expiry queue and heap and finished
// list made of slot numbers too. The index words carry the bits of the
// key's hash that place them, so growing the index never reads a slot
// (deleting hashes the slot's key again to find its word). Keys and
// responses are appended to chunks of up to 256 KiB. A chunk is freed when nothing live is
// left in it, and a shard whose chunks hold more than twice its live bytes
// copies its records into fresh chunks. The garbage collector sees a handful
// of objects per shard, whatever the number of records.
//
// The slot pages, expiry pages, indexes and chunks are not on the Go heap:
// they are blocks of memory mapped from the operating system (with
// transparent huge pages advised on Linux), shared by the Stores of the
// process and given back when a Store is no longer reachable. Records kept
// there do not raise the garbage collector's heap goal, so a growing store
// does not make the process touch fresh pages for garbage too, and its own
// memory grows 2 MiB at a time instead of 4 KiB (each fresh page is a page
// fault). A goroutine has the system back the next 2 MiB of the regions it
// carves blocks from with memory once less than 1 MiB of what is backed is
// left, so that a request does not wait for the kernel to clear a huge
// page (milliseconds on a virtual machine). Freed blocks are reused at once, so a Record's Response is a
// copy, made under the shard's lock. The Go runtime does not count this
// memory (GOMEMLIMIT, runtime/metrics); MaxBytes bounds it, within the
// factor of two above.
//
// # Expiry
//
// A record past its ExpiresAt is gone: every access checks it (lazily), each
// Begin also drops up to a few expired records of its shard (amortized), and
// a background sweeper (every Options.SweepInterval, bounded work per shard)
// reclaims memory of idle shards. Close stops the sweeper. A shard finds its
// soonest expiry in a queue of records in the order they expire (claims
// with one window join it in O(1), and leave it in O(1) when dropped,
// evicted or taken over), and in a heap for those that would expire before
// the queue's last.
//
// # Bounds and eviction
//
// The store holds at most MaxEntries records and MaxBytes bytes (keys,
// stored responses and a fixed per-record overhead), divided evenly among the
// shards, of which there are few enough for each to hold a few hundred
// records (see Options.Shards). When a new record does not fit its shard
// (or, see below, its principal is over its share of a shard more than
// half full), the store drops, until it fits: its expired records (soonest expiry
// first), then its reclaimable FAILED records (no response kept, which a
// retry may take over anyway: evicting one makes nothing run twice; oldest
// first, counted in Stats.EvictedFailed), then its oldest finished records
// (COMPLETED, or FAILED with a response: in the order they finished,
// counted in Stats.Evicted) that finished at least Options.MinRetention ago
// (default an hour). A record younger than that is never evicted: when only
// such records and PENDING ones are left, Begin fails with ErrFull (a
// *FullError, saying when the shard may next make room; the engine answers
// 503 IDEMPOTENCY_STORE_UNAVAILABLE with that as Retry-After, or runs
// unprotected with FailOpen) and Stats counts the refusal (Full).
//
// An evicted record's window is cut short: a retry with its key executes
// again. MinRetention is what protects the automatic retries of a request
// (the generated clients' retry within about a minute): callers that fill
// the store with large responses under fresh keys (several principals, or
// no principal: one principal is refused its share first, see below) evict
// other callers' records only once they are older than MinRetention, and
// otherwise get claims refused, theirs and everyone else's, until records
// age or expire; they never make another caller's request run twice
// while that caller's client is still retrying it. A negative MinRetention keeps every record
// for its whole window (fully fail closed). The store keeps a whole window
// of records when a window's worth fits the bounds: new records a second ×
// Window records, each of EntryOverhead plus its key and response bytes.
// Under more load, records older than MinRetention are evicted, oldest
// first, so the window shortens for them only; and claims are refused only
// when a MinRetention's worth of records (rate × MinRetention) does not fit.
// With the defaults (1,000,000 records, 256 MiB, 24h windows), a service
// with 256-byte responses keeps a whole window below about 6 new keys a
// second, and is refused nothing below about 150 a second; when one
// principal makes a quarter or more of the new keys, half that (3 and 75:
// see below, the store then evicts at half full). Size MaxBytes and MaxEntries for that at the largest
// stored responses (Response.MaxBytes), and rate-limit callers.
//
// No single caller fills the store, though: each shard accounts the
// records and bytes each principal (idem.BeginRequest.Principal: the
// engine's Options.Principal) holds in it, and while the shard is more
// than half full (by its share of MaxEntries or of MaxBytes) it refuses a
// new key to a principal that holds more than Options.MaxPrincipalShare of
// that share already (default 1/8), with ErrPrincipalFull (a
// *PrincipalFullError, saying when the shard may next drop a record: a
// lower bound, as one record dropped may not be enough; the engine answers 429 IDEMPOTENCY_QUOTA_EXCEEDED with that
// as Retry-After, and never runs the request, FailOpen or not: it is a
// refusal of one caller, not an outage), counted in Stats.PrincipalFull.
// The others are admitted. Pressure is what eviction may not relieve:
// before refusing, the shard drops what may go (expired records,
// reclaimable FAILED ones, finished ones older than MinRetention, as when
// it is full) until it is back under half or the principal within its
// share, and refuses only when that is not enough. So while a principal
// over its share is active, a shard evicts its records older than
// MinRetention before it is full, down to half: under a steady load of
// which one principal makes a fraction f of the new keys (f > 1/8), a
// shard sits at about 1/(8f) of its bounds, and at half from f = 1/4 on;
// such a service keeps the window a store that much smaller would keep,
// and is refused (429) only at loads that store would refuse (ErrFull). A caller flooding the store with fresh keys (all younger
// than MinRetention) thus fills about half of it (plus the responses of its claims in flight,
// stored as they complete, and of the claims that took each shard past
// half: 1 MB responses under the defaults, 8 MiB shards, fill about 160
// MiB of 256) and is then refused alone, instead of getting every caller
// ErrFull for up to MinRetention. Below half full no one is
// refused, so a single tenant on an idle store is not; a service whose
// callers are one or two named principals raises the share (1 or more, or
// negative: no limit). No principal ("": idem.Anonymous) is never limited
// nor accounted. The share bounds each principal, not several together
// (eight principals at 1/8 hold a shard). Principals are told apart by a
// 64-bit hash (seeded per process): two whose hashes collide share an
// account, which is negligibly likely and not predictable by callers.
//
// A PENDING record is never evicted: when a shard holds nothing but PENDING
// records, Begin fails with ErrFull. A completion is never lost: Finish
// stores a response even when it takes the shard over its byte budget (after
// dropping what a claim would drop, other than the record itself), and a
// claim whose key is larger than the budget is admitted into a shard that
// is (or, once what may go is dropped, becomes) empty. MaxEntries is thus
// an exact bound, and MaxBytes is not: completions of claims in flight can
// take a shard over its share until records age or expire.
// The memory a shard really holds stays within about twice the bytes it
// accounts (chunks not yet compacted), plus its tables.
package memstore

import (
	"bytes"
	"context"
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/mono"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Shards is the number of shards, rounded up to a power of two (default
	// 32), and lowered (to a power of two, at least 1) until each shard has
	// room for MinShardRecords records by MaxEntries, and by MaxBytes for
	// records of EntryOverhead bytes (short keys, no response): every shard
	// holds its share of the bounds, and one that is full of records it may
	// not drop (PENDING ones, finished ones younger than MinRetention)
	// refuses a claim (ErrFull), so small shards would refuse claims far
	// below the bounds whenever a few keys hash alike. 32 shards need
	// MaxEntries 8192 and MaxBytes 1.25 MiB; a store bounded below 512
	// records or 80 KiB has one shard.
	Shards int
	// MaxEntries bounds the number of records (default 1,000,000). Each
	// shard holds its share (MaxEntries/shards, one more for the first
	// MaxEntries%shards), so the store never holds more.
	MaxEntries int
	// MaxBytes bounds the memory accounted to records (default 256 MiB):
	// their keys and stored responses and EntryOverhead each. Each shard
	// holds its share, as for MaxEntries, but this bound is not exact: a
	// completion that does not fit is stored anyway (a completion is never
	// lost), once the shard dropped what may go (expired records,
	// reclaimable FAILED ones, finished ones older than MinRetention), which
	// leaves the shard over its share and refusing claims until records age
	// or expire; and a claim whose key is larger than the share is admitted
	// into a shard that is (or can be made) empty.
	MaxBytes int64
	// MinRetention is how long a finished record is kept, at least, from
	// when it finished, even when its shard is full (default
	// DefaultMinRetention, 1 hour; negative: for its whole window). A full
	// shard evicts its oldest finished records once they are older than
	// that, to admit a new claim, and refuses the claim (ErrFull) when it
	// would have to evict a younger one. A retry of an evicted key
	// executes again, so MinRetention must outlast the automatic retries
	// of a request: the generated clients retry within about a minute
	// (backoff of at most tens of seconds, an in-use wait of about 38 s, a
	// Retry-After of at most a minute honoured). It is counted from the
	// finish, not the claim, since those retries follow the answer, however
	// long the handler ran (a finished record's LeaseExpiresAt, which a
	// PENDING one's lease no longer concerns, is when it finished).
	// Reclaimable FAILED records (no response kept: a
	// retry may run again anyway) are evicted first, whatever their age;
	// PENDING records never are. See the package doc, "Bounds and
	// eviction".
	MinRetention time.Duration
	// MaxPrincipalShare is the share of a shard's bounds (MaxEntries and
	// MaxBytes, each) that one principal (idem.BeginRequest.Principal) may
	// hold and still make new records while the shard is under pressure:
	// more than half full, by either bound (0 or NaN: the default,
	// DefaultMaxPrincipalShare, 1/8; negative, or 1 or more: no limit).
	// Pressure is what eviction may not relieve: a claim of a new key by a
	// principal that holds more first drops what may go (expired records,
	// reclaimable FAILED ones, finished ones older than MinRetention) until
	// the shard is back under half or the principal within its share, so
	// while such a principal is active the shard evicts its old records at
	// half full rather than full. If that is not enough, the claim is
	// refused with ErrPrincipalFull
	// (the engine answers 429 IDEMPOTENCY_QUOTA_EXCEEDED, FailOpen or
	// not), and the other principals' are admitted: one caller flooding
	// the store with fresh keys fills at most about half of it, leaving
	// the rest to the others (it would otherwise get every caller refused
	// ErrFull, 503, for up to MinRetention). Below the pressure a principal
	// is never refused, so a single tenant may use half the store before
	// its share counts; a larger share lets a few heavy principals use
	// more of it under pressure, and lets fewer principals together fill
	// it (1/8: eight of them, each at its share, hold it all; four fill the
	// half that pressure leaves). No principal ("": idem.Anonymous) is
	// never limited. Principals are told apart by a 64-bit hash (maphash,
	// seeded per process): two that collide (negligibly likely) share an
	// account. See the package doc, "Bounds and eviction".
	MaxPrincipalShare float64
	// SweepInterval is how often the background sweeper runs (default 30s);
	// negative disables it (expiry stays lazy and amortized).
	SweepInterval time.Duration
	// Now is the store's clock. The default is the wall clock read once, at
	// New, advanced by the monotonic clock: a record's times look like wall
	// times, are immune to steps of the wall clock, and each store call reads
	// only the (cheaper) monotonic clock.
	Now func() time.Time
}

// Defaults.
const (
	DefaultShards        = 32
	DefaultMaxEntries    = 1_000_000
	DefaultMaxBytes      = 256 << 20
	DefaultSweepInterval = 30 * time.Second
	DefaultMinRetention  = time.Hour
	// maxRetryAfter caps a refusal's retry hint (FullError.RetryAfter).
	maxRetryAfter = time.Hour
	// EntryOverhead is the bytes accounted to each record beside its key and
	// response. A record whose fingerprint its slot cannot hold (one that
	// is not process-local, e.g. a SHA-256 fingerprint, as a keyless
	// request's) keeps 33 bytes more in its key's chunk (the whole
	// fingerprint: its version and 32-byte digest), which MaxBytes and
	// Stats().Bytes do not count.
	EntryOverhead = 160
	sweepBatch    = 1024
	amortizedPops = 4
)

// MinShardRecords is the fewest records a shard has room for (see
// Options.Shards).
const MinShardRecords = 256

// Chunks: sizes grow with the shard's live bytes (a 32nd of them), between
// chunkMin and chunkMax; a key or response larger than bigValue gets a
// chunk of its own. Each shard's current chunk is half empty on average:
// small chunks keep that little while a store grows (a 32nd: about 3% of
// its bytes; an 8th kept 2 MiB in the 32 shards of a store of 64k records
// of 340 bytes).
const (
	chunkMin = 4 << 10
	chunkMax = 256 << 10
	bigValue = chunkMax / 4
	// compactSlack: a shard compacts when its chunks hold more than twice
	// its live bytes plus this much.
	compactSlack = 4 * chunkMax
)

// ErrFull is what Begin's error is (errors.Is) when no new record fits
// its shard (by MaxEntries or MaxBytes) once it dropped what may go:
// expired records, reclaimable FAILED ones and finished ones older than
// Options.MinRetention. The shard holds only PENDING records and finished
// ones younger than MinRetention. The error is a *FullError, which says
// when to retry.
var ErrFull = errors.New("memstore: full: no room for a new record (its shard holds only PENDING records and finished ones younger than Options.MinRetention, which are not evicted)")

// FullError is the error of a claim refused for room: it is ErrFull
// (errors.Is), and its RetryAfter is the time until its shard may next make
// room (its oldest finished record reaches Options.MinRetention, or its
// soonest expiry comes), at least a second and at most an hour. The engine
// (idem.RetryHint) sends it as the 503's Retry-After, capped at 30 seconds
// (what a client waits for).
type FullError struct{ wait time.Duration }

func (e *FullError) Error() string {
	return ErrFull.Error() + "; retry after " + e.wait.String()
}

// Unwrap returns ErrFull.
func (e *FullError) Unwrap() error { return ErrFull }

// RetryAfter implements idem.RetryHint.
func (e *FullError) RetryAfter() time.Duration { return e.wait }

// Stats are counters of a Store's life.
type Stats struct {
	Entries int   // records held now
	Bytes   int64 // bytes accounted now
	Expired int64 // records dropped after their expiry
	// Evicted counts finished records that a retry would have replayed
	// (COMPLETED, or FAILED with a response) dropped before their expiry
	// for room, each older than Options.MinRetention: a retry with such a
	// key now executes again. Raise the bounds if it grows.
	Evicted int64
	// EvictedFailed counts reclaimable FAILED records (no response kept)
	// dropped before their expiry for room: harmless (a retry of one
	// could run again anyway), not counted in Evicted.
	EvictedFailed int64
	Full          int64 // Begin calls refused with ErrFull (the store was full of records that may not go)
	// PrincipalFull counts Begin calls refused with ErrPrincipalFull (a
	// principal over its Options.MaxPrincipalShare while the store was
	// under pressure).
	PrincipalFull int64
	// Principals is the number of principal accounts held now: the
	// principals with records, each counted once per shard that holds
	// some of them.
	Principals int
}

// Store is an in-memory idem.Store.
type Store struct {
	shards []shard
	shift  uint // a key's shard is its hash >> shift
	seed   maphash.Seed
	now    func() time.Time // Options.Now, or nil for the default clock
	base   time.Time        // the default clock's origin (with a monotonic reading)
	baseNs int64            // base in Unix ns
	// monoOff is base's monotonic reading since mono.Epoch: a reading
	// since mono.Epoch that a call's context made (mono.Started) is base's
	// clock at baseNs + reading - monoOff, as nowNs would have read it.
	monoOff time.Duration
	minRet  int64 // Options.MinRetention in ns; negative: never evict a COMPLETED record (or FAILED with a response) within its window

	expired, evicted, evictedFailed, full atomic.Int64
	principalFull                         atomic.Int64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ idem.Store         = (*Store)(nil)
	_ idem.Watcher       = (*Store)(nil)
	_ idem.LeaseExtender = (*Store)(nil)
	_ idem.ContextBound  = (*Store)(nil)
	_ idem.LocalReader   = (*Store)(nil)
)

const none = -1 // no slot, no chunk

type shard struct {
	mu   sync.Mutex
	seed maphash.Seed // the store's
	// fpHead and fpTail are byte 0 and bytes 17..32 of the process-local
	// fingerprints this shard keeps in fpLocal form (fpSet: known, from
	// the first local fingerprint it was given): the version, and this
	// process's tag and the zero bytes after it. (In the shard's first
	// line, with its lock: a replay reads them.)
	fpTail [16]byte
	fpHead byte
	fpSet  bool
	idx    []uint64      // open addressing: 0 empty, else hash>>32<<32 | slot+1, placed at (hash>>32)&mask; an arena block
	count  int           // records held
	pages  []*slotPage   // the slot table, in pages that never move
	nslots int32         // slots made
	free   []int32       // free slot numbers
	queue  []*queuePage  // records in order of expiry (see qe)
	qbase  uint32        // the position of queue[0][0]
	qlo    uint32        // the queue's front (live when the queue is not empty)
	qhi    uint32        // the queue's end
	qlive  int           // live entries in the queue
	qlast  int64         // the expiry of the queue's last entry (MinInt64 when empty)
	heap   []*expiryPage // records whose expiry came out of order
	nheap  int           // entries in heap
	maxExp int64         // no entry of heap expires later (it never decreases)
	minExp int64         // the soonest expiry (MaxInt64 when none): Begin looks here

	head, tail   int32 // finished records that a retry replays (COMPLETED, FAILED with a response), in the order they finished
	fhead, ftail int32 // reclaimable FAILED records (no response), in the order they finished

	chunks     [][]byte // len = bytes used; nil: dropped
	chunkLive  []int64  // live bytes per chunk
	freeChunks []int32
	cur        int32 // the chunk being appended to, or none
	chunkBytes int64 // capacity of the chunks held
	dataBytes  int64 // live bytes of keys and responses

	watchers   map[string]*watch
	bytes      int64
	maxEntries int
	maxBytes   int64
	pr         principals // what each principal holds (principal.go)

	// idxAt and idxMask are idx's address and len-1, set with it, for
	// PrefetchKey, which reads them without the lock: a pair read while
	// the index grows may mix the old and the new, which a prefetch (it
	// never faults) does not mind.
	idxAt   atomic.Pointer[uint64]
	idxMask atomic.Uint64

	_ [64]byte // keep shards on separate cache lines
}

// slot is a record, in 80 bytes. state 0 marks a free slot. A record is on
// one of the finished lists exactly when its state is COMPLETED or FAILED
// (which one: reclaimable, set before it is listed and kept until it is
// unlisted).
type slot struct {
	exp   int64 // ExpiresAt, Unix ns on the store's clock
	lease int64 // PENDING: LeaseExpiresAt; finished: when it finished (MinRetention counts from it; reported as LeaseExpiresAt)
	token idem.Token
	// fp holds the fingerprint's bytes 1..16 when fpMode is fpLocal (see
	// fpOf).
	fp        [16]byte
	state     idem.State
	hasResp   bool  // Response is non-nil (it may be empty)
	queued    bool  // expiryPos is a position in the queue, not in the heap
	fpMode    uint8 // where the fingerprint is: fpZero, fpLocal, fpLong
	keyChunk  int32
	respChunk int32
	keyOff    uint32
	keyLen    uint32
	respOff   uint32
	respLen   uint32
	expiryPos int32 // where its expiry is scheduled (see queued), or none
	prev      int32
	next      int32
}

type expiryEntry struct {
	exp  int64
	slot int32
}

type watch struct {
	ch   chan struct{}
	refs int
}

// New returns a Store; call Close to stop its sweeper.
func New(opts Options) *Store {
	n := opts.Shards
	if n <= 0 {
		n = DefaultShards
	}
	n = 1 << bits.Len(uint(n-1))
	maxEntries := opts.MaxEntries
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	// Each shard holds at least MinShardRecords records (by count, and by
	// bytes of records with short keys and no response): a shard refuses a
	// claim when it is full (of unexpired records), so small shards would refuse
	// claims far below the bounds, whenever a few keys hash alike.
	if most := min(int64(maxEntries), maxBytes/EntryOverhead) / MinShardRecords; int64(n) > most {
		n = 1
		if most > 1 {
			n = 1 << (bits.Len64(uint64(most)) - 1)
		}
	}
	minRet := int64(opts.MinRetention)
	if minRet == 0 {
		minRet = int64(DefaultMinRetention)
	}
	s := &Store{shards: make([]shard, n), shift: uint(64 - bits.Len(uint(n-1))), seed: maphash.MakeSeed(), now: opts.Now, minRet: minRet}
	if s.now == nil {
		s.base = time.Now()
		s.baseNs = s.base.UnixNano()
		s.monoOff = s.base.Sub(mono.Epoch)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.head, sh.tail, sh.fhead, sh.ftail, sh.cur = none, none, none, none, none
		sh.seed = s.seed
		sh.minExp, sh.qlast = math.MaxInt64, math.MinInt64
		sh.watchers = make(map[string]*watch)
		// The bounds' shares add up to them exactly: the first shards take
		// one more of what does not divide evenly.
		sh.maxEntries = max(1, min(maxEntries/n+bit(i < maxEntries%n), 1<<31-2))
		sh.maxBytes = maxBytes/int64(n) + int64(bit(int64(i) < maxBytes%int64(n)))
		sh.pr.setLimits(opts.MaxPrincipalShare, sh.maxEntries, sh.maxBytes)
	}
	// The shards' memory is the arena's, which the garbage collector does
	// not free: give it back once the Store is unreachable.
	runtime.AddCleanup(s, freeShards, s.shards)
	interval := opts.SweepInterval
	if interval == 0 {
		interval = DefaultSweepInterval
	}
	if interval > 0 {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.sweeper(interval)
	}
	return s
}

// freeShards gives the memory of an unreachable Store's shards back to the
// arena.
func freeShards(shards []shard) {
	for i := range shards {
		sh := &shards[i]
		sh.mu.Lock()
		for _, b := range sh.chunks {
			mem.free(b[:cap(b)])
		}
		for _, p := range sh.pages {
			mem.free(pageBlock(p))
		}
		for _, p := range sh.heap {
			mem.free(pageBlock(p))
		}
		for _, p := range sh.queue {
			mem.free(pageBlock(p))
		}
		mem.free(idxBlock(sh.idx))
		sh.chunks, sh.pages, sh.heap, sh.queue, sh.idx = nil, nil, nil, nil, nil
		sh.idxAt.Store(nil)
		sh.mu.Unlock()
	}
}

// Close stops the background sweeper. The store stays usable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
	})
	return nil
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := Stats{Expired: s.expired.Load(), Evicted: s.evicted.Load(), EvictedFailed: s.evictedFailed.Load(), Full: s.full.Load(),
		PrincipalFull: s.principalFull.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Entries += sh.count
		st.Bytes += sh.bytes
		st.Principals += sh.pr.live
		sh.mu.Unlock()
	}
	return st
}

func (s *Store) shard(key string) (*shard, uint64) {
	h := maphash.String(s.seed, key)
	return &s.shards[h>>s.shift&uint64(len(s.shards)-1)], h
}

// Begin implements idem.Store.
func (s *Store) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if err := ctx.Err(); err != nil {
		return idem.BeginResult{}, err
	}
	if req.Lease <= 0 || req.TTL <= 0 {
		return idem.BeginResult{}, errors.New("memstore: Begin with a non-positive lease or TTL")
	}
	if req.Key == "" {
		return idem.BeginResult{}, errors.New("memstore: Begin with an empty key")
	}
	sh, h := s.shard(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.nowAt(ctx)
	if now >= sh.minExp {
		sh.dropExpired(s, now, amortizedPops)
	}
	i := sh.find(req.Key, h)
	if i != none && now >= sh.at(i).exp {
		sh.remove(i)
		s.expired.Add(1)
		i = none
	}
	var prior idem.State
	switch {
	case i != none && sh.at(i).state == idem.StatePending && sh.at(i).token == req.Token:
		// This very claim, made by an earlier run of the same Begin (a
		// caller that sent it again): acquired, as for a fresh claim, with
		// the lease counted from now (the caller counts it from this
		// answer), even when the first run's lease has run out meanwhile
		// (that is no takeover: no other claim came in between, or the
		// token would be another). Nothing else changes; the prior state
		// the first run replaced is not kept (Prior 0). Tokens are fresh
		// per claim; as the Redis script.
		sh.at(i).lease = after(now, req.Lease)
		return idem.BeginResult{Acquired: true}, nil
	case i == none:
		size := int64(len(req.Key)) + EntryOverhead
		who, err := sh.admit(s, req.Principal, now)
		if err != nil {
			return idem.BeginResult{}, err
		}
		// A record larger than the shard's share of MaxBytes is admitted
		// into an empty shard, as a response larger than it is stored.
		if (sh.count >= sh.maxEntries || sh.bytes+size > sh.maxBytes) && !sh.makeRoom(s, now, size) && sh.count > 0 {
			s.full.Add(1)
			return idem.BeginResult{}, sh.full(s, now)
		}
		exp := after(now, req.TTL)
		i = sh.add(req.Key, h, exp, sh.enter(who, size))
	case sh.at(i).state == idem.StatePending && now >= sh.at(i).lease &&
		(!req.SameFingerprintToReclaim || sh.fpOf(i) == req.Fingerprint):
		prior = idem.StatePending
	case sh.at(i).reclaimable() && (!req.SameFingerprintToReclaim || sh.fpOf(i) == req.Fingerprint):
		prior = idem.StateFailed
	default:
		return idem.BeginResult{Record: sh.record(i, req.Buf)}, nil
	}
	if prior != 0 {
		sh.unlist(i)
		sh.dropResponse(i)
		sh.at(i).exp = after(now, req.TTL)
		sh.expiryFix(i)
		sh.retag(i, sh.claimantOf(s, req.Principal))
	}
	e := sh.at(i)
	e.state = idem.StatePending // first: setFP may compact the shard, which skips free slots
	sh.setFP(i, &req.Fingerprint)
	e.token = req.Token
	e.lease = after(now, req.Lease)
	sh.notify(i)
	// While the handler runs, bring in the end of the current chunk, where
	// Finish will most likely append the response.
	sh.prefetchAppend(prefetchResponse)
	return idem.BeginResult{Acquired: true, Prior: prior}, nil
}

// Finish implements idem.Store.
func (s *Store) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if state != idem.StateCompleted && state != idem.StateFailed {
		return errors.New("memstore: Finish with a state other than COMPLETED or FAILED")
	}
	sh, h := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.nowAt(ctx)
	i := sh.find(key, h)
	if i == none {
		return idem.ErrFenced
	}
	e := sh.at(i) // slots never move: e stays i's through store's compaction
	if now >= e.exp {
		sh.remove(i)
		s.expired.Add(1)
		return idem.ErrFenced
	}
	if e.token != token {
		return idem.ErrFenced
	}
	if e.state != idem.StatePending {
		// Already final under this token: a re-run of the Finish that made
		// it so succeeds (the idem.Store contract); anything else is fenced.
		if sh.holds(e, state, response) {
			return nil
		}
		return idem.ErrFenced
	}
	if e.hasResp {
		sh.dropResponse(i)
	}
	if response != nil {
		c, off := store(sh, response)
		e.hasResp, e.respChunk, e.respOff, e.respLen = true, c, off, uint32(len(response))
		sh.bytes += int64(len(response))
		sh.charge(i, int64(len(response)))
	}
	e.state = state
	e.lease = now // finished now: MinRetention counts from here
	sh.list(i)
	// Over the budget: records go as they would for a claim (expired ones,
	// reclaimable FAILED ones, finished ones older than MinRetention), but
	// not i; else the shard stays over it, refusing claims, until records
	// expire or age. A finish with no response adds no bytes and evicts
	// nothing: a reclaimable FAILED one would keep itself and evict an
	// older replayable record (the next claim drops it first).
	for response != nil && sh.bytes > sh.maxBytes && sh.freeOne(s, now, i) {
	}
	sh.notify(i)
	return nil
}

// Get implements idem.Store.
func (s *Store) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	rec, found := s.ReadLocal(key, nil)
	return rec, found, nil
}

// ReadLocal implements idem.LocalReader: Get, with the response appended
// to buf[:0].
func (s *Store) ReadLocal(key string, buf []byte) (idem.Record, bool) {
	sh, h := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.find(key, h)
	if i == none {
		// Most likely a claim follows (a first request): bring in what its
		// Begin will write, while the caller computes the fingerprint.
		sh.prefetchClaim(len(key))
		return idem.Record{}, false
	}
	if s.nowNs() >= sh.at(i).exp {
		sh.remove(i)
		s.expired.Add(1)
		return idem.Record{}, false
	}
	return sh.record(i, buf), true
}

// PrefetchKey brings into the CPU's cache, without waiting for it, the
// word of the store's index that a call with key looks at first (a cache
// miss of a few hundred cycles once a store holds more records than the
// CPU's caches): a hint, which changes nothing. runtime/idem's engine calls
// it as soon as a request's scope key is known, before digesting the
// request's body, so that its first store call finds the word in the
// cache. It takes no lock (idxAt, idxMask).
func (s *Store) PrefetchKey(key string) {
	sh, h := s.shard(key)
	if p := sh.idxAt.Load(); p != nil {
		prefetch(unsafe.Add(unsafe.Pointer(p), 8*(h>>32&sh.idxMask.Load())))
	}
}

// ExtendLease implements idem.LeaseExtender: it moves the lease to now +
// lease and the record's expiry to the lease's end when that is later. A
// non-positive lease is an error (not ErrFenced) and changes nothing.
func (s *Store) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if lease <= 0 {
		return errors.New("memstore: ExtendLease with a non-positive lease")
	}
	sh, h := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.nowNs()
	i := sh.find(key, h)
	if i == none || now >= sh.at(i).exp || sh.at(i).state != idem.StatePending || sh.at(i).token != token {
		return idem.ErrFenced
	}
	// The record lives at least as long as the lease (idem.LeaseExtender):
	// a holder that heartbeats past the window keeps its record.
	e := sh.at(i)
	e.lease = after(now, lease)
	if e.lease > e.exp {
		e.exp = e.lease
		sh.expiryFix(i)
	}
	return nil
}

// ContextBound implements idem.ContextBound: no method uses its ctx beyond
// the call (each only checks ctx.Err on entry), nor keeps a key it is given
// (keys are copied into the store's chunks, a watch's into its own string),
// so the engine may reuse the memory that holds them.
func (*Store) ContextBound() {}

// Watch implements idem.Watcher: changed is closed on the next change of the
// key's record (claim, takeover, finish, expiry or eviction).
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func()) {
	sh, _ := s.shard(key)
	sh.mu.Lock()
	key = strings.Clone(key) // ContextBound: keep no key of the caller's (the cancel func holds it)
	w := sh.watchers[key]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		sh.watchers[key] = w
	}
	w.refs++
	sh.mu.Unlock()
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			sh.mu.Lock()
			w.refs--
			if w.refs == 0 && sh.watchers[key] == w {
				delete(sh.watchers, key)
			}
			sh.mu.Unlock()
		})
	}
}

// nowNs reads the store's clock, in Unix ns.
func (s *Store) nowNs() int64 {
	if s.now != nil {
		return s.now().UnixNano()
	}
	return s.baseNs + int64(time.Since(s.base))
}

// nowAt is nowNs for a call with context ctx, taken from the reading that
// ctx made when the call started (mono.Started: the engine's store calls)
// under the default clock, which then reads no clock: the call's now is
// when it started, before it waited for its shard's lock (as if it had got
// the lock at once; the engine counts a claim's lease from there too).
func (s *Store) nowAt(ctx context.Context) int64 {
	if s.now == nil {
		if m, ok := ctx.(mono.Started); ok {
			if d, ok := m.MonoStarted(); ok {
				return s.baseNs + int64(d-s.monoOff)
			}
		}
	}
	return s.nowNs()
}

// bit is 1 for true, 0 for false.
func bit(b bool) int {
	if b {
		return 1
	}
	return 0
}

// after returns now+d in Unix ns, saturated.
func after(now int64, d time.Duration) int64 {
	if t := now + int64(d); t >= now {
		return t
	}
	return 1<<63 - 1
}

// at returns slot i.
//
// Its address is computed, not taken of the page's element (&page[j]): the
// compiler checks a page pointer for nil by loading from it, which reads
// the page's first line, most often cold (a page holds 204 slots), and
// stalls on it even when the slot is only prefetched (prefetchClaim).
// Pages are never nil, and the index is in range.
func (sh *shard) at(i int32) *slot {
	u := uint32(i) // none (and any negative i) is out of range
	return (*slot)(pageElem(unsafe.Pointer(sh.pages[u/slotsPerPage]), uintptr(u%slotsPerPage), unsafe.Sizeof(slot{})))
}

// pageElem returns the address of element j, of size bytes, of the page at
// p: &p[j] without a load from p (see at).
func pageElem(p unsafe.Pointer, j, size uintptr) unsafe.Pointer {
	return unsafe.Add(p, j*size)
}

// reclaimable is idem.Record.Reclaimable on a slot (hasResp stands for
// Response != nil), without building the Record.
func (e *slot) reclaimable() bool { return e.state == idem.StateFailed && !e.hasResp }

// key returns slot i's key, aliasing its chunk.
func (sh *shard) key(i int32) []byte {
	e := sh.at(i)
	return sh.chunks[e.keyChunk][e.keyOff : e.keyOff+e.keyLen : e.keyOff+e.keyLen]
}

// record returns slot i as an idem.Record; its Response is a copy (the
// chunk's memory is reused once the record is gone), appended to buf[:0].
func (sh *shard) record(i int32, buf []byte) idem.Record {
	e := sh.at(i)
	rec := idem.Record{State: e.state, Token: e.token,
		LeaseExpiresAt: time.Unix(0, e.lease), ExpiresAt: time.Unix(0, e.exp)}
	sh.loadFP(i, &rec.Fingerprint)
	switch {
	case !e.hasResp:
	case e.respLen == 0:
		rec.Response = []byte{}
	default:
		rec.Response = append(buf[:0], sh.chunks[e.respChunk][e.respOff:e.respOff+e.respLen]...)
	}
	return rec
}

// holds reports whether slot e holds exactly state and response (a nil
// response and an empty one differ).
func (sh *shard) holds(e *slot, state idem.State, response []byte) bool {
	if e.state != state || e.hasResp != (response != nil) || int(e.respLen) != len(response) {
		return false
	}
	return e.respLen == 0 || bytes.Equal(sh.chunks[e.respChunk][e.respOff:e.respOff+e.respLen], response)
}

func (sh *shard) notify(i int32) {
	if len(sh.watchers) == 0 {
		return
	}
	key := sh.key(i)
	if w := sh.watchers[string(key)]; w != nil {
		close(w.ch)
		delete(sh.watchers, string(key))
	}
}

// find returns the slot of key (hash h), or none.
func (sh *shard) find(key string, h uint64) int32 {
	if sh.count == 0 {
		return none
	}
	mask := uint64(len(sh.idx) - 1)
	tag := h >> 32
	for p := tag & mask; ; p = (p + 1) & mask {
		w := sh.idx[p]
		if w == 0 {
			return none
		}
		if w>>32 == tag {
			i := int32(uint32(w) - 1)
			if string(sh.key(i)) == key {
				return i
			}
		}
	}
}

// add makes a new record for key (hash h) expiring at exp and indexes it.
func (sh *shard) add(key string, h uint64, exp int64, tag uint32) int32 {
	var i int32
	if n := len(sh.free); n > 0 {
		i = sh.free[n-1]
		sh.free = sh.free[:n-1]
	} else {
		i = sh.nslots
		if int(i)/slotsPerPage == len(sh.pages) {
			sh.pages = append(sh.pages, newSlotPage())
		}
		sh.nslots++
	}
	c, off := sh.storeKey(key, tag)
	*sh.at(i) = slot{exp: exp, keyChunk: c, keyOff: off, keyLen: uint32(len(key)),
		respChunk: none, expiryPos: none, prev: none, next: none}
	if (sh.count+1)*4 > len(sh.idx)*3 {
		sh.grow()
	}
	sh.insert(h>>32<<32 | uint64(uint32(i)+1))
	sh.count++
	sh.bytes += int64(len(key)) + EntryOverhead
	sh.expiryPush(i, exp)
	return i
}

// insert puts index word w (hash>>32<<32 | slot+1) at its place.
func (sh *shard) insert(w uint64) {
	mask := uint64(len(sh.idx) - 1)
	p := w >> 32 & mask
	for sh.idx[p] != 0 {
		p = (p + 1) & mask
	}
	sh.idx[p] = w
}

// grow doubles the index. It is an arena block, as the slots are: on the
// Go heap, each new index is fresh memory (a page fault per 4 KiB, most of a
// growing store's faults besides its records') and the old one garbage.
func (sh *shard) grow() {
	old := sh.idx
	sh.idx = newIndex(max(minBlock/8, 2*len(old)))
	sh.idxMask.Store(uint64(len(sh.idx) - 1))
	sh.idxAt.Store(&sh.idx[0])
	for _, w := range old {
		if w != 0 {
			sh.insert(w)
		}
	}
	mem.free(idxBlock(old))
}

// unindex removes slot i from the index (backward-shift deletion); its
// key's hash is computed again (removals are rarer than lookups, and a slot
// is smaller without it).
func (sh *shard) unindex(i int32) {
	mask := uint64(len(sh.idx) - 1)
	h := maphash.Bytes(sh.seed, sh.key(i))
	want := h>>32<<32 | uint64(uint32(i)+1)
	p := h >> 32 & mask
	for sh.idx[p] != want {
		p = (p + 1) & mask
	}
	for q := p; ; {
		q = (q + 1) & mask
		w := sh.idx[q]
		if w == 0 {
			break
		}
		home := w >> 32 & mask
		if (q-home)&mask >= (q-p)&mask {
			sh.idx[p] = w
			p = q
		}
	}
	sh.idx[p] = 0
}

// makeRoom frees room for a new record of size bytes (see freeOne); false
// when no record left may go.
func (sh *shard) makeRoom(s *Store, now int64, size int64) bool {
	for sh.count+1 > sh.maxEntries || sh.bytes+size > sh.maxBytes {
		if !sh.freeOne(s, now, none) {
			return false
		}
	}
	return true
}

// freeOne drops one record, other than keep, for room: an expired one
// (soonest expiry first), else a reclaimable FAILED one (oldest first),
// else the oldest finished record if it finished at least MinRetention ago.
// false when none may go (the shard holds PENDING records and younger
// finished ones).
func (sh *shard) freeOne(s *Store, now int64, keep int32) bool {
	switch {
	case now >= sh.minExp:
		sh.remove(sh.soonest())
		s.expired.Add(1)
	case sh.fhead != none && sh.fhead != keep:
		sh.remove(sh.fhead)
		s.evictedFailed.Add(1)
	case sh.head != none && sh.head != keep && s.minRet >= 0 && now >= after(sh.at(sh.head).lease, time.Duration(s.minRet)):
		sh.remove(sh.head)
		s.evicted.Add(1)
	default:
		return false
	}
	return true
}

// full is the ErrFull of a claim the shard has no room for, with the time
// until it may next make room (nextRoom).
func (sh *shard) full(s *Store, now int64) error {
	return &FullError{wait: sh.nextRoom(s, now)}
}

// nextRoom is the time until the shard may next drop a record: when its
// oldest finished record reaches MinRetention or its soonest expiry comes,
// whichever first (within [1s, maxRetryAfter]).
func (sh *shard) nextRoom(s *Store, now int64) time.Duration {
	next := sh.minExp
	if sh.head != none && s.minRet >= 0 {
		next = min(next, after(sh.at(sh.head).lease, time.Duration(s.minRet)))
	}
	wait := maxRetryAfter
	if next-now < int64(maxRetryAfter) {
		wait = max(time.Second, time.Duration(next-now))
	}
	return wait
}

// dropExpired removes up to n expired records.
func (sh *shard) dropExpired(s *Store, now int64, n int) {
	for ; n > 0 && now >= sh.minExp; n-- {
		sh.remove(sh.soonest())
		s.expired.Add(1)
	}
}

func (sh *shard) remove(i int32) {
	sh.notify(i)
	sh.unindex(i)
	sh.expiryRemove(i)
	sh.unlist(i)
	sh.dropResponse(i)
	e := sh.at(i)
	sh.leave(i)
	sh.release(e.keyChunk, e.keySpan())
	sh.bytes -= int64(e.keyLen) + EntryOverhead
	*e = slot{}
	sh.free = append(sh.free, i)
	sh.count--
}

func (sh *shard) dropResponse(i int32) {
	e := sh.at(i)
	if !e.hasResp {
		return
	}
	sh.release(e.respChunk, e.respLen)
	sh.bytes -= int64(e.respLen)
	sh.charge(i, -int64(e.respLen))
	e.hasResp, e.respChunk, e.respOff, e.respLen = false, none, 0, 0
}

// Chunks.

// prefetchResponse is how much of the current chunk, past its end, a claim
// prefetches for the response that its Finish will append.
const prefetchResponse = 320

// prefetchClaim prefetches what add will write for a key of n bytes: the
// slot it will take, the end of the current chunk and the expiry queue's
// next entry.
func (sh *shard) prefetchClaim(n int) {
	i := sh.nslots
	if k := len(sh.free); k > 0 {
		i = sh.free[k-1]
	}
	if int(i)/slotsPerPage < len(sh.pages) {
		p := unsafe.Pointer(sh.at(i))
		prefetch(p)
		prefetch(unsafe.Add(p, unsafe.Sizeof(slot{})-1))
	}
	sh.prefetchAppend(n)
	if d := sh.qhi - sh.qbase; int(d/entriesPerQueuePage) < len(sh.queue) {
		prefetch(unsafe.Pointer(sh.qe(sh.qhi)))
	}
	if sh.count >= sh.maxEntries || sh.bytes+int64(n)+EntryOverhead > sh.maxBytes {
		sh.prefetchEvict()
	}
}

// prefetchEvict prefetches, for a claim that will make room (makeRoom),
// what dropping the record freeOne most likely takes reads and writes
// besides its slot: its key (unindex hashes it again), its expiry queue
// entry and the next record on its list (unlist). The oldest records are
// the coldest in memory. The record is the oldest reclaimable FAILED one,
// else the oldest finished one (an expired record, which freeOne takes
// first, is not looked for: that needs the clock).
func (sh *shard) prefetchEvict() {
	v := sh.fhead
	if v == none {
		v = sh.head
	}
	if v == none {
		return
	}
	e := sh.at(v)
	if c := e.keyChunk; c != none && int(c) < len(sh.chunks) && e.keyLen > 0 {
		if b := sh.chunks[c]; uint64(e.keyOff)+uint64(e.keyLen) <= uint64(len(b)) {
			prefetch(unsafe.Pointer(&b[e.keyOff]))
			prefetch(unsafe.Pointer(&b[e.keyOff+e.keyLen-1]))
		}
	}
	if e.queued {
		if d := uint32(e.expiryPos) - sh.qbase; int(d/entriesPerQueuePage) < len(sh.queue) {
			prefetch(unsafe.Pointer(sh.qe(uint32(e.expiryPos))))
		}
	}
	if e.next != none {
		p := unsafe.Pointer(sh.at(e.next))
		prefetch(p)
		prefetch(unsafe.Add(p, unsafe.Sizeof(slot{})-1))
	}
}

// prefetchAppend prefetches the lines of the current chunk that an append
// of n bytes would write.
func (sh *shard) prefetchAppend(n int) {
	if sh.cur == none {
		return
	}
	b := sh.chunks[sh.cur]
	b = b[:cap(b)]
	// Blocks are page-aligned: offsets that are multiples of 64 start lines.
	for o, end := len(sh.chunks[sh.cur])&^63, min(len(sh.chunks[sh.cur])+n, len(b)); o < end; o += 64 {
		prefetch(unsafe.Pointer(&b[o]))
	}
}

// store appends b to a chunk and returns where it lies.
func store[T string | []byte](sh *shard, b T) (int32, uint32) {
	n := len(b)
	if n == 0 {
		return none, 0
	}
	c := sh.reserve(n)
	buf := sh.chunks[c]
	off := len(buf)
	sh.chunks[c] = append(buf, b...)
	return c, uint32(off)
}

// reserve returns a chunk with room for n more bytes, accounted live.
func (sh *shard) reserve(n int) int32 {
	if c := sh.cur; c != none && cap(sh.chunks[c])-len(sh.chunks[c]) >= n {
		sh.chunkLive[c] += int64(n)
		sh.dataBytes += int64(n)
		return c
	}
	if sh.chunkBytes > 2*sh.dataBytes+compactSlack {
		sh.compact()
		return sh.reserve(n)
	}
	size := n
	if n <= bigValue {
		// At least n: store appends within the chunk's capacity, so the
		// value never moves out of the arena block.
		size = max(n, int(min(chunkMax, max(chunkMin, sh.dataBytes/32))))
	}
	c := sh.newChunk(size)
	if n <= bigValue {
		old := sh.cur
		sh.cur = c
		if old != none && sh.chunkLive[old] == 0 {
			sh.dropChunk(old)
		}
	}
	sh.chunkLive[c] += int64(n)
	sh.dataBytes += int64(n)
	return c
}

func (sh *shard) newChunk(size int) int32 {
	var c int32
	if n := len(sh.freeChunks); n > 0 {
		c = sh.freeChunks[n-1]
		sh.freeChunks = sh.freeChunks[:n-1]
	} else {
		c = int32(len(sh.chunks))
		sh.chunks = append(sh.chunks, nil)
		sh.chunkLive = append(sh.chunkLive, 0)
	}
	b := mem.alloc(size)
	sh.chunks[c] = b[:0]
	sh.chunkLive[c] = 0
	sh.chunkBytes += int64(len(b))
	return c
}

// dropChunk gives chunk c's memory back to the arena.
func (sh *shard) dropChunk(c int32) {
	b := sh.chunks[c]
	sh.chunkBytes -= int64(cap(b))
	mem.free(b[:cap(b)])
	sh.chunks[c] = nil
	sh.freeChunks = append(sh.freeChunks, c)
}

// release marks n bytes of chunk c dead.
func (sh *shard) release(c int32, n uint32) {
	if c == none || n == 0 {
		return
	}
	sh.chunkLive[c] -= int64(n)
	sh.dataBytes -= int64(n)
	if sh.chunkLive[c] == 0 && c != sh.cur {
		sh.dropChunk(c)
	}
}

// compact copies every live key and response into fresh chunks.
func (sh *shard) compact() {
	old := sh.chunks
	sh.chunks, sh.chunkLive, sh.freeChunks = nil, nil, nil
	sh.cur, sh.chunkBytes, sh.dataBytes = none, 0, 0
	for i := range sh.nslots {
		e := sh.at(i)
		if e.state == 0 {
			continue
		}
		if e.keyLen > 0 {
			e.keyChunk, e.keyOff = store(sh, old[e.keyChunk][e.keyOff:e.keyOff+e.keySpan()]) // the principal tag (and a long fingerprint) follow the key
		}
		if e.respLen > 0 {
			e.respChunk, e.respOff = store(sh, old[e.respChunk][e.respOff:e.respOff+e.respLen])
		}
	}
	for _, b := range old {
		mem.free(b[:cap(b)])
	}
}

// The list of finished records, oldest first.

// list appends slot i, which is not on a list and has just been given its
// finished state and response, to its list: reclaimable FAILED records are
// on their own (evicted first, whatever their age).
func (sh *shard) list(i int32) {
	e := sh.at(i)
	head, tail := &sh.head, &sh.tail
	if e.reclaimable() {
		head, tail = &sh.fhead, &sh.ftail
	}
	e.prev, e.next = *tail, none
	if *tail != none {
		sh.at(*tail).next = i
	} else {
		*head = i
	}
	*tail = i
}

// unlist removes slot i from its list, if it is on one; the caller then
// changes its state or response.
func (sh *shard) unlist(i int32) {
	e := sh.at(i)
	if e.state != idem.StateCompleted && e.state != idem.StateFailed {
		return
	}
	head, tail := &sh.head, &sh.tail
	if e.reclaimable() {
		head, tail = &sh.fhead, &sh.ftail
	}
	if e.prev != none {
		sh.at(e.prev).next = e.next
	} else {
		*head = e.next
	}
	if e.next != none {
		sh.at(e.next).prev = e.prev
	} else {
		*tail = e.prev
	}
	e.prev, e.next = none, none
}

// Expiry: a record is scheduled either on the queue or on the heap, and
// slot.expiryPos says where (slot.queued tells which). A record that expires
// no sooner than the queue's last entry joins the queue (the common case:
// one window, claims in time order), in O(1) and without touching another
// record; the rest go to the heap. The soonest expiry is the sooner of the
// queue's front and the heap's root.

// expiryPush schedules slot i, which is not scheduled, to expire at exp.
func (sh *shard) expiryPush(i int32, exp int64) {
	if exp >= sh.qlast {
		sh.qpush(i, exp)
	} else {
		sh.heapPush(i, exp)
	}
	sh.minExp = min(sh.minExp, exp)
}

// expiryRemove unschedules slot i (if it is scheduled).
func (sh *shard) expiryRemove(i int32) {
	if sh.at(i).queued {
		sh.qremove(i)
	} else {
		sh.heapRemove(i)
	}
	sh.minExp = math.MaxInt64
	if sh.qlo != sh.qhi {
		sh.minExp = sh.at(*sh.qe(sh.qlo)).exp
	}
	if sh.nheap > 0 {
		sh.minExp = min(sh.minExp, sh.hp(0).exp)
	}
}

// expiryFix schedules slot i again after its exp changed.
func (sh *shard) expiryFix(i int32) {
	sh.expiryRemove(i)
	sh.expiryPush(i, sh.at(i).exp)
}

// soonest returns the record that expires first (at minExp); the shard
// holds one (minExp < MaxInt64).
func (sh *shard) soonest() int32 {
	if sh.qlo != sh.qhi {
		if q := *sh.qe(sh.qlo); sh.nheap == 0 || sh.at(q).exp <= sh.hp(0).exp {
			return q
		}
	}
	return sh.hp(0).slot
}

// The queue: the slot numbers of records in order of expiry at positions
// [qlo, qhi) (uint32, wrapping), in a ring of pages whose first holds
// position qbase. An entry is ordered by its slot's exp, which does not
// change while it is queued (expiryFix takes it out and puts it back). A
// removed entry is marked dead (none) and passed over when it reaches the
// front; when more than half the queue is dead, the live entries move up
// (amortized O(1) per removal), so the queue holds at most about twice
// its live entries.

// queueSlack: the queue compacts when it holds more than twice its live
// entries plus this many.
const queueSlack = 1024

// qe returns the queue entry at position p.
func (sh *shard) qe(p uint32) *int32 {
	d := p - sh.qbase
	return (*int32)(pageElem(unsafe.Pointer(sh.queue[d/entriesPerQueuePage]), uintptr(d%entriesPerQueuePage), 4))
}

func (sh *shard) qpush(i int32, exp int64) {
	if int((sh.qhi-sh.qbase)/entriesPerQueuePage) == len(sh.queue) {
		sh.queue = append(sh.queue, newQueuePage())
	}
	p := sh.qhi
	*sh.qe(p) = i
	e := sh.at(i)
	e.expiryPos, e.queued = int32(p), true
	sh.qhi++
	sh.qlive++
	sh.qlast = exp
}

func (sh *shard) qremove(i int32) {
	e := sh.at(i)
	*sh.qe(uint32(e.expiryPos)) = none
	e.expiryPos, e.queued = none, false
	sh.qlive--
	if sh.qlive == 0 {
		// Empty: start again at the first page.
		sh.qlo, sh.qhi, sh.qlast = sh.qbase, sh.qbase, math.MinInt64
		return
	}
	for *sh.qe(sh.qlo) == none {
		sh.qlo++
	}
	for sh.qlo-sh.qbase >= entriesPerQueuePage {
		// The first page is behind the front: it goes to the end of the
		// ring, for the queue's growth.
		pg := sh.queue[0]
		copy(sh.queue, sh.queue[1:])
		sh.queue[len(sh.queue)-1] = pg
		sh.qbase += entriesPerQueuePage
	}
	if n := sh.qhi - sh.qlo; n > 2*uint32(sh.qlive)+queueSlack {
		sh.qcompact()
	}
}

// qcompact moves the queue's live entries up over its dead ones.
func (sh *shard) qcompact() {
	to := sh.qlo
	for p := sh.qlo; p != sh.qhi; p++ {
		q := *sh.qe(p)
		if q == none {
			continue
		}
		if p != to {
			*sh.qe(to) = q
			sh.at(q).expiryPos = int32(to)
		}
		to++
	}
	sh.qhi = to
	sh.qlast = sh.at(*sh.qe(to - 1)).exp
}

// The heap on ExpiresAt, with indexes kept in the slots.

// hp returns heap entry j.
func (sh *shard) hp(j int) *expiryEntry {
	u := uint(j) // a negative j is out of range
	return (*expiryEntry)(pageElem(unsafe.Pointer(sh.heap[u/entriesPerExpiryPage]), uintptr(u%entriesPerExpiryPage), unsafe.Sizeof(expiryEntry{})))
}

func (sh *shard) heapPush(i int32, exp int64) {
	j := sh.nheap
	if j == len(sh.heap)*entriesPerExpiryPage {
		sh.heap = append(sh.heap, newExpiryPage())
	}
	sh.nheap++
	*sh.hp(j) = expiryEntry{exp: exp, slot: i}
	sh.at(i).expiryPos = int32(j)
	if exp >= sh.maxExp {
		// Expiring no sooner than any entry, it stays a leaf without a
		// look at its parent, which is far away in memory.
		sh.maxExp = exp
		return
	}
	sh.up(j)
}

func (sh *shard) heapRemove(i int32) {
	j := int(sh.at(i).expiryPos)
	last := sh.nheap - 1
	if j < 0 || j > last || sh.hp(j).slot != i {
		return
	}
	if j != last {
		sh.swap(j, last)
	}
	sh.nheap = last
	sh.at(i).expiryPos = none
	if j != last {
		sh.heapFixAt(j)
	}
}

func (sh *shard) heapFixAt(i int) {
	if !sh.down(i) {
		sh.up(i)
	}
}

func (sh *shard) swap(i, j int) {
	a, b := sh.hp(i), sh.hp(j)
	*a, *b = *b, *a
	sh.at(a.slot).expiryPos = int32(i)
	sh.at(b.slot).expiryPos = int32(j)
}

func (sh *shard) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if sh.hp(j).exp >= sh.hp(i).exp {
			break
		}
		sh.swap(i, j)
		j = i
	}
}

func (sh *shard) down(i0 int) bool {
	i, n := i0, sh.nheap
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		if j2 := j + 1; j2 < n && sh.hp(j2).exp < sh.hp(j).exp {
			j = j2
		}
		if sh.hp(j).exp >= sh.hp(i).exp {
			break
		}
		sh.swap(i, j)
		i = j
	}
	return i > i0
}

func (s *Store) sweeper(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Sweep drops expired records now (up to a bounded number per shard); the
// background sweeper calls it.
func (s *Store) Sweep() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.dropExpired(s, s.nowNs(), sweepBatch)
		sh.mu.Unlock()
	}
}

// Fingerprints. Most records over the engine hold a process-local
// fingerprint (fingerprint.Local), whose bytes 17..32 (the process's tag,
// then zeros) and version byte are the same in all of them: a slot keeps
// its 16 bytes of digest (fpLocal), the shard the rest once (fpHead,
// fpTail). A zero fingerprint takes no room (fpZero); any other is kept
// whole (fpLong), in the key's chunk after the key and its principal tag.
// Every byte of a slot is memory each record takes.
const (
	fpZero  = 0
	fpLocal = 1
	fpLong  = 2
	// fpLongBytes is the size of a fingerprint kept whole.
	fpLongBytes = uint32(len(idem.Fingerprint{}))
)

// keySpan is the length of slot e's bytes in its key's chunk: the key, the
// principal tag and a long fingerprint.
func (e *slot) keySpan() uint32 {
	n := e.keyLen + tagBytes
	if e.fpMode == fpLong {
		n += fpLongBytes
	}
	return n
}

// fpOf returns slot i's fingerprint.
func (sh *shard) fpOf(i int32) idem.Fingerprint {
	var fp idem.Fingerprint
	sh.loadFP(i, &fp)
	return fp
}

// loadFP sets *fp, which is zero, to slot i's fingerprint.
func (sh *shard) loadFP(i int32, fp *idem.Fingerprint) {
	e := sh.at(i)
	switch e.fpMode {
	case fpLocal:
		fp[0] = sh.fpHead
		*(*[16]byte)(fp[1:17]) = e.fp
		*(*[16]byte)(fp[17:]) = sh.fpTail
	case fpLong:
		o := e.keyOff + e.keyLen + tagBytes
		*fp = idem.Fingerprint(sh.chunks[e.keyChunk][o : o+fpLongBytes])
	}
}

// fpModeOf returns the form in which the shard keeps fp.
func (sh *shard) fpModeOf(fp *idem.Fingerprint) uint8 {
	if *fp == (idem.Fingerprint{}) {
		return fpZero
	}
	if !sh.fpSet && fingerprint.IsLocal(int(fp[0])) {
		sh.fpHead, sh.fpSet = fp[0], true
		copy(sh.fpTail[:], fp[17:])
	}
	if sh.fpSet && fp[0] == sh.fpHead && [16]byte(fp[17:]) == sh.fpTail {
		return fpLocal
	}
	return fpLong
}

// setFP gives slot i, which is not free (setFP may compact the shard),
// the fingerprint fp.
func (sh *shard) setFP(i int32, fp *idem.Fingerprint) {
	e := sh.at(i) // slots never move: e stays i's through a compaction
	mode := sh.fpModeOf(fp)
	if mode == fpLong {
		if e.fpMode != fpLong {
			sh.widenKeySpan(e)
		}
		o := e.keyOff + e.keyLen + tagBytes
		copy(sh.chunks[e.keyChunk][o:o+fpLongBytes], fp[:])
		e.fp = [16]byte{}
		e.fpMode = fpLong
		return
	}
	if e.fpMode == fpLong {
		// The long fingerprint's bytes are dead where they are.
		sh.release(e.keyChunk, fpLongBytes)
	}
	e.fp = [16]byte{}
	if mode == fpLocal {
		copy(e.fp[:], fp[1:17])
	}
	e.fpMode = mode
}

// widenKeySpan moves slot e's key and principal tag to a span with room
// for a long fingerprint after them (its bytes unset).
func (sh *shard) widenKeySpan(e *slot) {
	n := e.keyLen + tagBytes
	c := sh.reserve(int(n + fpLongBytes)) // may compact: e's key moves (its span is n bytes)
	buf := sh.chunks[c]
	off := len(buf)
	buf = buf[:off+int(n+fpLongBytes)]
	copy(buf[off:], sh.chunks[e.keyChunk][e.keyOff:e.keyOff+n])
	sh.chunks[c] = buf
	old := e.keyChunk
	e.keyChunk, e.keyOff = c, uint32(off)
	sh.release(old, n)
}
