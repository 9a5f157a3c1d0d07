package idemclient

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// HTTPDoer performs HTTP requests: oapi-codegen's HttpRequestDoer, which
// *http.Client implements.
type HTTPDoer interface {
	Do(req *http.Request) (*http.Response, error)
}

// Matcher tells whether a request not marked by [Start] is idempotent, and
// under which policy. Generated code may provide a method+path table as a
// Matcher; [MatchMethods] matches by method. The policy it returns may
// share its On.Statuses with the policies it returns for other requests
// ([RouteTable]'s do, to cost no allocation): the Doer only reads it, and
// so should any other caller.
type Matcher func(req *http.Request) (Policy, bool)

// MatchMethods returns a Matcher that manages every request whose method is
// one of methods, under policy p.
func MatchMethods(p Policy, methods ...string) Matcher {
	return func(req *http.Request) (Policy, bool) {
		for _, m := range methods {
			if req.Method == m {
				return p, true
			}
		}
		return Policy{}, false
	}
}

// Problem codes of the contract that steer retries.
const (
	CodeKeyInUse  = "IDEMPOTENCY_KEY_IN_USE"
	CodeKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodeResponseUnavailable (409): the request ran, but its response was
	// too large for the server to store, so it cannot be replayed; every
	// retry with the key gets the same answer until the window ends. Never
	// retried. The problem's original_status member ([ProblemError].OriginalStatus) is the status it ran
	// with; fetch the result another way.
	CodeResponseUnavailable = "IDEMPOTENCY_RESPONSE_UNAVAILABLE"
)

// Default limits of a [Doer].
const (
	DefaultResponseBuffer   = 1 << 20 // bytes of a response body read within the attempt
	DefaultRequestBodyLimit = 8 << 20 // bytes of a body without GetBody buffered for replay
	DefaultRetryAfterLimit  = time.Minute
)

// Doer wraps an [HTTPDoer] (an *http.Client, or anything with its Do) and
// makes idempotent requests safe to retry: one key per logical call, carried
// where the policy says, the same key and identical body bytes on every
// attempt, retries under the policy, bounded by the context deadline.
//
// # Which requests
//
// A managed request whose context is already done is not sent: the call
// ends with the context's error, no key fixed or observed, no attempt
// counted or reported.
//
// A request is managed when its context carries a [Call] (set by [Start];
// generated typed helpers do this), or when the [Matcher] given with
// [WithMatcher] matches it. Other requests go to the inner Doer untouched,
// as do the attempts of another Doer's call that reach this one (an SDK's
// HTTP doer between two Doers: see [DoerWrapper]): a request whose context
// is an attempt's and that carries that attempt's Call, or none. A request
// on an attempt's context that carries a Call of its own (an in-process
// handler that calls another service with [Start](r.Context())) is
// another logical call, managed as any; one that carries none, though a
// matcher or [WithSafeRetries] would manage it, passes through, sent
// once. The policy is the Call's ([WithPolicy]), else the matcher's, else
// the one given to [NewDoer].
//
// # The key
//
// The key is the Call's ([WithKey]) or the one the request already carries
// (a header, query parameter or body member set by the caller; an empty
// value and the nil UUID, which oapi-codegen's client sends for an unset
// UUID-typed key parameter, carry none, nor does a query pair the server
// does not read: one holding a semicolon, or a badly escaped value), or a new
// one in the policy's format ([NewKey], or the call's [WithKeyGenerator], or
// the Doer's [WithDoerKeyGenerator]). It is fixed, reported to
// [WithKeyObserver] and stored in the Call before the first attempt. For a
// body carrier the key is spliced into the JSON body once (other bytes keep
// their spelling) and those bytes are sent on every attempt; a body that
// names a member on the key's pointer twice fails with [ErrBadKeyCarrier]
// (parsers disagree on which one counts). For a query
// carrier the first pair of the key's name that carries a key counts, and
// the request is sent with that pair alone (others of the name, which carry
// none or the same key, are dropped: the server refuses a key given twice);
// two different keys fail with [ErrKeyConflict]. A key longer than the
// policy's KeyMaxLength, or under its EnforceKeyFormat not in its
// KeyFormat (which the server would refuse with a 400), fails with
// [ErrInvalidKey] before anything is sent.
//
// # The body
//
// Attempt 1 sends req.Body; later attempts send req.GetBody() (set by
// http.NewRequest for bytes, strings and buffers, as oapi-codegen does).
// A body without GetBody (or any body for the body carrier) is read into
// memory once, up to [WithRequestBodyLimit] (default 8 MiB); a larger one
// fails with [ErrBodyNotReplayable] before anything is sent (but for a
// safe method's request managed by [WithSafeRetries], sent once instead). That read
// respects the context: when it ends first, the body is closed (which
// stops a read blocked on a pipe or a connection) and the call ends at
// once with the context's error (a read that closing does not stop is left
// to a goroutine, which ends when the read returns, and reads no more: at
// most the Read under way finishes after Do returned, but the reader must
// not be reused after a call its context ended). Nothing else
// changes between attempts: no header is added besides the key (and the
// attempt header, only if [WithAttemptHeader] asks for it).
//
// # When it retries
//
// A transport error is retried when the policy's On.Connection is set and
// [Classify] says ClassConnection, or when the per-attempt timeout
// ([WithAttemptTimeout], extended by the policy's InFlightWait for an
// attempt the server may hold) fired. A response is retried when its status is in
// On.Statuses; 400 and 422, and a problem+json code IDEMPOTENCY_KEY_REUSED
// or IDEMPOTENCY_RESPONSE_UNAVAILABLE, never are (the server answers them
// again to every retry), nor is a replay (Idempotent-Replayed: true, such as
// a 5xx stored under the contract's `failures: replay`: the key's answer is
// final; a 503 IDEMPOTENCY_STORE_UNAVAILABLE is no replay); the code IDEMPOTENCY_KEY_IN_USE always is, at
// whatever status the server answers it (the contract's in-flight status,
// 409 by default; never 400 or 422, which the contract refuses), and
// without counting toward the policy's MaxAttempts: the key's first
// request still runs, or its holder crashed and a retry takes the key
// over once its lease runs out. Those waits are bounded by the policy's
// InUseWait, as the time elapsed since the call's first in-use answer
// (and, like every wait, by the context deadline and the
// Retry-After limit); under MaxAttempts 1 nothing is waited out.
// Up to [WithResponseBuffer] bytes (default 1 MiB) of each response body
// are read within the attempt, so that a connection lost mid-body is a
// retryable error rather than the caller's problem; a longer body streams
// (so does, for a safe method's request under [WithSafeRetries], a
// response not retried whose length is unknown or above the buffer).
// Of a JSON or problem+json error body, at least its first 64 KiB (where
// its code is looked for: a code there counts even when the body goes on
// past them) are read within the attempt, whatever the buffer.
//
// # How long it waits
//
// Before retry n it waits max(backoff(n), the server's Retry-After or
// Retry-After-Ms) ([ParseRetryAfter]), where n counts the retries after
// answers other than IDEMPOTENCY_KEY_IN_USE: an in-use answer waits
// max(backoff(n), Retry-After), at least Backoff.Initial, and leaves n
// where it was. It never sleeps past the context
// deadline: if the server asks for longer than remains (or than
// [WithRetryAfterLimit], default 1 minute) it stops with
// [ErrRetryAfterTooLong] (which matches context.DeadlineExceeded too when
// the deadline was the bound, not the limit); if only the backoff is too
// long it stops with [ErrNoTimeLeft] (which matches it too). When the wait after an in-use answer would end more
// than the policy's InUseWait after the call's first in-use answer (by the
// Doer's clock: the attempts' own durations count, such as a server's
// in-flight wait), it stops with [ErrInUseWaitExhausted] (a server that
// answers in use forever ends there: each such wait is at least
// Backoff.Initial); the wait after the first in-use answer is always
// allowed, unless InUseWait is below Backoff.Initial (see
// [Policy].InUseWait). A discarded response (one that is retried) is read to
// its end and closed, so its connection is reused, when its body fits in
// the response buffer plus 64 KiB; a longer one is closed after that much,
// which closes its connection (the next attempt opens another) rather than
// reading an unbounded body nobody will use. With [WithAttemptTimeout], the
// drain of a streamed body ends at the attempt's deadline too (a stalled
// body is closed there, and the retry goes on).
//
// # What it returns
//
// The final response, intact, when an attempt got one that is not retried
// or when the attempts ran out on a retryable status (a 503 after the last
// attempt is returned as a response, like http.Client does; under
// [WithErrorOnExhausted] the call ends instead with an [*Error] whose
// Reason is [ErrAttemptsExhausted] and which keeps that response). An [*Error]
// naming the key, attempts and cause otherwise; when the call stopped
// after a response that is one of the contract's problems (the key still
// in use at the deadline or when the in-use wait ran out), the Error
// carries it too ([Error].Problem, which errors.As finds as a
// [*ProblemError]). Attempts (and [Attempt].N, and the attempt header)
// count every attempt sent, those answered in use included.
//
// A Doer is safe for concurrent use.
type Doer struct {
	inner  HTTPDoer
	policy Policy
	cfg    config
	// nestedWarned: the Doer logged that another Doer's attempts pass
	// through it (warnNested), once.
	nestedWarned atomic.Bool
}

