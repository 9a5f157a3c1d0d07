// Package memstore is the in-memory idem.Store: the embedded default for a
// single process (tests, development, one-instance services). Records live
// only as long as the process; use a shared store (Redis, PostgreSQL) when
// several instances serve the same API.
//
// The store is sharded (a power of two of shards, chosen by a seeded hash of
// the key, each with its own lock), implements idem.Watcher (a waiting
// duplicate is woken when the record changes) and idem.LeaseExtender, and is
// safe for concurrent use.
//
// # Expiry
//
// A record past its ExpiresAt is gone: every access checks it (lazily), each
// Begin also drops up to a few expired records of its shard (amortized), and
// a background sweeper (every Options.SweepInterval, bounded work per shard)
// reclaims memory of idle shards. Close stops the sweeper.
//
// # Bounds and eviction
//
// The store holds at most MaxEntries records and MaxBytes bytes (keys,
// stored responses and a fixed per-record overhead), divided evenly among the
// shards. When a new record does not fit its shard, the store drops, in
// order: expired records (soonest expiry first), then the oldest finished
// records (COMPLETED or FAILED, in the order they finished). Evicting a
// finished record shortens its window: a retry with its key would execute
// again; Stats counts evictions so this can be monitored and the bounds
// raised. A PENDING record is never evicted: when a shard holds nothing but
// PENDING records, Begin fails with ErrFull (the engine then answers 503
// IDEMPOTENCY_STORE_UNAVAILABLE, or runs unprotected with FailOpen). A single
// response larger than a shard's byte budget is still stored (after evicting
// everything else finished in the shard), so a completion is never lost.
package memstore

import (
	"context"
	"errors"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Shards is the number of shards, rounded up to a power of two (default 32).
	Shards int
	// MaxEntries bounds the number of records (default 1,000,000).
	MaxEntries int
	// MaxBytes bounds the memory accounted to records (default 256 MiB).
	MaxBytes int64
	// SweepInterval is how often the background sweeper runs (default 30s);
	// negative disables it (expiry stays lazy and amortized).
	SweepInterval time.Duration
	// Now is the store's clock (default time.Now).
	Now func() time.Time
}

// Defaults.
const (
	DefaultShards        = 32
	DefaultMaxEntries    = 1_000_000
	DefaultMaxBytes      = 256 << 20
	DefaultSweepInterval = 30 * time.Second
	// EntryOverhead is the bytes accounted to each record beside its key and response.
	EntryOverhead = 160
	sweepBatch    = 1024
	amortizedPops = 4
)

// ErrFull is returned by Begin when a shard holds only PENDING records and
// no new record fits.
var ErrFull = errors.New("memstore: full: no room for a new record (every record of its shard is PENDING)")

// Stats are counters of a Store's life.
type Stats struct {
	Entries int   // records held now
	Bytes   int64 // bytes accounted now
	Expired int64 // records dropped after their expiry
	Evicted int64 // finished records dropped before their expiry, for room
	Full    int64 // Begin calls refused with ErrFull
}

// Store is an in-memory idem.Store.
type Store struct {
	shards []shard
	mask   uint64
	seed   maphash.Seed
	now    func() time.Time

	expired, evicted, full atomic.Int64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ idem.Store         = (*Store)(nil)
	_ idem.Watcher       = (*Store)(nil)
	_ idem.LeaseExtender = (*Store)(nil)
	_ idem.ContextBound  = (*Store)(nil)
)

type shard struct {
	mu         sync.Mutex
	m          map[string]*entry
	heap       []*entry // min-heap on rec.ExpiresAt
	head, tail *entry   // finished records, oldest first
	watchers   map[string]*watch
	bytes      int64
	maxEntries int
	maxBytes   int64
	_          [64]byte // keep shards on separate cache lines
}

