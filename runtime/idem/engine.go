package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// Options configure an Engine. Principal is required for policies scoped per
// principal (the default): set it from your authentication, or to
// Anonymous; the other fields' zero values are usable.
type Options struct {
	// Principal returns who makes the request (e.g. the authenticated user or
	// tenant id); records are scoped by principal and operation, so one
	// principal never replays another's response. An error refuses the
	// request: a *Problem is written as is, any other error as 500
	// IDEMPOTENCY_PRINCIPAL_UNAVAILABLE.
	//
	// An empty principal with a nil error is refused as an error
	// (ErrEmptyPrincipal: 500, logged), unless Principal is Anonymous, where
	// it would select the key space: "" is the one key space that Anonymous
	// shares among all callers, so a func that answers "" for a request
	// without a caller (userID(r) on a route without authentication) would
	// let every such caller replay the others' responses (under Window semantics, without even sending a key: by
	// sending the same body). Return an error for a request without a
	// caller (an *Problem, such as 401, to answer it yourself), or a
	// non-empty constant ("guest") for the callers meant to share one key
	// space. Where the principal selects no key space, "" is not refused:
	// under a ScopeShared policy (all callers share its keys anyway), and
	// for a request that is not recorded (an optional key left out under
	// Strict or Loose semantics: it runs unprotected); under Window
	// semantics a request without a key is recorded (by its fingerprint),
	// so there it is refused.
	//
	// Set it from your authentication. A service whose callers are all one
	// principal (no authentication, a single tenant) sets Anonymous: every
	// caller then shares each operation's keys, and may be replayed
	// another's response. Required for a policy scoped per principal
	// (ScopePrincipal, the default: its keys are per caller): with nil,
	// every request of such a policy is refused (500
	// IDEMPOTENCY_PRINCIPAL_UNAVAILABLE, ErrNoPrincipal; the handler does
	// not run), and the Engine logs one error naming their operations (see
	// Engine.Serves). ScopeShared policies need none.
	Principal func(*http.Request) (string, error)
	// Logger receives warnings and errors (store errors, fenced
	// completions, lease takeovers, lost leases, fail-open runs, unreadable
	// records, responses too large to replay, handlers that did not finish),
	// at Info the requests whose own context ended, and at Debug the
	// router's error behind Engine.RefuseWithCause; use Observer for every
	// decision. nil means slog.Default().
	Logger *slog.Logger
	// Observer receives an Event for every decision; nil costs nothing.
	Observer Observer
	// FailOpen runs the handler unprotected when the store fails at Begin
	// (reported as EventStoreError + EventFailOpen and logged). The default,
	// false, fails closed: 503 IDEMPOTENCY_STORE_UNAVAILABLE with Retry-After.
	// A claim the failed Begin may have made all the same (its reply lost,
	// or cut by StoreTimeout; see ErrNothingDone), or that a failed BeginTx
	// leaves, is released only once the unprotected run ends (in the
	// background, so the response does not wait for the store; see
	// MaxClaimReleases): meanwhile it keeps a retry of the same key from
	// running the handler concurrently, up to the operation's lease
	// (InFlight.Lease, counted from the Begin): the claim gets no
	// heartbeat, so a run that outlasts it no longer keeps a retry out.
	// Neither applies to a store call that failed because the request's own
	// context had ended (its client went away, or a deadline set for it
	// passed): that request is refused with CodeRequestEnded, never run;
	// nor to a claim the store refused for its caller's share
	// (ErrQuotaExceeded): refused 429 CodeQuotaExceeded, never run.
	FailOpen bool
	// Transactional runs handlers inside the store's transaction (the store
	// must implement Transactor, or New panics): the response is buffered and
	// reaches the client only after the record committed together with the
	// handler's own writes. See Transactor.
	Transactional bool
	// DisableHeartbeat turns off lease extension. By default, when the store
	// implements LeaseExtender, a running holder that outlives a sixth of
	// its lease extends it Lease/3 after the start of the claim's Begin
	// (the lease counts from there; at once after a claim that took
	// longer), then every Lease/3 after the start of the last extension
	// that got through, so a slow handler is not taken over while it still
	// runs; a failed extension is tried again every Lease/12 while the
	// lease lasts. New logs a warning when heartbeats are on and the store
	// is no LeaseExtender (a store wrapped for metrics that does not
	// forward ExtendLease, typically).
	DisableHeartbeat bool
	// StoreTimeout bounds every call the engine makes to the store (each
	// Get, Begin, Finish, and a transaction's begin and commit), so that a store
	// that accepts connections but never answers makes a request fail closed
	// (503 IDEMPOTENCY_STORE_UNAVAILABLE) in bounded time instead of holding
	// it; an earlier deadline of the request's context still applies. A lease
	// extension (heartbeat) is bounded by the shortest of StoreTimeout, a
	// third of the lease and what is left of it. Default DefaultStoreTimeout.
	StoreTimeout time.Duration
	// FinishRetryFor is how long the engine goes on trying, in the
	// background and with backoff, to finish a record whose Finish failed
	// on the store (it did not answer within StoreTimeout, or the
	// connection broke) after the handler ran, outside a transaction: the
	// response is on its way to the client, and once the store answers
	// again the record holds it, so a retry gets the replay instead of
	// finding the key in flight until its lease runs out and then running
	// the handler a second time. A later attempt after another request
	// took the key over is fenced and changes nothing. Nobody can take the
	// key over while the store is down for every instance, so a record
	// outlives its lease (which counts from the claim, or the last
	// heartbeat) as long as the store stays down: once it answers, the
	// next attempt (every 250ms at most once the lease may have run out;
	// soon when another store call of the engine succeeds: 100ms after the
	// last attempt ended at the earliest, plus a random 0-100ms, and not
	// again during the next backoff step if that attempt fails too) stores
	// the response, unless a retry of the client reached the store first
	// and took the expired lease over (one that reaches this instance
	// tries the pending Finish first: replayed if it is stored, answered
	// in flight, 409 with Retry-After, if it fails otherwise than fenced). It does not cover a store unreachable
	// from this instance only: once the lease runs out, another instance
	// takes the key over (InFlight.Lease must exceed the longest outage a
	// single instance can see, after the handler returns too). 0 means
	// the operation's window (its record cannot be stored after it), at
	// most DefaultFinishRetryFor (10 minutes), at least its lease: set it
	// to the longest store outage the service should ride through without
	// running a handler twice;
	// negative turns the retries off (not the releases of claims a failed
	// Begin may have made: see below). At least one attempt is made. It is
	// counted from the failure on both the engine's clock (Now) and the
	// wall clock: the retries stop once it has passed on either, so that a
	// clock that stands still (a test's) does not keep them going. The
	// pauses between attempts (backoff up to 2s, 250ms once the lease may
	// have run out) are on the wall clock.
	// Engine.Drain waits for the retries under way (and wakes them), and
	// gives up on them, reporting each, when its context ends.
	// At most MaxFinishRetries Finish calls, with MaxFinishRetryBytes of
	// responses, are retried at once per Engine. The release of a key
	// (FAILED without a response: a handler that did not finish) is
	// retried likewise, so that a retry finds the key free sooner. A
	// failed commit itself is not (nothing of it was kept, or it is
	// replayed, and its client got 503); its key is released as the
	// claims below are. A handler's Finish that is not
	// stored in the end (or not retried) is reported as
	// EventFinishAbandoned. The release of a claim that a failed Begin
	// may have made all the same (one that failed as its request ended,
	// or on StoreTimeout: a store client that cancels asynchronously, pgx;
	// or, over a store that is not in-process, with any error its store
	// did not mark ErrNothingDone: a reply lost with its connection), and
	// of one whose transaction could not begin (BeginTx failed: its 503
	// does not wait for the release; under FailOpen, see above), and of
	// one whose transactional commit failed (its 503, or
	// CodeRequestEnded, does not wait for the release either), is
	// tried in the background too, whatever FinishRetryFor says (negative
	// included): at most ClaimReleaseAttempts times within the lease, and
	// at most MaxClaimReleases at once (MaxLostReplyReleases of them for
	// the errors other than a context's end), which do not count toward
	// MaxFinishRetries (see docs/runtime.md).
	FinishRetryFor time.Duration
	// FinishWait bounds how long a response waits for the Finish of its
	// record outside a transaction (records before reply). 0 (the
	// default), negative, or not below StoreTimeout (New logs a warning
	// then): it waits for the Finish, up to StoreTimeout, so that a client
	// that gets the response and sends the key again finds the record. Positive and below
	// StoreTimeout: a Finish the store has not answered within FinishWait
	// goes on in the background (bounded by StoreTimeout, then tried again
	// as a failed Finish is, see FinishRetryFor) and the response is sent
	// at once, logged at Warn and reported as EventStoreError (Err says
	// FinishWait); when it lands, EventExecuted. Until it lands, a retry of
	// the key finds it in flight (409 IDEMPOTENCY_KEY_IN_USE, or a wait
	// per InFlight.Wait, on this instance for that Finish to land);
	// if it has not landed when the lease runs out (the store hangs that
	// long), a retry served by another instance may take the key over and
	// run the handler again: the exposure of a Finish that fails, for
	// every Finish slower than FinishWait. It costs a goroutine and a copy
	// of the response per Finish. The store's Finish gets the request's
	// context values while the response waits for it; one handed over
	// loses them at the hand-over (a Value call from then on finds none:
	// the request ends, and its context's values may be reused), and the
	// retries after it never have them. With FinishRetryFor negative, or the
	// retries' budget full (MaxFinishRetries), the response waits as
	// without it. A transaction's commit always waits.
	FinishWait time.Duration
	// DetachHandler, when positive, keeps a client that goes away from
	// cancelling at once the handler that runs for it under a record (a
	// protected run: its request claimed the key). The handler's context
	// (Call.Context, and the request Call.Request hands on) keeps the
	// request's values and deadline but not its cancellation: once the
	// request's context is cancelled (its client closed the connection: a
	// per-attempt timeout, a load balancer's upstream timeout, a user who
	// gave up), the handler's is cancelled DetachHandler later (with a
	// cause that says so), or when the handler returns. A handler that
	// honours its context thus finishes the operation it began, its answer
	// is recorded (the writes the gone client cannot get go to the record
	// only), and the client's retry with the same key is answered in
	// flight (409 IDEMPOTENCY_KEY_IN_USE with Retry-After, or waits under
	// InFlight.Wait) until it is, then replayed: the operation runs once,
	// and its outcome is the one it reached. A deadline of the request's
	// context (a timeout middleware in front of the engine) still ends the
	// handler's context when it passes (DeadlineExceeded): it is the
	// server's own bound; a timeout middleware that cancels the context
	// instead of giving it a deadline does not end it before
	// DetachHandler. Set it to the longest a handler should go on for
	// nobody (at least what its slowest dependency may take). Without
	// heartbeats (DisableHeartbeat, a store that is no LeaseExtender) keep
	// it at most the shortest lease: a detached run that outlives its
	// lease is taken over by a retry and runs twice (New warns). Shutting
	// the server down (http.Server.Close, a cancelled BaseContext)
	// cancels the request's context, so a detached handler goes on up to
	// DetachHandler after it: count it in the shutdown budget
	// (docs/operations.md). The engine logs at Info level when the grace
	// ends a handler's context.
	//
	// 0 (the default) or negative: the handler's context is the
	// request's, cancelled as the client goes away. Under failures: retry
	// a handler that gives up then frees the key (a retry runs it again);
	// under failures: replay its error's answer (a strict handler's
	// ctx.Err()) is stored and replayed for the whole window, since the
	// engine cannot know how far the handler got before it gave up (the
	// engine warns once per operation when a strict handler returns
	// context.Canceled so). Unprotected
	// runs (no key, FailOpen's) are never detached. It costs a few
	// allocations per protected run (none when 0). See docs/server.md,
	// "Handler errors and failures: replay".
	DetachHandler time.Duration
	// CancelOnLeaseLost cancels the context of a handler that is not
	// transactional when its claim is lost while it runs: a heartbeat is
	// refused (ErrFenced: the key was taken over, or the record expired),
	// or the heartbeats fail until the lease runs out (ErrLeaseLost: the
	// store stayed unreachable, and a retry may have taken the key over
	// since). context.Cause of the handler's context is then that error,
	// and LeaseLost(ctx) reports true: a handler that checks it right
	// before an external side effect (charging a card) does not make it
	// while another run of the same key may. A transactional handler's
	// context is cancelled so whatever this option says (its transaction
	// could not commit). A 5xx such a run answers (or a strict handler's
	// error answers) frees the key, under failures: replay too: it says
	// the run gave up, and when nobody took the key over (the store came
	// back in time) a retry runs the operation rather than getting that
	// 5xx replayed for the window; so does one that writes nothing at all
	// (it returned on the cancelled context: its implicit 200 is not
	// recorded). A run that answers anything else is recorded as usual
	// (fenced if the key was taken over).
	//
	// Off (the default), a handler that outlives its lease runs on: the
	// engine cannot stop what it does, and a retry that took the key over
	// runs the operation a second time (the lost run's Finish is fenced).
	// On, the lost run ends (as far as it heeds its context) and its client
	// gets what the handler answers for the cancellation, which may be an
	// error although the operation did part of its work: the trade is one
	// interrupted run instead of two complete ones. It costs a context
	// and a cancel func per protected run (none when off), and only
	// matters with heartbeats (a store that is a LeaseExtender, and
	// DisableHeartbeat off).
	CancelOnLeaseLost bool
	// UnavailableRetryAfter is the Retry-After of 503 answers (default 1s),
	// but for a claim refused with a store error that says when to retry
	// (RetryHint: a full memstore), which is sent instead.
	UnavailableRetryAfter time.Duration
	// ProblemTypeBase prefixes the code in the "type" of problem details
	// (default DefaultProblemTypeBase).
	ProblemTypeBase string
	// Now is the engine's clock (tests). Stores keep time on their own clock.
	Now func() time.Time
	// FingerprintVersion is the fingerprint format version the engine
	// computes and writes into records: 0 means fingerprint.Version (3); 2
	// computes version 2 (which leaves out the Content-Type parameters of a
	// raw body, a multipart boundary among them), for the first step of a
	// rolling upgrade from a release that knows only versions 1 and 2, and 1
	// computes version 1 (which also leaves out the request path), for one
	// from a release that knows only version 1 (see docs/runtime.md,
	// "Upgrading the fingerprint version"). Over a store that implements
	// LocalReader (memstore), whose records never leave the process, the
	// engine computes for a request with an idempotency key the
	// process-local variant of that version (fingerprint.Local: the same
	// canonical form, a keyed digest with keys random for each process
	// instead of SHA-256); a request without a key, whose fingerprint
	// names its record, gets the SHA-256 one over any store. Whatever it is, a
	// record of another version is compared with this request's
	// fingerprint computed in the record's version. Any other value makes
	// New panic.
	FingerprintVersion int
}

