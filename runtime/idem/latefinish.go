package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A record's Finish that fails on the store (it did not answer within
// Options.StoreTimeout, or the connection broke), outside a transaction,
// leaves the record PENDING although the handler ran: its response is on
// its way to the client, but a retry finds the key in flight until the
// lease runs out, and then runs the handler again. So the engine goes on
// trying that Finish in the background, with backoff, for
// Options.FinishRetryFor (by default the operation's window, at most
// DefaultFinishRetryFor): once the
// store answers again, the record holds its response and a retry gets the
// replay, the handler having run once. A Finish that comes after another
// request took the key over (its lease had run out) is fenced and changes
// nothing; one that reached the store although its caller gave up on it
// is found there by the next (a re-run: Finish succeeds and changes
// nothing), so trying again is always safe.

// MaxFinishRetries bounds the Finish calls an Engine retries at once in
// the background (Options.FinishRetryFor), and MaxFinishRetryBytes the
// responses they keep copies of; past either, a failed Finish is not
// retried.
//
// MaxClaimReleases bounds, apart from those, the releases an Engine tries
// at once in the background of claims that a failed Begin may have made
// all the same (see Options.FinishRetryFor and ErrNothingDone), of
// those held through FailOpen's unprotected runs (see Options.FailOpen),
// of those whose transaction could not begin (BeginTx failed: the
// request is refused with 503 at once, without waiting for the release),
// and of those whose transactional commit failed (the 503, or
// CodeRequestEnded, does not wait for the release either);
// each is tried at most ClaimReleaseAttempts times, within the operation's
// lease.
// They never take the slots of the Finish calls (a response whose Finish
// failed during an outage is retried, whatever the number of Begins that
// failed with it), and a release that is not tried, or given up, leaves
// at worst a claim that runs out with its lease; so the load they add on
// a struggling store stays bounded. A release that is not tried is logged
// (at Warn, at most once per 10 seconds, with the number not tried since
// the last such log and in all).
//
// Of those, at most MaxLostReplyReleases free the claims of Begins that
// failed otherwise than by their context's end (the request's, or
// Options.StoreTimeout) with an error their store did not mark
// ErrNothingDone (a reply lost with its connection): the other half is
// kept for the releases of Begins cut by their context, which a store
// that does not answer in time makes many of, so that ambiguous errors
// (a store failing fast) never crowd them out.
const (
	MaxFinishRetries    = 1024
	MaxFinishRetryBytes = 64 << 20

	MaxClaimReleases     = MaxFinishRetries / 4
	MaxLostReplyReleases = MaxClaimReleases / 2
	ClaimReleaseAttempts = 4
)

// DefaultFinishRetryFor caps the default of Options.FinishRetryFor: the
// operation's window (its records live that long: a late Finish can be
// stored until then, unless another request took the key over), at most
// DefaultFinishRetryFor, and at least the operation's lease.
//
// Why not the lease: while the store is down nobody can take the key
// over, and a late Finish is fenced by its token once somebody did, so
// giving up when the lease runs out only throws away records that could
// still be stored (the handler then runs again on the client's retry).
// Why a cap: an outage longer than a few minutes is an incident of its
// own, the retries' memory is bounded anyway (MaxFinishRetries,
// MaxFinishRetryBytes) but a full budget refuses the retries of newer
// Finish calls, and a process is rarely kept that long past its shutdown.
const DefaultFinishRetryFor = 10 * time.Minute

// defaultFinishRetryFor is how long a failed Finish of an operation of
// this window and lease is tried again when Options.FinishRetryFor is 0.
func defaultFinishRetryFor(window, lease time.Duration) time.Duration {
	return max(min(window, DefaultFinishRetryFor), lease)
}

// releaseDropLogEvery is how often at most the engine logs releases it
// did not try (MaxClaimReleases, MaxLostReplyReleases).
const releaseDropLogEvery = 10 * time.Second

// lateFinish backoff: the first retry after lateFinishFirst, doubling up
// to lateFinishMax, each with jitter (half to all of it). Once the lease
// of a handler's claim may have run out (Call.leaseEnd), its Finish is tried at least every lateFinishShort (with
// the same jitter): another instance may then take the key over as soon
// as the store answers again, and whichever reaches the store first wins
// (the handler runs again if the takeover does).
const (
	lateFinishFirst = 100 * time.Millisecond
	lateFinishMax   = 2 * time.Second
	lateFinishShort = 250 * time.Millisecond
	// lateWakeJitter: a retry woken by a store call that succeeded
	// (storeAnswered) waits a random 0 to lateWakeJitter more.
	lateWakeJitter = 100 * time.Millisecond
)

// finishKind says what a Finish is, for what a later attempt reports.
type finishKind uint8

const (
	// finishAnswer finishes a run of the handler (Call.Finish, or Call.End
	// releasing the key of a handler that did not finish): a later attempt
	// that stores it reports EventExecuted (and EventNotReplayable), one
	// that is fenced EventFenced, as Call.Finish does at once.
	finishAnswer finishKind = iota
	// finishUnanswered frees the claim a Begin that failed as its context
	// ended (the request's end, or the store timeout) may have made all
	// the same (releaseUnanswered): no event.
	// Fenced, there was no such claim (or it was taken over already).
	finishUnanswered
	// finishLostReply is finishUnanswered for a Begin that failed
	// otherwise, with an error its store did not mark ErrNothingDone (a
	// reply lost with its connection): at most MaxLostReplyReleases of
	// the MaxClaimReleases at once.
	finishLostReply
	// finishClaim frees a claim that the Call acquired and that runs
	// nothing more, in the background so that the response does not wait
	// for the store (Call.releaseLater; its claimCause says which claim):
	// tried at once (no attempt failed before it), then as
	// finishUnanswered is; no event. Fenced, the key was taken over or
	// expired (or, claimUncommitted, holds the commit's result): nothing
	// to free.
	finishClaim
)

