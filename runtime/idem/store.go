package idem

import (
	"context"
	"errors"
	"time"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// This file is the driver contract between the Engine and a record store.
// A store is deliberately dumb: it never interprets responses, policies or
// HTTP. It keeps one record per encoded scope key and makes the few
// decisions that must be atomic (claim, take over, fence) on its own clock.
// The shared logic lives once, in the Engine.

// State is the state of an idempotency record.
type State uint8

const (
	// StateNone (0, "NONE") is no record: the BeginResult.Prior and
	// Event.Prior of a claim of a key that had no record (or an expired
	// one), and the Event.State of a request that ran unprotected. No store
	// keeps it in a record.
	StateNone State = 0
	// StatePending: a holder is executing the request under a lease.
	StatePending State = 1
	// StateCompleted: the request executed; Response holds what to replay.
	StateCompleted State = 2
	// StateFailed: the request failed. With a nil Response the key is free
	// again for a retry (policy `failures: retry`); with a Response the
	// failure is replayed like a completion (policy `failures: replay`).
	StateFailed State = 3
)

// String returns the state's name: NONE, PENDING, COMPLETED or FAILED
// (UNKNOWN for any other value). The names are stable, like the event
// kinds' (see EventKind).
func (s State) String() string {
	switch s {
	case StateNone:
		return "NONE"
	case StatePending:
		return "PENDING"
	case StateCompleted:
		return "COMPLETED"
	case StateFailed:
		return "FAILED"
	}
	return "UNKNOWN"
}

// Token is a fencing token. The Engine draws a fresh random token for every
// claim; a store only stores and compares tokens (as opaque 64-bit values:
// a store whose server-side language has only doubles, like Redis Lua, must
// keep them as strings).
type Token uint64

// Fingerprint is the versioned digest of a request (see package fingerprint).
type Fingerprint = fingerprint.Fingerprint

// Record is what a store keeps under one encoded scope key.
type Record struct {
	// State is PENDING, COMPLETED or FAILED.
	State State
	// Fingerprint is the fingerprint of the request that claimed the key.
	Fingerprint Fingerprint
	// Token is the fencing token of the claim that holds (or held) the key.
	Token Token
	// LeaseExpiresAt is when a PENDING holder's lease runs out, on the store's clock.
	LeaseExpiresAt time.Time
	// ExpiresAt is when the record is forgotten: Begin time + BeginRequest.TTL, on the store's clock,
	// or the end of a later lease (LeaseExtender.ExtendLease moves it there).
	ExpiresAt time.Time
	// Response is the engine-encoded response (opaque to the store); nil while PENDING
	// and for a FAILED record that frees the key.
	Response []byte
}

// Reclaimable reports whether a record frees its key for a new claim (a FAILED record without a response).
func (r *Record) Reclaimable() bool { return r.State == StateFailed && r.Response == nil }

// BeginRequest asks a store to claim a key.
type BeginRequest struct {
	// Key is the encoded scope key (principal, operation and idempotency key,
	// encoded by the Engine so that distinct scopes never collide). It is valid
	// UTF-8 without NUL bytes, at most a few hundred bytes long.
	Key string
	// Fingerprint of the request making the claim.
	Fingerprint Fingerprint
	// Token is the fresh fencing token the claim will carry if it succeeds.
	Token Token
	// Lease is how long the claim holds before another request may take it over.
	Lease time.Duration
	// TTL is how long the record lives, counted from this Begin (the policy's window).
	TTL time.Duration
	// SameFingerprintToReclaim (strict semantics): a reclaimable (FAILED, no
	// response) record, and a PENDING record whose lease has expired (its
	// holder may have done its side effects before it stopped), are claimed
	// again only by a request with an equal Fingerprint (byte for byte: the
	// store does not compare across fingerprint versions); otherwise the
	// store returns the record unclaimed. The Engine then answers a conflict,
	// or, for the same request fingerprinted in another version, claims again
	// with the record's Fingerprint.
	SameFingerprintToReclaim bool
	// Principal is the caller whose request makes the claim, as
	// Options.Principal returned it (under ScopeShared too: the keys are
	// shared, but the record is still made for this caller), or "" for no
	// principal (idem.Anonymous, a nil Options.Principal, or one that
	// answered "" where that is allowed). A store may use it to keep one
	// caller from filling it at the expense of the others (memstore's
	// Options.MaxPrincipalShare) and refuse such a caller's new claims
	// with an error that is ErrQuotaExceeded; "" is never limited. It
	// changes nothing else: the Key already scopes the record. It may
	// alias memory of the request, as Key does. Stores that do not limit
	// callers ignore it.
	Principal string
	// Buf is memory of the Engine's that a store may use for the Response
	// of the Record it returns, by appending to Buf[:0] (a store that copies
	// responses out of memory it reuses, as memstore does). The Engine
	// reuses it once the request is over and copies what it keeps from it.
	// A store whose responses stay valid may ignore it.
	Buf []byte
}

// BeginResult is what Begin decided, atomically.
type BeginResult struct {
	// Acquired: the caller holds the key with BeginRequest.Token; a new PENDING
	// record was written (with the request's fingerprint and a fresh TTL).
	Acquired bool
	// Prior is the state of the record that the claim replaced: StateNone (0)
	// when there was none (or it had expired), StatePending when an expired lease was taken
	// over, StateFailed when a reclaimable failure was retried.
	Prior State
	// Record is the existing record when !Acquired.
	Record Record
}

// Store is the driver interface that every record store implements.
//
// Begin, in one atomic step on the store's clock:
//   - no record, or a record past ExpiresAt: write PENDING{fingerprint, token,
//     lease, ExpiresAt = now+TTL} and report Acquired (Prior 0);
//   - PENDING with an expired lease: replace it the same way (Prior StatePending),
//     so the old holder's token is fenced out, unless SameFingerprintToReclaim
//     is set and the fingerprints differ;
//   - reclaimable FAILED: replace it (Prior StateFailed), unless
//     SameFingerprintToReclaim is set and the fingerprints differ;
//   - otherwise: report the record, not acquired.
//
// Finish, atomically: if the record exists, is PENDING and carries token, set
// its State and Response (keeping ExpiresAt); otherwise change nothing and
// return ErrFenced. state is StateCompleted or StateFailed.
//
// Re-runs: a store's client may send a call again when the connection
// dropped after the call was sent (go-redis does, up to MaxRetries), so the
// store may execute one Begin or Finish twice, the second run possibly
// well after the first (a connection that hung before it dropped). Both
// must tolerate it. Begin finding an unexpired PENDING record that carries
// req.Token (the first run's claim) reports Acquired and renews the lease,
// LeaseExpiresAt = now + Lease, as the claim did: the caller counts its
// lease (and schedules its heartbeats) from the answer it gets, so a lease
// left as the first run set it could run out, and be taken over, while
// the caller believes it holds the key. It renews it even when that lease
// has run out meanwhile: no other claim came in between, or the record
// would carry another token, so this is no takeover. It changes nothing
// else (ExpiresAt stays the first run's). Prior is the state the first run
// replaced where the record keeps it (pgstore keeps it), else 0: a
// takeover or reclaim whose reply was lost is then reported as a claim of
// a new key (see EventLeaseTakeover). Finish finding a record that carries
// token and already holds state and response (the first run's write; a nil
// and an empty response differ) returns nil and changes nothing; a final
// record holding anything else is still fenced. Tokens are fresh per
// claim, so only the claim's own calls can match. (The Engine also takes a
// reported, not acquired, PENDING record carrying its own token as its
// claim, the answer an earlier form of this contract allowed; such a store
// leaves the lease where the first run set it.)
//
// Get returns the current, unexpired record, or found == false.
//
// Memory: a store must not keep a reference to the response slice passed to
// Finish (or to a Transactor's commit) after the call returns: the engine
// reuses that buffer. A Record.Response a store returns may be shared (the
// in-memory store returns its own copy to every reader), so neither the store
// nor the engine modifies it afterwards. BeginRequest.Key may alias memory of
// the request being served: a store that keeps it beyond the call (as a map
// key, say) should keep strings.Clone(Key), not to pin that memory.
//
// Context: a ctx already cancelled when a method is called makes it return
// an error wrapping ctx.Err() (errors.Is(err, context.Canceled)) without
// changing anything.
//
// Errors: a Begin error after which the store certainly did not claim the
// key may be marked so (NothingDone, ErrNothingDone); the engine releases
// the claim any other failed Begin may have made.
//
// Quotas: a store may refuse a claim that would add a record (a key with
// no record, or an expired one) with an error that is ErrQuotaExceeded
// (and ErrNothingDone: nothing was claimed) when BeginRequest.Principal
// holds more than its share of the store already, so that one caller
// cannot fill it for all (memstore does, see its Options.MaxPrincipalShare).
// It never refuses so the empty principal (no principal), nor a claim that
// adds no record (a takeover, a reclaim, a re-run of the same claim).
type Store interface {
	Begin(ctx context.Context, req *BeginRequest) (BeginResult, error)
	Finish(ctx context.Context, key string, token Token, state State, response []byte) error
	Get(ctx context.Context, key string) (rec Record, found bool, err error)
}

// ErrFenced is returned by Store.Finish when the caller's claim is no longer
// the current one: its lease was taken over, or the record expired (or is
// already final with another state or response).
var ErrFenced = errors.New("idem: claim fenced: the lease was taken over or the record expired")

// ErrNothingDone marks the error of a store call that certainly changed
// nothing on the store: the call was refused before anything of it was
// sent (no connection could be had: a dial error, a pool that could not
// hand out a connection in time; its context was done before it was
// written), or the store answered with an error that says it did nothing
// (a statement that failed and rolled back). A store wraps such an error
// with NothingDone, and the engine tests it with errors.Is.
//
// The engine uses it after a failed Begin: any other error of a Begin
// leaves open whether the claim was made (a reply lost with its connection
// after the server committed the claim, or a read that timed out), and
// the engine then releases, in the background, the claim it may have made
// (see Options.FinishRetryFor and MaxClaimReleases), so that the retry of
// its client (told 503, nothing ran) is not refused
// IDEMPOTENCY_KEY_IN_USE for a whole lease (under Options.FailOpen, once
// the unprotected run has ended: until then the claim keeps that retry
// from running the handler concurrently). A store that marks nothing is
// correct, but costs a release (a Finish) per failed Begin, up to the
// releases' budget; a store that marks an error after which its Begin did
// claim the key leaves that key in flight until its lease runs out. So a
// store marks only what its driver guarantees, and in doubt marks
// nothing: with retries inside the driver (go-redis sends a command again
// after a lost reply), the last attempt's error is not enough when an
// earlier attempt may have been sent; and an error answered by something
// in front of the store (a proxy, a connection pooler) may come after it
// forwarded the call, so only the errors the store itself gives before
// it acts are marked.
//
// A handler's error says the same with its own mark, HandlerNothingDone:
// Call.HandlerFailed does not take this one for it, since a handler that
// did something and then failed on a store call of its own (whose error
// carries this mark) must not have its key freed.
var ErrNothingDone = errors.New("idem: the store call changed nothing")

// NothingDone returns err marked with ErrNothingDone (nil for nil): its
// message and what it wraps are err's, and errors.Is(result,
// ErrNothingDone) holds. See ErrNothingDone for when a store may use it; a
// handler marks its error with HandlerNothingDone.
func NothingDone(err error) error {
	if err == nil {
		return nil
	}
	return nothingDone{err}
}

type nothingDone struct{ error }

func (e nothingDone) Unwrap() error { return e.error }

func (nothingDone) Is(target error) bool { return target == ErrNothingDone }

// ErrHandlerNothingDone is the mark of a handler's error that says
// nothing of the operation ran (HandlerNothingDone; see
// Call.HandlerFailed): the handler failed before it changed anything (its
// payment provider refused the connection, a validation it makes before
// any write). It is the handler's own mark, apart from the stores'
// ErrNothingDone: an error a handler got from a store and returned,
// wrapped or not, does not free its key.
var ErrHandlerNothingDone = errors.New("idem: the handler did nothing")

// HandlerNothingDone returns err, an operation's error, marked with
// ErrHandlerNothingDone (nil for nil): its message and what it wraps are
// err's, and errors.Is(result, ErrHandlerNothingDone) holds (through %w
// too: mark the error where the handler knows nothing was done, not an
// error a later step may wrap after a side effect). A protected run whose
// handler returns it has its key freed (Call.HandlerFailed), whatever the
// operation's failures policy: a retry with the key runs the operation
// again.
func HandlerNothingDone(err error) error {
	if err == nil {
		return nil
	}
	return handlerNothingDone{err}
}

type handlerNothingDone struct{ error }

func (e handlerNothingDone) Unwrap() error { return e.error }

func (handlerNothingDone) Is(target error) bool { return target == ErrHandlerNothingDone }

// ErrQuotaExceeded is what the error of a Begin refused for its caller
// alone is (errors.Is): the store keeps room for the other callers, and
// this one (BeginRequest.Principal) holds too large a share of it already
// (memstore.ErrPrincipalFull). The store claimed nothing: the engine
// releases nothing after it, whether or not the store also marked it
// ErrNothingDone. The engine
// answers it 429 CodeQuotaExceeded, with the error's RetryHint as
// Retry-After (else Options.UnavailableRetryAfter), reports an
// EventRejected (not EventStoreError: the store works) and never runs such
// a request, FailOpen or not: it is a deliberate refusal of one caller,
// not an outage. A store refuses so only a claim of a new key by a caller
// that is not "".
var ErrQuotaExceeded = errors.New("idem: the caller holds too large a share of the record store")

// ErrMisconfigured marks a store error that will not go away by itself:
// the store's setup is wrong (its role lacks a privilege, its table or
// database does not exist, its credentials are refused). The engine
// answers it as any store error (503 IDEMPOTENCY_STORE_UNAVAILABLE with
// Retry-After, or FailOpen's run: clients cannot tell, and a fix deployed
// meanwhile makes their retries work), but sets Event.Misconfigured on its
// EventStoreError, so that an alert can tell a misconfiguration, which
// needs an operator, from an outage. A store marks such an error with
// Misconfigured (the engine tests errors.Is(err, ErrMisconfigured));
// pgstore marks SQLSTATE classes 42 (42501 insufficient privilege, 42P01
// undefined table, ...), 3F000 (no such schema), 3D000 (no such
// database) and 28 (authentication), and logs them apart. The engine's
// own refusal for want of an Options.Principal, ErrNoPrincipal, is marked
// too (that one is answered 500 IDEMPOTENCY_PRINCIPAL_UNAVAILABLE).
var ErrMisconfigured = errors.New("idem: the store is misconfigured")

// Misconfigured returns err marked with ErrMisconfigured (nil for nil): its
// message and what it wraps are err's, and errors.Is(result,
// ErrMisconfigured) holds.
func Misconfigured(err error) error {
	if err == nil {
		return nil
	}
	return misconfigured{err}
}

type misconfigured struct{ error }

func (e misconfigured) Unwrap() error { return e.error }

func (misconfigured) Is(target error) bool { return target == ErrMisconfigured }

// RetryHint is an optional ability of an error a Store's Begin returns (or
// wraps: the engine finds it with errors.As): RetryAfter is how long the
// store expects to keep refusing claims (a store full of records it may not
// drop: memstore.FullError). Without FailOpen the engine sends it, in
// whole seconds rounded up, as the Retry-After of its 503
// IDEMPOTENCY_STORE_UNAVAILABLE instead of Options.UnavailableRetryAfter,
// at most 30 seconds (a longer hint is sent as 30: what a client waits
// for); a hint that is not positive is ignored.
type RetryHint interface {
	RetryAfter() time.Duration
}

// maxRetryHint bounds the Retry-After the engine sends for a store's
// RetryHint (a full store's 503, a quota's 429). A store's hint may be
// long (memstore's: until its oldest record reaches MinRetention, up to an
// hour), but a client does not wait that long: it gives up instead (the Go
// client does on a Retry-After over idemclient.DefaultRetryAfterLimit, a
// minute, and most clients cap their waits lower), and the caller's
// request is lost, though the store may make room sooner (an expiry,
// another caller's record dropped). 30 seconds is within what those
// clients wait, with room for the attempts already spent; a client that
// comes back too early is refused again, which is cheap (nothing runs).
const maxRetryHint = 30 * time.Second

// Optional abilities, discovered by type assertion.

// ContextBound is a promise, not an ability: a store that implements it
// never uses (nor lets a library it calls use) the ctx of a method after the
// method returns, and keeps no key string it is passed (BeginRequest.Key, the
// key of Finish, Get, ExtendLease or Watch) beyond the call without copying
// it. The engine then keeps the contexts of its store calls and the encoded
// scope key in per-request memory that it reuses, which saves the
// allocations of a replay and of a first request.
// Beware of Go maps: assigning to an existing string key replaces the key the
// map holds with the one assigned, so a store keyed by a map clones the key
// on every assignment, not only when it inserts.
// An in-process store can promise it; a store over a pooled network client
// cannot (pgxpool, for one, starts connections in the background with the
// caller's context values), and does not implement it.
type ContextBound interface {
	ContextBound()
}

// ReadFirst is a promise about costs, not an ability: a store whose Get
// costs much less than a Begin that finds a record (a plain read by key,
// where Begin runs a script or a function on the server) implements it.
// The engine then reads first when it expects a replay: a request whose
// key this Engine recently saw final (it completed the record, or replayed
// it), within the record's window, is first looked up with Get, and a final
// record found there (COMPLETED, or FAILED with a response) is replayed
// (or, under a strict policy and another fingerprint, refused) without a
// Begin; a key Get does not settle (no record, or one in flight or free
// again) goes on to Begin. Every other request, a first request in
// particular, calls Begin alone, as with any store.
//
// A final record never changes until it expires, and Get returns only
// unexpired records, so what Get finds there is what Begin would have
// returned, provided Get reads what Begin reads: the same copy of the
// record (a primary, not a replica that may lag), expired by the same
// clock. A Get that fails or settles nothing costs a second round trip (the
// Begin, which answers as always, a failure included); the two share one
// Options.StoreTimeout (Begin gets what the Get left), and a Get that used
// it all up is answered as a failed Begin would be (503, or FailOpen's
// unprotected run) without one.
type ReadFirst interface {
	ReadFirst()
}

// LocalReader is implemented by a store that keeps its records in the
// process (memstore): reading one is a lookup in memory, no round trip,
// and costs far less than fingerprinting a request (canonicalizing its
// body). ReadLocal is Get without a context or an error, since it never
// waits for I/O: the current, unexpired record under key, or found ==
// false. It may append the Response of the record it returns to buf[:0]
// (as Begin does with BeginRequest.Buf); it keeps neither key nor buf
// beyond the call.
//
// The engine then reads a key's record before it fingerprints a request
// whose fingerprint is not in its cache (a retry that comes after many
// other requests, or a first request): over such a store, a response
// record carries a tag of the request that made it (the keyed digest of
// its bytes that the Engine's fingerprint cache uses, and a name of the
// digest's key, random for each Engine: see docs/runtime.md), and a final
// record (COMPLETED, or FAILED with a response) that this Engine
// made for a request of the same bytes is replayed without the
// fingerprint being computed. Any other final record is compared by
// fingerprint as usual, and answered from what ReadLocal returned, without
// a Begin (a final record never changes until it expires, as for
// ReadFirst); a key without a record, or with one in flight or free again,
// goes on to Begin with the fingerprint computed. A first request thus
// pays one lookup more.
//
// Tagged records use a flag that releases before it was introduced refuse
// (the record is then unreadable: 500 IDEMPOTENCY_RECORD_UNREADABLE), and
// the engine writes into a LocalReader's records, for keyed requests, the
// process-local fingerprints of its version (fingerprint.Local: a keyed
// digest whose keys are random for each process, which match nothing in
// another), so a store whose records another process may read (another
// instance, another release) must not implement LocalReader. Such a
// fingerprint carries a tag of its process: a record found with another
// process's is answered 500 IDEMPOTENCY_RECORD_UNREADABLE, and the Engine
// logs an error (once) naming its store's type.
type LocalReader interface {
	ReadLocal(key string, buf []byte) (rec Record, found bool)
}

// keyPrefetcher is a store in the process's memory (memstore) that can
// bring into the CPU's cache, without waiting for it, the memory its first
// call with a key will look at (its index): a hint that changes nothing.
// The engine calls PrefetchKey as soon as a request's scope key is known,
// before the work that comes before its first store call (the
// fingerprint cache's digest of the body), so that the cache miss of that
// call overlaps the work instead of stalling it.
type keyPrefetcher interface {
	PrefetchKey(key string)
}

// LeaseExtender lets a long-running holder extend its lease (a heartbeat).
//
// ExtendLease, atomically: if the record exists, is unexpired, PENDING and
// carries token, set LeaseExpiresAt = now + lease (even when the old lease
// ran out, as long as nobody took it over) and ExpiresAt = max(ExpiresAt,
// LeaseExpiresAt); otherwise return ErrFenced. A non-positive lease is a
// caller's mistake: an error other than ErrFenced, and nothing changes.
//
// So a record whose holder keeps heartbeating never expires while it is
// PENDING, even when the handler runs past the window (ExpiresAt, set by
// Begin to the claim's time + TTL): a record that expired under a running
// holder would let a retry claim the key and run the operation again while
// the first run goes on, and fence the first run's Finish, so nothing would
// be recorded. ExpiresAt never moves earlier (a shorter lease shrinks the
// lease only), and Finish keeps it as it is: a COMPLETED record of a handler
// that ran past the window lives until the end of its last lease.
type LeaseExtender interface {
	ExtendLease(ctx context.Context, key string, token Token, lease time.Duration) error
}

// Watcher lets a waiting duplicate be woken when a record leaves PENDING
// instead of polling. The channel is closed (or receives) on any change of the
// record; stop releases resources.
type Watcher interface {
	Watch(ctx context.Context, key string) (changed <-chan struct{}, stop func())
}

// Transactor is implemented by stores that can run the handler inside a
// database transaction and finish the record in that same transaction, so the
// handler's own writes and the COMPLETED record commit together or not at all.
//
// BeginTx opens a transaction for the holder of key/token and returns a
// context that carries it (the store's package offers a function to take it
// out, e.g. pgstore.Tx(ctx)). commit finishes the record inside the
// transaction, fenced like Store.Finish, and commits; when it returns an error
// (ErrFenced included) the transaction was rolled back. rollback abandons the
// transaction; calling it after commit is a no-op.
type Transactor interface {
	BeginTx(ctx context.Context, key string, token Token) (txctx context.Context, commit func(state State, response []byte) error, rollback func(), err error)
}

// TxLockHolder is an optional ability of a Transactor whose transactions
// may lock the record's row (pgstore, above READ COMMITTED): the engine
// asks it, in transactional mode, before it cancels a handler whose
// heartbeats failed until its lease ran out (ErrLeaseLost).
//
// TxHoldsLock reports whether a transaction BeginTx opened for key/token
// is still open and holds a lock that every claim of key by another token
// (a takeover, the reaper's delete of an expired record) must take first,
// so that none can succeed, nor commit, before that transaction ends; and
// such that the transaction's commit can succeed only if it held that lock
// from BeginTx on (a transaction that lost it, its backend terminated or
// its connection lost, can no longer commit). Then the holder's claim
// cannot be lost while the lock is held, whatever its lease: the engine
// lets the handler go on, and its heartbeats go on trying, instead of
// cancelling a transaction whose work can still commit as its claim's
// (a heartbeat that cannot get a connection from a starved pool does not
// roll back good work). A true answer may be stale only that way (the
// store cannot yet know the lock is gone, and the commit will fail); false
// is always safe: the transaction is cancelled as the lease ends.
//
// The engine asks it right after a heartbeat failed (an error other than
// ErrFenced) at or past the lease's end, so a store can answer from that
// failure: false when it says the server is unreachable (a dial that
// failed, a statement that went unanswered), where the transaction's own
// connection likely hangs too and only the lease's end cuts a handler
// stuck on it short (true would leave it to its request's end, or TCP's
// timeout); true, while the lock holds, when the failure says nothing of
// the server (no free connection in a starved pool). pgstore answers so
// (see pgstore.Store.TxHoldsLock). A heartbeat that reaches the store and
// finds the lock gone is fenced (ErrFenced), which cancels the
// transaction whatever this answers. It must not block: it is called from
// the heartbeat, and must not do I/O.
type TxLockHolder interface {
	TxHoldsLock(key string, token Token) bool
}
