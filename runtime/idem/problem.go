package idem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// DetailKeyInUse is the "detail" member of the engine's CodeKeyInUse
// problem (the generated documentation quotes it).
const DetailKeyInUse = "a request with this idempotency key is still in progress"

// Problem codes: the stable "code" member of every problem+json the engine
// writes. Each problem's "type" is ProblemTypeBase + code.
const (
	// CodeKeyMissing (400): the operation requires an idempotency key and the request has none.
	CodeKeyMissing = "IDEMPOTENCY_KEY_MISSING"
	// CodeKeyInvalid (400): the key is malformed, too long, of the wrong format, or repeated.
	CodeKeyInvalid = "IDEMPOTENCY_KEY_INVALID"
	// CodeKeyReused (422 or the policy's ConflictStatus): under strict
	// semantics the key was used for a request with another fingerprint.
	// Retrying cannot help; the client must use a new key for a new request.
	CodeKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodeKeyInUse (409 or the policy's InFlight.Status, with Retry-After): a
	// request with this key is still in flight. Retry after Retry-After.
	CodeKeyInUse = "IDEMPOTENCY_KEY_IN_USE"
	// CodeStoreUnavailable (503, with Retry-After): the record store failed;
	// nothing was executed. Retry after Retry-After.
	CodeStoreUnavailable = "IDEMPOTENCY_STORE_UNAVAILABLE"
	// CodeQuotaExceeded (429, with Retry-After): the record store refused
	// a new key of this caller (Options.Principal's principal), which holds
	// too large a share of the store already (memstore's
	// Options.MaxPrincipalShare), to keep room for the others: see
	// ErrQuotaExceeded. Nothing was executed, FailOpen or not. Retry after
	// Retry-After, once the caller's records have aged or expired.
	CodeQuotaExceeded = "IDEMPOTENCY_QUOTA_EXCEEDED"
	// CodeResponseUnavailable (409, no Retry-After): the request was executed,
	// but its response exceeded Response.MaxBytes and was not stored, so it
	// cannot be replayed. The problem's "original_status" member carries the
	// executed status and the allowlisted headers (e.g. Location) are
	// replayed. This is final: retrying with the same key returns it again
	// until the window ends; the client should fetch the result another way.
	CodeResponseUnavailable = "IDEMPOTENCY_RESPONSE_UNAVAILABLE"
	// CodeRequestTooLarge (413): the request body exceeds Request.MaxBytes.
	CodeRequestTooLarge = "IDEMPOTENCY_REQUEST_TOO_LARGE"
	// CodeRequestUnreadable (400): the request body could not be read (or was
	// consumed before the engine could fingerprint it: see CaptureBody).
	CodeRequestUnreadable = "IDEMPOTENCY_REQUEST_UNREADABLE"
	// CodeRecordUnreadable (500): a stored record could not be decoded.
	CodeRecordUnreadable = "IDEMPOTENCY_RECORD_UNREADABLE"
	// CodePrincipalUnavailable (500): Options.Principal failed with an error
	// that is not a *Problem.
	CodePrincipalUnavailable = "IDEMPOTENCY_PRINCIPAL_UNAVAILABLE"
	// CodeRequestEnded (503 when a deadline set for the request passed, 499
	// when its client went away): the request's own context ended while the
	// engine was checking its key, so a store call (or Options.Principal)
	// failed with it. Nothing was executed; retrying with the same key is
	// safe (a claim the failed Begin made all the same is released in the
	// background, so a retry finds the key in flight for a moment at most,
	// not for the lease). (In transactional mode: the request ended before its
	// transaction committed; a retry replays the result if the commit took
	// effect after all.) It is no store failure: it is reported as
	// EventRejected (EventExecuted, FAILED, for the commit), logged at Info,
	// and FailOpen never runs such a request.
	CodeRequestEnded = "IDEMPOTENCY_REQUEST_ENDED"
	// CodeHandlerPanicked (500): the handler panicked before anything of
	// its response was sent. The engine freed the key (FAILED without a
	// response, whatever Failures says), answered this in full, and let the
	// panic go on (to net/http, which logs it, or a recover middleware in
	// front of the engine). The handler may have done part of its work; a
	// retry with the same key runs it again. Also the answer to such a
	// panic in an unprotected run of a request that carries a key (FailOpen,
	// the store failing), or an Idempotency-Key or X-Idempotency-Key header
	// although the engine found no key: no key to free there.
	CodeHandlerPanicked = "IDEMPOTENCY_HANDLER_PANICKED"
	// CodeHandlerFailed (500): the operation returned an error and no
	// error handler of the service answered it: the generated strict
	// servers' error handlers (ResponseErrorHandler, gin's
	// HandlerErrorFunc) answer it so by default, through
	// Engine.WriteHandlerError. The error's text is not sent (it is
	// logged): it may hold internal details, and under failures: replay
	// the answer is recorded and replayed for the whole window.
	CodeHandlerFailed = "IDEMPOTENCY_HANDLER_FAILED"
)

// StatusClientClosedRequest (499, nginx's "Client Closed Request", which
// Caddy, Traefik and grpc-gateway use too) is the status of the
// CodeRequestEnded answer to a request whose client went away: no one reads
// it, but access logs and metrics do, and a 5xx there would count a
// client's disconnect as a server error.
const StatusClientClosedRequest = 499

// DefaultProblemTypeBase prefixes the code to form a problem's "type" URI;
// it points at the documentation of the Code constants.
const DefaultProblemTypeBase = "https://pkg.go.dev/github.com/idemgen/idemgen/runtime/idem#"

// Problem is an RFC 9457 problem detail. The engine writes them as
// application/problem+json; Options.Principal may return one to choose the
// answer to a request it refuses.
type Problem struct {
	Type  string // default: ProblemTypeBase + Code
	Title string // default: the status text
	// Status is the HTTP status of the answer.
	Status int
	// Detail explains this occurrence to a human ("" leaves it out).
	Detail string
	// Code is the machine-readable problem code (one of the Code constants
	// for the engine's problems), sent as the "code" member ("" leaves it out).
	Code string
	// RetryAfter, when > 0, is sent as a Retry-After header (whole seconds).
	RetryAfter int
}

// Error implements error.
func (p *Problem) Error() string {
	return "idem: " + strconv.Itoa(p.Status) + " " + p.Code + ": " + p.Detail
}

// problem is the engine's internal, allocation-free description of a problem.
type problem struct {
	status     int
	code       string
	title      string
	detail     string
	retryAfter []string // Retry-After header value, shared (writeProblem copies it)
	origStatus int      // CodeResponseUnavailable
}

// replayedTrue is the value of Idempotent-Replayed on a replay without other
// headers: shared, so that it costs no allocation (see Call.writeReplay).
var replayedTrue = []string{"true"}

// writeProblem writes p as application/problem+json. Its one allocation
// (beyond what the ResponseWriter does) is the response's own header values,
// which a middleware may change in place. typ overrides the "type" member.
func (e *Engine) writeProblem(w http.ResponseWriter, p *problem, typ string) {
	bp := getBuf()
	b := e.appendProblem((*bp)[:0], p, typ)
	h := w.Header()
	vals := make([]string, 4)
	vals[0], vals[1], vals[2] = "application/problem+json", "nosniff", "no-store"
	h["Content-Type"] = vals[0:1:1]
	h["X-Content-Type-Options"] = vals[1:2:2]
	// The engine's answers are about this attempt (a key in use, a store
	// unreachable, a body too large): no cache keeps them.
	h["Cache-Control"] = vals[2:3:3]
	delete(h, "Expires")
	delete(h, "Pragma")
	if p.retryAfter != nil {
		vals[3] = p.retryAfter[0]
		h["Retry-After"] = vals[3:4:4]
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(b)
	*bp = b
	putBuf(bp)
}

// appendProblem appends p's problem+json document to b (typ overrides the
// "type" member).
func (e *Engine) appendProblem(b []byte, p *problem, typ string) []byte {
	b = append(b, `{"type":"`...)
	if typ != "" {
		b = appendJSONInner(b, typ)
	} else {
		b = appendJSONInner(b, e.problemBase)
		b = appendJSONInner(b, p.code)
	}
	title := p.title
	if title == "" {
		title = http.StatusText(p.status)
	}
	b = append(b, `","title":`...)
	b = appendJSONString(b, title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.status), 10)
	if p.detail != "" {
		b = append(b, `,"detail":`...)
		b = appendJSONString(b, p.detail)
	}
	if p.code != "" {
		b = append(b, `,"code":`...)
		b = appendJSONString(b, p.code)
	}
	if p.origStatus != 0 {
		b = append(b, `,"original_status":`...)
		b = strconv.AppendInt(b, int64(p.origStatus), 10)
	}
	return append(b, "}\n"...)
}

// WriteProblem writes p as application/problem+json, as the engine writes
// its own refusals: the type defaults to ProblemTypeBase + Code (about:blank
// without a code), the title to the status text, and a status outside
// 400..599 becomes 500. It reports nothing to the Observer: to refuse a
// request of an idempotent operation, use Refuse.
func (e *Engine) WriteProblem(w http.ResponseWriter, p *Problem) { e.writePublicProblem(w, p) }

// DetailHandlerFailed is the "detail" member of the CodeHandlerFailed
// problem.
const DetailHandlerFailed = "the operation failed; the server logged the error"

// WriteHandlerError is the default answer of the generated strict
// servers' error handlers to err, the error an operation of r returned
// (when the service gave no error handler of its own): a generic 500
// problem, CodeHandlerFailed, without the error's text, which may hold
// internal details (a database address, a query) and, under failures:
// replay, would be recorded and replayed to every retry for the whole
// window. err is logged at Error level (Options.Logger) with the request's
// method and path (clipped, as the engine logs every text a client
// controls). It reports nothing to the Observer.
func (e *Engine) WriteHandlerError(w http.ResponseWriter, r *http.Request, err error) {
	e.writeProblem(w, &problem{status: http.StatusInternalServerError, code: CodeHandlerFailed, detail: DetailHandlerFailed}, "")
	ctx := context.Background()
	var method, path string
	if r != nil {
		ctx, method = r.Context(), r.Method
		if r.URL != nil {
			path = r.URL.Path
		}
	}
	e.log.LogAttrs(ctx, slog.LevelError, "idem: the operation failed, answered with a 500 problem",
		slog.String("method", clip(method)), slog.String("path", clip(path)), clipErr("error", err))
}

// Refuse answers r, a request of policy's operation refused before it
// reached the engine, with prob, written as WriteProblem writes it, and
// reports the refusal to the Observer as an EventRejected with the
// operation, the status sent and prob.Code (no principal: Options.Principal
// is not called; no key: the request's was refused). Generated server
// wrappers use it for key parameters the router rejects (a missing
// required header, a malformed uuid) before the engine runs.
func (e *Engine) Refuse(w http.ResponseWriter, r *http.Request, policy *Policy, prob *Problem) {
	e.RefuseWithCause(w, r, policy, prob, nil)
}

// RefuseWithCause is Refuse for a refusal caused by err (the router's
// error about the key parameter): the client gets prob alone, err goes to
// the Observer as the event's Err and to the log at debug level, where
// the details a client should not see (Go types, a parser's wording) are
// kept (its text clipped to a bounded length, with the length it had: it
// may quote the key as the client sent it).
func (e *Engine) RefuseWithCause(w http.ResponseWriter, r *http.Request, policy *Policy, prob *Problem, err error) {
	if policy == nil || prob == nil {
		panic("idem: Refuse with a nil policy or problem")
	}
	e.writePublicProblem(w, prob)
	if err != nil && e.log.Enabled(r.Context(), slog.LevelDebug) { // clipErr boxes err: only when it is logged
		e.log.LogAttrs(r.Context(), slog.LevelDebug, "idem: request refused before the engine ran",
			slog.String("operation", policy.spec.Operation), slog.String("code", prob.Code), clipErr("error", err))
	}
	e.observe(r.Context(), Event{Kind: EventRejected, Operation: policy.spec.Operation,
		Status: publicStatus(prob.Status), Code: prob.Code, Err: err})
}

// RefuseTooLarge answers err, the error a strict server's decoder got
// reading r's body, when the body is one CaptureBodyFor bounds (a request
// of an idempotent operation) and err is, or wraps, an
// *http.MaxBytesError: it writes the 413 IDEMPOTENCY_REQUEST_TOO_LARGE
// problem the engine answers such a body with when it reads it itself,
// reports it as Refuse does, and returns true. For any other error, or a
// request CaptureBodyFor does not bound, it writes nothing and returns
// false. The generated strict servers' error handlers call it first.
func (e *Engine) RefuseTooLarge(w http.ResponseWriter, r *http.Request, err error) bool {
	var mbe *http.MaxBytesError
	if err == nil || r == nil || !errors.As(err, &mbe) {
		return false
	}
	cp, _ := findCapture(r)
	if cp == nil || cp.policy == nil {
		return false
	}
	e.RefuseWithCause(w, r, cp.policy, &Problem{Status: http.StatusRequestEntityTooLarge, Code: CodeRequestTooLarge,
		Detail: detailTooLarge}, err)
	return true
}

// detailTooLarge is the detail of the CodeRequestTooLarge problem, whether
// the engine met the bound (Call.bodyFailed) or a decoder did (RefuseTooLarge).
const detailTooLarge = "the request body is larger than this operation accepts"

// writePublicProblem writes a *Problem (from Options.Principal).
func (e *Engine) writePublicProblem(w http.ResponseWriter, p *Problem) {
	ip := problem{status: publicStatus(p.Status), code: p.Code, title: p.Title, detail: p.Detail}
	if p.RetryAfter > 0 {
		ip.retryAfter = []string{strconv.Itoa(p.RetryAfter)}
	}
	typ := p.Type
	if typ == "" && p.Code == "" {
		typ = "about:blank"
	}
	e.writeProblem(w, &ip, typ)
}

// publicStatus is the status a *Problem is written with: its own when in
// 400..599, else 500.
func publicStatus(status int) int {
	if status < 400 || status > 599 {
		return http.StatusInternalServerError
	}
	return status
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	return append(appendJSONInner(b, s), '"')
}

// appendJSONInner appends s escaped for a JSON string, without quotes.
func appendJSONInner(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, `\u00`...)
				b = append(b, hexDigits[c>>4], hexDigits[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return b
}