// claimRelease reports whether k frees a claim (one a failed Begin may
// have made, releaseUnanswered, or finishClaim's).
func (k finishKind) claimRelease() bool { return k >= finishUnanswered }

// atOnce reports whether k's first attempt is made in the background (no
// attempt failed before it): finishClaim.
func (k finishKind) atOnce() bool { return k == finishClaim }

// claimCause names the claim a finishClaim frees, for its logs.
type claimCause uint8

const (
	// claimHeld: the claim of a Begin that acquired the key before its
	// BeginTx failed, held through FailOpen's unprotected run and freed
	// once it ended (Call.releaseHeld). Fenced, the lease ran out during
	// the run (it had no heartbeat) and the key was taken over, or
	// expired.
	claimHeld claimCause = iota + 1
	// claimUnbegun: the claim of a Begin that acquired the key before its
	// BeginTx failed, when the request is refused (503, or
	// CodeRequestEnded; not under FailOpen: claimHeld), so that the
	// refusal does not wait for the store (Call.release).
	claimUnbegun
	// claimUncommitted: the claim of a transaction whose commit failed
	// (rolled back, or of unknown outcome if the store failed during the
	// COMMIT itself), when the request is refused (503, or
	// CodeRequestEnded), so that the refusal does not wait for the store
	// (Call.releaseUncommitted). Fenced, the commit's result may have been
	// kept after all: logged at Info after a later attempt (silent at
	// once), unlike the other causes' fenced releases.
	claimUncommitted
)

// String names the claim, as the logs do.
func (c claimCause) String() string {
	switch c {
	case claimHeld:
		return "the claim held through FailOpen's unprotected run (its transaction could not begin)"
	case claimUnbegun:
		return "the claim whose transaction could not begin (its request refused)"
	case claimUncommitted:
		return "the claim whose commit failed (its request refused)"
	}
	return "the claim"
}

// lateFinish is one Finish to retry, with copies of what the Call held.
type lateFinish struct {
	kind      finishKind
	cause     claimCause // finishClaim's
	operation string
	principal string
	key       string // the client's key (logs, events)
	scope     string
	recent    uint64
	window    time.Duration
	token     Token
	state     State
	resp      []byte
	prior     State
	status    int
	loss      bodyLoss  // the response lost its body (stored as not replayable): too large, or cut short (see Complete)
	respMax   int       // Response.MaxBytes
	start     time.Time // on the engine's clock (set with an Observer)
	failedAt  time.Time // on the engine's clock
	leaseEnd  time.Time // finishAnswer: the earliest time the claim's lease may run out (wall clock; Call.leaseEnd)
	err       error     // the first failure
	reported  bool      // claimUncommitted: the request reported the run as executed (CodeRequestEnded)

	// settled: a request of the same key finished it first (finishPending),
	// with settledErr (nil, or ErrFenced); under lateMu. The retry stops and
	// reports that.
	settled    bool
	settledErr error

	// inflight: the result of the Finish still in flight when its request
	// stopped waiting (Options.FinishWait): the retry's first attempt;
	// awaited while it has not come (finishPending does not try another
	// meanwhile). landed is closed once it has come, landedErr set before
	// (and before awaited turns false): a request that waits for the key
	// (InFlight.Wait) waits for it (finishPending).
	inflight  <-chan error
	awaited   atomic.Bool
	landed    chan struct{}
	landedErr error

	stop    context.CancelFunc // cuts the retry's pause and attempt (Drain gave up on it)
	stopped context.Context    // done once stop is called
	dropped bool               // Drain gave up on it and reported it (under lateMu): the retry reports nothing
}

// finishLater schedules the retry of the Finish that just failed with err
// (finishClaim: its first attempt, err nil, cause naming the claim), unless it
// cannot help (fenced) or may not (Options.FinishRetryFor negative, MaxFinishRetries or
// MaxFinishRetryBytes reached; for a claim release, which FinishRetryFor
// does not turn off, MaxClaimReleases or MaxLostReplyReleases reached:
// logged); it reports whether it did.
//
// The retries run with a context of their own, without the request's
// values: the request is over, and what a router or middleware put there
// may be reused by another request (chi pools its route context).
func (c *Call) finishLater(kind finishKind, cause claimCause, state State, resp []byte, status int, loss bodyLoss, err error) bool {
	return c.finishLaterWith(kind, cause, state, resp, status, loss, err, false, nil)
}

// ongoing is a Finish still in flight when its request stopped waiting
// for it (Options.FinishWait, finishWithin): its result comes on done;
// stop cancels it (its context derives from stopped).
type ongoing struct {
	done    <-chan error
	stopped context.Context
	stop    context.CancelFunc
}