// Anonymous is an Options.Principal for a service whose callers are all one
// principal (no authentication, or a single tenant): every request has the
// principal "", so all callers share each operation's keys: a caller who
// sends another's key (or, under Window semantics, the same body) gets the
// other's response. A nil Principal refuses the requests of policies
// scoped per principal (ErrNoPrincipal); Anonymous says on purpose that
// there is one caller. It is the only Principal that may answer "" (the
// Engine recognises it by identity: a func that calls it is another
// Principal, refused for ""), and it costs nothing per request (the
// Engine does not call it).
func Anonymous(*http.Request) (string, error) { return "", nil }

// ErrEmptyPrincipal refuses a request (500 IDEMPOTENCY_PRINCIPAL_UNAVAILABLE,
// logged) whose Options.Principal, other than Anonymous, answered "" and no
// error, where the principal selects the request's key space: a policy
// scoped per principal, and a request that is recorded (see
// Options.Principal).
var ErrEmptyPrincipal = errors.New(`idem: Options.Principal returned an empty principal (""), which would put this caller in the key space all anonymous callers share: ` +
	`return an error for a request without a caller (an *idem.Problem such as 401 to answer it yourself), ` +
	`or a non-empty constant for callers meant to share one key space (or set Principal to idem.Anonymous if all callers are one principal)`)