type entry struct {
	key        string
	rec        idem.Record
	heapIdx    int
	prev, next *entry
	listed     bool
	size       int64
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
	s := &Store{shards: make([]shard, n), mask: uint64(n - 1), seed: maphash.MakeSeed(), now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.m = make(map[string]*entry)
		sh.watchers = make(map[string]*watch)
		sh.maxEntries = max(1, (maxEntries+n-1)/n)
		sh.maxBytes = max(EntryOverhead, (maxBytes+int64(n)-1)/int64(n))
	}
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
	st := Stats{Expired: s.expired.Load(), Evicted: s.evicted.Load(), Full: s.full.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Entries += len(sh.m)
		st.Bytes += sh.bytes
		sh.mu.Unlock()
	}
	return st
}

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&s.mask]
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
	sh := s.shard(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	sh.dropExpired(s, now, amortizedPops)
	e := sh.m[req.Key]
	if e != nil && !now.Before(e.rec.ExpiresAt) {
		sh.remove(e)
		s.expired.Add(1)
		e = nil
	}
	var prior idem.State
	switch {
	case e == nil:
		size := int64(len(req.Key)) + EntryOverhead
		if !sh.makeRoom(s, now, size) {
			s.full.Add(1)
			return idem.BeginResult{}, ErrFull
		}
		// Own the key: the engine's may alias a larger per-request object.
		key := strings.Clone(req.Key)
		e = &entry{key: key, size: size}
		sh.m[key] = e
		sh.bytes += size
		e.rec.ExpiresAt = now.Add(req.TTL)
		sh.heapPush(e)
	case e.rec.State == idem.StatePending && !now.Before(e.rec.LeaseExpiresAt):
		prior = idem.StatePending
	case e.rec.Reclaimable() && (!req.SameFingerprintToReclaim || e.rec.Fingerprint == req.Fingerprint):
		prior = idem.StateFailed
	default:
		return idem.BeginResult{Record: e.rec}, nil
	}
	if prior != 0 {
		sh.unlist(e)
		sh.setResponse(e, nil)
		e.rec.ExpiresAt = now.Add(req.TTL)
		sh.heapFix(e)
	}
	e.rec.State = idem.StatePending
	e.rec.Fingerprint = req.Fingerprint
	e.rec.Token = req.Token
	e.rec.LeaseExpiresAt = now.Add(req.Lease)
	sh.notify(req.Key)
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
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	e := sh.m[key]
	if e != nil && !now.Before(e.rec.ExpiresAt) {
		sh.remove(e)
		s.expired.Add(1)
		e = nil
	}
	if e == nil || e.rec.State != idem.StatePending || e.rec.Token != token {
		return idem.ErrFenced
	}
	var resp []byte
	if response != nil {
		resp = append(make([]byte, 0, len(response)), response...)
	}
	sh.setResponse(e, resp)
	e.rec.State = state
	sh.list(e)
	for sh.bytes > sh.maxBytes && sh.head != nil && sh.head != e {
		sh.evict(s, sh.head)
	}
	sh.notify(key)
	return nil
}

// Get implements idem.Store.
func (s *Store) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[key]
	if e == nil {
		return idem.Record{}, false, nil
	}
	if !s.now().Before(e.rec.ExpiresAt) {
		sh.remove(e)
		s.expired.Add(1)
		return idem.Record{}, false, nil
	}
	return e.rec, true, nil
}

// ExtendLease implements idem.LeaseExtender.
func (s *Store) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	e := sh.m[key]
	if e == nil || !now.Before(e.rec.ExpiresAt) || e.rec.State != idem.StatePending || e.rec.Token != token {
		return idem.ErrFenced
	}
	e.rec.LeaseExpiresAt = now.Add(lease)
	return nil
}

// ContextBound implements idem.ContextBound: no method uses its ctx beyond
// the call (each only checks ctx.Err on entry), so the engine may reuse the
// memory that holds those contexts.
func (*Store) ContextBound() {}

