package idemclient

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Contract defaults for a [Policy] (the `retry` block of `x-idempotency`).
const (
	DefaultMaxAttempts = 4
	DefaultInitial     = 500 * time.Millisecond
	DefaultMax         = 8 * time.Second
	DefaultMultiplier  = 2.0
	DefaultKeyName     = "Idempotency-Key"

	// DefaultLease and DefaultInFlightRetryAfter are the contract's
	// defaults of in-flight.lease and in-flight.retry-after, from which a
	// zero [Policy.InUseWait] is derived.
	DefaultLease              = 30 * time.Second
	DefaultInFlightRetryAfter = 2 * time.Second

	// WindowRetryFactor: a policy's Window must be at least this many
	// times its [Policy.LongestSpan], the margin the generator requires of
	// a contract (its window-shorter-than-retry) for the attempts' own
	// durations and the server's clock.
	WindowRetryFactor = 1.5
)

// DefaultStatuses are the response statuses retried by default, besides
// connection errors: 408, 409, 425, 429, 500, 502, 503, 504.
var DefaultStatuses = []int{
	http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests,
	http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
}

// Jitter is how a backoff delay is randomized below its ceiling.
type Jitter uint8

const (
	// JitterFull draws the delay uniformly from [0, ceiling] (the contract's default).
	JitterFull Jitter = iota
	// JitterEqual draws the delay uniformly from [ceiling/2, ceiling].
	JitterEqual
	// JitterNone waits exactly the ceiling.
	JitterNone
)

func (j Jitter) String() string {
	switch j {
	case JitterFull:
		return "full"
	case JitterEqual:
		return "equal"
	case JitterNone:
		return "none"
	}
	return fmt.Sprintf("Jitter(%d)", uint8(j))
}

// ParseJitter parses the contract's spelling: full, equal or none.
func ParseJitter(s string) (Jitter, error) {
	switch s {
	case "full", "":
		return JitterFull, nil
	case "equal":
		return JitterEqual, nil
	case "none":
		return JitterNone, nil
	}
	return 0, fmt.Errorf("idemclient: unknown jitter %q (want full, equal or none)", s)
}

// Backoff is the exponential backoff of a [Policy]. The ceiling of the delay
// before retry n (n = 1 for the wait after the first attempt) is
//
//	ceiling(n) = min(Max, Initial × Multiplier^(n-1))
//
// and the delay itself is drawn below the ceiling as [Jitter] says.
// Zero fields take the contract defaults (500ms, 8s, 2, full).
type Backoff struct {
	// Initial is the ceiling of the first delay (default 500ms).
	Initial time.Duration
	// Max caps every ceiling (default 8s).
	Max time.Duration
	// Multiplier is the growth of the ceiling from one retry to the next
	// (default 2; at least 1).
	Multiplier float64
	// Jitter is how a delay is drawn below its ceiling (default JitterFull).
	Jitter Jitter
}

// Ceiling returns the largest delay before retry n (n >= 1) of a defaulted b.
// The sequence is computed by cenkalti/backoff's ExponentialBackOff with a
// zero randomization factor (growth, cap and overflow guard are the
// library's); the jitter is applied on top by [Backoff.Delay].
func (b Backoff) Ceiling(n int) time.Duration {
	if n < 1 {
		return 0
	}
	b = b.withDefaults()
	eb := b.sequence()
	var d time.Duration
	for range n {
		d = eb.NextBackOff()
		if d >= b.Max {
			return b.Max
		}
	}
	return d
}

// sequence returns the library's deterministic exponential sequence for a defaulted b.
func (b Backoff) sequence() *backoff.ExponentialBackOff {
	eb := &backoff.ExponentialBackOff{
		InitialInterval:     b.Initial,
		RandomizationFactor: 0,
		Multiplier:          b.Multiplier,
		MaxInterval:         b.Max,
	}
	eb.Reset()
	return eb
}

// Delay returns the delay before retry n for a uniform random draw u in
// [0, 1): full jitter gives u × ceiling, equal jitter ceiling/2 + u × ceiling/2,
// none the ceiling. Out-of-range u is clamped.
func (b Backoff) Delay(n int, u float64) time.Duration {
	return b.withDefaults().jitter(b.Ceiling(n), u)
}

func (b Backoff) jitter(ceiling time.Duration, u float64) time.Duration {
	if !(u >= 0) { // also NaN
		u = 0
	}
	if u > 1 {
		u = 1
	}
	switch b.Jitter {
	case JitterFull:
		return scale(ceiling, u)
	case JitterEqual:
		half := ceiling / 2
		return ceiling - half + scale(half, u)
	default:
		return ceiling
	}
}