// ErrNoPrincipal refuses a request (500 IDEMPOTENCY_PRINCIPAL_UNAVAILABLE) of
// a policy scoped per principal (ScopePrincipal, the default) on an Engine
// without Options.Principal, which cannot tell its callers apart: the
// handler does not run and nothing is stored. It is a misconfiguration
// (errors.Is(ErrNoPrincipal, ErrMisconfigured); the EventRejected that
// reports it has Misconfigured set), logged once per Engine (see
// Engine.Serves), not per request.
var ErrNoPrincipal = Misconfigured(errors.New(`idem: no Options.Principal: a policy scoped per principal cannot tell callers apart; ` +
	`set Options.Principal from your authentication, or to idem.Anonymous if all callers are one principal`))

// isAnonymous reports whether f is Anonymous (the same code). It runs
// once, in New.
func isAnonymous(f func(*http.Request) (string, error)) bool {
	return f != nil && reflect.ValueOf(f).Pointer() == reflect.ValueOf(Anonymous).Pointer()
}

// DefaultStoreTimeout is the default of Options.StoreTimeout.
const DefaultStoreTimeout = 5 * time.Second

// Engine is the request-time idempotency engine over a Store. It is safe for
// concurrent use; create one per store and share it.
type Engine struct {
	store       Store
	watcher     Watcher
	extender    LeaseExtender
	hbs         *hbSched // arms heartbeats (nil without an extender)
	recycle     bool     // the store is ContextBound: per-request Calls are reused
	tx          Transactor
	txLock      TxLockHolder // tx, when it is one (Transactional only)
	principal   func(*http.Request) (string, error)
	anonymous   bool        // Options.Principal is Anonymous (principal is then nil: its "" needs no call); any other principal's "" is refused (ErrEmptyPrincipal)
	warnedPr    atomic.Bool // the error about a nil Options.Principal was logged (Serves)
	warnedNest  atomic.Bool // the warning about a doubled wiring was logged (Nested)
	warnedOther atomic.Bool // the error about a record with another process's local fingerprint was logged (Call.otherProcess)
	warnedErr   sync.Map    // the operation name of each FailuresReplay operation warned about an unanswered end (Engine.warnUnanswered)
	warnedGone  sync.Map    // the operation name of each FailuresReplay operation warned about a stored answer to a handler its client's going away stopped (Engine.warnCancelledStored)
	log         *slog.Logger
	obs         Observer
	failOpen    bool
	timeout     time.Duration
	now         func() time.Time
	problemBase string
	unavailRA   []string
	fpc         *fpCache
	recent      *recentKeys   // over a ReadFirst store
	local       LocalReader   // the store, when it is one: records are tagged
	prefetch    keyPrefetcher // the store, when it is one (memstore)
	lateFor     time.Duration // Options.FinishRetryFor
	finishWait  time.Duration // Options.FinishWait, when positive and below timeout
	detach      time.Duration // Options.DetachHandler, when positive
	cancelLost  bool          // Options.CancelOnLeaseLost
	lateFirst   time.Duration // the retries' first backoff (lateFinishFirst; tests change it)
	lateMax     time.Duration // and its cap (lateFinishMax)
	lateWakeMin time.Duration // a woken retry's least pause after its last attempt (lateFinishFirst; tests change it)
	lateWakeJit time.Duration // and its jitter (lateWakeJitter)
	lateMu      sync.Mutex
	lateN       int                      // the Finish calls retried in the background (finishLater), releases included
	lateRel     int                      // the releases among them (claimRelease kinds: MaxClaimReleases)
	lateLost    int                      // the finishLostReply ones among those (MaxLostReplyReleases)
	relDrop     releaseDrops             // the releases not tried (releaseDropped)
	quota       quotaLog                 // the claims refused with ErrQuotaExceeded (refuseQuota)
	lateBytes   int64                    // the size of their responses
	lateIdle    chan struct{}            // closed when lateN drops to 0; nil while it is 0
	lateWake    chan struct{}            // closed by Drain to wake the retries from their backoff, then replaced
	lateStore   chan struct{}            // closed by a store call that succeeded (storeAnswered) to wake the retries from their backoff, then replaced
	lateArmed   atomic.Bool              // a retry waits on lateStore since it last read it: storeAnswered wakes it
	lateSet     map[*lateFinish]struct{} // the retries under way that have not reported yet (Drain abandons them)
	lateKeys    map[string]*lateFinish   // the finishAnswer retries under way, by scope key (finishPending)
	lateAns     atomic.Int32             // len(lateKeys): a request's Begin looks there only when it is not 0
}

