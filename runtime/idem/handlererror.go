package idem

import (
	"errors"
	"net/http"
)

// HandlerError is the error a generated strict-server wrapper returns, under
// failures: replay, for an operation that returned an error instead of a
// response (see Call.HandlerFailed): the operation's error (Unwrap, so
// errors.Is and errors.As see through it, and Error is its text) with the
// Call that waits for the strict server's answer to it. The generated
// strict error handler (AnswerHandlerError) records that answer, stored
// and replayed as a plain handler's; without it, the request's CaptureBody
// frees the key once the strict server returned.
type HandlerError struct {
	err error
	c   *Call
}

// Error returns the operation's error's text.
func (e *HandlerError) Error() string { return e.err.Error() }

// Unwrap returns the operation's error.
func (e *HandlerError) Unwrap() error { return e.err }

// Pending reports whether the Call waits for the answer to the error still:
// no AnswerHandlerError took it and its request's CaptureBody has not
// ended it. A framework whose error handler runs after every middleware
// returned (echo's HTTPErrorHandler) has its CaptureBody answer a pending
// error itself, while the request is still bounded.
func (e *HandlerError) Pending() bool { return e.c != nil && e.c.pending }

// HandlerFailed is what a strict-server wrapper calls when the operation of
// an Execute decision returned err instead of a response, before it returns
// err to the strict server (which answers it with its error handler after
// the wrapper returned).
//
// Under failures: replay, outside transactional mode (where the error rolls
// back and frees the key), for a protected run of a request that CaptureBody
// bounds (its body is the capture, or its context leads to it; a request
// without a body has CaptureBody's empty body while it runs), it returns
// a *HandlerError and leaves the Call open: End does nothing, and the
// answer the strict server's error handler writes through
// AnswerHandlerError is recorded (a 5xx is stored as failed and replayed,
// as a plain handler's). If no AnswerHandlerError takes it (the generated
// error handler is not installed, or a strict middleware swallowed the
// error), CaptureBody ends the Call when the request leaves it: the key is
// freed, as End would have, and the engine warns once per operation.
//
// Otherwise (another failures policy, transactional mode, a request
// CaptureBody does not bound, a Call of Engine.Handler, a nil err) it
// returns err, and End frees the key. A Call is handed on at most once.
func (c *Call) HandlerFailed(err error) error {
	if err == nil || c.decision != Execute || !c.protected || c.finished || c.ended || c.pending || c.pooled ||
		c.commit != nil || c.p.spec.Failures != FailuresReplay {
		return err
	}
	b := findBound(c.r)
	if b == nil || b.pending != nil {
		return err
	}
	c.pending = true
	b.pending = c
	return &HandlerError{err: err, c: c}
}

// AnswerHandlerError is the body of the generated strict error handlers:
// answer is the user's error handler (or the strict server's default)
// writing to w. When err is (or wraps) a *HandlerError whose Call is still
// open, answer is called with the operation's own error and the Call's
// recorder, and what it writes is recorded and finishes the Call (a 5xx
// under failures: replay is stored as failed and replayed); if it writes
// nothing, the key is freed and the engine warns once per operation. Any
// other error goes to answer as it is.
func AnswerHandlerError(w http.ResponseWriter, err error, answer func(http.ResponseWriter, error)) {
	var he *HandlerError
	if !errors.As(err, &he) || he.c == nil || !he.c.pending {
		answer(w, err)
		return
	}
	c := he.c
	c.pending = false
	defer c.End() // frees the key if nothing was written, answers a panic as End does
	answer(c.Writer(w), he.err)
	if c.h.rec.active && c.h.rec.wroteHeader {
		_ = c.Finish()
	}
}

// bound is what CaptureBody keeps for a request: the Call a strict
// wrapper left open for the strict server's error handler (HandlerFailed),
// which CaptureBody ends, if nothing else did, once the request leaves it.
type bound struct {
	pending *Call
}

// endPending ends the Call left open, if the error handler did not: the
// key is freed, as End would have (and the engine warns once per
// operation under failures: replay).
func (b *bound) endPending() {
	c := b.pending
	if c == nil {
		return
	}
	b.pending = nil
	if !c.pending {
		return
	}
	c.pending = false
	c.end(nil)
}

// findBound returns the bound of the request CaptureBody wrapped, nil for
// none.
func findBound(r *http.Request) *bound {
	if nb, ok := r.Body.(*noBody); ok {
		return &nb.bound
	}
	if cp, _ := findCapture(r); cp != nil && !cp.released.Load() {
		return &cp.bound
	}
	return nil
}