// finishLaterWith is finishLater; reported: the request reported its
// run as executed already (claimUncommitted, CodeRequestEnded), so a
// release that finds the commit took effect after all does not report it
// again; on: the Finish is still in
// flight (Options.FinishWait), its outcome the retry's first attempt's,
// and resp a copy of the request's already (the attempt reads it).
func (c *Call) finishLaterWith(kind finishKind, cause claimCause, state State, resp []byte, status int, loss bodyLoss, err error, reported bool, on *ongoing) bool {
	e := c.e
	if errors.Is(err, ErrFenced) || (e.lateFor < 0 && !kind.claimRelease()) {
		return false
	}
	e.lateMu.Lock()
	if kind.claimRelease() {
		// Releases have a budget of their own (no response to keep).
		if e.lateRel == MaxClaimReleases || (kind == finishLostReply && e.lateLost == MaxLostReplyReleases) {
			e.releaseDropped(c, kind, cause) // unlocks lateMu
			return false
		}
		e.lateRel++
		if kind == finishLostReply {
			e.lateLost++
		}
	} else if e.lateN-e.lateRel == MaxFinishRetries || e.lateBytes+int64(len(resp)) > MaxFinishRetryBytes {
		e.lateMu.Unlock()
		return false
	}
	if e.lateN == 0 {
		e.lateIdle = make(chan struct{})
	}
	e.lateN++
	e.lateBytes += int64(len(resp))
	wake, storeWake := e.lateWake, e.lateStore
	e.lateArmed.Store(true) // a store call that succeeds from now on wakes it
	f := &lateFinish{
		kind:      kind,
		cause:     cause,
		operation: c.p.spec.Operation,
		principal: c.principal,
		key:       c.key,
		scope:     strings.Clone(c.scope),
		recent:    c.recent,
		window:    c.p.spec.Window,
		token:     c.token,
		state:     state,
		resp:      resp,
		prior:     c.prior,
		status:    status,
		loss:      loss,
		respMax:   c.p.respMax,
		err:       err,
		reported:  reported,
		start:     c.start,
		failedAt:  e.now(),
	}
	if kind == finishAnswer {
		f.leaseEnd = c.leaseEnd()
	}
	if on != nil {
		f.inflight = on.done
		f.landed = make(chan struct{})
		f.awaited.Store(true)
		f.stopped, f.stop = on.stopped, on.stop
	} else {
		f.resp = bytes.Clone(resp) // nil stays nil: a re-run compares them
		f.stopped, f.stop = context.WithCancel(context.Background())
	}
	if e.lateSet == nil {
		e.lateSet = make(map[*lateFinish]struct{})
	}
	e.lateSet[f] = struct{}{}
	if kind == finishAnswer {
		if e.lateKeys == nil {
			e.lateKeys = make(map[string]*lateFinish)
		}
		if _, ok := e.lateKeys[f.scope]; !ok {
			e.lateAns.Add(1)
		}
		e.lateKeys[f.scope] = f // a newer claim's (the older one's lease ran out)
	}
	e.lateMu.Unlock()
	d := e.lateFor
	if kind.claimRelease() {
		d = c.p.spec.InFlight.Lease
	} else if d == 0 {
		d = defaultFinishRetryFor(c.p.spec.Window, c.p.spec.InFlight.Lease)
	}
	go e.retryFinish(f, d, wake, storeWake)
	return true
}

// errFinishSlow is the error of a Finish whose request stopped waiting
// for it (Options.FinishWait): it goes on in the background.
var errFinishSlow = errors.New("idem: the store did not answer the finish within Options.FinishWait: it goes on in the background")

// finishWithin runs the Finish of c's record (finishRecord, under
// Options.FinishWait, wait) on copies of its scope key and response, in a
// goroutine, bounded by StoreTimeout, and waits for it up to wait: the
// outcome if it came by then (not handed). Otherwise it hands the Finish
// still in flight over to a background retry (finishLaterWith: its outcome
// is the retry's first attempt's, and a failure is tried again as after a
// failed Finish) and returns errFinishSlow, handed true: the response does
// not wait for it. When the retries' budget is full (or FinishRetryFor is
// negative) it waits for the outcome, as without FinishWait.
//
// The Finish's context carries the request's values (as finishOnce's
// does: a tracing or tenant-routing store wrapper reads them) while the
// request waits for it, and none from the hand-over on (handOff): the
// request goes on and ends, and what a router or middleware put in its
// context may then be reused by another request (chi pools its route
// context). The retry's later attempts carry none either (finishLater).
func (c *Call) finishWithin(wait time.Duration, state State, resp []byte, status int, loss bodyLoss) (handed bool, err error) {
	e := c.e
	scope, token, r := strings.Clone(c.scope), c.token, bytes.Clone(resp) // nil stays nil: a re-run compares them
	stopped, stop := context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(stopped, e.timeout)
	hc := &handOff{Context: ctx, req: c.claimSide().bg.parent}
	done := make(chan error, 1)
	go func() {
		done <- e.store.Finish(hc, scope, token, state, r)
		cancel()
	}()
	t := time.NewTimer(wait)
	select {
	case err = <-done:
		t.Stop()
		stop()
		return false, err
	case <-t.C:
	}
	hc.handOver()
	if c.finishLaterWith(finishAnswer, 0, state, r, status, loss, errFinishSlow, false, &ongoing{done: done, stopped: stopped, stop: stop}) {
		return true, errFinishSlow
	}
	err = <-done
	stop()
	return false, err
}