// scale returns u × d for u in [0, 1], at most d: float64(d) rounds up
// near the largest Duration, and a product at or beyond it would convert
// to a negative Duration.
func scale(d time.Duration, u float64) time.Duration {
	if f := u * float64(d); f < float64(d) {
		return time.Duration(f)
	}
	return d
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial == 0 {
		b.Initial = DefaultInitial
	}
	if b.Max == 0 {
		b.Max = DefaultMax
	}
	if b.Multiplier == 0 {
		b.Multiplier = DefaultMultiplier
	}
	return b
}

// RetryOn says which failures are retried: connection errors (see
// [Classify]) and response statuses. The zero RetryOn (no connection, no
// statuses) takes the contract default (connection plus [DefaultStatuses]);
// to disable retries set [Policy.MaxAttempts] to 1.
//
// Whatever it lists, 400 and 422, and any response whose problem+json code is
// IDEMPOTENCY_KEY_REUSED or IDEMPOTENCY_RESPONSE_UNAVAILABLE, are never
// retried: retrying cannot change them. Nor is a replay (a response with
// Idempotent-Replayed: true, such as a stored 5xx under the contract's
// `failures: replay`): the key's stored answer is final. A response whose code is
// IDEMPOTENCY_KEY_IN_USE is always waited out, at whatever status other
// than 400 and 422 it comes (the contract's in-flight status, 409 by
// default), without counting toward MaxAttempts: for up to
// [Policy.InUseWait] after the first in-use answer (see [Doer]).
type RetryOn struct {
	// Connection retries connection errors: the request may not have
	// reached the server, or its answer was lost (see [Classify]).
	Connection bool
	// Statuses lists the response statuses retried (400 and 422 never are).
	Statuses []int
}

// IsZero reports whether o lists nothing.
func (o RetryOn) IsZero() bool { return !o.Connection && len(o.Statuses) == 0 }

// Status reports whether o retries status s (never 400 or 422).
func (o RetryOn) Status(s int) bool {
	if neverRetried(s) {
		return false
	}
	return slices.Contains(o.Statuses, s)
}

func neverRetried(s int) bool {
	return s == http.StatusBadRequest || s == http.StatusUnprocessableEntity
}

// KeyFormat is the format of keys a helper creates.
type KeyFormat string

const (
	// FormatUUID (the zero value, and "uuid") creates UUID version 7 keys.
	FormatUUID KeyFormat = "uuid"
	// FormatUUIDv7 creates UUID version 7 keys (time-ordered: good for index locality).
	FormatUUIDv7 KeyFormat = "uuidv7"
	// FormatUUIDv4 creates UUID version 4 keys (fully random).
	FormatUUIDv4 KeyFormat = "uuidv4"
	// FormatToken accepts any visible ASCII; the helper creates UUID version 7 strings.
	FormatToken KeyFormat = "token"
)

// KeyCarrier is where a request carries its key.
type KeyCarrier uint8

const (
	// CarrierHeader: the request header KeyName (the zero value; default Idempotency-Key).
	CarrierHeader KeyCarrier = iota
	// CarrierQuery: the query parameter KeyName.
	CarrierQuery
	// CarrierBody: the member of the JSON request body at the RFC 6901 pointer KeyName.
	CarrierBody
)

func (c KeyCarrier) String() string {
	switch c {
	case CarrierHeader:
		return "header"
	case CarrierQuery:
		return "query"
	case CarrierBody:
		return "body"
	}
	return fmt.Sprintf("KeyCarrier(%d)", uint8(c))
}