type config struct {
	clock          Clock
	random         func() float64
	hook           func(context.Context, Attempt)
	callHook       func(context.Context, CallEnd)
	logger         *slog.Logger
	attemptTimeout time.Duration
	match          Matcher
	respBuffer     int64
	bodyLimit      int64
	retryAfterMax  time.Duration
	attemptHeader  string
	keyGen         KeyGenerator
	safe           *Policy
	budget         *RetryBudget
	errOnExhausted bool
}

// Option configures a [Doer].
type Option func(*config)

// WithClock sets the clock (default [SystemClock]); tests pass one whose
// Sleep returns at once.
func WithClock(c Clock) Option { return func(o *config) { o.clock = c } }

// WithRandom sets the source of jitter draws in [0, 1) (default
// math/rand/v2's Float64). It must be safe for concurrent use.
func WithRandom(f func() float64) Option { return func(o *config) { o.random = f } }

// WithRetryBudget makes the Doer's retries take tokens from b, a bucket
// that may be shared by several Doers (see [RetryBudget]); a retry the
// bucket cannot pay for stops the call with [ErrRetryBudgetExhausted].
// Off by default (nil): retries are bounded by each call's policy alone.
func WithRetryBudget(b *RetryBudget) Option { return func(o *config) { o.budget = b } }

// WithErrorOnExhausted makes a call whose attempts ran out on an answer
// the policy retries (a status On lists, a 503 IDEMPOTENCY_STORE_UNAVAILABLE,
// an IDEMPOTENCY_KEY_IN_USE under a policy of one attempt) end with an
// [*Error] whose Reason is [ErrAttemptsExhausted] instead of that
// response: errors.Is(err, ErrAttemptsExhausted) then tells "the service
// kept failing" from the API's own answers, and the Error keeps the last
// answer: its Status, RetryAfter, Problem (a contract problem, which
// errors.As finds) and Response (its body in memory, which need not be
// closed); a call that stops before the next retry on such an answer
// ([ErrRetryAfterTooLong], [ErrNoTimeLeft], [ErrRetryBudgetExhausted],
// [ErrInUseWaitExhausted]), which ends with an error either way, keeps
// that answer's Response too. Off by default: the last response is
// returned with a nil error, as http.Client returns a 503 (and a
// generated helper's [Call.Check] reports a contract problem in it). An
// answer the policy does not retry is returned as always, whatever its
// status.
func WithErrorOnExhausted() Option { return func(o *config) { o.errOnExhausted = true } }

// WithSafeRetries makes the Doer retry requests of the safe methods (GET,
// HEAD, OPTIONS, TRACE), which no [Call] carries and the matcher does not
// match, under policy p (its zero fields the contract defaults): the same
// attempts, backoff, statuses, Retry-After and deadline rules as an
// idempotent call's, the in-use wait aside, but no key is added (the
// request is sent as it is: a safe method has no effect to repeat). Off
// by default: such requests pass through, sent once. Give p statuses a
// safe request may succeed after (408, 429, 502, 503, 504, say): the
// contract defaults ([DefaultPolicy]) include 409 and 500. A body without
// GetBody is buffered for replay as for any call (up to the request body
// limit); a larger one is sent once, as without the option. Of a response
// that is not retried, the body is read within the attempt only when its
// length is known and within the response buffer: a success of unknown
// length (server-sent events, a long poll, a watch, a download) streams
// at once, and a connection lost mid-body reaches the caller's read; an
// error status is read as for any call.
func WithSafeRetries(p Policy) Option { return func(o *config) { o.safe = &p } }

