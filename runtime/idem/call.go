package idem

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cenkalti/backoff/v5"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// Decision is what the engine decided for a request.
type Decision uint8

const (
	// Execute: run the handler (record its response through Call.Writer,
	// then call Call.Finish).
	Execute Decision = iota + 1
	// Replay: write the stored response with Call.Respond; do not run the handler.
	Replay
	// Reject: write the problem with Call.Respond; do not run the handler.
	Reject
)

func (d Decision) String() string {
	switch d {
	case Execute:
		return "execute"
	case Replay:
		return "replay"
	case Reject:
		return "reject"
	}
	return "Decision(?)"
}

// Call is one request's passage through the engine, from Begin to End. It
// is used by one goroutine (the request's), and must not be used after End.
//
// The lifecycle, which Engine.Handler follows and generated strict-server
// wrappers follow too:
//
//	c := eng.Begin(r, policy, key)
//	defer c.End()                 // releases the key if Finish is never reached (panic, error)
//	if c.Decision() != idem.Execute {
//		c.Respond(w)              // the replay or the problem
//		return
//	}
//	h.ServeHTTP(c.Writer(w), c.Request())
//	c.Finish()                    // store the record; the response is on its way or written
type Call struct {
	e        *Engine
	p        *Policy
	r        *http.Request
	ctx      context.Context
	decision Decision

	// Reject
	prob problem
	pub  *Problem
	// Replay
	resp   storedResponse
	fields [4]headerField
	hvals  [5]string // header values of a replay (the last: Idempotent-Replayed); not for a pooled Call, whose memory is reused
	kvals  []string  // the header values of a pooled Call's replay, made by keepHeader with the bytes they keep, or nil
	pooled bool
	// viaHandler: set by Engine.Handler, whose Call begins before anything
	// downstream of the middleware read the body.
	viaHandler bool
	replayS    State
	// respBuf is handed to the store as BeginRequest.Buf; it outlives
	// recycling (reset keeps it). scratch: the replayed record is in it, so
	// what the response keeps of it is copied.
	respBuf []byte
	scratch bool

	protected   bool
	principal   string
	key         string
	scope       string
	recent      uint64 // the scope's digest in the Engine's recentKeys (a ReadFirst store's)
	fp          Fingerprint
	fpAlt       Fingerprint       // fp in another version (a record's), once computed
	fpCompat    Fingerprint       // a record's fingerprint this request has under a compatible setting (Spec.CompatibleFingerprints), once found; zero: none
	claimCompat bool              // the claim's fingerprint is fpCompat: its record is not tagged (Finish)
	fpIn        fingerprint.Input // what fp (and fpAlt) is computed from, built once
	fpk         fpKey             // fpIn's key in the Engine's fingerprint cache
	fpLater     bool              // fp is not computed yet: claim reads the record first (readLocal)
	token       Token
	prior       State
	start       time.Time
	// ss and cs are what the store calls are handed: own and ownClaim for a
	// Call over a ContextBound store (or one never recycled), else a
	// storeSide and a claimSide of the request's own, so that a store that
	// keeps them cannot see them reused, made once the scope key is built
	// (makeSides): a replay read first makes no claimSide.
	ss         *storeSide
	cs         *claimSide
	own        storeSide
	ownClaim   claimSide
	readsFirst bool // claim reads first (ReadFirst): the Engine recently saw the scope final

	body        []byte
	bodyBuf     *[]byte // pooled (or &bodyOwn), when the engine read the body itself
	bodyOwn     []byte  // a pooled Call's own body buffer, kept through recycling (reset) instead of a trip through bufPool
	restoreBody bool
	bodyCapture *capture      // the capture c.body aliases (readCapture): its buffer is held until end
	origBody    io.ReadCloser // r.Body, while Request swapped it
	swapped     bool

	// ho holds what the handler is handed (Writer, request body); h points
	// to it, or, for a recycled Call, to a handout of its own that outlives
	// the Call's reuse.
	ho       handout
	h        *handout
	commit   func(State, []byte) error
	rollback func()
	txCancel context.CancelCauseFunc // ends the transaction's context (End)
	finished bool
	ended    bool
	// handoff: HandlerFailed left the Call open for the strict server's
	// error handler (AnswerHandlerError) or its request's bound (End does
	// nothing meanwhile); see the handoff states. unbounded: HandlerFailed
	// would have, but found no open bound (the warning says so).
	handoff   atomic.Int32
	unbounded bool
	// nothingDone: HandlerFailed's error says nothing of the operation
	// ran (ErrHandlerNothingDone): End frees the key without the warning.
	nothingDone bool
	// detach: the handler's context is detached from the request's
	// cancellation (Options.DetachHandler); End releases it.
	detach *handlerDetach
	// finishRetrying: a Finish of this Call that failed on the store is
	// being retried in the background (finishLater); finishAbandoned: it
	// failed, not fenced, and is not (EventFinishAbandoned).
	finishRetrying  bool
	finishAbandoned bool
	// held releases the claim that FailOpen's unprotected run leaves in
	// place while it runs, once it ends (releaseHeld); nil: none.
	held func()
	// claimBy: after a ReadFirst Get that decided nothing, the deadline of
	// the first Begin (the Get's): the store calls up to the claim share one
	// StoreTimeout. Zero otherwise.
	claimBy time.Time

	// lostCancel ends the handler's context of a run that is not
	// transactional, under Options.CancelOnLeaseLost (End; txLost, with
	// the cause, when the claim is lost).
	lostCancel context.CancelCauseFunc

	hbMu      sync.Mutex
	hb        hbTimer // made only when the handler outlives a sixth of the lease (hbSched)
	hbStopped bool
	// hbGrant: when the call that granted the current lease started (the
	// claim's Begin, then the last successful extension), since epoch: the
	// lease runs to hbGrant+Lease on the store's clock at the latest.
	// hbRanOut: the lease runs out before the next attempt (said
	// once). Under hbMu once the heartbeat is armed.
	hbGrant   time.Duration
	hbRanOut  bool
	hbStarted bool // the claim is registered with the engine's heartbeat scheduler
	hbDone    bool // stopHeartbeat ran
	hbArmed   bool // the scheduler took the Call to arm its heartbeat: it must not be recycled
	// hbLost: the cause with which a heartbeat cancelled the transaction
	// (txLost: ErrFenced or ErrLeaseLost); Finish then does not commit.
	// Written under hbMu before the heartbeat is stopped, read after.
	hbLost error
	// lostFired: txLost cancelled the handler's context under
	// Options.CancelOnLeaseLost (lostCancel): a 5xx it then answers frees
	// the key whatever Spec.Failures says (the operation gave up, it did
	// not run). Written under hbMu before the heartbeat is stopped, read
	// after.
	lostFired bool

	// Owned by the engine's hbSched (under its lock).
	hbPrev, hbNext *Call
	hbListed       bool
	hbCollected    bool // taken off the list to be armed
}

// Decision returns what the engine decided.
func (c *Call) Decision() Decision { return c.decision }

// Protected reports whether an Execute decision runs under a record (false
// when the request carried no key under strict/loose with an optional key,
// or when FailOpen ran it after a store error).
func (c *Call) Protected() bool { return c.protected }

// Key returns the normalized idempotency key ("" when the request has none).
func (c *Call) Key() string { return c.key }

// Context returns the context the handler must run with: the request's, or,
// in transactional mode, the store's transaction context; with
// Options.DetachHandler, for a protected run, one the request's
// cancellation (its client going away) ends only DetachHandler later.
func (c *Call) Context() context.Context { return c.ctx }

// Problem returns the problem of a Reject decision (nil otherwise).
func (c *Call) Problem() *Problem {
	if c.decision != Reject {
		return nil
	}
	if c.pub != nil {
		return c.pub
	}
	p := &Problem{Type: c.e.problemBase + c.prob.code, Title: c.prob.title, Status: c.prob.status, Detail: c.prob.detail, Code: c.prob.code}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if c.prob.retryAfter != nil {
		for _, ch := range c.prob.retryAfter[0] {
			p.RetryAfter = p.RetryAfter*10 + int(ch-'0')
		}
	}
	return p
}

// Begin decides what to do with r under policy p. key is RequestKey to read
// the key from r as the policy says, or KeyFrom/KeyFromPtr/NoKey when the
// caller (a generated strict-server wrapper) already has it.
//
// Begin reads the request body (up to p's Request.MaxBytes) to fingerprint
// it: from CaptureBody's capture whenever CaptureBody wrapped r (the
// strict-server case, where the body was decoded before; when a middleware
// inside CaptureBody replaced r.Body, the wire bytes under it, and r.Body is
// left to the handler: see CaptureBody), else from r.Body, which
// Call.Request then restores for the handler. (Engine.Handler, which begins
// before anything downstream read the body, reads a replaced r.Body
// instead.) It never returns nil; the caller must call End.
func (e *Engine) Begin(r *http.Request, p *Policy, key Key) *Call {
	c := new(Call)
	c.init(e, p, r)
	c.begin(key)
	return c
}

// callPool recycles the Calls of Engine.Handler (never those returned by
// Begin: End may be called twice on them). What a handler is handed (the
// Writer and the request body) lives apart from a recycled Call, since a
// careless handler may keep it; a Call whose heartbeat ran is not recycled.
var callPool = sync.Pool{New: func() any { return new(Call) }}

// storeSide and claimSide are what a request's store calls are handed and
// a store may keep beyond a call unless it is ContextBound. storeSide,
// which every request with a key needs: the context of the first store call
// (a Get, ReadFirst, or the first Begin) and the memory of the scope key;
// claimSide, which a request that claims needs: the BeginRequest, the
// context of the first Finish and their parent without cancellation. A
// replay read first allocates only the first (half the bytes of both, and
// the bytes a request allocates are what the garbage collector costs it), a
// request that claims both at once (sides).
type storeSide struct {
	bctx     boundedCtx // the context of the first store call: a Get (ReadFirst) or the first Begin
	scopeBuf [160]byte
}

type claimSide struct {
	breq BeginRequest
	fctx boundedCtx // the context of the first Finish
	bg   detached
}

type sides struct {
	ss storeSide
	cs claimSide
}

// init prepares a zero Call. A Call from the pool over a store that is not
// ContextBound gets a storeSide (and, if it claims, a claimSide) of its own
// request (makeSides): the Call is reused, they never are.
func (c *Call) init(e *Engine, p *Policy, r *http.Request) {
	c.e, c.p, c.r, c.ctx = e, p, r, r.Context()
	c.ss, c.cs = &c.own, &c.ownClaim
	c.cs.bg.parent = c.ctx
	c.h = &c.ho
}

// initPooled is init for a Call from the pool.
func (c *Call) initPooled(e *Engine, p *Policy, r *http.Request) {
	c.init(e, p, r)
	c.pooled = true
	if !e.recycle {
		c.ss, c.cs = nil, nil // makeSides
	}
}

// makeSides makes the storeSide, and unless the request reads first the
// claimSide, of a Call from the pool over a store that is not ContextBound,
// in one allocation.
func (c *Call) makeSides(readsFirst bool) {
	if readsFirst {
		c.ss = new(storeSide)
		return
	}
	s := &sides{cs: claimSide{bg: detached{parent: c.ctx}}}
	c.ss, c.cs = &s.ss, &s.cs
}

// claimSide returns the Call's claimSide, which it makes on its first use
// for a Call of the pool over a store that is not ContextBound that read
// first (a key Get did not settle goes on to Begin).
func (c *Call) claimSide() *claimSide {
	if c.cs == nil {
		c.cs = &claimSide{bg: detached{parent: c.ctx}}
	}
	return c.cs
}

// handout is what the handler of an executed request is handed.
type handout struct {
	rec     recorder
	sw      statusWriter // an unprotected run's (see Writer)
	reqBody bodyReader
}

// recyclable reports whether an ended Call from the pool can go back to it:
// no heartbeat callback can still touch it.
func (c *Call) recyclable() bool {
	// What the store calls were handed lives in the Call (own) only over a
	// store that promises not to use it after a call (ContextBound);
	// otherwise it lives in a storeSide that is never reused, since a pooled
	// network client may keep a child of those contexts beyond the call
	// (pgxpool starts connections with the caller's values) and zeroing the
	// memory under it would break it. A store that asked for Done anyway
	// keeps a Call over a ContextBound store from being reused.
	if c.ss == &c.own && (!c.e.recycle || c.own.bctx.materialized() || c.ownClaim.fctx.materialized()) {
		return false
	}
	if !c.hbStarted {
		return true
	}
	c.stopHeartbeat()
	return !c.hbArmed
}

// endPooled ends a Call from the pool and puts it back if it can be reused.
// Deferred, it answers a panic as End does (see End).
func (c *Call) endPooled() {
	v := recover()
	raise := c.end(v)
	if c.recyclable() {
		c.recycle()
	}
	if raise {
		panic(v)
	}
}

// recycle puts an ended Call back into the pool.
func (c *Call) recycle() {
	c.reset()
	callPool.Put(c)
}