// Policy is the client half of an operation's contract: how often and when
// to retry, and how the key is made and carried. Generated code emits one
// Policy per operation from the `retry` and `key` blocks; zero fields take
// the contract defaults (see [DefaultPolicy]).
type Policy struct {
	// MaxAttempts bounds the attempts, the first included (default 4; 1
	// disables retries, the wait on IDEMPOTENCY_KEY_IN_USE included).
	// Attempts answered IDEMPOTENCY_KEY_IN_USE do not count: InUseWait
	// bounds them.
	MaxAttempts int
	// Backoff says how long to wait before each retry (default 500ms to
	// 8s, ×2, full jitter); a Retry-After the response sends may ask for
	// longer.
	Backoff Backoff
	// On says which failures are retried (default: connection errors and
	// [DefaultStatuses]).
	On RetryOn
	// InUseWait bounds how long a call keeps waiting on
	// IDEMPOTENCY_KEY_IN_USE answers (the key's first request still runs,
	// or its holder crashed and its lease has not run out yet), as the time
	// elapsed since the call's first such answer, by the Doer's clock: the
	// waits and the attempts' own durations alike (a server with
	// in-flight.wait > 0 holds each duplicate up to that long before it
	// answers in use). Those answers are waited out (each for max(backoff,
	// Retry-After), at least Backoff.Initial) without counting toward
	// MaxAttempts, until a wait would end more than InUseWait after the
	// first in-use answer: the call then ends with [ErrInUseWaitExhausted]
	// (the context's deadline and the Doer's Retry-After limit still bound
	// each wait, as for every answer). No attempt is sent later than
	// InUseWait after the first in-use answer, so the call ends at most one
	// attempt's duration after that, with one exception: the wait after the
	// first in-use answer is always allowed (within the deadline and the
	// Retry-After limit), so a Retry-After longer than InUseWait is waited
	// once. An InUseWait below Backoff.Initial turns the in-use wait off:
	// the call ends at the first in-use answer, while the other answers are
	// still retried (MaxAttempts 1 turns both off). Zero takes the default: 30s (the
	// contract's default lease) + max(2s (its default in-flight
	// retry-after), Backoff.Max), 38s with the default backoff, so that a
	// crashed holder's lease runs out and a retry takes the key over.
	// Generated policies set it from the operation's in-flight block:
	// lease + max(retry-after in whole seconds, as the server sends it,
	// backoff max). Why the margin: a holder that had crashed by the call's
	// first in-use answer loses the key at most `lease` after it, and no
	// wait between two answers is longer than max(Retry-After,
	// Backoff.Max), so the last attempt the bound allows is answered after
	// the lease ran out (a server holding it takes the key over when the
	// lease runs out). With heartbeats, a holder that crashes later keeps
	// the key until its last heartbeat + lease, which may be past the bound.
	InUseWait time.Duration
	// InFlightWait is the contract's in-flight.wait: how long the server
	// holds a duplicate (a request whose key is in flight) before it
	// answers, with the first request's replay once that ends, or
	// IDEMPOTENCY_KEY_IN_USE when the wait runs out (0, the default: it
	// answers at once). A per-attempt timeout ([WithAttemptTimeout]) is
	// extended by it for every attempt the server may hold (see [Doer]), so
	// that a held attempt is not cut short and counted a failure although
	// the operation completed. Generated policies set it from the
	// operation's in-flight block.
	InFlightWait time.Duration
	// KeyFormat is the format of the keys the helper creates (default
	// FormatUUID: UUID version 7). It is not required of a supplied key
	// unless EnforceKeyFormat says so.
	KeyFormat KeyFormat
	// EnforceKeyFormat says the server requires KeyFormat (generated
	// policies set it: it is the contract's key.format): a key the caller
	// supplies ([WithKey], [Call.FixKey], a typed key parameter, a key
	// the request carries, one a [KeyGenerator] makes) must then be in it,
	// as the server reads it (runtime/idem's ParseKey: the same code):
	// for uuid, uuidv4 and uuidv7 the canonical text of an RFC 9562 UUID
	// (either case; variant 10xx, version 1 to 8, or that version; not the
	// nil or max UUID), for token visible ASCII; not empty; not longer than
	// KeyMaxLength nor the server's 255 characters; a quoted RFC 8941
	// string well formed. Another key fails with [ErrInvalidKey] before
	// anything is sent, instead of the server's 400. False (the zero value, and
	// [DefaultPolicy]): KeyFormat is only the format of the keys the
	// helper creates, and a supplied key's format is left to the server.
	EnforceKeyFormat bool
	// KeyCarrier is where a request carries its key (default
	// CarrierHeader).
	KeyCarrier KeyCarrier
	// KeyName is the header name, query parameter name or JSON pointer of the key
	// (default Idempotency-Key; required for the query and body carriers).
	KeyName string
	// KeyMaxLength is the longest key the server accepts, in characters
	// (the contract's key.max-length; generated policies set it). 0 (the
	// default) leaves the length to the server. A longer key, whether
	// supplied ([WithKey], [Call.FixKey]) or carried by the request, fails
	// with [ErrInvalidKey] before anything is sent, instead of the server's
	// 400. The keys the [Doer] creates are UUIDs of 36 characters: under a
	// KeyMaxLength below 36 every call needs a supplied key. (A supplied
	// key's format is checked against KeyFormat only under
	// EnforceKeyFormat; see there.) An ambiguous request (Ambiguous) is not
	// checked.
	KeyMaxLength int
	// Ambiguous marks a request that may be an operation that is not
	// idempotent (the generated suffix matcher sets it when an idempotent
	// route and one that is not both serve the request). It is sent once,
	// whatever MaxAttempts, and the Doer adds a key to it only as a header
	// (which an operation that does not know it ignores): under the query
	// and body carriers it never adds a parameter or member the request
	// does not carry, and only fills one that carries no key (the nil
	// UUID, empty, or a null member) with a new key, since two calls must
	// not share the nil UUID; a request without one goes out unchanged,
	// without a key, and a key it carries is kept.
	Ambiguous bool
	// Operation names the operation the policy is the contract of (its
	// operationId; generated policies set it), as [Attempt] and [CallEnd]
	// report it: for metrics and logs by operation. It changes nothing in
	// how a call is made; "" for none.
	Operation string
	// KeyOptional says the server accepts a request without a key (the
	// contract's key.required: false; generated policies set it): a call
	// given [WithoutKey] may be made. Without it such a call fails with
	// [ErrInvalidKey], nothing sent.
	KeyOptional bool
	// KeylessDedupe says the server recognises a retry of a request
	// without a key by its fingerprint (the contract's window semantics:
	// the caller, the operation and the fingerprint act as the key;
	// generated policies set it, but for an operation whose fingerprint
	// covers headers, which may change between attempts): a call given
	// [WithoutKey] is retried as a keyed one is. Without it such a call is
	// sent once, since a retry might run the operation again. Set it only
	// when every attempt sends the same fingerprinted bytes and headers
	// (see [WithoutKey] for the limits).
	KeylessDedupe bool
	// Window is the operation's idempotency window (the contract's
	// window, for which the server remembers a key; generated policies
	// set it), 0 (the default) when unknown. A retry after it would find
	// the key forgotten and run the operation again, so a policy whose
	// LongestSpan × [WindowRetryFactor] exceeds Window is invalid
	// ([Policy.Validate]): the call fails with [ErrInvalidPolicy], nothing
	// sent. That is the generator's check of the contract
	// (window-shorter-than-retry), made again at run time for the policy a
	// call really uses, after [WithPolicyOverride]. Not checked: waits the
	// server asks for longer than the backoff (Retry-After, bounded by the
	// context's deadline) and in-use waits (InUseWait), which happen while
	// the server holds the key.
	Window time.Duration
}

