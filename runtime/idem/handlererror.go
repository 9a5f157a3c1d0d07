package idem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
)

// The hand-off states of a Call (Call.handoff), changed only by
// compare-and-swap once the Call is handed on, so that exactly one of
// AnswerHandlerError and the request's bound ends it.
const (
	handoffNone      int32 = iota // not handed on: End ends the Call
	handoffPending                // HandlerFailed left it to the request's bound
	handoffAnswering              // AnswerHandlerError took it: it ends it
	handoffEnded                  // ended by the bound (CaptureBody) or by End's panic
)

// HandlerFailed is what a strict-server wrapper calls when the operation of
// an Execute decision returned err instead of a response, before it returns
// err to the strict server (which answers it with its error handler after
// the wrapper returned). It returns err unchanged, always: the strict
// server, its middlewares and its error handler see exactly the error the
// operation returned.
//
// Under failures: replay, outside transactional mode (where the error rolls
// back and frees the key), for a protected run of a request that
// CaptureBody bounds and has not returned from yet (the request's body is
// the capture, its context leads to it, or, for a request without a body,
// its body is CaptureBody's empty body), it leaves the Call open, held by
// the request's bound: End does nothing, and the answer the strict
// server's error handler writes through AnswerHandlerError (given the
// request) is recorded (a 5xx is stored as failed and replayed, as a plain
// handler's). If no AnswerHandlerError takes it (the generated error
// handler is not installed, or a strict middleware answered the error
// itself), CaptureBody ends the Call when the request leaves it: the key
// is freed, as End would have, and the engine warns once per operation.
//
// An err marked HandlerNothingDone (errors.Is(err, ErrHandlerNothingDone);
// not the stores' ErrNothingDone, which an error the handler got from a
// store call of its own may carry) says that
// nothing of the operation ran (the handler failed before it changed
// anything: its payment provider refused the connection, a validation it
// makes before any write), under any failures policy and in
// transactional mode: End frees the key (logged at Info level, without
// the warnings of a handler that did not finish), so a retry with the key
// runs the operation again, and the error
// handler's answer reaches the client without being stored. Mark only an
// error after which the handler knows nothing was done: an error after a
// side effect may have happened (a call that timed out, a context that
// ended mid-way) is exactly what failures: replay keeps from running
// twice.
//
// Otherwise (another failures policy, transactional mode, a request
// CaptureBody does not bound, or one CaptureBody already returned from, as
// when a timeout middleware inside it let the request go while the
// operation went on, a Call of Engine.Handler, a nil err) End frees the
// key. A Call is handed on at most once, and a bound holds one Call.
func (c *Call) HandlerFailed(err error) error {
	if err == nil || c.decision != Execute || !c.protected || c.finished || c.ended || c.handoff.Load() != handoffNone || c.pooled {
		return err
	}
	if errors.Is(err, ErrHandlerNothingDone) {
		// The operation says nothing of it ran: End frees the key, as
		// under failures: retry, and a retry runs it again; End says so
		// at Info level (under any failures policy, in transactional
		// mode too), without the warnings of an unfinished handler.
		c.nothingDone = true
		return err
	}
	if c.commit != nil || c.p.spec.Failures != FailuresReplay {
		return err
	}
	// Decided now, said once the Call is handed on (its answer is then
	// stored): another goroutine may end it as soon as it is.
	gone := c.e.detach == 0 && errors.Is(err, context.Canceled) && errors.Is(c.r.Context().Err(), context.Canceled)
	e, ctx, p := c.e, c.ctx, c.p
	if b := findBound(c.r); b == nil || !b.handOn(c) {
		c.unbounded = true
		return err
	}
	if gone {
		e.warnCancelledStored(ctx, p)
	}
	return err
}