func (c *Call) reset() {
	buf, body := c.respBuf, c.bodyOwn
	*c = Call{}
	if cap(buf) <= maxKeptRespBuf {
		c.respBuf = buf[:0]
	}
	if cap(body) <= maxPooled { // as putBuf: a large body's buffer is dropped
		c.bodyOwn = body[:0]
	}
}

// maxKeptRespBuf is the largest response buffer a recycled Call keeps;
// initRespBuf the size of the one it makes after its first replay.
const (
	maxKeptRespBuf = 16 << 10
	initRespBuf    = 1 << 10
)

func (c *Call) begin(k Key) {
	p, r := c.p, c.r
	carrier := p.spec.Key.Carrier
	var raw string
	var kerr error
	switch {
	case k.given:
		if k.set {
			raw = k.value
		} else {
			kerr = errKeyMissing
		}
	case carrier == CarrierHeader:
		raw, kerr = headerKey(r.Header, p.keyName)
	case carrier == CarrierQuery:
		raw, kerr = queryKey(r.URL.RawQuery, p.keyName)
	}
	bodyCarried := !k.given && carrier == CarrierBody
	if !bodyCarried && !c.checkKey(raw, kerr) {
		return
	}
	if !c.readBody() {
		return
	}
	if bodyCarried {
		raw, kerr = bodyKey(c.body, p.keyPtr)
		if kerr == detailBadJSON && k.orNone {
			kerr = errKeyMissing
		}
		if !c.checkKey(raw, kerr) {
			return
		}
	}
	if pf := c.e.principal; pf != nil {
		pr, err := pf(r)
		if pr == "" && err == nil && p.spec.Scope == ScopePrincipal &&
			(c.key != "" || p.spec.Semantics == Window) {
			// The anonymous callers' key space: not for a caller unknown.
			// Only where the principal selects one: a shared scope uses
			// none, and a request without a key (but under Window, which
			// records it by its fingerprint) runs unprotected.
			err = ErrEmptyPrincipal
		}
		if err != nil {
			c.principalFailed(err)
			return
		}
		c.principal = pr
	} else if p.spec.Scope == ScopePrincipal && !c.e.anonymous {
		c.noPrincipal()
		return
	}
	if c.key == "" && p.spec.Semantics != Window {
		// An optional key left out under strict/loose: a plain request.
		c.decision = Execute
		if c.e.obs != nil { // the Duration of EventExecuted
			c.start = c.e.now()
		}
		return
	}
	var b []byte
	pr := c.principal // the scope's principal: none when the keys are shared
	if p.spec.Scope == ScopeShared {
		pr = ""
	}
	// The scope is built in the storeSide's buffer, or, before a Call from
	// the pool over a store that is not ContextBound has one, in the
	// Call's own, as a scratch. A keyed request's is built first: a store
	// in memory (keyPrefetcher) then brings in what its first call will
	// look at while the fingerprint's cache digests the body.
	buf := &c.own.scopeBuf
	if c.ss != nil {
		buf = &c.ss.scopeBuf
	}
	switch {
	case c.key != "" && pr == "" && p.anonKeyScope != "":
		// Fast path: no principal (Anonymous, or the keys are shared);
		// the scope's head is the policy's, encoded at Compile.
		b = appendKeyField(append(buf[:0], p.anonKeyScope...), c.key)
	case c.key != "":
		b = appendKeyField(appendScopeHead(buf[:0], pr, p.spec.Operation, kindKey), c.key)
	}
	if pf := c.e.prefetch; pf != nil && len(b) > 0 {
		pf.PrefetchKey(unsafe.String(unsafe.SliceData(b), len(b)))
	}
	c.fpIn = c.fpInput()
	fpc := c.e.fpc
	c.fpk = fpc.key(p, &c.fpIn, c.key == "")
	if fp, ok := fpc.get(c.fpk); ok {
		c.fp = fp
	} else if c.key != "" && c.e.local != nil {
		// Not in the cache: the key's record may tell that this request
		// was made before without it (readLocal).
		c.fpLater = true
	} else {
		c.fp = fpc.compute(p, &c.fpIn, c.fpk)
	}
	if c.key == "" {
		var hx [2 * len(Fingerprint{})]byte
		hex.Encode(hx[:], c.fp[:])
		b = appendScope(buf[:0], pr, p.spec.Operation, kindFP, string(hx[:]))
	}
	if e := c.e; e.recent != nil {
		c.recent = e.recent.digest(unsafe.String(unsafe.SliceData(b), len(b)))
		c.readsFirst = !c.fpLater && e.recent.has(c.recent, e.now)
	}
	if c.ss == nil {
		// A LocalReader (fpLater) often answers without a claim: its
		// claimSide is made if the claim comes (claimSide).
		c.makeSides(c.readsFirst || c.fpLater)
		if len(b) > 0 && &b[0] == &buf[0] {
			b = c.ss.scopeBuf[:copy(c.ss.scopeBuf[:], b)]
		}
	}
	if len(b) <= len(c.ss.scopeBuf) && len(b) > 0 && &b[0] == &c.ss.scopeBuf[0] {
		// The scope lives in the storeSide: aliasing it saves an
		// allocation. A storeSide is reused (with its recycled Call) only
		// over a ContextBound store, which keeps no key it is given; any
		// other's scopeBuf is never written again.
		c.scope = unsafe.String(&c.ss.scopeBuf[0], len(b))
	} else {
		c.scope = string(b)
	}
	c.claim()
}

// fpInput is what the request's fingerprint is computed from (begin keeps
// it in fpIn).
func (c *Call) fpInput() fingerprint.Input {
	r := c.r
	return fingerprint.Input{
		Method:      r.Method,
		Operation:   c.p.spec.Operation,
		Path:        escapedPath(r.URL),
		RawQuery:    r.URL.RawQuery,
		Header:      r.Header,
		ContentType: headerValue(r.Header, "Content-Type"),
		Body:        c.body,
	}
}

// escapedPath is u.EscapedPath(). Its fast path: a URL without RawPath
// whose Path holds no byte that EscapedPath escapes (most paths) is its
// own escaped form, which EscapedPath returns after a pass of its escape
// function; the scan here is a table lookup per byte. Any other URL goes
// to EscapedPath.
func escapedPath(u *url.URL) string {
	if u.RawPath == "" {
		p := u.Path
		i := 0
		for i < len(p) && pathSafe[p[i]] {
			i++
		}
		if i == len(p) {
			return p
		}
	}
	return u.EscapedPath()
}

// pathSafe holds the bytes that url.URL.EscapedPath leaves as they are in
// a path (net/url's shouldEscape in its path mode): ALPHA, DIGIT,
// "-_.~" and the reserved bytes but '?'.
var pathSafe = func() (t [256]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("-_.~$&+,/:;=@", byte(c)) >= 0
	}
	return t
}()

// sameRequest reports whether fp, a record's fingerprint, is this
// request's: equal to it or, for a record of another fingerprint version (an
// instance of the other step of a rolling upgrade made it: see
// Options.FingerprintVersion), equal to this request's fingerprint computed
// in the record's version. The comparison is symmetric: an engine at version
// 3 recognizes version 1 and 2 records, one at version 2 version 1 and 3
// records, and so on. Failing that, a keyed request is compared under the
// policy's compatible fingerprint settings (sameCompatible).
func (c *Call) sameRequest(fp Fingerprint) bool {
	if fp == c.fp {
		return true
	}
	if fp[0] != c.fp[0] {
		if other, ok := c.fpInVersion(fp[0]); ok && other == fp {
			return true
		}
	}
	return len(c.p.compat) > 0 && c.sameCompatible(fp)
}

// otherProcess answers the request when fp, its key's record's
// fingerprint, is a process-local fingerprint of another process (see
// fingerprint.Fingerprint.OtherProcess), and reports whether it did. Such
// a fingerprint cannot be compared with this request's, in any version: the
// record is answered as one this Engine cannot read (500
// IDEMPOTENCY_RECORD_UNREADABLE), and the Engine logs once, at ERROR, that
// the store's records leave the process, against the LocalReader contract
// (a wrapper over a shared store that forwards ReadLocal: every retry
// reaching another instance would otherwise be refused, 422, with nothing
// said).
func (c *Call) otherProcess(fp Fingerprint) bool {
	if !fp.OtherProcess() {
		return false
	}
	e := c.e
	if e.warnedOther.CompareAndSwap(false, true) {
		e.log.LogAttrs(c.ctx, slog.LevelError, "idem: a record's fingerprint is process-local and was computed by another process: "+
			"records written through a store that implements idem.LocalReader must never leave the process (LocalReader's contract), "+
			"and this store holds one another process wrote (a store shared by several processes, Redis or PostgreSQL behind a wrapper that forwards ReadLocal, "+
			"or records copied from another process); such records are answered 500 "+CodeRecordUnreadable+
			": fix the store (do not implement or forward LocalReader over a shared store); logged once",
			slog.String("store", fmt.Sprintf("%T", e.store)), slog.String("operation", c.p.spec.Operation), slog.String("fingerprint", fp.String()))
	}
	c.reject(problem{status: http.StatusInternalServerError, code: CodeRecordUnreadable,
		detail: "the stored record for this idempotency key cannot be read"}, errOtherProcess)
	return true
}

// errOtherProcess is the cause of the answer to a request whose record
// has another process's local fingerprint (otherProcess).
var errOtherProcess = errors.New("idem: the record's fingerprint is process-local to another process (the store implements LocalReader, but its records leave the process)")

// sameCompatible reports whether fp, a record's fingerprint that is not
// this request's, is its fingerprint under one of the policy's compatible
// settings (Spec.CompatibleFingerprints), computed in fp's version: the record was made
// before the operation's fingerprint settings changed (or, in a rollback,
// after), by the same request. Only a keyed request: a request without a
// key names its record by its fingerprint, and finds none made under
// another setting. The fingerprints are computed here only, when the
// record differs (one per setting, and again on each call but for the one
// found, which is kept), never on a first request or a replay.
func (c *Call) sameCompatible(fp Fingerprint) bool {
	if c.key == "" {
		return false
	}
	if c.fpCompat[0] != 0 && fp == c.fpCompat {
		return true
	}
	for _, h := range c.p.compat {
		if other, ok := h.SumVersion(&c.fpIn, int(fp[0])); ok && other == fp {
			c.fpCompat = fp
			return true
		}
	}
	return false
}

// reclaimWith makes the claim's fingerprint fp, a record's fingerprint
// that sameRequest found to be this request's (in another version, or
// under a compatible setting): the store takes the record over only for an
// equal fingerprint (BeginRequest.SameFingerprintToReclaim).
func (c *Call) reclaimWith(fp Fingerprint) {
	c.claimSide().breq.Fingerprint = fp
	c.claimCompat = c.fpCompat[0] != 0 && fp == c.fpCompat
}

// fpInVersion is the request's fingerprint in format version v (false if
// the fingerprint package does not compute it), computed once per Call.
func (c *Call) fpInVersion(v byte) (Fingerprint, bool) {
	if c.fpAlt[0] == v && v != 0 {
		return c.fpAlt, true
	}
	fp, ok := c.p.hasher.SumVersion(&c.fpIn, int(v))
	if ok {
		c.fpAlt = fp
	}
	return fp, ok
}

// checkKey validates the raw key; false means the call was rejected.
func (c *Call) checkKey(raw string, kerr error) bool {
	if kerr == errKeyMissing {
		if c.p.keyRequired {
			c.reject(problem{status: http.StatusBadRequest, code: CodeKeyMissing,
				detail: "this operation requires an idempotency key"}, nil)
			return false
		}
		return true
	}
	if kerr == nil {
		c.key, kerr = ParseKey(raw, c.p.spec.Key.Format, c.p.maxKey)
	}
	if kerr != nil {
		c.reject(problem{status: http.StatusBadRequest, code: CodeKeyInvalid, detail: c.p.invalidKeyDetail(kerr)}, nil)
		return false
	}
	return true
}

func (c *Call) principalFailed(err error) {
	var pub *Problem
	if errors.As(err, &pub) {
		c.decision = Reject
		c.pub = pub
		c.e.observe(c.ctx, Event{Kind: EventRejected, Operation: c.p.spec.Operation, Key: c.key,
			Status: publicStatus(pub.Status), Code: pub.Code, Err: err})
		return
	}
	if ended := c.requestEnded(); ended != nil {
		c.refuseEnded(ended, err)
		return
	}
	c.e.log.LogAttrs(c.ctx, slog.LevelError, "idem: principal unavailable",
		slog.String("operation", c.p.spec.Operation), slog.Any("error", err))
	c.reject(principalUnavailable, err)
}

// principalUnavailable answers a request whose caller the engine could not
// tell (principalFailed, noPrincipal).
var principalUnavailable = problem{status: http.StatusInternalServerError, code: CodePrincipalUnavailable,
	detail: "the server could not tell who makes this request"}