// safeMethod reports whether m is a safe method (RFC 9110, 9.2.1).
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
		return true
	}
	return false
}

// WithCallHook calls fn once per call the Doer manages, when it ends
// (after its last attempt, or before any when it failed before sending),
// with its outcome, its number of attempts and its total time: the event
// for per-call metrics (the attempt hook's are per attempt). fn runs on
// the calling goroutine, before Do returns.
func WithCallHook(fn func(context.Context, CallEnd)) Option {
	return func(o *config) { o.callHook = fn }
}

// WithAttemptHook calls fn after every attempt, with what happened and what
// comes next. fn runs on the calling goroutine.
func WithAttemptHook(fn func(context.Context, Attempt)) Option {
	return func(o *config) { o.hook = fn }
}

// WithLogger logs every attempt of managed requests: at Debug when it ends
// the call with a response, Info when a retry follows, Warn when the call
// gives up with an error. A line names the URL without its password and
// query values ([Attempt].URL), and never the body.
func WithLogger(l *slog.Logger) Option { return func(o *config) { o.logger = l } }

// WithAttemptTimeout bounds each attempt (sending, waiting for the response
// and reading the buffered part of its body, or the head of a JSON error
// body) to d, the time the server takes to answer a request it runs at
// once; an attempt that times out is a connection error (retried when
// On.Connection is set). An attempt the server may hold before it answers
// gets d plus the policy's InFlightWait (the contract's in-flight.wait: a
// server holds a duplicate, a request whose key is in flight, up to that
// long, then answers the first request's replay or
// IDEMPOTENCY_KEY_IN_USE): every retry, and a first attempt whose key was
// supplied (WithKey, a key the request or a typed key parameter carries,
// a [KeyGenerator]'s), which another call may be running (a double click
// that reuses the key). Only a first attempt with a key the Doer (or
// [Call.FixKey]) just created, which nobody else holds, keeps d alone. So
// a held attempt is not cut short and counted a failure although the
// operation completed. The Doer's drain of a streamed response it
// discards ends at the attempt's deadline too. 0 (the default) means
// attempts are bounded only by the context.
func WithAttemptTimeout(d time.Duration) Option { return func(o *config) { o.attemptTimeout = d } }

// WithDoerKeyGenerator makes the Doer create keys with gen instead of
// [NewKey]: for requests without a key of their own (a call's
// [WithKeyGenerator] wins); a generator that fails or returns "" fails the
// call with [ErrKeyGenerator], nothing sent. Keys a generated helper creates for a typed key
// parameter are made before the Doer sees the request: give those helpers
// [WithKeyGenerator].
func WithDoerKeyGenerator(gen KeyGenerator) Option { return func(o *config) { o.keyGen = gen } }

// WithMatcher manages requests without a [Call] that m matches.
func WithMatcher(m Matcher) Option { return func(o *config) { o.match = m } }

// WithResponseBuffer sets how many bytes of a response body are read within
// the attempt (default 1 MiB); n <= 0 streams bodies (a connection lost
// mid-body then reaches the caller's read instead of being retried), but
// for the first 64 KiB of a JSON error body, read for its problem code.
func WithResponseBuffer(n int64) Option { return func(o *config) { o.respBuffer = n } }

// WithRequestBodyLimit sets how large a request body may be when it must be
// buffered for replay (default 8 MiB, [DefaultRequestBodyLimit]); a larger
// one fails with [ErrBodyNotReplayable] before anything is sent.
// math.MaxInt64 means no limit; n <= 0 buffers nothing, so every non-empty
// body without GetBody (and every non-empty body under the body carrier)
// fails.
func WithRequestBodyLimit(n int64) Option { return func(o *config) { o.bodyLimit = max(n, 0) } }

// WithRetryAfterLimit sets the longest server-asked wait the Doer honours
// even without a deadline (default 1 minute, [DefaultRetryAfterLimit]); a
// retryable response asking for longer stops the call with
// [ErrRetryAfterTooLong]. Like the other options, d is taken as given, not
// as "the default" when zero: 0 honours no wait at all (any positive
// Retry-After stops the call, an IDEMPOTENCY_KEY_IN_USE included, while
// a response without one, or with Retry-After: 0, is retried on the
// backoff), and a negative d means 0. There is no unlimited setting: pass a
// long d; the context's deadline still bounds every wait.
func WithRetryAfterLimit(d time.Duration) Option {
	return func(o *config) { o.retryAfterMax = max(d, 0) }
}

// WithAttemptHeader makes every attempt carry header name with the attempt
// number (1, 2, ...). Off by default: the value changes between attempts,
// so the server must leave this header out of its fingerprint (the contract
// fingerprints only the headers it names).
func WithAttemptHeader(name string) Option { return func(o *config) { o.attemptHeader = name } }

// NewDoer returns a Doer over inner with default policy p (zero fields take
// the contract defaults).
func NewDoer(inner HTTPDoer, p Policy, opts ...Option) *Doer {
	cfg := config{
		clock:         SystemClock,
		random:        rand.Float64,
		respBuffer:    DefaultResponseBuffer,
		bodyLimit:     DefaultRequestBodyLimit,
		retryAfterMax: DefaultRetryAfterLimit,
	}
	for _, o := range opts {
		o(&cfg)
	}
	return &Doer{inner: inner, policy: p, cfg: cfg}
}

type attemptKey struct{}

// Do sends req, retrying it as the Doer's documentation says when it is managed.
func (d *Doer) Do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	call := CallFromContext(ctx)
	// An attempt of an outer Doer's call (the request carries that call,
	// or none: a matched call's) passes through. A request on an attempt's
	// context that carries a Call of its own is another logical call
	// (an in-process handler calling a downstream service on its
	// request's context): managed as any.
	if outer, _ := ctx.Value(attemptKey{}).(*Call); outer != nil && (call == nil || call == outer) {
		if outer.sender != d && d.nestedWarned.CompareAndSwap(false, true) {
			d.warnNested(req)
		}
		return d.inner.Do(req)
	}
	var (
		p       = d.policy
		managed = call != nil
	)
	if d.cfg.match != nil {
		if mp, ok := d.cfg.match(req); ok {
			p, managed = mp, true
		}
	}
	keyless := false // a safe method's request retried without a key (WithSafeRetries)
	if !managed && d.cfg.safe != nil && safeMethod(req.Method) {
		p, managed, keyless = *d.cfg.safe, true, true
		p.KeyOptional, p.KeylessDedupe = true, true
	}
	if !managed {
		return d.inner.Do(req)
	}
	if d.cfg.callHook == nil && d.cfg.logger == nil {
		return d.managed(ctx, req, call, p, keyless, nil)
	}
	start := d.cfg.clock.Now()
	end := CallEnd{Method: req.Method}
	resp, err := d.managed(ctx, req, call, p, keyless, &end)
	end.Duration = d.cfg.clock.Now().Sub(start)
	if err != nil {
		end.Err = err
		if e, ok := err.(*Error); ok {
			end.URL, end.Key, end.Attempts = e.URL, e.Key, e.Attempts
		}
	}
	d.reportEnd(ctx, end)
	return resp, err
}