// handOff is the context of the Finish finishWithin runs: the deadline
// and cancellation of its own Context, and the values of the request's
// context (req, without its cancellation) until handOver, none after.
// Its own Context is asked first: it holds no values but the context
// package's own (the cancellation a derived context hooks into).
type handOff struct {
	context.Context
	mu  sync.RWMutex
	req context.Context // nil once handed over
}

func (h *handOff) Value(key any) any {
	if v := h.Context.Value(key); v != nil {
		return v
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.req == nil {
		return nil
	}
	return h.req.Value(key)
}

// handOver drops the request's values: once it returns, no Value call of
// the Finish reads the request's context any more.
func (h *handOff) handOver() {
	h.mu.Lock()
	h.req = nil
	h.mu.Unlock()
}

func (h *handOff) String() string { return "idem.handOff" }

// leaseEnd is, on the wall clock, the earliest time c's lease may run
// out: the start of the call that granted it (hbGrant) plus the lease
// (the store counts it from when it took that call, no sooner). Without
// heartbeats (Options.DisableHeartbeat, a store that is no LeaseExtender)
// the claim's start is not read (a clock reading on every request): the
// lease may have run out already (zero).
func (c *Call) leaseEnd() time.Time {
	if c.e.hbs == nil || !c.hbStarted {
		return time.Time{}
	}
	c.hbMu.Lock()
	grant := c.hbGrant
	c.hbMu.Unlock()
	return time.Now().Add(grant + c.p.spec.InFlight.Lease - c.e.hbs.since())
}

// finishPending tries at once, before c's Begin, the Finish of its key
// that the engine is retrying in the background: once that claim's lease
// ran out the Begin would take the key over and run the handler again
// (before, it would answer in flight), where the Finish stores the
// response it is to replay. A client's retry that reaches this instance
// thus never races its own pending Finish, and gets the replay as soon as
// the store takes the Finish (unless the Finish its request handed over,
// Options.FinishWait, is still in flight: then no other attempt is made
// beside it, and it returns false with landed, which closes once that
// Finish has come back; the caller answers in flight at once, or, under a
// policy that waits for a key in flight (InFlight.Wait), waits for landed
// within the wait and asks again: awaitLanded). It reports whether the
// Begin may go on: the Finish stored the response (the Begin then finds it
// and replays), or was fenced (the claim was taken over or expired:
// nothing of this instance's to replay); the Finish handed over that
// landed so counts as this attempt. On any other failure (the store did
// not answer within StoreTimeout, or failed fast: a dead pooled connection
// right after an outage) the request is answered in flight, as for a key
// in use, neither Begin (it could take the key over once the lease ran
// out, and run the handler again while this instance holds its response)
// nor FailOpen (an unprotected run). The retry, told (settled), stops and
// reports the outcome.
func (c *Call) finishPending() (ok bool, landed <-chan struct{}) {
	e := c.e
	e.lateMu.Lock()
	f := e.lateKeys[c.scope]
	e.lateMu.Unlock()
	if f == nil {
		return true, nil
	}
	if f.awaited.Load() {
		// The Finish its request handed over (FinishWait) is still in
		// flight: in flight, without a second attempt beside it.
		return false, f.landed
	}
	if f.landed != nil {
		<-f.landed // closed before awaited turned false: at once
		if f.landedErr == nil || errors.Is(f.landedErr, ErrFenced) {
			// It landed (the retry reports it, and stops): no attempt
			// of this request's, which the retry's end (f.stop) could
			// cut.
			return true, nil
		}
	}
	ctx, cancel := context.WithTimeout(f.stopped, e.timeout)
	err := e.store.Finish(ctx, f.scope, f.token, f.state, f.resp)
	cancel()
	if err == nil || errors.Is(err, ErrFenced) {
		e.lateMu.Lock()
		if !f.settled {
			f.settled, f.settledErr = true, err
		}
		e.lateMu.Unlock()
		f.stop()
		e.storeAnswered()
		return true, nil
	}
	return false, nil
}

// awaitLanded waits, for a request whose policy waits for a key in flight
// (InFlight.Wait), until landed closes (the Finish its key's request
// handed over, Options.FinishWait, has come back: see finishPending),
// until deadline (on the engine's clock, as the wait's), or until ctx
// (the request's) ends. It reports whether landed closed.
func (c *Call) awaitLanded(ctx context.Context, landed <-chan struct{}, deadline time.Time) bool {
	select {
	case <-landed:
		return true
	default:
	}
	remain := deadline.Sub(c.e.now())
	if remain <= 0 {
		return false
	}
	t := time.NewTimer(remain)
	defer t.Stop()
	select {
	case <-landed:
		return true
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
}

// storeAnswered wakes the retries of Finish calls waiting out their backoff
// (retryFinish) once a store call of the engine succeeded: the store is
// back, and each tries again soon (lateFinishFirst after its last attempt
// ended at the earliest, plus up to lateWakeJitter), before a client's
// retry takes a key whose lease ran out over; one so woken that fails
// again is deaf to these wakes for its next backoff step (retryFinish). On a request's path it costs one atomic load while no retry
// waits.
func (e *Engine) storeAnswered() {
	if e.lateArmed.Load() {
		e.wakeLate()
	}
}

// wakeLate wakes the retries waiting since they last read lateStore, once.
func (e *Engine) wakeLate() {
	if !e.lateArmed.CompareAndSwap(true, false) {
		return
	}
	e.lateMu.Lock()
	close(e.lateStore)
	e.lateStore = make(chan struct{})
	e.lateMu.Unlock()
}

// releaseUnanswered frees, off the request's path, the claim a Begin that
// failed with err may have made all the same, unless the store marked err
// ErrNothingDone or refused the claim for its caller's share
// (ErrQuotaExceeded: the store answered, and claimed nothing): one whose
// context ended (cut: the request's, or the
// store timeout; pgx cancels asynchronously and the claim may commit), or
// (finishLostReply) one of a store that is not in-process whose reply may have
// been lost after the server claimed (memstore's Begin claims nothing
// when it fails). The token is that Begin's own and no handler runs under
// it, so a fenced answer frees nothing else. Under FailOpen, claim leaves
// it to the end of the unprotected run (releaseHeld). How it is tried and
// bounded: finishUnanswered, MaxClaimReleases, MaxLostReplyReleases,
// ClaimReleaseAttempts.
func (c *Call) releaseUnanswered(err error, cut bool) {
	if (!cut && c.e.local != nil) || errors.Is(err, ErrNothingDone) || errors.Is(err, ErrQuotaExceeded) {
		return
	}
	kind := finishUnanswered
	if !cut {
		kind = finishLostReply
	}
	c.finishLater(kind, 0, StateFailed, nil, 0, bodyKept, err)
}

// releaseLater frees c's claim (FAILED without a response), which runs
// nothing more, in the background (finishClaim): what is sent does not
// wait for the store, which may not answer within StoreTimeout. Its first
// attempt is made at once; it reports no event. cause names the claim.
func (c *Call) releaseLater(cause claimCause) {
	c.finishLater(finishClaim, cause, StateFailed, nil, 0, bodyKept, nil)
}

// releaseDrops counts the releases finishLater did not try (under lateMu).
type releaseDrops struct {
	n      uint64        // in all
	logged uint64        // n when last logged
	at     time.Time     // when last logged (wall clock)
	every  time.Duration // releaseDropLogEvery (tests change it)
}

// releaseDropped logs, at most once per releaseDropLogEvery, the release
// of kind (finishClaim: of cause's claim) that finishLater does not try
// (the releases' budget is full), counting the others not tried since the
// last log. It is called with lateMu held, and unlocks it.
func (e *Engine) releaseDropped(c *Call, kind finishKind, cause claimCause) {
	d := &e.relDrop
	d.n++
	now := time.Now()
	if !d.at.IsZero() && now.Sub(d.at) < d.every {
		e.lateMu.Unlock()
		e.observe(context.Background(), Event{Kind: EventReleaseAbandoned, Operation: c.p.spec.Operation, Principal: c.principal,
			Key: c.key, Protected: true, State: StateFailed, Err: errReleaseNotTried})
		return
	}
	d.at = now
	since, total, lost, every := d.n-d.logged, d.n, e.lateLost, d.every
	d.logged = d.n
	e.lateMu.Unlock()
	why := "MaxClaimReleases"
	if kind == finishLostReply && lost == MaxLostReplyReleases {
		why = "MaxLostReplyReleases"
	}
	what := "if the failed Begin claimed the key, it stays"
	if kind == finishClaim {
		what = cause.String() + " stays"
	}
	e.log.LogAttrs(context.Background(), slog.LevelWarn, "idem: claim release not tried: "+why+" releases are under way; "+
		what+" in flight until its lease runs out (logged at most once per "+every.String()+")",
		slog.String("operation", c.p.spec.Operation), slog.String("key", c.key),
		slog.Uint64("not_tried", since), slog.Uint64("not_tried_total", total))
	e.observe(context.Background(), Event{Kind: EventReleaseAbandoned, Operation: c.p.spec.Operation, Principal: c.principal,
		Key: c.key, Protected: true, State: StateFailed, Err: errReleaseNotTried})
}

// errReleaseNotTried is the Err of the EventReleaseAbandoned of a release
// finishLater did not try (MaxClaimReleases, MaxLostReplyReleases).
var errReleaseNotTried = errors.New("idem: claim release not tried: the releases' budget is full")

// retryFinish tries f's Finish until it succeeds, is fenced, or d has
// passed on the engine's clock or on the wall clock, whichever comes
// first (at least once, however short d is): an engine clock that stands
// still or crawls (a test's Options.Now) does not keep a retry (one of
// MaxFinishRetries) and its copy of the response while the store stays
// down. A Drain (wake closed) cuts the pause before the next attempt
// short, but to no less than lateFinishFirst after the end of the last
// one, so that Drain called in a loop does not undo the backoff. A store
// call of the engine that succeeded (storeWake closed: storeAnswered)
// cuts it likewise, plus a random jitter of up to lateWakeJitter (the
// store that just came back is not hit by every pending Finish at once);
// an attempt so woken that fails is followed by its whole backoff step,
// deaf to store wakes, so that a store that answers other keys but not
// this one does not undo the backoff. Why the whole step and not a part of
// it: while other calls succeed, wakes come all the time, so a retry
// honours each as early as it may; a floor below the step adds that many
// attempts per step on a key the store keeps failing (as
// TestLateBackoffHoldsWhileOtherKeysSucceed counts), while the step it saves matters little: before the
// lease may have run out nobody can take the key over (a retry elsewhere
// is answered in flight; one on this instance tries the Finish at once,
// finishPending), and after, the step is lateFinishShort at most, hardly
// above a woken attempt's own least pause and jitter. Once the lease of a handler's claim may have
// run out (f.leaseEnd), its pauses are lateFinishShort at most, and the
// one during which it runs out ends at most lateFinishShort after it.
func (e *Engine) retryFinish(f *lateFinish, d time.Duration, wake, storeWake chan struct{}) {
	defer func() {
		f.stop()
		e.lateMu.Lock()
		delete(e.lateSet, f)
		if e.lateKeys[f.scope] == f {
			delete(e.lateKeys, f.scope)
			e.lateAns.Add(-1)
		}
		e.lateBytes -= int64(len(f.resp))
		if f.kind.claimRelease() {
			e.lateRel--
		}
		if f.kind == finishLostReply {
			e.lateLost--
		}
		if e.lateN--; e.lateN == 0 {
			close(e.lateIdle)
			e.lateIdle = nil
		}
		e.lateMu.Unlock()
	}()
	ctx := context.Background()
	deadline := f.failedAt.Add(d) // d counts from the failure
	begun := time.Now()
	wallDeadline := begun.Add(d)
	last := begun  // the last attempt ended (the failed Finish, just before)
	woken := false // the pause before the last attempt was cut short by storeWake
	deaf := false  // this pause ignores storeWake (a woken attempt failed)
	wait := e.lateFirst
	err := f.err
	// prior: the attempts before these (the failed Finish, or the failed
	// Begin); none before a release tried at once (atOnce).
	prior := 1
	if f.kind.atOnce() {
		prior = 0
	}
	attempt := prior
	var sleep *time.Timer
	skip := false // the Finish in flight (f.inflight) settled it
	if f.inflight != nil {
		// Bounded by StoreTimeout, and cut by f.stop like any attempt.
		err = <-f.inflight
		f.landedErr = err
		close(f.landed)
		f.awaited.Store(false)
		last = time.Now()
		switch {
		case err == nil || errors.Is(err, ErrFenced):
			e.storeAnswered() // the others may get through too
			skip = true
		case f.stopped.Err() != nil:
			skip = true
		}
	}
retry:
	for !skip {
		if attempt > 0 { // no pause before the first attempt of an atOnce kind (prior 0)
			pause := wait/2 + rand.N(wait/2+1)
			if f.kind == finishAnswer {
				// A takeover is possible from the lease's end: the store
				// that answers again goes to whichever comes first.
				short := min(wait, lateFinishShort)
				pause = min(pause, max(time.Until(f.leaseEnd), 0)+short/2+rand.N(short/2+1))
			}
			if left := min(deadline.Sub(e.now()), time.Until(wallDeadline)); left < pause {
				if attempt > prior { // at least one attempt here, however short d is
					break
				}
				pause = max(left, 0)
			}
			// The pauses between attempts are on the wall clock.
			if sleep == nil {
				sleep = time.NewTimer(pause)
				defer sleep.Stop()
			} else {
				sleep.Reset(pause)
			}
			until := time.Now().Add(pause)
			sw := storeWake
			if deaf {
				sw = nil // the whole backoff step after a woken attempt that failed
			}
			woken = false
			select {
			case <-sleep.C:
			case <-f.stopped.Done(): // Drain gave up on it
				break retry
			case <-wake:
				// Drain: try again at once, or once lateFinishFirst has passed
				// since the last attempt (if the pause does not end sooner).
				if rest := min(time.Until(until), time.Until(last.Add(e.lateWakeMin))); rest > 0 {
					sleep.Reset(rest)
					<-sleep.C
				}
			case <-sw:
				// The store answered another call: try again once
				// lateFinishFirst has passed since the last attempt, with
				// jitter (if the pause does not end sooner).
				woken = true
				rest := max(time.Until(last.Add(e.lateWakeMin)), 0) + rand.N(e.lateWakeJit+1)
				if rest = min(rest, time.Until(until)); rest > 0 {
					sleep.Reset(rest)
					select {
					case <-sleep.C:
					case <-f.stopped.Done():
						break retry
					}
				}
			}
			wait = min(2*wait, e.lateMax)
		}
		attempt++
		e.lateMu.Lock()
		wake, storeWake = e.lateWake, e.lateStore // a Drain, or a store call that succeeds, from now on wakes the next pause
		e.lateArmed.Store(true)
		e.lateMu.Unlock()
		cctx, cancel := context.WithTimeout(f.stopped, e.timeout)
		err = e.store.Finish(cctx, f.scope, f.token, f.state, f.resp)
		cancel()
		last = time.Now()
		deaf = woken
		if err == nil || errors.Is(err, ErrFenced) {
			e.storeAnswered() // the others may get through too
			break
		}
		if f.stopped.Err() != nil {
			break
		}
		if f.kind.claimRelease() && attempt-prior == ClaimReleaseAttempts {
			break
		}
	}
	e.lateMu.Lock()
	dropped := f.dropped
	if f.settled && err != nil {
		err = f.settledErr // a request of the key finished it (finishPending)
	}
	delete(e.lateSet, f) // from now on, Drain leaves it to this goroutine
	e.lateMu.Unlock()
	if dropped {
		return // Drain gave up on it, and reported it
	}
	count := slog.Int("attempts", attempt)
	if f.kind.claimRelease() {
		count = slog.Int("releases", attempt-prior)
	}
	attrs := []slog.Attr{slog.String("operation", f.operation), slog.String("key", f.key),
		count, slog.Duration("after", time.Since(begun).Round(time.Millisecond))}
	switch {
	case err == nil && f.kind == finishUnanswered:
		e.log.LogAttrs(ctx, slog.LevelInfo, "idem: key released: a Begin that failed as its context ended (the request's, or the store timeout) had claimed it all the same", attrs...)
		e.observe(ctx, Event{Kind: EventClaimReleased, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: StateFailed, Err: f.err})
	case err == nil && f.kind == finishLostReply:
		attrs = append(attrs, slog.Any("begin_error", f.err))
		e.log.LogAttrs(ctx, slog.LevelInfo, "idem: key released: a Begin that failed (its reply lost, say) had claimed it all the same", attrs...)
		e.observe(ctx, Event{Kind: EventClaimReleased, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: StateFailed, Err: f.err})
	case err == nil && f.kind == finishClaim:
		if attempt > 1 { // at once, it is not news
			e.log.LogAttrs(ctx, slog.LevelInfo, "idem: key released by a later attempt, after the store failed: "+f.cause.String(), attrs...)
		}
	case errors.Is(err, ErrFenced) && f.cause == claimUncommitted:
		// Taken over, expired, or the commit's result was kept after all
		// (the store failed during the COMMIT itself): nothing to free.
		if rec, ok := e.committedAfterAll(f); ok {
			// The handler's run took effect: counted as executed, as
			// a commit whose reply came would have been (once: a request
			// that ended reported it already).
			e.rememberFinal(f.recent, f.window)
			if f.reported {
				e.log.LogAttrs(ctx, slog.LevelWarn, "idem: a commit reported failed had taken effect: the record holds its result, a retry replays it (its request had ended)", attrs...)
				break
			}
			e.log.LogAttrs(ctx, slog.LevelWarn, "idem: a commit reported failed had taken effect: the record holds its result, a retry replays it (its client got 503)", attrs...)
			e.reportStored(ctx, Event{Kind: EventExecuted, Operation: f.operation, Principal: f.principal, Key: f.key,
				Protected: true, State: rec.State, Prior: f.prior, Status: f.status, Duration: f.failedAt.Sub(f.start)}, f.loss, f.respMax)
		} else if attempt > 1 { // at once, it is not news
			e.log.LogAttrs(ctx, slog.LevelInfo, "idem: key not released by a later attempt after a failed commit: it was taken over, expired, or holds the commit's result (kept after all)", attrs...)
		}
	case errors.Is(err, ErrFenced) && f.kind.claimRelease():
		// No such claim (the Begin did not reach the store), or taken
		// over (a held claim's lease ran out during its run), or expired.
	case err == nil && f.inflight != nil && attempt == prior:
		// The Finish its request stopped waiting for (FinishWait) landed.
		if f.resp != nil {
			e.log.LogAttrs(ctx, slog.LevelInfo, "idem: record finished after its response was sent: the store answered the finish after Options.FinishWait", attrs...)
			e.rememberFinal(f.recent, f.window)
		} else {
			e.log.LogAttrs(ctx, slog.LevelInfo, "idem: key released after its response was sent: the store answered after Options.FinishWait", attrs...)
		}
		e.reportStored(ctx, Event{Kind: EventExecuted, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: f.state, Prior: f.prior, Status: f.status, Duration: f.failedAt.Sub(f.start)}, f.loss, f.respMax)
	case err == nil:
		if f.resp != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "idem: record finished by a later attempt, after the store failed at finish", attrs...)
			e.rememberFinal(f.recent, f.window)
		} else {
			// FAILED without a response (a 5xx under FailuresRetry, a
			// handler that did not finish): the key is free for a retry.
			e.log.LogAttrs(ctx, slog.LevelInfo, "idem: key released by a later attempt, after the store failed at finish", attrs...)
		}
		e.reportStored(ctx, Event{Kind: EventExecuted, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: f.state, Prior: f.prior, Status: f.status, Duration: f.failedAt.Sub(f.start)}, f.loss, f.respMax)
	case errors.Is(err, ErrFenced):
		e.log.LogAttrs(ctx, slog.LevelWarn, "idem: late completion rejected: the claim was taken over or expired while the store failed at finish", attrs...)
		e.observe(ctx, Event{Kind: EventFenced, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: f.state, Status: f.status, Err: err})
	case f.kind == finishClaim:
		attrs = append(attrs, slog.Any("error", err))
		msg := "idem: gave up releasing " + f.cause.String() + ": the key stays in flight until its lease runs out"
		if f.cause == claimUncommitted {
			msg += " (or holds the commit's result, if it was kept after all)"
		}
		e.log.LogAttrs(ctx, slog.LevelError, msg, attrs...)
		e.observe(ctx, Event{Kind: EventReleaseAbandoned, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: StateFailed, Err: err})
	case f.kind.claimRelease():
		attrs = append(attrs, slog.Any("error", err))
		e.log.LogAttrs(ctx, slog.LevelWarn, "idem: gave up releasing the claim a failed Begin may have made: if it did, the key stays in flight until its lease runs out", attrs...)
		e.observe(ctx, Event{Kind: EventReleaseAbandoned, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: StateFailed, Err: err})
	default:
		attrs = append(attrs, slog.Any("error", err))
		e.log.LogAttrs(ctx, slog.LevelError, "idem: gave up finishing the record: the key stays in flight until its lease runs out, and a retry then runs the handler again", attrs...)
		e.observe(ctx, Event{Kind: EventFinishAbandoned, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: f.state, Status: f.status, Err: err})
	}
}