// noPrincipal refuses a request of a policy scoped per principal on an
// Engine without Options.Principal (ErrNoPrincipal). The Engine logs it
// once, not per request: at wiring (Serves), or here when Begin is called
// without it.
func (c *Call) noPrincipal() {
	if !c.e.warnedPr.Load() {
		c.e.Serves(c.p)
	}
	c.reject(principalUnavailable, ErrNoPrincipal) // Misconfigured: observe marks it
}

// reject decides Reject with p and reports it.
func (c *Call) reject(p problem, cause error) {
	c.decision = Reject
	c.prob = p
	if c.e.obs == nil {
		return
	}
	kind := EventRejected
	switch p.code {
	case CodeKeyReused:
		kind = EventConflict
	case CodeKeyInUse:
		kind = EventInFlight
	case CodeStoreUnavailable:
		kind = EventStoreError
	}
	c.e.observe(c.ctx, Event{Kind: kind, Operation: c.p.spec.Operation, Principal: c.principal, Key: c.key,
		Protected: c.scope != "", Status: p.status, Code: p.code, Err: cause})
}

// readBody reads the request body for the fingerprint; false means rejected.
//
// Under CaptureBody, when r.Body is the capture, the fingerprint is of the
// capture's wire bytes, all of them, and the handler is handed them again.
// When a middleware inside CaptureBody replaced r.Body (gzip decompression,
// http.MaxBytesReader):
//   - Engine.Handler reads the replacement, as without CaptureBody: nothing
//     downstream has read it yet, so the fingerprint is of the body the
//     handler sees (decompressed: canonical JSON, volatile members and a
//     body-carried key apply), and Call.Request hands it to the handler;
//   - Begin called after a strict-server decoder read the body through the
//     replacement fingerprints the capture's wire bytes, all of them (the
//     replacement's remainder would be only what the decoder left, a
//     trailing newline, and different requests would share a
//     fingerprint); r.Body stays the handler's, and reads the rest from the
//     capture's kept bytes.
func (c *Call) readBody() bool {
	r, limit := c.r, c.p.reqMax
	cp, isBody := findCapture(r)
	if isBody {
		return c.readCapture(cp, true)
	}
	if cp != nil && !c.viaHandler {
		return c.readCapture(cp, false)
	}
	if isNoBody(r.Body) {
		if cp != nil && cp.wasRead() {
			return c.readCapture(cp, false)
		}
		return true
	}
	// With a capture that r.Body replaced, r.Body is read; its
	// ContentLength may be the capture's (compressed) length. So may it be
	// without one: a decompressing middleware in front of the engine that
	// replaced r.Body often leaves ContentLength and Content-Encoding as
	// sent, so ContentLength is taken for the length of r.Body only when
	// the body is not encoded (the header is looked at only when the
	// lengths disagree).
	if cp == nil && r.ContentLength > limit && !contentEncoded(r.Header) {
		return c.bodyFailed(errTooLarge)
	}
	var bp *[]byte
	if c.pooled {
		// Fast path: a pooled Call reads into its own buffer, kept when
		// the Call is recycled (its lifetime is the one a buffer from
		// bufPool has: until End), without a trip through bufPool.
		if c.bodyOwn == nil {
			c.bodyOwn = make([]byte, 0, initialBuf)
		}
		bp = &c.bodyOwn
	} else {
		bp = getBuf()
	}
	b, err := readAtMost((*bp)[:0], r.Body, limit)
	*bp = b
	if err == nil && cp == nil && int64(len(b)) < r.ContentLength && !contentEncoded(r.Header) {
		// Shorter: something read it before the engine. (Longer is a
		// body a middleware replaced without updating ContentLength.)
		err = errBodyConsumed
	}
	if err != nil {
		c.releaseBody(bp)
		return c.bodyFailed(err)
	}
	c.bodyBuf, c.body, c.restoreBody = bp, b, true
	return true
}

// releaseBody gives back a body buffer readBody took: to bufPool, unless
// it is the Call's own (which reset keeps or drops).
func (c *Call) releaseBody(bp *[]byte) {
	if bp != &c.bodyOwn {
		putBuf(bp)
	}
}

// readCapture takes the body from CaptureBody's capture. restore: hand it to
// the handler as r.Body (only when r.Body was the capture: a replacement
// stays the handler's, and reads what drain kept from the capture).
func (c *Call) readCapture(cp *capture, restore bool) bool {
	body, err := cp.drain(c.p.reqMax)
	if err != nil {
		return c.bodyFailed(err)
	}
	// drain held the capture's buffer for the Call (end drops it): under a
	// timeout middleware inside CaptureBody, the Call may outlive
	// CaptureBody, and c.body, c.fpIn.Body and the handler's body reader
	// alias the buffer until end.
	c.bodyCapture = cp
	c.body = body
	c.restoreBody = restore
	return true
}

// contentEncoded reports whether h has a Content-Encoding other than
// identity.
func contentEncoded(h http.Header) bool {
	for _, v := range h["Content-Encoding"] {
		if v = strings.TrimSpace(v); v != "" && !strings.EqualFold(v, "identity") {
			return true
		}
	}
	return false
}

var (
	errTooLarge     = errors.New("idem: request body too large")
	errBodyConsumed = errors.New("idem: request body shorter than its Content-Length: it was read before the engine (use CaptureBody)")
)

// readAtMost appends all of r to b; errTooLarge past limit bytes.
func readAtMost(b []byte, r io.Reader, limit int64) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return b, errTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return b, errTooLarge
			}
			return b, err
		}
	}
}

func (c *Call) bodyFailed(err error) bool {
	if err == errTooLarge {
		c.reject(problem{status: http.StatusRequestEntityTooLarge, code: CodeRequestTooLarge,
			detail: detailTooLarge}, nil)
		return false
	}
	if err == errBodyConsumed {
		c.e.log.LogAttrs(c.ctx, slog.LevelError, "idem: request body was consumed before the engine read it; wrap the router with idem.CaptureBody",
			slog.String("operation", c.p.spec.Operation))
	}
	c.reject(problem{status: http.StatusBadRequest, code: CodeRequestUnreadable,
		detail: "the request body could not be read"}, err)
	return false
}

// claim runs Begin against the store until a decision is reached.
func (c *Call) claim() {
	e, p := c.e, c.p
	ctx := c.ctx
	spec := &p.spec
	var (
		waiting  bool
		deadline time.Time
		changed  <-chan struct{}
		stop     func()
		bo       backoff.ExponentialBackOff
		timer    *time.Timer
		wctx     context.Context // the watch's: ends at the wait's deadline
		wcancel  func()
		// claims retried with a record's fingerprint of another version or
		// setting (or, after one, with the request's own): at most
		// p.maxReclaims
		versionReclaims int
		// landedBy: the wait's deadline, once the request waited for a
		// Finish its key's request handed over (Options.FinishWait) to
		// land (awaitLanded); zero before
		landedBy time.Time
	)
	defer func() {
		if stop != nil {
			stop()
		}
		if timer != nil {
			timer.Stop()
		}
		if wcancel != nil {
			wcancel()
		}
	}()
	if c.fpLater {
		if c.readLocal() {
			return
		}
	} else if c.readsFirst && c.readFirst() {
		return
	}
	cs := c.claimSide()
	cs.breq = BeginRequest{Key: c.scope, Fingerprint: c.fp, Lease: spec.InFlight.Lease, TTL: spec.Window,
		SameFingerprintToReclaim: p.sameFPReclaim, Principal: c.principal}
	if e.recycle {
		// Only a ContextBound store gets the Call's reusable memory: the
		// Call may have been recycled by another Engine (the pool is the
		// process's), and another store may keep what it is handed.
		cs.breq.Buf = c.respBuf
	}
	for {
		if e.lateAns.Load() != 0 {
			ok, landed := c.finishPending()
			if !ok && landed != nil && spec.InFlight.Wait > 0 {
				// The Finish its key's request handed over is in flight,
				// and the policy waits: wait for it, then look again.
				if landedBy.IsZero() {
					landedBy = e.now().Add(spec.InFlight.Wait)
				}
				if c.awaitLanded(ctx, landed, landedBy) {
					continue
				}
			}
			if !ok {
				// The key's pending Finish failed: in flight (no claim
				// was made; no Begin, no FailOpen).
				var waited time.Duration
				if waiting {
					waited = c.waited(deadline)
				} else if !landedBy.IsZero() {
					waited = c.waited(landedBy)
				}
				c.inFlight(waited)
				return
			}
		}
		c.token = newToken()
		cs.breq.Token = c.token
		if e.hbs != nil {
			c.hbGrant = e.hbs.since() // the lease this Begin grants starts no earlier
		}
		res, cut, err := c.beginBounded(ctx)
		if err == nil {
			e.storeAnswered() // wakes the Finish calls retried in the background, if any
		}
		if err != nil {
			ended := c.requestEnded() != nil
			cut = cut || ended
			if waiting && ended {
				// The wait ended with the request, as when ctx.Done
				// wins the select below: the record was in flight.
				c.releaseUnanswered(err, cut)
				c.inFlight(c.waited(deadline))
				return
			}
			c.storeFailed(err)
			if c.decision == Execute {
				// FailOpen runs the handler unprotected: a claim the Begin
				// made all the same keeps the client's retry out while it
				// runs, so it is released once the run ends.
				c.held = func() { c.releaseUnanswered(err, cut) }
				return
			}
			c.releaseUnanswered(err, cut)
			return
		}
		if res.Acquired {
			c.acquired(res.Prior)
			return
		}
		rec := &res.Record
		if rec.State == StatePending && rec.Token == c.token {
			// Our own claim: the store ran this Begin twice (a client
			// library that sent the command again after a lost reply) and
			// the second run found the first's record. Tokens are fresh
			// per claim, so no one else holds it; the prior state the
			// first run replaced is unknown. (The stores of this module
			// answer a re-run acquired, with the lease renewed, as the
			// Store contract asks; this answer is an earlier contract's.)
			c.acquired(0)
			return
		}
		if c.otherProcess(rec.Fingerprint) {
			return
		}
		switch {
		case rec.State == StatePending:
			if spec.Semantics == Strict && !c.sameRequest(rec.Fingerprint) {
				c.conflict()
				return
			}
			if cs.breq.SameFingerprintToReclaim && versionReclaims < p.maxReclaims && rec.Fingerprint != cs.breq.Fingerprint {
				// The same request, fingerprinted in another version (or
				// under a compatible setting: Spec.CompatibleFingerprints). The
				// store takes an expired lease over only for an equal
				// fingerprint (SameFingerprintToReclaim), and cannot tell
				// whether this lease has run out on its clock: claim again
				// with the record's fingerprint, as for a reclaimable
				// record below. A live lease is then reported again, with
				// that fingerprint, and waited for as usual.
				versionReclaims++
				c.reclaimWith(rec.Fingerprint)
				continue
			}
			if spec.InFlight.Wait <= 0 {
				c.inFlight(0)
				return
			}
		case rec.Reclaimable():
			// Not reclaimed: SameFingerprintToReclaim and another fingerprint.
			if versionReclaims < p.maxReclaims && rec.Fingerprint != cs.breq.Fingerprint && c.sameRequest(rec.Fingerprint) {
				// The same request, fingerprinted in another version or
				// under a compatible setting: claim with the record's
				// fingerprint (at most once per fingerprint the request
				// may have, so records rewritten concurrently in
				// alternating versions cannot keep this loop going).
				versionReclaims++
				c.reclaimWith(rec.Fingerprint)
				continue
			}
			c.conflict()
			return
		default: // COMPLETED, or FAILED with a stored response
			var waited time.Duration
			if waiting {
				waited = c.waited(deadline)
			} else if !landedBy.IsZero() {
				waited = c.waited(landedBy)
			}
			c.settled(rec, waited)
			return
		}

		// In flight, and the policy waits.
		now := e.now()
		if !waiting {
			waiting = true
			deadline = now.Add(spec.InFlight.Wait)
			if !landedBy.IsZero() {
				deadline = landedBy // it waited for a Finish to land first
			}
			bo = backoff.ExponentialBackOff{InitialInterval: 5 * time.Millisecond, RandomizationFactor: 0.3,
				Multiplier: 1.6, MaxInterval: 250 * time.Millisecond}
			if e.watcher != nil {
				bo.InitialInterval, bo.MaxInterval = 50*time.Millisecond, time.Second
				// Watch, then look again: a change between the two is not missed.
				// The watch never outlives the wait, so a store that does not
				// answer cannot hold the request past it.
				wctx, wcancel = untilDeadline(ctx, deadline)
				changed, stop = e.watcher.Watch(wctx, c.scope)
				continue
			}
		}
		remain := deadline.Sub(now)
		if remain <= 0 {
			c.inFlight(spec.InFlight.Wait)
			return
		}
		d := min(bo.NextBackOff(), remain)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			c.inFlight(c.waited(deadline))
			return
		case <-timer.C:
		case <-changed:
			stop()
			changed, stop = e.watcher.Watch(wctx, c.scope)
		}
	}
}

// waited returns how long claim has waited for an in-flight record, given
// the wait's deadline (its start plus InFlight.Wait).
func (c *Call) waited(deadline time.Time) time.Duration {
	return c.e.now().Sub(deadline.Add(-c.p.spec.InFlight.Wait))
}

