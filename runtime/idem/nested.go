package idem

import (
	"context"
	"log/slog"
	"net/http"
)

// maxUnwrap bounds the chain of Unwrap calls Nested follows.
const maxUnwrap = 16

// Nested reports whether w is, or wraps (Unwrap() http.ResponseWriter, as
// http.ResponseController follows it), the recorder an engine handed the
// handler of a request of policy p that it is running now: the engine's
// wiring is doubled, and the request is already claimed, recorded and
// answered by the engine in front. The caller then hands the request
// straight to the handler, with w, instead of running the engine again:
// a second run would find the key in use (the first run holds the claim)
// and answer 409 IDEMPOTENCY_KEY_IN_USE, which the first run would record
// and replay to every retry of the key.
//
// A doubled wiring is, for instance, a hand-added HTTPMiddleware (or
// HTTPMiddlewareWithBaseURL) left in front of idemgen's one-line wiring
// (x.Handler, x.RegisterHandlers), which protects every operation on its
// own; Engine.Handler checks it too. The first time it finds one, Nested
// logs a warning naming the operation (once per Engine).
//
// It costs a few type assertions and allocates nothing. Engines that share
// a store and a policy are alike here: whichever recorder is in front, the
// request it records is the one the inner run would claim again.
//
// What it does not tell apart (it compares the policy, not the request): a
// handler that serves another request of the same operation (another key)
// itself, through the same operation's protected handler and with the
// ResponseWriter it was given, has that request passed through, unclaimed
// (serve it with a fresh ResponseWriter, or call the operation's code
// directly); and two Engines over different stores sharing a policy
// (generated policies are package-level), one wired inside the other,
// record in the outer one's store only.
func (e *Engine) Nested(w http.ResponseWriter, p *Policy) bool {
	for range maxUnwrap {
		switch v := w.(type) {
		case nil:
			return false
		case *recorder:
			if !v.active || v.done || v.p != p || p == nil {
				return false
			}
			if e.warnedNest.CompareAndSwap(false, true) {
				e.log.LogAttrs(context.Background(), slog.LevelWarn,
					"idem: the engine runs twice for one request (a doubled wiring, e.g. a hand-added HTTPMiddleware in front of "+
						"x.Handler or x.RegisterHandlers, which already protect every operation): the inner run passes the request "+
						"through to the handler; remove the hand-added middleware",
					slog.String("operation", p.spec.Operation))
			}
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return false
		}
	}
	return false
}