// Watch implements idem.Watcher: changed is closed on the next change of the
// key's record (claim, takeover, finish, expiry or eviction).
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func()) {
	sh := s.shard(key)
	sh.mu.Lock()
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

func (sh *shard) notify(key string) {
	if len(sh.watchers) == 0 {
		return
	}
	if w := sh.watchers[key]; w != nil {
		close(w.ch)
		delete(sh.watchers, key)
	}
}

func (sh *shard) setResponse(e *entry, resp []byte) {
	delta := int64(len(resp)) - int64(len(e.rec.Response))
	e.rec.Response = resp
	e.size += delta
	sh.bytes += delta
}

// makeRoom frees room for a new record of size bytes; false when only PENDING records are left.
func (sh *shard) makeRoom(s *Store, now time.Time, size int64) bool {
	for len(sh.m)+1 > sh.maxEntries || sh.bytes+size > sh.maxBytes {
		if len(sh.heap) > 0 && !now.Before(sh.heap[0].rec.ExpiresAt) {
			sh.remove(sh.heap[0])
			s.expired.Add(1)
			continue
		}
		if sh.head == nil {
			return false
		}
		sh.evict(s, sh.head)
	}
	return true
}

func (sh *shard) evict(s *Store, e *entry) {
	sh.remove(e)
	s.evicted.Add(1)
}

// dropExpired removes up to n expired records.
func (sh *shard) dropExpired(s *Store, now time.Time, n int) {
	for ; n > 0 && len(sh.heap) > 0 && !now.Before(sh.heap[0].rec.ExpiresAt); n-- {
		sh.remove(sh.heap[0])
		s.expired.Add(1)
	}
}

func (sh *shard) remove(e *entry) {
	delete(sh.m, e.key)
	sh.heapRemove(e)
	sh.unlist(e)
	sh.bytes -= e.size
	sh.notify(e.key)
}

func (sh *shard) list(e *entry) {
	sh.unlist(e)
	e.listed = true
	e.prev = sh.tail
	if sh.tail != nil {
		sh.tail.next = e
	} else {
		sh.head = e
	}
	sh.tail = e
}

func (sh *shard) unlist(e *entry) {
	if !e.listed {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		sh.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		sh.tail = e.prev
	}
	e.prev, e.next, e.listed = nil, nil, false
}

// Heap on ExpiresAt, with indexes kept in the entries.

func (sh *shard) heapPush(e *entry) {
	e.heapIdx = len(sh.heap)
	sh.heap = append(sh.heap, e)
	sh.up(e.heapIdx)
}

func (sh *shard) heapRemove(e *entry) {
	i := e.heapIdx
	last := len(sh.heap) - 1
	if i < 0 || i > last || sh.heap[i] != e {
		return
	}
	if i != last {
		sh.swap(i, last)
	}
	sh.heap[last] = nil
	sh.heap = sh.heap[:last]
	e.heapIdx = -1
	if i != last {
		sh.heapFixAt(i)
	}
}

func (sh *shard) heapFix(e *entry) { sh.heapFixAt(e.heapIdx) }

func (sh *shard) heapFixAt(i int) {
	if !sh.down(i) {
		sh.up(i)
	}
}

func (sh *shard) less(i, j int) bool {
	return sh.heap[i].rec.ExpiresAt.Before(sh.heap[j].rec.ExpiresAt)
}

func (sh *shard) swap(i, j int) {
	sh.heap[i], sh.heap[j] = sh.heap[j], sh.heap[i]
	sh.heap[i].heapIdx = i
	sh.heap[j].heapIdx = j
}

func (sh *shard) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !sh.less(j, i) {
			break
		}
		sh.swap(i, j)
		j = i
	}
}

func (sh *shard) down(i0 int) bool {
	i, n := i0, len(sh.heap)
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		if j2 := j + 1; j2 < n && sh.less(j2, j) {
			j = j2
		}
		if !sh.less(j, i) {
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
		sh.dropExpired(s, s.now(), sweepBatch)
		sh.mu.Unlock()
	}
}