// settled answers a request whose key has a final record (COMPLETED, or
// FAILED with a stored response): its replay, or a conflict when a strict
// policy finds another fingerprint.
func (c *Call) settled(rec *Record, waited time.Duration) {
	e, spec := c.e, &c.p.spec
	if e.recent != nil && !rec.ExpiresAt.IsZero() {
		// The next retry with this key reads first (ReadFirst), until the
		// record expires (on the store's clock: a hint).
		e.recent.add(c.recent, rec.ExpiresAt)
	}
	if c.otherProcess(rec.Fingerprint) {
		return
	}
	mismatch := false
	if !c.sameRequest(rec.Fingerprint) {
		if spec.Semantics == Strict {
			c.conflict()
			return
		}
		mismatch = true
	}
	c.replay(rec, waited, mismatch)
}

// readFirst reads the record of a key whose record this Engine recently saw
// final (most likely a retry) with the store's Get, which costs a ReadFirst
// store less than a Begin that finds the record, and reports whether that
// decided the request: a replay or a conflict. A key whose record is gone,
// in flight or free again, or whose Get failed quickly, goes on to Begin,
// which decides it atomically, within what is left of the Get's
// StoreTimeout (claimBy): the store calls up to the claim share one. A Get
// that failed by running out of it is answered as Begin's failure would be
// (503, or FailOpen's unprotected run), at once.
func (c *Call) readFirst() bool {
	ss := c.ss
	ss.bctx.init(c.ctx, c.e.timeout) // the first store call of the request
	rec, found, err := c.e.store.Get(&ss.bctx, c.scope)
	if err == nil {
		c.e.storeAnswered()
	}
	if err == nil && found && rec.State != StatePending && !rec.Reclaimable() {
		ss.bctx.release()
		c.settled(&rec, 0)
		return true
	}
	// Begin decides, by the Get's deadline (a clock reading the replay
	// above does without).
	by := ss.bctx.ownDeadline()
	ss.bctx.release()
	if err != nil {
		if ended := c.requestEnded(); ended != nil {
			// Begin would fail as well: the request ended.
			c.refuseEnded(ended, err)
			return true
		}
		if time.Until(by) <= 0 {
			// The store did not answer within StoreTimeout: an outage,
			// which a Begin in no time left cannot answer otherwise.
			c.storeFailed(err)
			return true
		}
		// A Get that failed quickly is no answer either: Begin decides,
		// and fails as it would have (503, or FailOpen's unprotected run)
		// only if the store fails it too. (A store may refuse a read it
		// answers a claim for: Redis refuses GETEX while it refuses
		// writes.)
	}
	c.claimBy = by
	return false
}

// readLocal decides, from its key's record in a LocalReader store, a
// request whose fingerprint is not in the Engine's cache, and computes
// the fingerprint unless the record shows it is not needed: a final record
// that this Engine made for a request of the same bytes (its tag is this
// request's) is replayed, as the fingerprint, equal to the record's, would
// decide; another final record is compared by fingerprint (settled). A key
// without a record, or with one in flight or free again, goes on to Begin
// (false). A final record is answered without a Begin: it never changes
// until it expires, and ReadLocal returns only unexpired records.
func (c *Call) readLocal() bool {
	c.fpLater = false
	var buf []byte
	if c.e.recycle {
		buf = c.respBuf // as BeginRequest.Buf (claim)
	}
	rec, found := c.e.local.ReadLocal(c.scope, buf)
	final := found && rec.State != StatePending && !rec.Reclaimable()
	if final && c.madeRecord(rec.Response) {
		// The bytes of the request that made the record: its
		// fingerprint (in the record's version, which a claim of a
		// record of another version may have kept) is this request's.
		c.fp = rec.Fingerprint
	} else {
		c.fp = c.e.fpc.compute(c.p, &c.fpIn, c.fpk)
	}
	if !final {
		return false
	}
	c.settled(&rec, 0)
	return true
}

// madeRecord reports whether resp, a record's response, carries this
// request's tag: this Engine recorded it for a request of the same bytes.
func (c *Call) madeRecord(resp []byte) bool {
	t, _, ok := cutRecordTag(resp)
	return ok && t == newRecordTag(c.e.fpc.domain, c.fpk)
}

// headerValue is h.Get(name) for a name already in canonical form, without
// canonicalizing it again.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// beginBounded calls the store's Begin bounded by the store timeout. The
// first call (the only one, but for a waiting duplicate) uses the Call's
// own lazy context, which costs no allocation with a store that never asks
// for Done; after a ReadFirst Get, the first call is bounded by the Get's
// deadline (claimBy), and a waiting duplicate's later ones each by a
// StoreTimeout of their own. A Begin that failed reports too whether its
// context had ended by then (cut: the store timeout, or the request's end).
func (c *Call) beginBounded(ctx context.Context) (res BeginResult, cut bool, err error) {
	ss, cs := c.ss, c.claimSide()
	if ss.bctx.parent == nil {
		if c.e.hbs != nil && c.e.hbs.clk == nil {
			// claim read the clock just before (hbGrant): the timeout
			// starts there (not on a test's heartbeat clock).
			ss.bctx.initAt(ctx, c.e.timeout, max(c.hbGrant, 1))
		} else {
			ss.bctx.init(ctx, c.e.timeout)
		}
		res, err = c.e.store.Begin(&ss.bctx, &cs.breq)
		if err != nil {
			cut = ss.bctx.Err() != nil
		}
		ss.bctx.release()
		return res, cut, err
	}
	var bctx context.Context
	var cancel context.CancelFunc
	if by := c.claimBy; !by.IsZero() {
		c.claimBy = time.Time{}
		bctx, cancel = context.WithDeadline(ctx, by)
	} else {
		bctx, cancel = context.WithTimeout(ctx, c.e.timeout)
	}
	defer cancel()
	res, err = c.e.store.Begin(bctx, &cs.breq)
	return res, err != nil && bctx.Err() != nil, err
}

// untilDeadline is context.WithDeadline (claim cancels it when it returns).
func untilDeadline(ctx context.Context, d time.Time) (context.Context, func()) {
	return context.WithDeadline(ctx, d)
}

func (c *Call) conflict() {
	c.reject(problem{status: c.p.spec.ConflictStatus, code: CodeKeyReused,
		detail: "this idempotency key was already used for a different request"}, nil)
}

func (c *Call) inFlight(waited time.Duration) {
	c.decision = Reject
	c.prob = problem{status: c.p.spec.InFlight.Status, code: CodeKeyInUse,
		detail: DetailKeyInUse, retryAfter: c.p.inFlightRA}
	c.e.observe(c.ctx, Event{Kind: EventInFlight, Operation: c.p.spec.Operation, Principal: c.principal,
		Key: c.key, Protected: true, State: StatePending, Status: c.prob.status, Code: CodeKeyInUse, Duration: waited})
}

func (c *Call) storeFailed(err error) {
	if ended := c.requestEnded(); ended != nil {
		c.refuseEnded(ended, err)
		return
	}
	if errors.Is(err, ErrQuotaExceeded) {
		c.refuseQuota(err) // one caller refused, not an outage: no FailOpen
		return
	}
	e := c.e
	e.log.LogAttrs(c.ctx, slog.LevelError, "idem: store failed at begin",
		slog.String("operation", c.p.spec.Operation), slog.String("key", c.key), slog.Bool("fail_open", e.failOpen), slog.Any("error", err))
	if e.failOpen {
		// The answer is the handler's: its EventExecuted carries it.
		e.observe(c.ctx, Event{Kind: EventStoreError, Operation: c.p.spec.Operation, Principal: c.principal,
			Key: c.key, Err: err})
		e.observe(c.ctx, Event{Kind: EventFailOpen, Operation: c.p.spec.Operation, Principal: c.principal,
			Key: c.key, Err: err})
		c.decision = Execute
		if e.obs != nil { // the Duration of EventExecuted
			c.start = e.now()
		}
		return
	}
	c.decision = Reject
	ra := e.unavailRA
	if hint := RetryHint(nil); errors.As(err, &hint) {
		if d := hint.RetryAfter(); d > 0 {
			ra = []string{retryAfterValue(min(d, maxRetryHint))}
		}
	}
	c.prob = problem{status: http.StatusServiceUnavailable, code: CodeStoreUnavailable,
		detail: "the idempotency record store is unavailable; nothing was executed", retryAfter: ra}
	e.observe(c.ctx, Event{Kind: EventStoreError, Operation: c.p.spec.Operation, Principal: c.principal,
		Key: c.key, Status: c.prob.status, Code: c.prob.code, Err: err})
}

// requestEnded returns the error of the request's own context once it has
// ended (its client went away: context.Canceled; a deadline a middleware set
// for it passed: context.DeadlineExceeded), else nil. A store call that
// fails then says nothing of the store: its context is a child of the
// request's (but for Finish and the heartbeat, which run detached).
func (c *Call) requestEnded() error { return c.r.Context().Err() }

// endedProblem is the CodeRequestEnded answer to a request whose context
// ended (ended is its error): 503 for a deadline (http.TimeoutHandler's
// status; a client may still read it), StatusClientClosedRequest for a
// client that went away.
func endedProblem(ended error, detail string) problem {
	if errors.Is(ended, context.DeadlineExceeded) {
		return problem{status: http.StatusServiceUnavailable, code: CodeRequestEnded, detail: detail}
	}
	return problem{status: StatusClientClosedRequest, code: CodeRequestEnded, title: "Client Closed Request", detail: detail}
}

// refuseEnded refuses a request whose own context ended (ended) while the
// engine was deciding, so that a store call or Options.Principal failed
// (cause): neither a store error (a false alarm at every disconnect) nor
// FailOpen's unprotected run (the key's record may well be COMPLETED).
// Nothing ran; it is reported as EventRejected and logged at Info.
func (c *Call) refuseEnded(ended, cause error) {
	if cause == nil {
		cause = ended
	}
	c.e.log.LogAttrs(c.ctx, slog.LevelInfo, "idem: request ended (client gone or deadline passed) before its key was checked: refused, nothing ran",
		slog.String("operation", c.p.spec.Operation), slog.String("key", c.key), slog.Any("error", cause))
	c.reject(endedProblem(ended, "the request ended (its client went away, or its deadline passed) before its idempotency key was checked; nothing was executed"), cause)
}

// replay decides the replay of rec; mismatch: a loose or window policy
// replays it to a request of another fingerprint (EventLooseMismatch).
func (c *Call) replay(rec *Record, waited time.Duration, mismatch bool) {
	c.scratch = len(rec.Response) > 0 && cap(c.respBuf) > 0 && &rec.Response[0] == &c.respBuf[:1][0]
	if !c.scratch && c.pooled && c.e.recycle && c.respBuf == nil {
		// An in-process store may copy the next replay of this recycled
		// Call into memory it reuses.
		c.respBuf = make([]byte, 0, max(initRespBuf, len(rec.Response)))
	}
	if err := decodeRecord(rec.Response, &c.resp, c.fields[:0]); err != nil {
		c.e.log.LogAttrs(c.ctx, slog.LevelError, "idem: stored response unreadable",
			slog.String("operation", c.p.spec.Operation), slog.Any("error", err))
		p := problem{status: http.StatusInternalServerError, code: CodeRecordUnreadable,
			detail: "the stored response for this idempotency key cannot be read"}
		if mismatch {
			c.e.observe(c.ctx, Event{Kind: EventLooseMismatch, Operation: c.p.spec.Operation, Principal: c.principal,
				Key: c.key, Protected: true, State: rec.State, Status: p.status, Code: p.code})
		}
		c.reject(p, err)
		return
	}
	if c.scratch {
		c.keepHeader()
	}
	c.decision = Replay
	c.replayS = rec.State
	if c.e.obs == nil {
		return
	}
	status, code := c.resp.status, ""
	if c.resp.notReplayable {
		status, code = http.StatusConflict, CodeResponseUnavailable
	}
	if mismatch {
		c.e.obs.Observe(c.ctx, Event{Kind: EventLooseMismatch, Operation: c.p.spec.Operation, Principal: c.principal,
			Key: c.key, Protected: true, State: rec.State, Status: status, Code: code})
	}
	c.e.obs.Observe(c.ctx, Event{Kind: EventReplayed, Operation: c.p.spec.Operation, Principal: c.principal,
		Key: c.key, Protected: true, State: rec.State, Status: status, Code: code, Duration: waited})
}