// managed runs a request the Doer manages (call nil: matched without a
// Call, or a safe method's request, keyless) under base policy p; end,
// when not nil, gets what the call-end event reports of a call that ends
// with a response.
func (d *Doer) managed(ctx context.Context, req *http.Request, call *Call, p Policy, keyless bool, end *CallEnd) (*http.Response, error) {
	if call == nil {
		call = &Call{used: true, noKey: keyless, safe: keyless}
	} else if !call.claim() {
		closeBody(req)
		e := d.fail(req, call, ErrCallReused, nil)
		e.Attempts = 0 // this request sent nothing; the Call's count is its first request's
		return nil, e
	}
	p = call.effectivePolicy(p)
	if end != nil {
		end.Operation = p.Operation
	}
	if err := ctx.Err(); err != nil { // nothing is sent, no key is fixed
		closeBody(req)
		return nil, d.fail(req, call, err, context.Cause(ctx))
	}
	return d.run(ctx, req, call, p.WithDefaults(), end)
}

func (d *Doer) fail(req *http.Request, call *Call, reason, err error) *Error {
	return &Error{
		Method: req.Method, URL: redactedURL(req), Key: call.errKey(), Attempts: call.Attempts(),
		Reason: reason, Err: err,
	}
}

// redactedURL is req's URL as the Doer's errors and log lines name it:
// see redact.
func redactedURL(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	return redact(req.URL)
}

// redact returns u without its password (as URL.Redacted), without its
// fragment, and with the value of every query parameter replaced by xxxxx:
// a query may carry a credential (an API key given "in: query"), which the
// attempts' log lines and the errors people log must not spell out. A
// query pair without "=" is one text that may as well be a credential, so
// it is replaced whole. The call's key, which the query may carry too, is
// reported in its own field.
func redact(u *url.URL) string {
	if u.RawQuery == "" && u.Fragment == "" && u.RawFragment == "" {
		return u.Redacted()
	}
	c := *u
	c.Fragment, c.RawFragment = "", ""
	if c.RawQuery != "" {
		pairs := strings.Split(c.RawQuery, "&")
		for i, pair := range pairs {
			if name, _, ok := strings.Cut(pair, "="); ok {
				pairs[i] = name + "=xxxxx"
			} else if pair != "" {
				pairs[i] = "xxxxx"
			}
		}
		c.RawQuery = strings.Join(pairs, "&")
	}
	return c.Redacted()
}

// redactError redacts the URL of the *url.Error in err, the error
// http.Client returns, which names the request's URL (the last one it was
// redirected to) with its query; sent is the URL the attempt was sent to,
// named instead when the error's does not parse. A *url.Error that an
// inner HTTPDoer wrapped in errors of its own is found (errors.As) and its
// URL replaced in the whole message, the chain kept for errors.Is and
// errors.As.
func redactError(err error, sent *url.URL) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil {
		u = sent
	}
	redacted := &url.Error{Op: ue.Op, URL: redact(u), Err: ue.Err}
	if ue == err {
		return redacted
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), ue.URL, redacted.URL), err: err}
}

// redactedError is an error whose message names a redacted URL, with the
// original error beneath it.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// prepared is the request every attempt is cloned from, and how to get its body.
type prepared struct {
	tmpl    *http.Request
	first   io.ReadCloser                 // body of attempt 1
	getBody func() (io.ReadCloser, error) // body of later attempts
	// fresh: the key is one the Doer or Call.FixKey just created with
	// NewKey, which no other call holds, so that the server never holds
	// attempt 1 (in-flight.wait).
	fresh bool
	// once: the body cannot be replayed (a safe method's, too large to
	// buffer): one attempt.
	once bool
}

// setBody sets how the attempts get req's body: data when it was
// buffered (the key placed in it), else req's own.
func (pr *prepared) setBody(req *http.Request, hasBody bool, data []byte) {
	switch {
	case !hasBody:
		pr.getBody = func() (io.ReadCloser, error) { return req.Body, nil }
		pr.first = req.Body
	case data != nil:
		pr.getBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
		pr.first, _ = pr.getBody()
		pr.tmpl.ContentLength = int64(len(data))
	default:
		pr.first, pr.getBody = req.Body, req.GetBody
	}
	pr.tmpl.GetBody = pr.getBody
}