// DefaultPolicy returns the contract defaults spelled out: 4 attempts,
// backoff 500ms..8s ×2 with full jitter, retry on connection errors and
// [DefaultStatuses], IDEMPOTENCY_KEY_IN_USE waited out for up to 38s, UUID
// v7 keys in the Idempotency-Key header.
func DefaultPolicy() Policy { return Policy{}.WithDefaults() }

// WithDefaults returns p with every zero field set to the contract default.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	p.Backoff = p.Backoff.withDefaults()
	if p.InUseWait == 0 {
		// The lease plus the longest wait between two attempts, as the
		// generator's ir.Policy.InUseWait computes it, saturated.
		p.InUseWait = time.Duration(math.MaxInt64)
		if margin := max(DefaultInFlightRetryAfter, p.Backoff.Max); margin <= math.MaxInt64-DefaultLease {
			p.InUseWait = DefaultLease + margin
		}
	}
	if p.On.IsZero() {
		p.On = RetryOn{Connection: true, Statuses: slices.Clone(DefaultStatuses)}
	}
	if p.KeyFormat == "" {
		p.KeyFormat = FormatUUID
	}
	if p.KeyName == "" && p.KeyCarrier == CarrierHeader {
		p.KeyName = DefaultKeyName
	}
	return p
}

// Validate reports the first problem of p after defaults: attempts below 1,
// a non-positive initial delay, a max below the initial delay, a multiplier
// below 1 (or not finite), an unknown jitter, key format or carrier, a
// missing key name, a negative in-use wait, in-flight wait, key max-length
// or window, a status outside 100..599, or a retry schedule that does not
// fit the window ([Policy].Window). Listing 400 or 422 is not
// an error here (the generator refuses it with a position); at run time they
// are simply never retried.
func (p Policy) Validate() error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	return nil
}