// keepHeader copies the header names and values of a replay decoded from
// respBuf, which the next request of a recycled Call reuses, into one
// string of their own: they go into the ResponseWriter's header map, which
// may be read after the request. Interned names are not in respBuf.
func (c *Call) keepHeader() {
	fs := c.resp.header
	n := 0
	for _, f := range fs {
		if within(f.name, c.respBuf) {
			n += len(f.name)
		}
		n += len(f.value)
	}
	var b []byte
	if m := len(fs) + 1; len(fs) > 0 && m <= len(keptHeader{}.vals) && n <= len(keptHeader{}.buf) {
		// The common replay: the header values writeReplay hands the
		// ResponseWriter and the bytes they hold, in one allocation
		// instead of two.
		kh := new(keptHeader)
		b, c.kvals = kh.buf[:0:n], kh.vals[:m:m]
	} else {
		b = make([]byte, 0, n)
	}
	for _, f := range fs {
		if within(f.name, c.respBuf) {
			b = append(b, f.name...)
		}
		b = append(b, f.value...)
	}
	kept := bytesString(b)
	for i := range fs {
		if within(fs[i].name, c.respBuf) {
			fs[i].name, kept = kept[:len(fs[i].name)], kept[len(fs[i].name):]
		}
		fs[i].value, kept = kept[:len(fs[i].value)], kept[len(fs[i].value):]
	}
}

// keptHeader is what a small replay of a pooled Call keeps of its header
// (keepHeader): the values writeReplay hands the ResponseWriter (the last:
// Idempotent-Replayed's), and the bytes of the values and names they alias.
// It is 96 bytes, as many as the two allocations of a replay of
// Content-Type and a short Location took, so that a replay does not
// allocate more bytes than before (128 did: more heap growth, and more page
// faults per replay).
type keptHeader struct {
	vals [3]string
	buf  [48]byte
}

// within reports whether s lies in b's array.
func within(s string, b []byte) bool {
	if len(s) == 0 || cap(b) == 0 {
		return false
	}
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p < start+uintptr(cap(b))
}

// acquired: the claim holds; prepare to execute.
func (c *Call) acquired(prior State) {
	e := c.e
	c.decision = Execute
	c.protected = true
	c.prior = prior
	if prior == StatePending {
		e.log.LogAttrs(c.ctx, slog.LevelWarn, "idem: took over an expired lease (its holder crashed or is stuck)",
			slog.String("operation", c.p.spec.Operation), slog.String("key", c.key))
		e.observe(c.ctx, Event{Kind: EventLeaseTakeover, Operation: c.p.spec.Operation, Principal: c.principal,
			Key: c.key, Protected: true, Prior: prior})
	}
	hctx := c.ctx // the handler's
	if e.detach > 0 {
		hctx = c.detachHandler(c.ctx)
	}
	if e.tx != nil {
		// The transaction lives as long as the handler, so its context cannot
		// carry a deadline: a timer cancels it only if the store does not
		// answer BeginTx (or, later, the commit) within the store timeout.
		parent, cancel := context.WithCancelCause(hctx)
		var txctx context.Context
		var commit func(State, []byte) error
		var rollback func()
		fired, err := c.bounded(parent, cancel, func() error {
			var err error
			txctx, commit, rollback, err = e.tx.BeginTx(parent, c.scope, c.token)
			return err
		})
		if err == nil && fired {
			// Opened just as the timer fired: its context is cancelled, so
			// the transaction is unusable.
			err = errStoreTimeout
		}
		if err != nil {
			if rollback != nil {
				rollback()
			}
			cancel(nil)
			c.endDetach()
			c.protected = false
			c.storeFailed(err)
			if c.decision == Execute {
				// FailOpen runs the handler unprotected: the claim keeps
				// the client's retry out while it runs, and is released
				// once the run ends, in the background, at once: the
				// response does not wait for the store (up to
				// StoreTimeout, when it struggles).
				c.held = func() { c.releaseLater(claimHeld) }
				return
			}
			c.release()
			return
		}
		e.storeAnswered()
		c.ctx, c.commit, c.rollback, c.txCancel = txctx, commit, rollback, cancel
	} else if e.cancelLost {
		c.ctx, c.lostCancel = context.WithCancelCause(hctx)
	} else {
		c.ctx = hctx
	}
	if e.obs != nil { // the Duration of EventExecuted
		c.start = e.now()
	}
	if e.hbs != nil {
		c.hbStarted = true
		lease := c.p.spec.InFlight.Lease
		if e.hbs.since()-c.hbGrant >= lease/6 {
			// The claim (its Begin, a BeginTx) took long: the lease,
			// counted from the Begin's start, may end before the
			// scheduler's next tick.
			e.hbs.collect(c)
			c.armHeartbeat()
			return
		}
		// No timer yet: most handlers end long before a sixth of the lease.
		e.hbs.register(c, lease)
	}
}

// armHeartbeat starts the heartbeat of a handler that outlived a sixth of
// its lease since its claim's Begin started (the scheduler, or acquired
// after a slow claim, calls it): the first extension a third of the lease
// after that start (at once if already past), then one a third of the
// lease after the start of each that got through.
func (c *Call) armHeartbeat() {
	c.hbMu.Lock()
	if !c.hbStopped {
		c.hb = c.e.hbs.afterFunc(max(c.hbGrant+c.p.spec.InFlight.Lease/3-c.e.hbs.since(), 0), c.heartbeat)
	}
	c.hbMu.Unlock()
}

// heartbeat extends the lease while the handler runs. The lease runs, on
// the store's clock, to the start of the call that granted it (hbGrant)
// plus Lease at the latest: the next extension is due a third of the lease
// after that start. One that fails (not ErrFenced) is tried again every
// Lease/12 (right after one that timed out), each attempt bounded by the
// store timeout, a third of the lease and what is left of it, as long as
// the lease lasts; once the next attempt would start at or after the
// lease's end (up to Lease/12 before it), the heartbeat says so, once, and
// goes on trying every Lease/3: a store back before anyone took the key
// over extends the lapsed lease.
func (c *Call) heartbeat() {
	c.hbMu.Lock()
	stopped, grant, ranOut := c.hbStopped, c.hbGrant, c.hbRanOut
	c.hbMu.Unlock()
	if stopped {
		return
	}
	lease := c.p.spec.InFlight.Lease
	start := c.e.hbs.since()
	end := grant + lease // the lease's end at the latest
	timeout := min(lease/3, c.e.timeout)
	if left := end - start; !ranOut && left > 0 && left < timeout {
		timeout = left
	}
	ctx, cancel := context.WithTimeout(c.background(), timeout)
	err := c.e.extender.ExtendLease(ctx, c.scope, c.token, lease)
	cancel()
	now := c.e.hbs.since()
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	if c.hbStopped {
		return // finished meanwhile: a refusal now means nothing
	}
	if err == nil {
		c.e.storeAnswered()
		c.hbGrant, c.hbRanOut = start, false
		c.hb.Reset(max(start+lease/3-now, 0))
		return
	}
	// Under hbMu, which stopHeartbeat takes before the request ends: the
	// request's context values (a trace id), in c.background(), are
	// still the request's while the log and the Observer read them.
	c.heartbeatFailed(err)
	if errors.Is(err, ErrFenced) {
		c.txLost(ErrFenced)
		return // no lease to extend any more
	}
	if (c.txCancel != nil || c.lostCancel != nil) && now >= end && !c.txHoldsLock() {
		c.txLost(ErrLeaseLost)
		return
	}
	next := max(start+lease/12, now+time.Millisecond)
	if ranOut || next >= end {
		if !ranOut {
			c.hbRanOut = true
			msg := "idem: lease will run out before the next attempt while the handler runs: the store stayed unreachable, and once the lease ends a duplicate may take the key over (heartbeats go on every third of the lease)"
			if c.txCancel != nil {
				msg = "idem: lease will run out before the next attempt while the handler runs: the store stayed unreachable; unless the attempt at the lease's end gets through, the transaction is cancelled then (a duplicate may take the key over)"
				if c.txHoldsLock() {
					msg = "idem: lease will run out before the next attempt while the handler runs: the heartbeats keep failing, but the store says the transaction holds the record's lock, which keeps every takeover out: unless the attempt at the lease's end (or a later one) fails for want of the store itself, it goes on while it holds it (heartbeats go on every third of the lease)"
				}
			}
			c.e.log.LogAttrs(c.background(), slog.LevelWarn, msg,
				slog.String("operation", c.p.spec.Operation), slog.String("key", c.key))
		}
		next = max(start+lease/3, now+time.Millisecond)
		if (c.txCancel != nil || c.lostCancel != nil) && now < end {
			// Transactional (or CancelOnLeaseLost, whose handler's
			// context is cancelled the same way): one more attempt as the lease ends, also
			// when the transaction holds the record's lock now (the
			// store's answer may change with that attempt's failure); the
			// transaction is cancelled if it fails, unless the store
			// then says the lock holds (TxLockHolder): then every third
			// of the lease, as outside, each failure asking again.
			next = max(min(next, end), now+time.Millisecond)
		}
	}
	c.hb.Reset(next - now)
}

// txHoldsLock reports whether c's transaction holds the record's lock,
// which keeps every takeover out, and the store does not take the
// heartbeat that just failed for a sign that the server is unreachable
// (TxLockHolder): then a lease run out loses nothing, and the transaction
// is not cancelled (ErrLeaseLost). A heartbeat fenced (ErrFenced: the
// store found the lock gone, or the key taken over) cancels it all the
// same.
func (c *Call) txHoldsLock() bool {
	return c.e.txLock != nil && c.e.txLock.TxHoldsLock(c.scope, c.token)
}

// ErrLeaseLost is the cause (context.Cause) of the end of a transactional
// handler's context when its heartbeats failed until its lease ran out
// (the store unreachable): another request may have taken the key over,
// so nothing the handler writes in the transaction could commit as its
// claim's. Not when the store says the transaction holds the record's
// lock (TxLockHolder: pgstore above READ COMMITTED, while its heartbeats
// fail for want of a connection in a starved pool, not for want of the
// server), which keeps every takeover out: the handler goes on. A
// heartbeat refused with ErrFenced (the key taken over, the record
// expired, or the transaction's lock gone) ends it with ErrFenced as the
// cause.
var ErrLeaseLost = errors.New("idem: lease lost: the store could not be reached to extend it before it ran out")

// txLost cancels, with cause, the transaction of a handler whose claim is
// lost (its heartbeat was fenced, or failed until the lease ran out): what
// it writes there could not commit as this claim's, and a store call that
// hangs (a connection blackholed) would hold the request, and a pooled
// connection, until the client gives up. Called under hbMu, with the
// heartbeat not stopped (the Call has not finished: End clears txCancel
// after stopping it). Outside a transaction it cancels the handler's
// context under Options.CancelOnLeaseLost, else does nothing.
func (c *Call) txLost(cause error) {
	if c.lostCancel != nil {
		// Options.CancelOnLeaseLost: the run is not transactional; its
		// Finish goes on as any other (fenced if the key was taken over).
		c.lostCancel(cause)
		c.lostCancel = nil
		c.lostFired = true
		c.e.log.LogAttrs(c.background(), slog.LevelWarn, "idem: handler's context cancelled while it runs: its claim is lost (Options.CancelOnLeaseLost)",
			slog.String("operation", c.p.spec.Operation), slog.String("key", c.key), slog.Any("cause", cause))
		return
	}
	if c.txCancel == nil {
		return
	}
	c.txCancel(cause)
	c.hbLost = cause
	c.e.log.LogAttrs(c.background(), slog.LevelWarn, "idem: transaction cancelled while the handler runs: its claim is lost, nothing it writes can commit",
		slog.String("operation", c.p.spec.Operation), slog.String("key", c.key), slog.Any("cause", cause))
}

// heartbeatFailed logs and observes the failed extension err of a heartbeat
// (ErrFenced: the lease is lost), with the request's context values.
func (c *Call) heartbeatFailed(err error) {
	ctx := c.background()
	if errors.Is(err, ErrFenced) {
		c.e.log.LogAttrs(ctx, slog.LevelWarn, "idem: lease lost while the handler runs (taken over or expired)",
			slog.String("operation", c.p.spec.Operation), slog.String("key", c.key))
	} else {
		c.e.log.LogAttrs(ctx, slog.LevelWarn, "idem: lease extension failed",
			slog.String("operation", c.p.spec.Operation), slog.String("key", c.key), slog.Any("error", err))
	}
	c.e.observe(ctx, Event{Kind: EventHeartbeatFailed, Operation: c.p.spec.Operation, Principal: c.principal,
		Key: c.key, Protected: true, Err: err})
}

func (c *Call) stopHeartbeat() {
	if !c.hbStarted || c.hbDone {
		return
	}
	c.hbDone = true
	if !c.e.hbs.unregister(c) {
		return // never armed: no timer, and the scheduler no longer knows the Call
	}
	c.hbArmed = true
	c.hbMu.Lock()
	c.hbStopped = true
	if c.hb != nil {
		c.hb.Stop()
	}
	c.hbMu.Unlock()
}