func (d *Doer) prepare(ctx context.Context, req *http.Request, call *Call, p Policy) (*prepared, error) {
	if err := p.validate(); err != nil {
		closeBody(req)
		return nil, d.fail(req, call, ErrInvalidPolicy, err)
	}
	if req.URL == nil {
		closeBody(req)
		return nil, d.fail(req, call, ErrNotRetryable, errors.New("request without a URL"))
	}
	if err := call.keyOptionErr(p); err != nil {
		closeBody(req)
		return nil, d.fail(req, call, ErrInvalidKey, err)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	pr := &prepared{tmpl: req.Clone(ctx)}
	if pr.tmpl.Header == nil {
		pr.tmpl.Header = http.Header{}
	}
	var data []byte // the body bytes, when buffered here
	if hasBody && (req.GetBody == nil || p.KeyCarrier == CarrierBody) {
		var err error
		r := req.Body
		if limit := d.cfg.bodyLimit; limit < math.MaxInt64 { // MaxInt64: no limit (limit+1 would overflow)
			r = io.NopCloser(io.LimitReader(req.Body, limit+1))
		}
		data, err = readAll(ctx, r, req.Body)
		if err == nil && ctx.Err() == nil && call.safe && int64(len(data)) > d.cfg.bodyLimit {
			// A safe method's request (WithSafeRetries) too large to
			// buffer is sent once, as it would be without the option:
			// the bytes read, then the rest.
			pr.first = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(data), req.Body), req.Body}
			pr.getBody, pr.tmpl.GetBody, pr.once = nil, nil, true
			return pr, nil
		}
		req.Body.Close()
		if ctx.Err() != nil {
			return nil, d.fail(req, call, ctx.Err(), fmt.Errorf("reading the request body: %w", err))
		}
		if err != nil {
			return nil, d.fail(req, call, ErrBodyNotReplayable, fmt.Errorf("reading the request body: %w", err))
		}
		if int64(len(data)) > d.cfg.bodyLimit {
			return nil, d.fail(req, call, ErrBodyNotReplayable,
				fmt.Errorf("body without GetBody larger than the %d-byte buffering limit", d.cfg.bodyLimit))
		}
	}

	if call.noKey { // sent as it is (WithoutKey), but for a carrier holding no key
		switch p.KeyCarrier {
		case CarrierHeader:
			// The nil UUID or an empty value (oapi-codegen writes the zero
			// value of a typed key parameter it always sends) is no key,
			// and the server would refuse it (400): no header, unless
			// one of its values carries a key (a real key after an empty
			// value is sent, not dropped with it).
			if vs := req.Header.Values(p.KeyName); len(vs) > 0 &&
				!slices.ContainsFunc(vs, func(v string) bool { return carried(v) != "" }) {
				pr.tmpl.Header.Del(p.KeyName)
			}
		case CarrierQuery:
			if existing, pairs, others := queryKey(req.URL.RawQuery, p.KeyName); existing == "" && pairs > 0 && !others {
				u := *req.URL
				u.RawQuery = withoutQueryKey(u.RawQuery, p.KeyName)
				pr.tmpl.URL = &u
			}
		}
		pr.setBody(req, hasBody, data)
		return pr, nil
	}
	key := call.supplied
	pr.fresh = key != "" && call.made
	if key == "" {
		var err error
		if key, err = call.newKey(d.cfg.keyGen, p.KeyFormat); err != nil {
			closeBody(req)
			return nil, d.fail(req, call, ErrKeyGenerator, err)
		}
		pr.fresh = call.keyGen == nil && d.cfg.keyGen == nil
	}
	var existing string
	switch p.KeyCarrier {
	case CarrierHeader:
		if existing = headerKey(req.Header, p.KeyName); existing == "" {
			pr.tmpl.Header.Set(p.KeyName, key)
		}
	case CarrierQuery:
		var (
			pairs  int
			others bool
		)
		existing, pairs, others = queryKey(req.URL.RawQuery, p.KeyName)
		if p.Ambiguous { // never add a parameter: only fill one that carries no key
			switch {
			case others:
				existing, key = "", ""
			case existing == "" && pairs > 0: // empty or the nil UUID
				u := *req.URL
				u.RawQuery = setQueryKey(u.RawQuery, p.KeyName, key)
				pr.tmpl.URL = &u
			case existing == "":
				key = ""
			case pairs > 1: // the key and empty repeats, which the server refuses: one pair
				u := *req.URL
				u.RawQuery = setQueryKey(u.RawQuery, p.KeyName, existing)
				pr.tmpl.URL = &u
			}
			break
		}
		if others {
			if data == nil {
				closeBody(req)
			}
			return nil, d.fail(req, call, ErrKeyConflict,
				fmt.Errorf("request carries more than one key in query parameter %s", p.KeyName))
		}
		if existing == "" || pairs > 1 { // exactly one pair: the key
			u := *req.URL
			u.RawQuery = setQueryKey(u.RawQuery, p.KeyName, cmp.Or(existing, key))
			pr.tmpl.URL = &u
		}
	case CarrierBody:
		if p.Ambiguous { // never add a member: only fill one that carries no key
			if !hasBody {
				key = ""
				break
			}
			toks, _ := parsePointer(p.KeyName) // validated
			switch out, ex, err := fillBodyKey(data, toks, key); {
			case err != nil: // no member to fill (or no JSON object): sent unchanged
				key = ""
			case ex != "":
				existing = ex
			default: // "", null or the nil UUID: filled
				data = out
			}
			break
		}
		if !hasBody {
			return nil, d.fail(req, call, ErrBadKeyCarrier, errors.New("the key goes in the body, but the request has none"))
		}
		toks, _ := parsePointer(p.KeyName) // validated
		out, ex, err := setBodyKey(data, toks, key)
		if err != nil {
			return nil, d.fail(req, call, ErrBadKeyCarrier, err)
		}
		data, existing = out, ex
	}
	if existing != "" {
		if call.supplied != "" && existing != call.supplied {
			if data == nil {
				closeBody(req)
			}
			return nil, d.fail(req, call, ErrKeyConflict,
				fmt.Errorf("request carries %q, call supplied %q", existing, call.supplied))
		}
		if existing != key || !call.made { // not the key FixKey just made (a typed parameter carries that)
			pr.fresh = false
		}
		key = existing
	}
	if !p.Ambiguous { // an ambiguous request's key may be another operation's member: as is
		if err := checkKey(key, p); err != nil {
			if data == nil {
				closeBody(req)
			}
			return nil, d.fail(req, call, ErrInvalidKey, err)
		}
	}

	pr.setBody(req, hasBody, data)
	if err := call.setKey(ctx, key); err != nil {
		if pr.first != nil {
			pr.first.Close()
		}
		return nil, d.fail(req, call, ErrKeyNotRecorded, err)
	}
	return pr, nil
}