// AnswerHandlerError is the body of the generated strict error handlers:
// answer is the user's error handler (or the strict server's default)
// answering err, the error the strict server handed the error handler, for
// request r, by writing to w. When a Call of r waits for that answer (see
// Call.HandlerFailed) and CaptureBody has not returned from r yet, answer
// writes to the Call's recorder, and what it writes is recorded and
// finishes the Call (a 5xx under failures: replay is stored as failed and
// replayed); if it writes nothing, the key is freed and the engine warns
// once per operation. Otherwise answer writes to w. Either way answer gets
// err as it is.
func AnswerHandlerError(w http.ResponseWriter, r *http.Request, err error, answer func(http.ResponseWriter, error)) {
	var c *Call
	if r != nil {
		if b := findBound(r); b != nil {
			c = b.take()
		}
	}
	if c == nil || !c.handoff.CompareAndSwap(handoffPending, handoffAnswering) {
		answer(w, err)
		return
	}
	defer c.End() // frees the key if nothing was written, answers a panic as End does
	answer(c.Writer(w), err)
	if c.h.rec.active && c.h.rec.wroteHeader {
		_ = c.Finish()
	}
}

// HandlerErrorPending reports whether a Call of r waits for the answer to
// its operation's error (see Call.HandlerFailed): a framework whose error
// handler runs after every middleware returned (echo's HTTPErrorHandler)
// has its CaptureBody answer such an error itself while r is still
// bounded.
func HandlerErrorPending(r *http.Request) bool {
	if r == nil {
		return false
	}
	b := findBound(r)
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// A Call whose End panicked while it was pending ended itself
	// (handoffEnded) and is left in b.pending (End does not look for its
	// bound): it waits for nothing.
	return b.pending != nil && b.pending.handoff.Load() == handoffPending
}

// bound is what CaptureBody keeps for a request: open while CaptureBody
// serves it, closed once it returned, and the Call a strict wrapper left
// open for the strict server's error handler (HandlerFailed), which
// CaptureBody ends, if AnswerHandlerError did not take it, when it closes
// the bound. A timeout middleware inside CaptureBody may run the operation
// on another goroutine that outlives it: the lock orders HandlerFailed,
// AnswerHandlerError and close, and the Call's hand-off state decides
// which one ends it.
type bound struct {
	mu      sync.Mutex
	closed  bool
	pending *Call
}

// handOn leaves c to the bound, if it is open and holds no other Call.
func (b *bound) handOn(c *Call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.pending != nil {
		return false
	}
	c.handoff.Store(handoffPending)
	b.pending = c
	return true
}

// take returns the Call the bound holds (nil: none, or closed), and leaves
// it to the caller.
func (b *bound) take() *Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.pending
	b.pending = nil
	return c
}

// close closes the bound and ends the Call left open, if no error handler
// took it: the key is freed, as End would have (and the engine warns once
// per operation under failures: replay).
func (b *bound) close() {
	b.mu.Lock()
	b.closed = true
	c := b.pending
	b.pending = nil
	b.mu.Unlock()
	if c != nil && c.handoff.CompareAndSwap(handoffPending, handoffEnded) {
		c.end(nil)
	}
}

// findBound returns the bound of the request CaptureBody wrapped, nil for
// none.
func findBound(r *http.Request) *bound {
	if nb, ok := r.Body.(*noBody); ok {
		return &nb.bound
	}
	if cp, _ := findCapture(r); cp != nil {
		return &cp.bound
	}
	return nil
}

// warnCancelledStored warns, once per operation, that a FailuresReplay
// operation's handler gave up as its client went away (it returned the
// request context's error) and that its answer is stored and replayed
// (HandlerFailed): safe, since the engine cannot know how far the handler
// got, but the client's retries then get that failure for the whole
// window. Options.DetachHandler lets such a handler finish instead.
func (e *Engine) warnCancelledStored(ctx context.Context, p *Policy) {
	if _, warned := e.warnedGone.LoadOrStore(p.spec.Operation, true); warned {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, "idem: under failures: replay, a handler gave up because its client went away (it returned its context's error): its answer is stored and replayed to every retry with the key, since the engine cannot know how far it got; set idem.Options.DetachHandler to let a handler finish what it began when its client goes away (the retry then gets its result), and return idem.HandlerNothingDone(err) from a handler that knows nothing was done (said once per operation)",
		slog.String("operation", p.spec.Operation))
}