// Writer returns the ResponseWriter the handler must write to: a recorder
// that tees to w (or, in transactional mode, buffers until the commit). It
// supports Flush (passed through: the client sees data at once; a replay
// sends the recorded body in one piece) and Unwrap (http.ResponseController).
// When the client goes away mid-response, its writes go on to the record
// only and succeed, up to Response.MaxBytes (see docs/runtime.md).
// For a call that is not Execute it returns w, and for one that runs
// unprotected w too, or, with an Observer or for a request that carries a
// key (or an Idempotency-Key or X-Idempotency-Key header: see End), a
// pass-through wrapper of w (Flush, Hijack, Unwrap) that notes the
// status (for EventExecuted, and End's answer to a panic), made by the
// first call.
//
// The first call (per Call) notes which representation headers
// (Content-Type, Content-Encoding) w carries: they are taken for a
// middleware's in front of the engine and left out of the record unless
// the handler sets or changes them; later calls return the same recorder.
// Code that runs behind the engine before Complete (a strict middleware
// after the engine's, or the caller's own) must come after the first
// Writer(w), or a header it sets on w is not recorded.
func (c *Call) Writer(w http.ResponseWriter) http.ResponseWriter {
	if c.decision != Execute {
		return w
	}
	if !c.protected {
		if c.e.obs == nil && c.key == "" && !resentByTransport(c.r.Header) {
			return w
		}
		if c.h.sw.ResponseWriter == nil {
			c.h.sw = statusWriter{ResponseWriter: w, outerCE: headerValue(w.Header(), "Content-Encoding") != ""}
		}
		return &c.h.sw
	}
	if c.h.rec.active {
		return &c.h.rec
	}
	c.h.rec.init(w, c.p, c.commit != nil, c.r.ProtoMajor < 2)
	return &c.h.rec
}

// Complete is the strict-server ending of an Execute decision: visit (a
// generated VisitXxxResponse method) writes the typed response into the
// recorder from Writer(w), then Finish stores it. When visit fails, Complete
// returns its error. If nothing reached the client (visit failed before
// writing a status, or the response is buffered: transactional mode), it
// does not finish, so End frees the key (and rolls back) for a retry. If the
// status was already sent, the operation ran and the client saw it answered:
// Complete finishes with that status, as Finish would, but stores the
// response as not replayable (a duplicate gets 409
// IDEMPOTENCY_RESPONSE_UNAVAILABLE with its original_status, as for a
// response above Response.MaxBytes) rather than free the key and run the
// operation again; a 5xx, 408, 425 or 429 still frees it, as in Finish.
//
// Complete calls Writer(w): when nothing called it since Begin, that is
// when the headers already on w are noted as set in front of the engine
// (see Writer). Call Writer(w) before running code behind the engine that
// may set Content-Type or Content-Encoding on w (the generated strict
// middleware does so before the strict handler chain).
func (c *Call) Complete(w http.ResponseWriter, visit func(http.ResponseWriter) error) error {
	if err := visit(c.Writer(w)); err != nil {
		if c.decision == Execute && c.protected && c.h.rec.cutShort() {
			_ = c.Finish()
		}
		return err
	}
	_ = c.Finish()
	return nil
}

// Request returns the request the handler must serve: r with its body
// restored (when Begin read it) and the handler context (Context).
//
// When the context is r's own, the body is swapped in place (as
// http.MaxBytesReader is meant to be used: r.Body = ...), which spares a copy
// of the request; End puts the original body back. Otherwise Request
// returns a shallow copy of r with the handler context.
func (c *Call) Request() *http.Request {
	if !c.restoreBody {
		if c.ctx == c.r.Context() {
			return c.r
		}
		return c.r.WithContext(c.ctx)
	}
	if c.ctx == c.r.Context() {
		if !c.swapped {
			c.h.reqBody = bodyReader{b: c.body}
			c.origBody, c.r.Body, c.swapped = c.r.Body, &c.h.reqBody, true
		}
		return c.r
	}
	r := c.r.WithContext(c.ctx)
	c.h.reqBody = bodyReader{b: c.body}
	r.Body = &c.h.reqBody
	r.GetBody = nil
	return r
}

// detached is the context of store calls made for a request whose own
// context may be cancelled (the client went away after the handler ran):
// context.WithoutCancel(r.Context()), kept inside the Call instead of
// allocated.
type detached struct{ parent context.Context }

func (*detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*detached) Done() <-chan struct{}       { return nil }
func (*detached) Err() error                  { return nil }
func (d *detached) Value(key any) any         { return d.parent.Value(key) }
func (d *detached) String() string            { return "idem.detached" }

// background returns the request's context without its cancellation.
func (c *Call) background() context.Context { return &c.claimSide().bg }

// Respond writes the decision's answer to w: the stored response (with
// Idempotent-Replayed: true) for Replay, the problem for Reject. It does
// nothing for Execute.
func (c *Call) Respond(w http.ResponseWriter) {
	switch c.decision {
	case Replay:
		c.writeReplay(w)
	case Reject:
		if c.pub != nil {
			c.e.writePublicProblem(w, c.pub)
			return
		}
		c.e.writeProblem(w, &c.prob, "")
	}
}

func (c *Call) writeReplay(w http.ResponseWriter) {
	h := w.Header()
	fs := c.resp.header
	// Each response gets its own header values (a middleware may change
	// them in place), Idempotent-Replayed's after the stored ones, in one
	// allocation; a response without stored headers shares replayedTrue
	// instead of allocating for it.
	n := len(fs) + 1
	var vals []string
	switch {
	case n <= len(c.hvals) && !c.pooled:
		vals = c.hvals[:n:n]
	case len(c.kvals) == n:
		// Made with the bytes they alias (keepHeader), for one response.
		vals, c.kvals = c.kvals, nil
	case len(fs) > 0:
		vals = make([]string, n)
	}
	for i := 0; i < len(fs); {
		j := i + 1
		for j < len(fs) && fs[j].name == fs[i].name {
			j++
		}
		for k := i; k < j; k++ {
			vals[k] = fs[k].value
		}
		switch {
		case c.resp.notReplayable && (representationHeader(fs[i].name) || cacheHeader(fs[i].name)):
			// The problem sent instead is not the stored response: neither
			// what its body is nor how long a cache may keep it.
		case j == i+1 && fs[i].value == "" && fs[i].name == "Content-Type":
			h["Content-Type"] = nil // stored present with no value: no sniffing (appendRecordHead)
		default:
			h[fs[i].name] = vals[i:j:j]
		}
		i = j
	}
	if vals != nil {
		vals[len(fs)] = "true"
		h["Idempotent-Replayed"] = vals[len(fs):n:n]
	} else {
		h["Idempotent-Replayed"] = replayedTrue
	}
	if c.resp.notReplayable {
		c.e.writeProblem(w, &problem{status: http.StatusConflict, code: CodeResponseUnavailable,
			detail:     "the request was executed, but its response could not be stored (too large, or cut short) and cannot be replayed",
			origStatus: c.resp.status}, "")
		return
	}
	w.WriteHeader(c.resp.status)
	if len(c.resp.body) > 0 {
		_, _ = w.Write(c.resp.body)
	}
}

// representationHeader reports the stored headers that describe the
// stored body (representationHeaders): a replay that sends a problem
// instead (CodeResponseUnavailable) leaves them out.
func representationHeader(name string) bool {
	return slices.Contains(representationHeaders[:], name)
}

// cacheHeader reports the stored headers that say whether a cache may keep
// the stored response (cacheHeaders): a replay that sends a problem instead
// (CodeResponseUnavailable) leaves them out too (the problem says
// Cache-Control: no-store).
func cacheHeader(name string) bool {
	return slices.Contains(cacheHeaders[:], name)
}

// Finish completes the record from what the handler wrote through Writer:
// COMPLETED with the response; for a status >= 500, FAILED (freeing the key
// under FailuresRetry, storing the response under FailuresReplay); 408, 425
// and 429 (the request was not processed) always free the key.
//
// A handler that wrote nothing (not even a status) is answered with net/http's
// implicit 200, and that is what is recorded (COMPLETED, an empty 200), even
// when the handler context (Context) has ended meanwhile (the client went
// away, a deadline of chi's middleware.Timeout or http.TimeoutHandler
// passed): the engine cannot tell a handler that gave up early from one that
// did its work and relies on the implicit 200, and freeing the key for the
// latter would run its side effects again on a retry. A handler that gives up
// because its client left should write an error status (503, say) to free the
// key (under FailuresRetry). Only in transactional mode, where the handler's
// writes roll back, is nothing written after the context ended taken as no
// answer: the transaction is rolled back and the key freed (FAILED, the
// Event's Status 0).
//
// A late completion whose claim was taken over is rejected (ErrFenced),
// reported and never written.
//
// In transactional mode Finish commits the record with the handler's
// transaction and only then writes the buffered response to the client (a
// fenced commit answers CodeKeyInUse, a failed one CodeStoreUnavailable).
// When Finish returns, the response is written; the error is for the caller's
// information only (it has been logged and observed).
func (c *Call) Finish() error {
	if c.decision != Execute || c.finished {
		return nil
	}
	c.finished = true
	c.stopHeartbeat()
	e, p := c.e, c.p
	if !c.protected {
		// The held claim is released first: an Observer that panics
		// (c.finished is set, so End does nothing) does not keep it.
		c.releaseHeld()
		if e.obs != nil {
			e.obs.Observe(c.ctx, Event{Kind: EventExecuted, Operation: p.spec.Operation, Principal: c.principal,
				Key: c.key, Status: c.h.sw.sent(), Duration: e.now().Sub(c.start)})
		}
		return nil
	}
	rec := &c.h.rec
	if !rec.active {
		// The handler never received the recorder (a wrapper that did not call Writer).
		rec.init(nil, p, false, false)
	}
	// A transactional handler that wrote nothing once its context had ended
	// (the client went away, or a deadline passed) gave no answer: its
	// writes roll back, so freeing the key is safe. A plain handler's empty
	// 200 is recorded like any answer: it may have done its work, and a
	// retry must not run it again, unless the engine itself ended its
	// context because its claim was lost (CancelOnLeaseLost: lostFired):
	// a run that then writes nothing gave up (the usual `if ctx.Err() !=
	// nil { return }`), and its implicit 200 replayed for the window would
	// tell every retry an operation ran that did not.
	abandoned := (c.commit != nil || c.lostFired) && !rec.wroteHeader && c.ctx.Err() != nil
	rec.finalize()
	status := rec.status
	state, resp := StateCompleted, rec.record()
	switch {
	case abandoned:
		state, resp, status = StateFailed, nil, 0
		msg := "idem: transactional handler wrote nothing after its context ended (client gone): rolled back, key released for a retry"
		if c.commit == nil {
			msg = "idem: handler wrote nothing after its context was cancelled for a lost claim (CancelOnLeaseLost): key released for a retry"
		}
		e.log.LogAttrs(c.ctx, slog.LevelInfo, msg, slog.String("operation", p.spec.Operation), slog.String("key", c.key))
	case status >= 500:
		state = StateFailed
		// A run whose context CancelOnLeaseLost ended (idem.LeaseLost)
		// gave up, and its 5xx says so: under FailuresReplay too the key
		// is freed (a retry runs the operation), not the 5xx replayed for
		// the window.
		if p.spec.Failures != FailuresReplay || status > 599 || c.lostFired {
			resp = nil
		}
	case status == http.StatusRequestTimeout || status == http.StatusTooEarly || status == http.StatusTooManyRequests:
		state, resp = StateFailed, nil
	}
	if resp != nil && e.local != nil && c.key != "" && !c.claimCompat {
		// Over a LocalReader, a stored record tells a retry of these
		// bytes that it needs no fingerprint (readLocal). Not one claimed
		// with this request's fingerprint under a compatible setting
		// (Spec.CompatibleFingerprints): that depends on what the cache's digest does
		// not cover (headers only a compatible setting lists).
		t := newRecordTag(e.fpc.domain, c.fpk)
		resp = rec.tag(&t)
	}
	loss := bodyKept // but for a response stored without its body (not replayable)
	if resp != nil {
		loss = rec.loss
	}
	var err error
	code := "" // the problem sent instead of the response (a failed commit)
	if c.commit != nil {
		commit := c.commit
		c.commit = nil
		if state == StateFailed && c.hbLost == nil {
			// The handler failed: undo its writes, then finish outside the transaction.
			c.rollback()
			err = c.finishRecord(state, resp, status, loss)
			rec.flushTo()
		} else {
			if c.hbLost != nil {
				// The claim was lost while the handler ran (txLost): its
				// transaction is not committed, and whatever the handler
				// answered (its context was cancelled under it: a failed
				// write, often a 5xx) is not sent: as a fenced commit,
				// 409 IDEMPOTENCY_KEY_IN_USE (ErrFenced), or 503 and the
				// key released (ErrLeaseLost).
				c.rollback()
				err = c.hbLost
			} else {
				// A commit that succeeded counts, even if the timer fired
				// meanwhile.
				_, err = c.bounded(c.ctx, c.txCancel, func() error { return commit(state, resp) })
			}
			switch {
			case err == nil:
				e.storeAnswered()
				rec.flushTo()
			case errors.Is(err, ErrFenced):
				status, code = p.spec.InFlight.Status, CodeKeyInUse
				e.writeProblem(rec.w, &problem{status: status, code: code,
					detail:     "another attempt with this idempotency key took over; retry to get its result",
					retryAfter: p.inFlightRA}, "")
			default:
				// Rolled back, or (the store failed during the COMMIT itself)
				// of unknown outcome: free the key (best effort; fenced if the
				// commit took effect) and fail closed. A retry replays the
				// result if it was kept and runs again if it was not.
				ended := c.requestEnded()
				if c.detach != nil {
					// Detached, the transaction's context is the
					// handler's, not the request's: only its own end
					// (DetachHandler's grace, the request's deadline)
					// is the request's end.
					ended = c.detach.ctx.Err()
				}
				// Ended, the refusal reports the run as executed
				// (reportFinish, CodeRequestEnded): the release does not
				// report it again if the commit took effect after all.
				c.releaseUncommitted(status, loss, ended != nil)
				if ended != nil {
					// The transaction's context is the request's (or, detached, the handler's): it
					// ended with it (the client went away, or a deadline
					// passed), which is no store failure.
					p := endedProblem(ended, "the request ended before its result was committed; retry with the same key (it is replayed if the commit took effect after all)")
					status, code = p.status, p.code
					e.writeProblem(rec.w, &p, "")
					break
				}
				status, code = http.StatusServiceUnavailable, CodeStoreUnavailable
				e.writeProblem(rec.w, &problem{status: status, code: code,
					detail:     "the result could not be committed; retry with the same key (it is replayed if the commit took effect after all)",
					retryAfter: e.unavailRA}, "")
			}
		}
	} else {
		err = c.finishRecord(state, resp, status, loss)
	}
	if err == nil && resp != nil {
		e.rememberFinal(c.recent, p.spec.Window)
	}
	c.reportFinish(state, status, code, err, loss)
	return err
}