func (d *Doer) run(ctx context.Context, req *http.Request, call *Call, p Policy, end *CallEnd) (*http.Response, error) {
	if p.Ambiguous { // it may be an operation that is not idempotent: once
		p.MaxAttempts = 1
	}
	if call.noKey && !p.KeylessDedupe { // a retry without a key may run it again: once
		p.MaxAttempts = 1
	}
	call.setClock(d.cfg.clock)
	pr, err := d.prepare(ctx, req, call, p)
	if err != nil {
		return nil, err
	}
	if pr.once {
		p.MaxAttempts = 1
	}
	// The attempts' context names the call they are attempts of (and,
	// through call.sender, the Doer sending them): see Do.
	call.sender = d
	actx := context.WithValue(ctx, attemptKey{}, call)
	seq := p.Backoff.sequence()
	key := call.Key()
	var (
		// counted: the attempts that count toward MaxAttempts (all but
		// those answered IDEMPOTENCY_KEY_IN_USE); n numbers every attempt.
		counted int
		// ceiling: the backoff ceiling of the next counted retry (-1: not
		// drawn from seq yet); in-use answers wait on it without advancing it.
		ceiling = time.Duration(-1)
		// firstInUse: when the call's first in-use answer came (by the
		// Doer's clock; zero before it). p.InUseWait bounds the time
		// elapsed since, the in-use attempts' own durations included.
		firstInUse time.Time
		// paid: the tokens the call's last retry took from the budget.
		paid int
	)
	for n := 1; ; n++ {
		at := Attempt{Operation: p.Operation, Method: req.Method, URL: redactedURL(req), Key: key, N: n}
		sent := d.cfg.clock.Now()
		// head: the start of an error response's JSON body.
		resp, head, err := d.attempt(actx, pr, call, n, p)
		// now: when the response (or the error) came.
		now := d.cfg.clock.Now()
		at.Duration = now.Sub(sent)

		retry := false
		if err != nil {
			if ctx.Err() != nil { // the caller stopped
				at.Err, at.Class = err, ClassCanceled
				d.report(ctx, at, true)
				return nil, d.fail(req, call, ctx.Err(), err)
			}
			at.Err, at.Class = err, Classify(err)
			if at.Class == ClassCanceled { // not the caller's context: an inner timeout or cancel
				at.Class = ClassPermanent
				if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
					at.Class = ClassConnection
				}
			}
			if errors.Is(err, errAttemptTimeout) {
				at.Class = ClassConnection
			}
			retry = at.Class == ClassConnection && p.On.Connection
			if !retry {
				d.report(ctx, at, true)
				return nil, d.fail(req, call, ErrNotRetryable, err)
			}
		} else {
			at.Status = resp.StatusCode
			at.Code = head.code()
			at.Replayed = replayed(resp.Header)
			retry = retryStatus(at.Status, at.Code, at.Replayed, p.On)
			if ra, ok := ParseRetryAfter(resp.Header, now); ok {
				at.RetryAfter = ra
			}
		}
		// An in-use answer (the key's first request still runs, or its
		// crashed holder's lease has not run out) is waited out without
		// counting toward MaxAttempts: p.InUseWait bounds the time since
		// the first of them. Under
		// MaxAttempts 1 (retries disabled, or an ambiguous request) nothing
		// is waited out.
		inUse := retry && err == nil && at.Code == CodeKeyInUse
		// first: the call's first in-use answer, whose wait is always
		// allowed (bounded, as every wait, by the Retry-After limit and the
		// deadline), even when longer than InUseWait, unless InUseWait is
		// below Backoff.Initial: that turns the in-use wait off.
		first := inUse && firstInUse.IsZero()
		if !inUse {
			counted++
		} else if first {
			firstInUse = now
		}
		// The problem the response carried, for an error that ends the call.
		lastProblem := func(e *Error) *Error {
			e.Status, e.RetryAfter = at.Status, at.RetryAfter
			if resp != nil {
				if e.Problem = problemError(resp.StatusCode, resp.Header, head.p, head.ok, now); e.Problem != nil {
					e.Problem.Key, e.Problem.Attempts = e.Key, e.Attempts
				}
			}
			return e
		}
		if !retry || p.MaxAttempts <= 1 || (!inUse && counted >= p.MaxAttempts) {
			// exhausted: the last answer is one the policy retries, and the
			// attempts ran out (WithErrorOnExhausted makes it an error).
			exhausted := retry && err == nil && d.cfg.errOnExhausted
			d.report(ctx, at, err != nil || exhausted)
			if err != nil {
				return nil, d.fail(req, call, ErrAttemptsExhausted, err)
			}
			if exhausted {
				// Under a single attempt too (MaxAttempts 1, an ambiguous
				// request, WithoutKey without KeylessDedupe, a body sent
				// once): the attempts allowed ran out on an answer the
				// policy retries, as a connection error then ends with
				// ErrAttemptsExhausted; returning it as a response would
				// let a failing service pass for an answer under the option.
				why := ""
				if p.MaxAttempts <= 1 {
					why = "; the call was allowed one attempt, no retry"
				}
				e := lastProblem(d.fail(req, call, ErrAttemptsExhausted,
					fmt.Errorf("the last answer, %d, is one the policy retries (WithErrorOnExhausted)%s", at.Status, why)))
				e.Response = d.keep(resp)
				return nil, e
			}
			if d.cfg.budget != nil && !retry && at.Status < 400 { // a success (2xx, 3xx)
				d.cfg.budget.succeeded(paid)
			}
			if end != nil {
				end.URL, end.Key, end.Attempts = at.URL, key, call.Attempts()
				end.Status, end.Code, end.Replayed = at.Status, at.Code, at.Replayed
			}
			return resp, nil
		}

		// Wait: max(backoff, server's ask), within the deadline.
		if ceiling < 0 {
			ceiling = min(seq.NextBackOff(), p.Backoff.Max)
		}
		delay := p.Backoff.jitter(ceiling, d.cfg.random())
		wait := max(delay, at.RetryAfter)
		if inUse {
			// At least Backoff.Initial (> 0): a server answering in use
			// without a Retry-After ends at the bound, in at most
			// InUseWait/Initial + 1 answers (fewer when they take time).
			wait = max(wait, p.Backoff.Initial)
		} else {
			ceiling = -1 // the next counted retry draws the next one
		}
		stop := error(nil)
		dl, hasDeadline := ctx.Deadline()
		left := time.Duration(0)
		if hasDeadline {
			left = dl.Sub(d.cfg.clock.Now())
		}
		switch {
		case at.RetryAfter > d.cfg.retryAfterMax:
			stop = ErrRetryAfterTooLong
			err = fmt.Errorf("longer than the Retry-After limit of %v (WithRetryAfterLimit)", d.cfg.retryAfterMax)
		case hasDeadline && wait >= left:
			stop = ErrNoTimeLeft
			if at.RetryAfter > 0 && at.RetryAfter >= left { // the server asked for it
				stop = ErrRetryAfterTooLong
				// The deadline is the limit: errors.Is(err, context.DeadlineExceeded) holds.
				err = deadlineLimit{fmt.Sprintf("beyond the context deadline, %v away", max(left, 0).Round(time.Millisecond))}
			}
		case first && p.InUseWait < p.Backoff.Initial,
			inUse && !first && now.Sub(firstInUse) > p.InUseWait-wait:
			elapsed := max(now.Sub(firstInUse), 0)
			stop = ErrInUseWaitExhausted
			err = fmt.Errorf("%v since the first %s answer; %v more would pass the in-use wait of %v (Policy.InUseWait)",
				elapsed.Round(time.Millisecond), CodeKeyInUse, wait, p.InUseWait)
		}
		if stop == nil && !inUse && d.cfg.budget != nil {
			if paid = d.cfg.budget.take(err != nil && errors.Is(err, errAttemptTimeout)); paid == 0 {
				stop = ErrRetryBudgetExhausted
				if err != nil {
					err = fmt.Errorf("the retry budget has %d tokens left, too few for a retry after: %w", d.cfg.budget.Tokens(), err)
				} else {
					err = fmt.Errorf("the retry budget has %d tokens left, too few for a retry", d.cfg.budget.Tokens())
				}
			}
		}
		if stop != nil {
			d.report(ctx, at, true)
			e := lastProblem(d.fail(req, call, stop, err))
			if resp != nil && d.cfg.errOnExhausted {
				// An answer the policy retries ends the call with an
				// error: it is kept, as when the attempts ran out.
				e.Response = d.keep(resp)
			} else {
				d.discard(resp)
			}
			return nil, e
		}
		at.Retry, at.Delay = true, wait
		d.report(ctx, at, false)
		d.discard(resp)
		if err := d.cfg.clock.Sleep(ctx, wait); err != nil {
			return nil, lastProblem(d.fail(req, call, ctx.Err(), err))
		}
	}
}