// New returns an Engine over store. It panics when Options.Transactional is
// set and store does not implement Transactor (a wiring mistake that must not
// silently drop the promise of atomicity).
func New(store Store, opts Options) *Engine {
	if store == nil {
		panic("idem: New with a nil Store")
	}
	e := &Engine{
		store:       store,
		principal:   opts.Principal,
		anonymous:   isAnonymous(opts.Principal),
		log:         opts.Logger,
		obs:         opts.Observer,
		failOpen:    opts.FailOpen,
		now:         opts.Now,
		problemBase: opts.ProblemTypeBase,
		lateFor:     opts.FinishRetryFor,
		lateFirst:   lateFinishFirst,
		lateMax:     lateFinishMax,
		lateWakeMin: lateFinishFirst,
		lateWakeJit: lateWakeJitter,
		lateWake:    make(chan struct{}),
		lateStore:   make(chan struct{}),
		relDrop:     releaseDrops{every: releaseDropLogEvery},
	}
	fpv := opts.FingerprintVersion
	if fpv == 0 {
		fpv = fingerprint.Version
	}
	if fpv < 1 || fpv > fingerprint.Version {
		panic(fmt.Sprintf("idem: Options.FingerprintVersion %d: want 0 or 1 to %d", opts.FingerprintVersion, fingerprint.Version))
	}
	keyless := fpv
	if _, ok := store.(LocalReader); ok {
		// Records that never leave the process: its fingerprints are
		// only compared in it, and for a keyed request the process-local
		// variant (a keyed digest instead of SHA-256) is enough. A
		// request without a key keeps SHA-256: its fingerprint names its
		// record across the callers of a scope.
		fpv = fingerprint.Local(fpv)
	}
	e.fpc = newFPCache(fpv, keyless)
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	e.timeout = opts.StoreTimeout
	if e.timeout <= 0 {
		e.timeout = DefaultStoreTimeout
	}
	if opts.DetachHandler > 0 {
		e.detach = opts.DetachHandler
	}
	e.cancelLost = opts.CancelOnLeaseLost
	if opts.FinishWait > 0 && opts.FinishWait < e.timeout {
		e.finishWait = opts.FinishWait
	} else if opts.FinishWait > 0 {
		e.log.LogAttrs(context.Background(), slog.LevelWarn,
			"idem: Options.FinishWait is not below the store timeout, so it changes nothing: a response waits for its record's finish up to the store timeout, as without it; set it well below the store timeout, or to 0",
			slog.Duration("finish_wait", opts.FinishWait), slog.Duration("store_timeout", e.timeout))
	}
	if e.problemBase == "" {
		e.problemBase = DefaultProblemTypeBase
	}
	ra := opts.UnavailableRetryAfter
	if ra <= 0 {
		ra = time.Second
	}
	e.unavailRA = []string{retryAfterValue(ra)}
	if e.anonymous {
		e.principal = nil // its "" is known: not called
	}
	e.watcher, _ = store.(Watcher)
	_, e.recycle = store.(ContextBound)
	e.local, _ = store.(LocalReader)
	e.prefetch, _ = store.(keyPrefetcher)
	if _, ok := store.(ReadFirst); ok {
		e.recent = newRecentKeys()
	}
	if !opts.DisableHeartbeat {
		e.extender, _ = store.(LeaseExtender)
		if e.extender != nil {
			e.hbs = newHBSched()
		} else {
			e.log.LogAttrs(context.Background(), slog.LevelWarn,
				"idem: the store does not implement idem.LeaseExtender, so no heartbeat extends a lease: "+
					"a handler that runs longer than its policy's lease is taken over by a retry, which runs it a second time; "+
					"a store that wraps another (for metrics or tracing) must forward the optional interfaces its inner store implements "+
					"(idem.LeaseExtender, idem.Watcher, idem.ReadFirst, idem.LocalReader, idem.Transactor, idem.TxLockHolder, and idem.ContextBound if the wrapper keeps no context or key), "+
					"see docs/runtime.md; set Options.DisableHeartbeat to silence this warning",
				slog.String("store", fmt.Sprintf("%T", store)))
		}
	}
	if e.detach > 0 && e.extender == nil {
		e.log.LogAttrs(context.Background(), slog.LevelWarn,
			"idem: Options.DetachHandler without heartbeats (Options.DisableHeartbeat, or a store that is no idem.LeaseExtender): "+
				"a detached handler that outlives its policy's lease is taken over by a retry, which runs it a second time; "+
				"keep DetachHandler at most the shortest lease (in-flight.lease) of the protected operations",
			slog.Duration("detach", e.detach))
	}
	if opts.Transactional {
		tx, ok := store.(Transactor)
		if !ok {
			panic("idem: Options.Transactional is set but the store does not implement idem.Transactor")
		}
		e.tx = tx
		e.txLock, _ = store.(TxLockHolder)
	}
	return e
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

func (e *Engine) observe(ctx context.Context, ev Event) {
	if e.obs != nil {
		if ev.Err != nil {
			ev.Misconfigured = errors.Is(ev.Err, ErrMisconfigured)
		}
		e.obs.Observe(ctx, ev)
	}
}

// newToken draws a fresh random fencing token (never 0). math/rand/v2's
// global generator is the runtime's per-thread ChaCha8, seeded from the
// operating system: unpredictable, and cheaper per token than
// crypto/rand.Read (a fencing token needs no secrecy, only uniqueness).
func newToken() Token {
	for {
		if t := Token(rand.Uint64()); t != 0 {
			return t
		}
	}
}

// Buffers. Pooled buffers never leave the engine: whatever escapes (stored
// responses, scope keys) is copied out first. Large buffers are dropped
// rather than pooled so one big response does not pin memory.
const (
	initialBuf  = 2 << 10
	maxPooled   = 64 << 10
	problemSize = 512
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, initialBuf); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// Serves tells the Engine the policies it serves, when they are wired, so
// that it can check its Options against them: with no Options.Principal,
// whose Engine refuses every request of a policy scoped per principal
// (ScopePrincipal, the default; see ErrNoPrincipal), the first call that
// names such policies logs one error, once per Engine, naming their
// operations and the fix (set Options.Principal from your authentication,
// or Anonymous). Handler and Middleware call it with their policy, and the
// NewIdempotency that idemgen generates with every policy of its package;
// code that calls Begin itself may call it at wiring time (else the first
// request of such a policy logs the error). It costs nothing else and
// may be called any number of times.
func (e *Engine) Serves(ps ...*Policy) {
	if e.principal != nil || e.anonymous || e.warnedPr.Load() {
		return
	}
	var ops []string
	for _, p := range ps {
		if p != nil && p.spec.Scope == ScopePrincipal {
			ops = append(ops, p.spec.Operation)
		}
	}
	if len(ops) == 0 || !e.warnedPr.CompareAndSwap(false, true) {
		return
	}
	e.log.LogAttrs(context.Background(), slog.LevelError,
		"idem: no Options.Principal: every request of these operations is refused (500 IDEMPOTENCY_PRINCIPAL_UNAVAILABLE), "+
			"since their keys are per caller and the engine cannot tell callers apart; set Options.Principal from your authentication, "+
			"or to idem.Anonymous if all callers are one principal (they then share every key)",
		slog.String("operations", strings.Join(ops, ", ")))
}