// rememberFinal notes, over a ReadFirst store, that the record of the
// scope digest d is final and replayable: a retry with its key reads
// first, until about when the record expires (a window after its claim,
// which came a little before now).
func (e *Engine) rememberFinal(d uint64, window time.Duration) {
	if e.recent != nil {
		e.recent.add(d, e.now().Add(window))
	}
}

// reportStored reports a protected run whose record was stored (ev, an
// EventExecuted): when the record lost its body (loss: the response
// exceeded Response.MaxBytes, respMax, or was cut short, see Complete), it
// is not replayable: EventNotReplayable and a warning too.
func (e *Engine) reportStored(ctx context.Context, ev Event, loss bodyLoss, respMax int) {
	if e.obs != nil {
		e.obs.Observe(ctx, ev)
		if loss != bodyKept {
			e.obs.Observe(ctx, Event{Kind: EventNotReplayable, Operation: ev.Operation, Principal: ev.Principal,
				Key: ev.Key, Protected: true, State: ev.State, Status: ev.Status})
		}
	}
	switch loss {
	case bodyCutShort:
		e.log.LogAttrs(ctx, slog.LevelWarn, "idem: response failed after its status was sent (strict Visit error): stored as not replayable",
			slog.String("operation", ev.Operation), slog.Int("status", ev.Status))
	case bodyTooLarge:
		e.log.LogAttrs(ctx, slog.LevelWarn, "idem: response larger than Response.MaxBytes: stored as not replayable",
			slog.String("operation", ev.Operation), slog.Int("max_bytes", respMax))
	}
}

// reportFinish reports the end of a protected run: status is what the
// handler produced, or, with code, the problem sent instead (a transaction
// whose commit failed). loss: whether the record was stored with a
// response (COMPLETED, or FAILED under FailuresReplay) that lost its body
// (it exceeded Response.MaxBytes, or was cut short), so it is not replayable.
func (c *Call) reportFinish(state State, status int, code string, err error, loss bodyLoss) {
	e, op := c.e, c.p.spec.Operation
	switch {
	case err == nil:
		if e.obs != nil || loss != bodyKept {
			e.reportStored(c.ctx, Event{Kind: EventExecuted, Operation: op, Principal: c.principal, Key: c.key,
				Protected: true, State: state, Prior: c.prior, Status: status, Duration: e.now().Sub(c.start)}, loss, c.p.respMax)
		}
	case code == CodeRequestEnded:
		// A transaction that could not commit because the request ended:
		// the handler ran, its writes were not kept, its key was released.
		e.log.LogAttrs(c.ctx, slog.LevelInfo, "idem: request ended (client gone or deadline passed) before its transaction committed: not committed, key released for a retry",
			slog.String("operation", op), slog.String("key", c.key), slog.Any("error", err))
		if e.obs != nil {
			e.obs.Observe(c.ctx, Event{Kind: EventExecuted, Operation: op, Principal: c.principal, Key: c.key,
				Protected: true, State: StateFailed, Prior: c.prior, Status: status, Code: code, Err: err,
				Duration: e.now().Sub(c.start)})
		}
	case errors.Is(err, ErrFenced):
		e.log.LogAttrs(c.ctx, slog.LevelWarn, "idem: late completion rejected: the claim was taken over or expired",
			slog.String("operation", op), slog.String("key", c.key), slog.Int("status", status))
		e.observe(c.ctx, Event{Kind: EventFenced, Operation: op, Principal: c.principal, Key: c.key,
			Protected: true, State: state, Status: status, Code: code, Err: err})
	default:
		msg, level := "idem: store failed at finish", slog.LevelError
		switch {
		case errors.Is(err, errFinishSlow):
			msg, level = "idem: the store did not answer the finish within Options.FinishWait: the response is sent, the finish goes on in the background", slog.LevelWarn
		case c.finishRetrying:
			msg = "idem: store failed at finish: trying again in the background"
		}
		e.log.LogAttrs(c.ctx, level, msg,
			slog.String("operation", op), slog.String("key", c.key), slog.Any("error", err))
		e.observe(c.ctx, Event{Kind: EventStoreError, Operation: op, Principal: c.principal, Key: c.key,
			Protected: true, State: state, Status: status, Code: code, Err: err})
		if c.finishAbandoned {
			e.observe(c.ctx, Event{Kind: EventFinishAbandoned, Operation: op, Principal: c.principal, Key: c.key,
				Protected: true, State: state, Status: status, Err: err})
		}
	}
}

// errStoreTimeout ends a transaction's context when the store does not
// answer BeginTx or the commit within Options.StoreTimeout.
var errStoreTimeout = errors.New("idem: the store did not answer within Options.StoreTimeout")

// bounded runs f, cancelling (with errStoreTimeout) ctx, whose cancel is
// given, if f takes longer than the store timeout; fired reports whether
// that happened. An error of f's after ctx ended with a cause of its own
// (errStoreTimeout, or a heartbeat's ErrFenced or ErrLeaseLost) is wrapped
// with that cause: the store's reports only "context canceled".
func (c *Call) bounded(ctx context.Context, cancel context.CancelCauseFunc, f func() error) (fired bool, err error) {
	t := time.AfterFunc(c.e.timeout, func() { cancel(errStoreTimeout) })
	err = f()
	fired = !t.Stop()
	if err != nil {
		err = withCause(ctx, err)
	}
	return fired, err
}