var errAttemptTimeout = errors.New("idemclient: attempt timed out")

// satAdd returns a + b for non-negative durations, saturated.
func satAdd(a, b time.Duration) time.Duration {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// deadlineLimit is the cause of an ErrRetryAfterTooLong whose bound was the
// context's deadline: it matches context.DeadlineExceeded, as
// ErrNoTimeLeft does.
type deadlineLimit struct{ msg string }

func (e deadlineLimit) Error() string      { return e.msg }
func (deadlineLimit) Is(target error) bool { return target == context.DeadlineExceeded }

// readAll reads r (the request body, body) to its end within ctx: when
// ctx ends first, body is closed (which stops a read blocked on a pipe or
// a connection) and readAll returns ctx's error at once, leaving a read
// that closing does not stop to its goroutine, which ends when the read
// returns. The goroutine reads r no more once readAll returned: body may
// be http.NewRequest's NopCloser around the caller's plain io.Reader, and
// only the Read under way then may still touch it.
func readAll(ctx context.Context, r io.Reader, body io.Closer) ([]byte, error) {
	if ctx.Done() == nil {
		return io.ReadAll(r)
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	sr := &stopReader{r: r}
	go func() {
		data, err := io.ReadAll(sr)
		done <- result{data, err}
	}()
	select {
	case res := <-done:
		return res.data, res.err
	case <-ctx.Done():
		sr.stop.Store(true) // no Read after the one under way
		body.Close()
		return nil, context.Cause(ctx)
	}
}

// stopReader reads r until stop is set.
type stopReader struct {
	r    io.Reader
	stop atomic.Bool
}

var errReadStopped = errors.New("idemclient: body read stopped: the call ended")

func (s *stopReader) Read(p []byte) (int, error) {
	if s.stop.Load() {
		return 0, errReadStopped
	}
	return s.r.Read(p)
}

// headMax is how much of a JSON error body the Doer reads, within the
// attempt, to find its problem code.
const headMax = 64 << 10

// bodyHead is the problem in the start of a JSON error body, read within
// its attempt (at most headMax bytes) and decoded once (decodeProblem,
// even when the body goes on past them): its code decides the retry, and
// the whole problem goes into the error of a call that ends on it. ok is
// false when there is no such body, or it does not decode.
type bodyHead struct {
	p  problemMembers
	ok bool
}

// code returns the `code` member of the problem the head holds ("" for
// none).
func (h bodyHead) code() string { return h.p.Code }

// attempt sends attempt n (counting it in call once it is sent: not when
// its body cannot be had) and reads, within the attempt, up to the buffer
// limit of its body, and at least the head (headMax bytes) of a JSON error
// body, which it returns.
func (d *Doer) attempt(actx context.Context, pr *prepared, call *Call, n int, p Policy) (*http.Response, bodyHead, error) {
	body := pr.first
	if n > 1 && pr.first != nil {
		var err error
		if body, err = pr.getBody(); err != nil {
			return nil, bodyHead{}, fmt.Errorf("%w: GetBody: %w", ErrBodyNotReplayable, err)
		}
	}
	cancel := context.CancelCauseFunc(func(error) {})
	var (
		timer    *time.Timer
		deadline time.Time
	)
	timeout := d.cfg.attemptTimeout
	if timeout > 0 && (n > 1 || !pr.fresh) { // the server may hold it up to in-flight.wait
		timeout = satAdd(timeout, p.InFlightWait)
	}
	if timeout > 0 {
		actx, cancel = context.WithCancelCause(actx)
		deadline = time.Now().Add(timeout)
		timer = time.AfterFunc(timeout, func() { cancel(errAttemptTimeout) })
	}
	done := func() { stopTimer(timer); cancel(nil) }
	areq := pr.tmpl.Clone(actx)
	areq.Body = body
	if d.cfg.attemptHeader != "" {
		areq.Header.Set(d.cfg.attemptHeader, strconv.Itoa(n))
	}
	call.countAttempt()
	resp, err := d.inner.Do(areq)
	err = redactError(err, areq.URL)
	timedOut := func(err error) error {
		if cause := context.Cause(actx); cause == errAttemptTimeout {
			return fmt.Errorf("%w after %v: %w", errAttemptTimeout, timeout, err)
		}
		return err
	}
	if err != nil {
		done()
		return nil, bodyHead{}, timedOut(err)
	}
	limit := max(d.cfg.respBuffer, 0)
	problem := resp.StatusCode >= 400 && jsonBody(resp.Header)
	if problem { // its code decides the retry: read it before the timer stops
		limit = max(limit, headMax)
	}
	// A safe method's answer that is not retried may be a stream (server-sent
	// events, a long poll, a watch, a download): read within the attempt
	// only when its length is known and within the buffer.
	if call.safe && resp.StatusCode < 400 && !p.On.Status(resp.StatusCode) && (resp.ContentLength < 0 || resp.ContentLength > limit) {
		limit = 0
	}
	if limit == 0 {
		stopTimer(timer)
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel, timer: timer, deadline: deadline}
		return resp, bodyHead{}, nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		resp.Body.Close()
		done()
		return nil, bodyHead{}, timedOut(fmt.Errorf("reading the response body: %w", err))
	}
	more := int64(len(buf)) == limit // the body may go on: the rest streams
	var h bodyHead
	if problem {
		h.p, h.ok = decodeProblem(buf[:min(len(buf), headMax)], len(buf) > headMax || more)
	}
	if !more {
		resp.Body.Close()
		done()
		resp.Body = io.NopCloser(bytes.NewReader(buf))
		return resp, h, nil
	}
	// Longer than the buffer: the rest streams under the call's context.
	stopTimer(timer)
	resp.Body = &cancelBody{
		ReadCloser: struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body},
		cancel: cancel, timer: timer, deadline: deadline,
	}
	return resp, h, nil
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// cancelBody is a body that streams past the attempt: closing it releases
// the attempt's context. timer (nil without an attempt timeout) cancels
// that context once re-armed: the Doer's own drain of a discarded body
// runs within the attempt's deadline.
type cancelBody struct {
	io.ReadCloser
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	deadline time.Time
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// retryStatus decides whether a response is retried.
//
// A replay (Idempotent-Replayed: true) is final whatever its status: the
// server stored that answer for the key (a 5xx under `failures: replay`, a
// 409 the handler returned), and every retry with the key would get it
// again until the window ends. A 503 IDEMPOTENCY_STORE_UNAVAILABLE or an
// in-flight answer is not a replay and keeps its rule. A 500
// IDEMPOTENCY_RECORD_UNREADABLE is final too: the key's record is corrupt,
// and retrying will not mend it.
func retryStatus(status int, code string, replayed bool, on RetryOn) bool {
	switch {
	case neverRetried(status), code == CodeKeyReused, code == CodeResponseUnavailable, code == CodeRecordUnreadable, replayed:
		return false
	case code == CodeKeyInUse: // the contract's in-flight status, 409 by default
		return true
	}
	return on.Status(status)
}

// replayed reports whether a response is the server's replay of the
// key's stored response (Idempotent-Replayed: true).
func replayed(h http.Header) bool {
	return strings.EqualFold(strings.TrimSpace(h.Get("Idempotent-Replayed")), "true")
}

// jsonBody reports whether a response body is JSON or problem+json: the
// Doer reads the head of such a body of any error status (the in-flight
// status is the contract's choice) for its problem code.
func jsonBody(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/problem+json" || mt == "application/json"
}

// discard drains and closes a response that will not be returned: what
// the attempt buffered and up to 64 KiB more from the connection, so that
// the connection is reused when the body ends there. With an attempt
// timeout, a streamed body is drained within what is left of the
// attempt's: a stalled body is cut there (its connection closed), and one
// whose attempt has no time left is closed at once.
func (d *Doer) discard(resp *http.Response) { d.drain(resp, nil) }

// drain is discard, first copying into kept (when not nil) up to
// max(the response buffer, 64 KiB) of the body, within the same bound of
// the attempt's deadline.
func (d *Doer) drain(resp *http.Response, kept *bytes.Buffer) {
	if resp == nil {
		return
	}
	if cb, ok := resp.Body.(*cancelBody); ok && cb.timer != nil {
		left := time.Until(cb.deadline)
		if left <= 0 {
			resp.Body.Close()
			return
		}
		cb.timer.Reset(left)
		defer cb.timer.Stop()
	}
	if kept != nil {
		_, _ = io.CopyN(kept, resp.Body, max(d.cfg.respBuffer, headMax))
	}
	const more = 64 << 10
	limit := max(d.cfg.respBuffer, 0)
	if limit > math.MaxInt64-more {
		limit = math.MaxInt64
	} else {
		limit += more
	}
	_, _ = io.CopyN(io.Discard, resp.Body, limit)
	resp.Body.Close()
}

// keep returns resp, the last response of a call that ends with an
// error under WithErrorOnExhausted, with its body in memory: a body that
// streams past the attempt (longer than the response buffer) is read up
// to max(the buffer, 64 KiB), the rest discarded and its connection
// released (within the attempt's deadline, as discard drains), so that
// the caller, who gets an error, need not close it.
func (d *Doer) keep(resp *http.Response) *http.Response {
	if _, ok := resp.Body.(*cancelBody); ok {
		var kept bytes.Buffer
		d.drain(resp, &kept)
		resp.Body = io.NopCloser(&kept)
	}
	return resp
}

// reportEnd gives the end of a call to the call hook and the logger
// (Debug).
func (d *Doer) reportEnd(ctx context.Context, end CallEnd) {
	if d.cfg.callHook != nil {
		d.cfg.callHook(ctx, end)
	}
	if d.cfg.logger != nil && d.cfg.logger.Enabled(ctx, slog.LevelDebug) {
		d.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "idemclient call", slog.Any("call", end))
	}
}

func (d *Doer) report(ctx context.Context, a Attempt, giveUp bool) {
	if d.cfg.hook != nil {
		d.cfg.hook(ctx, a)
	}
	if d.cfg.logger == nil {
		return
	}
	level := slog.LevelDebug
	switch {
	case a.Retry:
		level = slog.LevelInfo
	case giveUp:
		level = slog.LevelWarn
	}
	d.cfg.logger.LogAttrs(ctx, level, "idemclient attempt", slog.Any("attempt", a))
}

// warnNested logs, once per Doer, that req is an attempt of another Doer
// (or a request without a Call made on one's context) passing through d: d's options (hook, logger, attempt timeout,
// Retry-After limit, ...) do not apply to it. The usual cause is an SDK
// that wraps d in an HTTP doer of its own, which a generated
// NewIdempotentClient wrapped in a second Doer: see [DoerWrapper]. It
// logs to d's logger, else to slog's default one.
func (d *Doer) warnNested(req *http.Request) {
	l := d.cfg.logger
	if l == nil {
		l = slog.Default()
	}
	l.LogAttrs(req.Context(), slog.LevelWarn,
		"idemclient: a Doer receives the attempts of another Doer and passes them through: its own options (attempt hook, logger, attempt timeout, Retry-After limit, ...) do not apply; make the HTTP doer that wraps it implement idemclient.DoerWrapper so that the generated client keeps it; a new logical call made on an attempt's context (an in-process handler's r.Context()) is managed once it carries its own Call (idemclient.Start)",
		slog.String("method", req.Method), slog.String("url", redactedURL(req)))
}