// committedAfterAll reads the record whose release after a failed commit
// (claimUncommitted) was fenced, and reports whether it holds that
// commit's result: final under the claim's own token (the commit took
// effect, its reply lost), not taken over or expired.
func (e *Engine) committedAfterAll(f *lateFinish) (Record, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	rec, found, err := e.store.Get(ctx, f.scope)
	if err != nil || !found || rec.Token != f.token || rec.State == StatePending {
		return Record{}, false
	}
	return rec, true
}

// Drain waits until the Finish calls the engine is trying again in the
// background (see Options.FinishRetryFor) have ended, or ctx is done.
// Call it once on a graceful shutdown, after the server stopped taking
// requests, with what is left of the shutdown's budget, so that a record
// the store could not finish during an outage that is ending gets its
// chance. It does not stop the engine, which may go on serving.
//
// When ctx ends first, Drain gives up on the retries still under way:
// they stop (an attempt in flight is cancelled; one the store got may
// take effect all the same), each Finish of a handler that ran is
// reported as EventFinishAbandoned and each claim release as
// EventReleaseAbandoned, one ERROR is logged with their counts, and it
// returns a *DrainError saying how many, which matches ctx's error
// (errors.Is). So a polling loop of Drains with short contexts gives up
// at its first poll: give one Drain the whole budget.
//
// It wakes the retries waiting out their backoff (up to 2s), so that
// each tries again at once instead of holding the shutdown until its
// next attempt, though no sooner than 100ms after its last one (Drains
// called one after another wake a retry at most once per 100ms); one
// whose attempt fails goes on with its schedule (until FinishRetryFor
// has passed), waited for until ctx is done. It waits likewise for the
// releases of claims a failed Begin may have made, of those held
// through FailOpen's unprotected runs, of those whose transaction
// could not begin, and of those whose commit failed (see
// MaxClaimReleases),
// whatever FinishRetryFor is: each ends after ClaimReleaseAttempts
// attempts at most, within the operation's lease.
//
// It waits for the retries under way when it is called; the engine may
// go on serving meanwhile, and a Finish that fails after that is not
// waited for unless its retry began before the last one ended.
func (e *Engine) Drain(ctx context.Context) error {
	e.lateMu.Lock()
	idle := e.lateIdle
	if idle != nil {
		close(e.lateWake)
		e.lateWake = make(chan struct{})
	}
	e.lateMu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return e.abandon(ctx.Err())
	}
}