func (p Policy) validate() error {
	p = p.WithDefaults()
	var errs []error
	if p.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max-attempts %d < 1", p.MaxAttempts))
	}
	b := p.Backoff
	if b.Initial <= 0 {
		errs = append(errs, fmt.Errorf("backoff initial %v <= 0", b.Initial))
	}
	if b.Max < b.Initial {
		errs = append(errs, fmt.Errorf("backoff max %v < initial %v", b.Max, b.Initial))
	}
	if !(b.Multiplier >= 1) || math.IsInf(b.Multiplier, 0) {
		errs = append(errs, fmt.Errorf("backoff multiplier %v not a finite number >= 1", b.Multiplier))
	}
	if b.Jitter > JitterNone {
		errs = append(errs, fmt.Errorf("unknown jitter %v", b.Jitter))
	}
	switch p.KeyFormat {
	case FormatUUID, FormatUUIDv4, FormatUUIDv7, FormatToken:
	default:
		errs = append(errs, fmt.Errorf("unknown key format %q", p.KeyFormat))
	}
	switch p.KeyCarrier {
	case CarrierHeader, CarrierQuery:
		if p.KeyName == "" {
			errs = append(errs, fmt.Errorf("%v key carrier without a name", p.KeyCarrier))
		}
	case CarrierBody:
		if _, err := parsePointer(p.KeyName); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("unknown key carrier %v", p.KeyCarrier))
	}
	if p.InUseWait < 0 {
		errs = append(errs, fmt.Errorf("in-use wait %v < 0", p.InUseWait))
	}
	if p.InFlightWait < 0 {
		errs = append(errs, fmt.Errorf("in-flight wait %v < 0", p.InFlightWait))
	}
	if p.KeyMaxLength < 0 {
		errs = append(errs, fmt.Errorf("key max-length %d < 0", p.KeyMaxLength))
	}
	for _, s := range p.On.Statuses {
		if s < 100 || s > 599 {
			errs = append(errs, fmt.Errorf("retry status %d outside 100..599", s))
		}
	}
	if p.Window < 0 {
		errs = append(errs, fmt.Errorf("window %v < 0", p.Window))
	}
	if p.Window > 0 && len(errs) == 0 {
		// need as the generator computes it (window-shorter-than-retry),
		// truncated to the nanosecond and saturated, so that both accept
		// the same windows.
		span, need := p.LongestSpan(), time.Duration(math.MaxInt64)
		if f := float64(span) * WindowRetryFactor; f < math.MaxInt64 {
			need = time.Duration(f)
		}
		if p.Window < need {
			errs = append(errs, fmt.Errorf("the longest retry span %v (%d attempts, backoff %v to %v ×%v) × %v exceeds the operation's window %v: a retry after the window would run the operation again; fewer attempts or a shorter backoff",
				span, p.MaxAttempts, p.Backoff.Initial, p.Backoff.Max, p.Backoff.Multiplier, WindowRetryFactor, p.Window))
		}
	}
	return errors.Join(errs...)
}

// LongestSpan is the longest time the helper can spend waiting between the
// attempts of one call under its own backoff: the sum of the delay ceilings
// over the MaxAttempts-1 retries,
//
//	LongestSpan = Σ_{n=1}^{MaxAttempts-1} min(Max, Initial × Multiplier^(n-1))
//
// (defaults: 500ms + 1s + 2s = 3.5s). Jitter only shortens delays, so this
// is an upper bound for every jitter mode. It leaves out the attempts' own
// durations, any longer Retry-After a server asks for (those are bounded
// by the caller's context deadline, see [Doer]) and the waits on
// IDEMPOTENCY_KEY_IN_USE answers (bounded by InUseWait). The generator refuses a
// policy whose LongestSpan × 1.5 exceeds the operation's window.
func (p Policy) LongestSpan() time.Duration {
	p = p.WithDefaults()
	if p.MaxAttempts <= 1 {
		return 0
	}
	b := p.Backoff
	eb := b.sequence()
	var sum time.Duration
	for n := 1; n < p.MaxAttempts; n++ {
		d := min(eb.NextBackOff(), b.Max)
		if d == b.Max { // the rest of the retries all wait Max
			rest := time.Duration(p.MaxAttempts - n)
			if rest > (math.MaxInt64-sum)/b.Max {
				return time.Duration(math.MaxInt64)
			}
			return sum + rest*b.Max
		}
		sum += d
	}
	return sum
}