// withCause wraps err, a store call's error, with the cause ctx ended with
// when it has one (context.Cause other than ctx.Err(), which err likely
// says already) that err does not match.
func withCause(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// finishRecord finishes the record outside any transaction, bounded by the
// store timeout and not by the request's context: a client that went away
// does not keep its result from being recorded.
//
// When the store fails (other than ErrFenced), the Finish goes on being
// tried in the background (finishLater); status is what the handler
// produced (0 for a key released), loss whether its response lost its body
// (exceeded Response.MaxBytes, or was cut short), for the events reported then.
func (c *Call) finishRecord(state State, resp []byte, status int, loss bodyLoss) error {
	var err error
	if w := c.e.finishWait; w > 0 {
		var handed bool
		if handed, err = c.finishWithin(w, state, resp, status, loss); handed {
			c.finishRetrying = true // errFinishSlow
			return err
		}
	} else {
		err = c.finishOnce(state, resp)
	}
	if err == nil {
		c.e.storeAnswered()
	} else {
		if c.finishLater(finishAnswer, 0, state, resp, status, loss, err) {
			c.finishRetrying = true
		} else if !errors.Is(err, ErrFenced) {
			c.finishAbandoned = true
		}
	}
	return err
}

// releaseUncommitted frees the key of a transaction whose commit failed
// (FAILED without a response; fenced if the commit took effect after
// all), in the background (releaseLater): the refusal (503, or
// CodeRequestEnded) does not wait for the store, which may not answer
// within StoreTimeout after the commit took as long.
//
// status and loss are the handler's (what the record holds if the commit
// took effect after all: the release, fenced, then finds it, and reports
// EventExecuted, unless reported: the request reported its run as
// executed already, when it ended with CodeRequestEnded).
func (c *Call) releaseUncommitted(status int, loss bodyLoss, reported bool) {
	c.finishLaterWith(finishClaim, claimUncommitted, StateFailed, nil, status, loss, nil, reported, nil)
}

func (c *Call) finishOnce(state State, resp []byte) error {
	cs := c.claimSide()
	parent := &cs.bg
	if cs.fctx.parent == nil { // the first (usually the only) Finish: no allocation
		cs.fctx.init(parent, c.e.timeout)
		defer cs.fctx.release()
		return c.e.store.Finish(&cs.fctx, c.scope, c.token, state, resp)
	}
	ctx, cancel := context.WithTimeout(parent, c.e.timeout)
	defer cancel()
	return c.e.store.Finish(ctx, c.scope, c.token, state, resp)
}

// release frees a held key (FAILED without a response) whose claim runs
// nothing (its transaction could not begin; the caller reports why), in
// the background (releaseLater): the refusal (503) does not wait for the
// store, which may not answer within StoreTimeout; a failure is logged,
// not reported as an event.
func (c *Call) release() {
	c.releaseLater(claimUnbegun)
}

// End ends the call: when an Execute decision was never finished (the
// handler panicked or returned an error), it rolls back a transaction and
// frees the key (FAILED, no response) so a retry can run. End also returns
// the call's buffers; the Call, its Writer and its Request body must not be
// used afterwards. It is safe to call twice.
//
// Deferred (defer c.End(), as Engine.Handler and the generated wrappers
// call it), End sees a panic of the handler: when nothing of a protected
// run's response reached the client yet (no status sent; in transactional
// mode, nothing ever is before the commit), it answers the client, after
// freeing the key, with a complete 500 IDEMPOTENCY_HANDLER_PANICKED
// (CodeHandlerPanicked; with a Content-Length, flushed), then panics again
// with the same value, so that net/http still logs it and a recover
// middleware in front of the engine still gets it (its own answer then
// comes too late: net/http logs a superfluous WriteHeader call and refuses
// its body). Without that answer, net/http would drop the connection, and
// Go's http.Transport sends a request that carries an Idempotency-Key
// header again, at once and on every idle connection it holds, each
// finding the key free.
//
// When that 500 cannot be flushed (a ResponseWriter in front of the
// engine that neither flushes nor unwraps: http.TimeoutHandler's, which
// buffers, or a metrics wrapper's), a panic going on would lose it, as
// the wrapper or net/http drops what it holds, and the Transport would
// send the request again all the same. End then does not panic again: it
// logs the panic's value and stack at Error (http.ErrAbortHandler at Warn,
// without the stack), with the operation and the key, reports the run's
// EventExecuted (FAILED) with the panic as its Err, and returns, so that
// the wrapper and net/http send the 500 (TimeoutHandler copies its
// buffer). A recover middleware in front of the engine does not see that
// panic.
//
// An unprotected run of a request that carries a key (FailOpen's, while
// the store fails) is answered the same way (there is no key to free; the
// answer's detail says it ran unprotected), as the Transport's resends
// would each run the handler, unprotected, again; so is one without a key
// whose request carries an Idempotency-Key or X-Idempotency-Key header,
// which the Transport resends whatever the engine took for the key (an
// optional key, or one in the query or body, left out). An unprotected
// run of a request without a key or those headers is passed through, its
// panic untouched.
//
// A panic after the status was sent goes on unwinding as it is. Called
// from a deferred function instead of deferred itself, End cannot see the
// panic: it frees the key and lets it unwind. Under GODEBUG=panicnil=1,
// End's recover gives nil for a panic(nil), and stops it: End takes it for
// a return without Finish (see docs/server.md).
func (c *Call) End() {
	v := recover()
	switch c.handoff.Load() {
	case handoffPending:
		if v == nil {
			return // HandlerFailed handed it on: AnswerHandlerError or the request's bound ends it
		}
		if !c.handoff.CompareAndSwap(handoffPending, handoffEnded) {
			panic(v) // the other one ends it
		}
	case handoffEnded:
		if v != nil {
			panic(v)
		}
		return // ended by the request's bound, perhaps on another goroutine: nothing of it is touched
	}
	if c.end(v) {
		panic(v)
	}
}

// warnUnanswered warns, once per operation, that a FailuresReplay
// operation's handler ended without an answer the engine could record: a
// strict-server handler that returned an error (which the strict server
// answers after the engine's wrapper returned) whose answer no generated
// error handler recorded (AnswerHandlerError: not installed, or it wrote
// nothing), or one that returned a response of another type. Its key was freed, so a retry runs the
// operation again, which failures: replay is chosen to prevent.
//
// unbounded: HandlerFailed found the request unbounded (see
// Call.HandlerFailed), and the warning says so instead of pointing at the
// error handler.
func (e *Engine) warnUnanswered(ctx context.Context, p *Policy, unbounded bool) {
	if _, warned := e.warnedErr.LoadOrStore(p.spec.Operation, true); warned {
		return
	}
	if unbounded {
		e.log.LogAttrs(ctx, slog.LevelWarn, "idem: under failures: replay, a handler that returns an error instead of a response (a strict-server handler's error) is not recorded: the request was not bounded by CaptureBody when the operation returned (no CaptureBody around the router; a middleware inside it that replaced the body of a request without one, such as http.MaxBytesReader or chi's RequestSize; or a timeout middleware inside it that let the request go before the operation returned), so its key is freed and a retry runs the operation again (said once per operation)",
			slog.String("operation", p.spec.Operation))
		return
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, "idem: under failures: replay, a handler that returns an error instead of a response (a strict-server handler's error) is not recorded: its key is freed and a retry runs the operation again; wrap the strict server's error handler in the generated one (ResponseErrorHandler; HandlerErrorFunc for gin; ErrorHandler, with the generated CaptureBody, for echo; StrictHandler and RegisterStrictHandlers install it) with CaptureBody around the router to have its answer stored and replayed, or return a typed 5xx response (said once per operation)",
		slog.String("operation", p.spec.Operation))
}

// end is End; v is the handler's panic (End recovered it; nil: none). It
// reports whether End must panic again with v: v is not nil, and the engine
// did not keep it for an answer it could not flush.
func (c *Call) end(v any) (raise bool) {
	raise = v != nil
	if c.ended {
		return raise
	}
	c.ended = true
	if c.decision == Execute && !c.finished {
		c.finished = true
		c.stopHeartbeat()
		if c.protected {
			if c.rollback != nil {
				c.rollback()
			}
			answer := v != nil && c.h.rec.unsent()
			err := c.finishRecord(StateFailed, nil, 0, bodyKept)
			switch {
			case !answer && v == nil && c.nothingDone:
				c.e.log.LogAttrs(c.ctx, slog.LevelInfo, "idem: handler returned an error marked idem.HandlerNothingDone (nothing of the operation ran): key released for a retry",
					slog.String("operation", c.p.spec.Operation), slog.String("key", c.key))
				c.reportFinish(StateFailed, 0, "", err, bodyKept)
			case !answer && v == nil && c.lostFired:
				// CancelOnLeaseLost ended the run: its error is the
				// engine's doing, not the handler's (read after
				// stopHeartbeat, as Finish reads it).
				c.e.log.LogAttrs(c.ctx, slog.LevelInfo, "idem: handler gave up after its claim was lost (CancelOnLeaseLost): key released for a retry",
					slog.String("operation", c.p.spec.Operation), slog.String("key", c.key))
				c.reportFinish(StateFailed, 0, "", err, bodyKept)
			case !answer:
				c.e.log.LogAttrs(c.ctx, slog.LevelWarn, "idem: handler did not finish (panic or error): key released for a retry",
					slog.String("operation", c.p.spec.Operation), slog.String("key", c.key))
				if v == nil && c.p.spec.Failures == FailuresReplay {
					c.e.warnUnanswered(c.ctx, c.p, c.unbounded)
				}
				c.reportFinish(StateFailed, 0, "", err, bodyKept)
			case c.answerPanic():
				c.e.log.LogAttrs(c.ctx, slog.LevelWarn, "idem: handler panicked before its response was sent: key released for a retry, 500 "+CodeHandlerPanicked+" sent, the panic goes on",
					slog.String("operation", c.p.spec.Operation), slog.String("key", c.key))
				c.reportFinish(StateFailed, 0, "", err, bodyKept)
			default:
				raise = false
				c.keepPanic(v, err)
			}
		} else {
			raise = c.endUnprotected(v)
		}
	}
	if c.txCancel != nil {
		c.txCancel(nil)
		c.txCancel = nil
	}
	if c.lostCancel != nil {
		c.lostCancel(nil)
		c.lostCancel = nil
	}
	c.endDetach()
	c.h.rec.end()
	if c.swapped {
		c.r.Body, c.origBody, c.swapped = c.origBody, nil, false
	}
	c.h.reqBody.b, c.h.reqBody.closed = nil, true
	if c.bodyBuf != nil {
		c.releaseBody(c.bodyBuf)
		c.bodyBuf = nil
	}
	c.body = nil
	if c.bodyCapture != nil {
		// Last, once nothing of the Call aliases the capture's buffer
		// (c.h.reqBody, c.body). An end that panicked before this point
		// never drops: the buffer then goes to the garbage collector,
		// not the pool.
		c.bodyCapture.drop()
		c.bodyCapture = nil
	}
	return raise
}

// endUnprotected is end for an unprotected run (v: its handler's panic,
// nil: none); it reports whether End must panic again with v. A panic
// before anything of the response was sent is answered as a protected
// run's is (see End) when the request carries a key (a FailOpen run while
// the store fails) or an Idempotency-Key or X-Idempotency-Key header
// (resentByTransport: a key in the query or body left out, an optional
// key left out, a key under another header): without that answer, Go's
// http.Transport would send the request again on every idle connection it
// holds, each running the handler, unprotected, once more. Another (a
// request without a key or those headers) is not: the engine only passes
// it through, and its panic goes on as it is.
func (c *Call) endUnprotected(v any) (raise bool) {
	// Deferred: released even when the answer's writer or the Observer
	// panics.
	defer c.releaseHeld()
	raise = v != nil
	op := c.p.spec.Operation
	ev := Event{Kind: EventExecuted, Operation: op, Principal: c.principal, Key: c.key}
	if sw := &c.h.sw; raise && (c.key != "" || resentByTransport(c.r.Header)) && sw.unsent() {
		ev.Status, ev.Code = http.StatusInternalServerError, CodeHandlerPanicked
		// The scope is set once the engine found a key (or, under
		// Window, recorded the request by its fingerprint) and went to
		// the store: it failed (FailOpen).
		why, detail := "the store failed: FailOpen", detailPanicUnprotected
		if c.scope == "" {
			why, detail = "no idempotency key", detailPanicKeyless
		}
		msg := "idem: handler of an unprotected run (" + why + ") panicked before its response was sent: 500 " + CodeHandlerPanicked + " sent"
		if c.writePanic(sw.ResponseWriter, !sw.outerCE, detail) {
			c.e.log.LogAttrs(c.ctx, slog.LevelWarn, msg+", the panic goes on",
				slog.String("operation", op), slog.String("key", c.key))
		} else {
			raise = false
			c.logKeptPanic(v, msg)
			ev.Err = handlerPanic{v}
		}
	}
	if c.e.obs != nil {
		ev.Duration = c.e.now().Sub(c.start)
		c.e.obs.Observe(c.ctx, ev)
	}
	return raise
}

// resentByTransport reports whether Go's http.Transport sends a request
// with header h again after its connection was dropped without an answer
// (as it does a GET): it carries an Idempotency-Key or X-Idempotency-Key
// header (Request.isReplayable), whatever its value and whatever the
// engine took for the key.
func resentByTransport(h http.Header) bool {
	_, a := h["Idempotency-Key"]
	_, b := h["X-Idempotency-Key"]
	return a || b
}

// releaseHeld releases, once FailOpen's unprotected run has ended (Finish,
// or End), the claim the store failure that led to it left in place (held).
// Released at once, that claim (a Begin's whose reply was lost after the
// server claimed; one cut by StoreTimeout that landed; one whose BeginTx
// failed) would no longer keep the client's retry, sent while the run goes
// on, from claiming the key and running the handler a second time,
// concurrently.
func (c *Call) releaseHeld() {
	if release := c.held; release != nil {
		c.held = nil
		release()
	}
}

// detailPanicUnprotected and detailPanicKeyless are the details of
// endUnprotected's answer: to a run the store's failure left unprotected
// (FailOpen), and to one without a key the operation reads.
const (
	detailPanicUnprotected = "the handler failed (it panicked) before it answered; it ran without idempotency protection (the idempotency record store was unavailable), so nothing was recorded: a retry with the same idempotency key runs it again"
	detailPanicKeyless     = "the handler failed (it panicked) before it answered; it ran without idempotency protection (the request carried no idempotency key where this operation reads it), so nothing was recorded: a retry runs it again"
	detailPanicProtected   = "the handler failed (it panicked) before it answered; nothing was recorded: a retry with the same idempotency key runs it again"
)

// answerPanic answers the client of a protected run whose handler
// panicked before anything of its response was sent (recorder.unsent): a
// complete 500 CodeHandlerPanicked, flushed, as the connection is about to
// be dropped (HTTP/1) or the stream reset (HTTP/2). Headers the handler set
// on the client's header map (tee mode) go with it, as they would with a
// recover middleware's answer, but for those that would misframe it
// (Content-Length, Transfer-Encoding, and a Content-Encoding that a
// middleware in front of the engine did not set) and those that describe
// the response the handler meant to send, not this one (Trailer and the
// trailers it announced, ETag, Last-Modified, Content-Range,
// Content-Disposition, Location). It reports whether the flush succeeded.
func (c *Call) answerPanic() (flushed bool) {
	r := &c.h.rec
	h := r.w.Header()
	dropCE := !r.buffered && headerValue(h, "Content-Encoding") != "" && r.outerSet(h)&contentEncodingBit == 0
	return c.writePanic(r.w, dropCE, detailPanicProtected)
}

// writePanic writes answerPanic's answer, with detail, to w (dropCE: drop
// its Content-Encoding) and flushes it; it reports whether the flush
// succeeded.
func (c *Call) writePanic(w http.ResponseWriter, dropCE bool, detail string) (flushed bool) {
	h := w.Header()
	if dropCE {
		h.Del("Content-Encoding")
	}
	for _, k := range panicDropped {
		delete(h, k)
	}
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			delete(h, k)
		}
	}
	p := problem{status: http.StatusInternalServerError, code: CodeHandlerPanicked, detail: detail}
	body := c.e.appendProblem(nil, &p, "")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store") // as writeProblem: not the handler's directives
	delete(h, "Expires")
	delete(h, "Pragma")
	w.WriteHeader(p.status)
	_, _ = w.Write(body)
	return http.NewResponseController(w).Flush() == nil
}

// panicDropped are the headers answerPanic drops (canonical).
var panicDropped = [...]string{"Content-Length", "Transfer-Encoding", "Trailer", "Etag", "Last-Modified",
	"Content-Range", "Content-Disposition", "Location"}

// keepPanic ends a handler's panic v that answerPanic answered but could
// not flush (see End): End returns instead of panicking again, so v is
// logged here, with the stack it unwound from (End's deferred call runs on
// top of it), and reported with the run's EventExecuted (or, when the
// release failed on the store, err's EventStoreError).
func (c *Call) keepPanic(v any, err error) {
	op := c.p.spec.Operation
	c.logKeptPanic(v, "idem: handler panicked before its response was sent: key released for a retry, 500 "+CodeHandlerPanicked+" sent")
	if err != nil {
		c.reportFinish(StateFailed, 0, "", err, bodyKept)
		return
	}
	c.e.observe(c.ctx, Event{Kind: EventExecuted, Operation: op, Principal: c.principal, Key: c.key,
		Protected: true, State: StateFailed, Prior: c.prior, Err: handlerPanic{v}, Duration: c.e.now().Sub(c.start)})
}

// logKeptPanic logs, after what (msg), a panic v whose answer could not be
// flushed and that End keeps (see End): at Error with its value and the
// stack it unwound from (End's deferred call runs on top of it), but an
// http.ErrAbortHandler, whose handler meant to abort quietly (net/http
// does not log it), at Warn without them.
func (c *Call) logKeptPanic(v any, msg string) {
	op := c.p.spec.Operation
	if v == http.ErrAbortHandler {
		c.e.log.LogAttrs(c.ctx, slog.LevelWarn, msg+" (the handler aborted: http.ErrAbortHandler); the ResponseWriter cannot flush, so the panic ends here",
			slog.String("operation", op), slog.String("key", c.key))
		return
	}
	c.e.log.LogAttrs(c.ctx, slog.LevelError, msg+"; the ResponseWriter cannot flush it, so the panic ends here (a panic going on would lose the answer)",
		slog.String("operation", op), slog.String("key", c.key), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
}

// handlerPanic is the Err of the EventExecuted of a run whose panic the
// engine ended (keepPanic): its message has the panic's value, and it
// unwraps to that value when it is an error.
type handlerPanic struct{ v any }

func (p handlerPanic) Error() string { return fmt.Sprint("idem: handler panicked: ", p.v) }

func (p handlerPanic) Unwrap() error {
	err, _ := p.v.(error)
	return err
}

// bodyReader serves the request body to the handler from the engine's buffer.
type bodyReader struct {
	b      []byte
	off    int
	closed bool
}

func (r *bodyReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (r *bodyReader) Close() error {
	r.closed = true
	return nil
}