// DrainError is what Engine.Drain returns when its context ended before
// the retries it waited for: how many it gave up on. It matches the
// context's error (errors.Is(err, context.DeadlineExceeded)).
type DrainError struct {
	Finishes int   // the Finish calls of handlers that ran, reported as EventFinishAbandoned
	Releases int   // the claim releases, reported as EventReleaseAbandoned
	Err      error // the context's error
}

func (d *DrainError) Error() string {
	return fmt.Sprintf("idem: Drain gave up: %d finishes (records of handlers that ran) and %d claim releases abandoned: %v", d.Finishes, d.Releases, d.Err)
}

func (d *DrainError) Unwrap() error { return d.Err }

// abandon stops the retries under way that have not ended (Drain's
// context ended with cause), reports each (EventFinishAbandoned for a
// handler's Finish, EventReleaseAbandoned for a release), logs one ERROR
// with their counts, and returns a *DrainError (cause if there were none:
// they ended as the context did).
func (e *Engine) abandon(cause error) error {
	e.lateMu.Lock()
	var fs []*lateFinish
	for f := range e.lateSet {
		if !f.dropped {
			f.dropped = true
			fs = append(fs, f)
		}
	}
	e.lateMu.Unlock()
	if len(fs) == 0 {
		return nil
	}
	ctx := context.Background()
	d := &DrainError{Err: cause}
	for _, f := range fs {
		f.stop()
		err := fmt.Errorf("idem: Drain gave up (%w) after the store failed: %w", cause, f.err)
		if f.kind.claimRelease() {
			d.Releases++
			e.observe(ctx, Event{Kind: EventReleaseAbandoned, Operation: f.operation, Principal: f.principal, Key: f.key,
				Protected: true, State: StateFailed, Err: err})
			continue
		}
		d.Finishes++
		e.observe(ctx, Event{Kind: EventFinishAbandoned, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: f.state, Status: f.status, Err: err})
	}
	e.log.LogAttrs(ctx, slog.LevelError, "idem: Drain gave up before the store answered: the records of handlers that ran stay PENDING until their leases run out, "+
		"and a retry then runs them again (finish-abandoned); the claims not released stay in flight until their leases run out (release-abandoned)",
		slog.Int("finishes", d.Finishes), slog.Int("releases", d.Releases), slog.Any("error", cause))
	return d
}
