package contract

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
)

// Built-in defaults, the lowest layer of the merge.
const (
	DefaultWindow          = 24 * time.Hour
	DefaultKeyHeader       = "Idempotency-Key"
	DefaultKeyFormat       = ir.FormatToken
	DefaultKeyMaxLength    = 255
	DefaultConflictStatus  = 422
	DefaultInFlightStatus  = 409
	DefaultRetryAfter      = 2 * time.Second
	DefaultLease           = 30 * time.Second
	DefaultWait            = 0
	DefaultFailures        = ir.FailuresRetry
	DefaultMaxBytes        = 1 << 20 // response.max-bytes and request.max-bytes
	DefaultMaxAttempts     = 4
	DefaultBackoffInitial  = 500 * time.Millisecond
	DefaultBackoffMax      = 8 * time.Second
	DefaultBackoffMultiply = 2.0
	DefaultJitter          = ir.JitterFull
	// WindowRetryFactor: the window must be at least this many times the
	// client's longest retry span.
	WindowRetryFactor = 1.5
)

// DefaultScope is the default key space: per principal (and per operation, always).
func DefaultScope() []string { return []string{"principal"} }

// DefaultRetryOn is the default retry.on list.
func DefaultRetryOn() []string {
	return []string{"connection", "408", "409", "425", "429", "500", "502", "503", "504"}
}

// retryableClientErrors are the 4xx statuses a client may retry with the
// same key: the request itself was fine.
var retryableClientErrors = []int{408, 409, 425, 429}

// Resolved is a merged block with every default filled.
type Resolved struct {
	Policy ir.Policy
	Key    ir.Key
	Block  Block // the merged block, for positions
}

// Resolve fills the defaults of a merged block and checks the policy as a
// whole. It returns ok=false when the policy is unusable (no semantics):
// the rest is still resolved and checked, with loose semantics standing in
// (the checks that depend on the semantics keep quiet), so the caller can
// report the block's other errors, and must then leave the operation out.
func Resolve(b Block) (Resolved, diag.List, bool) {
	var diags diag.List
	r := Resolved{Block: b}
	pol := &r.Policy
	ok := b.Semantics.Set
	switch {
	case ok:
		pol.Semantics = b.Semantics.V
	case b.Semantics.Pos.IsZero():
		diags.Errorf(b.Pos, "semantics-missing", "x-idempotency: semantics is missing (strict, loose or window), neither here nor at the document root")
		fallthrough
	default: // a bad value, reported by Parse
		pol.Semantics = ir.Loose // the placeholder
	}
	pol.Window = orDefault(b.Window, DefaultWindow)

	// Key.
	k := &r.Key
	k.Carrier, k.Name = ir.CarrierHeader, DefaultKeyHeader
	if b.Key.Carrier.Set {
		k.Carrier, k.Name = b.Key.Carrier.V, b.Key.Name.V
	}
	k.Required = pol.Semantics != ir.Window
	if b.Key.Required.Set {
		k.Required = b.Key.Required.V
	}
	k.Format = orDefault(b.Key.Format, DefaultKeyFormat)
	k.MaxLength = orDefault(b.Key.MaxLength, DefaultKeyMaxLength)
	k.Pos = ir.FirstPos(b.Key.Carrier.Pos, b.Key.Pos, b.Pos)
	if k.Format != ir.FormatToken && k.MaxLength < 36 {
		diags.Errorf(ir.FirstPos(b.Key.MaxLength.Pos, b.Key.Format.Pos), "bad-value", "key.max-length %d is shorter than a %s (36 characters)", k.MaxLength, k.Format)
	}
	if !k.Required && pol.Semantics != ir.Window && ok {
		diags.Warnf(ir.FirstPos(b.Key.Required.Pos, b.Pos), "key-optional", "key.required is false with %s semantics: a request without a key is not deduplicated at all", pol.Semantics)
	}

	pol.Volatile = pointers(b.Volatile.V)
	pol.Unordered = pointers(b.Unordered.V)
	// Header names keep the spec's spelling (the documentation prints
	// them); the runtime canonicalizes them, and the parser has refused
	// two spellings of one name.
	pol.FingerprintHeaders = values(b.FingerprintHeaders.V)
	compatible(b, pol, &diags, ok)
	if b.Scope.Set {
		pol.Scope = []string{}
		for _, s := range b.Scope.V {
			if !slices.Contains(pol.Scope, s.V) {
				pol.Scope = append(pol.Scope, s.V)
			}
		}
		if !slices.Contains(pol.Scope, "principal") {
			diags.Warnf(b.Scope.Pos, "scope-without-principal", "scope has no principal: two callers who pick the same key share one record, and one may get the other's response")
		}
	} else {
		pol.Scope = DefaultScope()
	}
	pol.ConflictStatus = orDefault(b.ConflictStatus, DefaultConflictStatus)
	if ok {
		noEffect(b, pol.Semantics, k.Required, &diags)
	}
	if !ok || !fingerprintInert(pol.Semantics, k.Required) {
		unstableHeaders(b, &diags)
	}
	pol.InFlight = ir.InFlight{
		Status:     orDefault(b.InFlight.Status, DefaultInFlightStatus),
		RetryAfter: orDefault(b.InFlight.RetryAfter, DefaultRetryAfter),
		Lease:      orDefault(b.InFlight.Lease, DefaultLease),
		Wait:       orDefault(b.InFlight.Wait, DefaultWait),
	}
	pol.Failures = orDefault(b.Failures, DefaultFailures)
	pol.Response.MaxBytes = orDefault(b.Response.MaxBytes, DefaultMaxBytes)
	pol.Response.Headers = append([]string{}, values(b.Response.Headers.V)...)
	pol.Request.MaxBytes = orDefault(b.Request.MaxBytes, DefaultMaxBytes)

	rt := &pol.Retry
	rt.MaxAttempts = orDefault(b.Retry.MaxAttempts, DefaultMaxAttempts)
	rt.Backoff = ir.Backoff{
		Initial:    orDefault(b.Retry.Initial, DefaultBackoffInitial),
		Max:        orDefault(b.Retry.Max, DefaultBackoffMax),
		Multiplier: orDefault(b.Retry.Multiplier, DefaultBackoffMultiply),
		Jitter:     orDefault(b.Retry.Jitter, DefaultJitter),
	}
	var on []Field[string]
	if b.Retry.On.Set {
		on = b.Retry.On.V
	} else {
		def := ir.FirstPos(b.Retry.Pos, b.ConflictStatus.Pos, b.Pos)
		for _, s := range DefaultRetryOn() {
			on = append(on, Field[string]{V: s, Pos: def})
		}
	}
	rt.On = []string{}
	rt.Statuses = []int{}
	for _, e := range on {
		rt.On = append(rt.On, e.V)
		if e.V == "connection" {
			rt.Connection = true
			continue
		}
		code, _ := strconv.Atoi(e.V)
		rt.Statuses = append(rt.Statuses, code)
		switch {
		case code >= 400 && code < 500 && !slices.Contains(retryableClientErrors, code) &&
			code == pol.InFlight.Status && code != http.StatusBadRequest && code != http.StatusUnprocessableEntity:
			// The contract's own in-flight status (423, say) is allowed: the
			// client waits out IDEMPOTENCY_KEY_IN_USE by its code at any
			// status, so listing it is redundant for the in-flight answer
			// and also retries the handler's own answers with that status.
			// (400 and 422 are refused below and by in-flight-status-final.)
		case code >= 400 && code < 500 && !slices.Contains(retryableClientErrors, code):
			diags.Errorf(e.Pos, "retry-on-client-error", "retry.on: %d means the request itself is wrong; retrying it with the same key gets the same answer (retry only 408, 409, 425, 429 among 4xx)", code)
		case code == pol.ConflictStatus && code == 409 && pol.Semantics == ir.Strict:
			diags.Warnf(ir.FirstPos(e.Pos, b.ConflictStatus.Pos), "retry-on-conflict-status", "retry.on: 409 is also this operation's conflict-status; the client helper must tell IDEMPOTENCY_KEY_IN_USE (retry) from IDEMPOTENCY_KEY_REUSED (do not) by the problem code")
		case code < 400:
			diags.Errorf(e.Pos, "retry-on-client-error", "retry.on: %d is not an error status", code)
		}
	}
	slices.Sort(rt.Statuses)

	// Consistency of the whole.
	if rt.Backoff.Max < rt.Backoff.Initial {
		diags.Errorf(ir.FirstPos(b.Retry.Max.Pos, b.Retry.Initial.Pos, b.Retry.Pos, b.Pos), "backoff-max-below-initial",
			"retry.backoff.max %s is below retry.backoff.initial %s", ir.FormatDuration(rt.Backoff.Max), ir.FormatDuration(rt.Backoff.Initial))
	}
	if pol.Window < pol.InFlight.Lease {
		diags.Errorf(ir.FirstPos(b.Window.Pos, b.InFlight.Lease.Pos, b.Pos), "window-shorter-than-lease",
			"window %s is shorter than in-flight.lease %s: a key could be forgotten while its first request still runs", ir.FormatDuration(pol.Window), ir.FormatDuration(pol.InFlight.Lease))
	}
	span := rt.LongestSpan()
	if !rt.Connection && len(rt.Statuses) == 0 {
		span = 0 // retry.on: []: one attempt, nothing retried
	}
	if need := retryWindow(span); pol.Window < need {
		diags.Errorf(ir.FirstPos(b.Window.Pos, b.Retry.Pos, b.Pos), "window-shorter-than-retry",
			"window %s is shorter than %.1f × the client's longest retry span %s (= %s): a late retry would run the operation again", ir.FormatDuration(pol.Window), WindowRetryFactor, ir.FormatDuration(span), ir.FormatDuration(need))
	}
	if st := pol.InFlight.Status; st == http.StatusBadRequest || st == http.StatusUnprocessableEntity {
		diags.Errorf(ir.FirstPos(b.InFlight.Status.Pos, b.Pos), "in-flight-status-final",
			"in-flight.status %d is an answer clients never retry (idemgen's client helper included): a duplicate told that its key is in use would give up instead of waiting for the first request; use 409 (the default), 423, 429 or 503", st)
	}
	if pol.InFlight.Wait > pol.InFlight.Lease {
		diags.Warnf(ir.FirstPos(b.InFlight.Wait.Pos, b.Pos), "wait-longer-than-lease",
			"in-flight.wait %s is longer than in-flight.lease %s: a waiting duplicate may take over the first request's lease", ir.FormatDuration(pol.InFlight.Wait), ir.FormatDuration(pol.InFlight.Lease))
	}
	return r, diags, ok
}

// retryWindow is the shortest window a client whose longest retry span is
// span needs: span × WindowRetryFactor, saturating at the largest Duration
// (a float64 beyond it does not convert to a Duration).
func retryWindow(span time.Duration) time.Duration {
	if f := float64(span) * WindowRetryFactor; f < math.MaxInt64 {
		return time.Duration(f)
	}
	return math.MaxInt64
}

func orDefault[T any](f Field[T], def T) T {
	if f.Set {
		return f.V
	}
	return def
}

// RuleCompatibleNoEffect is the rule of the warning that a
// compatible-fingerprints entry (or the whole list) recognizes nothing more.
const RuleCompatibleNoEffect = "compatible-fingerprints-no-effect"

// compatible resolves compatible-fingerprints into pol: each entry whole, a
// list it leaves out the current one (pol's, filled already). It warns of
// an entry that is the current settings or an earlier entry's, and of the
// list under loose or window semantics (sure: semantics is set), where the
// runtime recognizes a request with a key whatever its fingerprint (and
// one without a key, under window, by its current fingerprint only).
func compatible(b Block, pol *ir.Policy, diags *diag.List, sure bool) {
	if !b.CompatibleFingerprints.Set {
		return
	}
	current := pol.Fingerprint()
	var seen []int // the entries kept, by index
	for i, e := range b.CompatibleFingerprints.V {
		fs := ir.FingerprintSettings{
			Volatile:           orCurrent(e.Volatile, pol.Volatile, pointers),
			Unordered:          orCurrent(e.Unordered, pol.Unordered, pointers),
			FingerprintHeaders: orCurrent(e.FingerprintHeaders, pol.FingerprintHeaders, values),
			Pos:                e.Pos,
		}
		pol.CompatibleFingerprints = append(pol.CompatibleFingerprints, fs)
		if e.Refused || !sure || pol.Semantics != ir.Strict {
			continue
		}
		if fs.Same(current) {
			diags.Warnf(e.Pos, RuleCompatibleNoEffect, "compatible-fingerprints[%d] equals the current fingerprint settings (a list an entry leaves out is the current one), so it recognizes nothing more: list volatile, unordered and fingerprint-headers as the other release has them (the one before, or the one after)", i)
			continue
		}
		if j := slices.IndexFunc(seen, func(j int) bool { return fs.Same(pol.CompatibleFingerprints[j]) }); j >= 0 {
			diags.Warnf(e.Pos, "duplicate-entry", "compatible-fingerprints[%d] equals compatible-fingerprints[%d] (a list an entry leaves out is the current one); delete one", i, seen[j])
			continue
		}
		seen = append(seen, i)
	}
	if !sure || len(b.CompatibleFingerprints.V) == 0 {
		return
	}
	switch pol.Semantics {
	case ir.Loose:
		diags.Warnf(b.CompatibleFingerprints.Pos, RuleCompatibleNoEffect, "compatible-fingerprints has no effect a client sees under loose semantics, which replay a retry with the key of a request made under other settings whatever its fingerprint (a listed setting's match only keeps the retry from being reported as EventLooseMismatch); a loose release needs no entry in the two-release procedure")
	case ir.Window:
		diags.Warnf(b.CompatibleFingerprints.Pos, RuleCompatibleNoEffect, "compatible-fingerprints has no effect under window semantics: a retry with the key of a request made under other settings gets its replay whatever its fingerprint, and a request without a key is found by its current fingerprint only")
	}
}

// Rules of the warnings that a setting does nothing under the operation's
// semantics (besides RuleCompatibleNoEffect, and unordered-no-effect's
// pointers that name values that are not arrays).
const (
	RuleConflictStatusNoEffect     = "conflict-status-no-effect"
	RuleVolatileNoEffect           = "volatile-no-effect"
	RuleUnorderedNoEffect          = "unordered-no-effect"
	RuleFingerprintHeadersNoEffect = "fingerprint-headers-no-effect"
)

// noEffect warns of the settings of b that do nothing under semantics sem
// (with the key required or not): conflict-status under loose and window
// semantics, which never refuse a request for its fingerprint; volatile,
// unordered and fingerprint-headers where the fingerprint only tells
// which replays are reported as EventLooseMismatch: under loose semantics,
// and under window semantics with the key required (no request is found
// by its fingerprint). (Such a list still shapes the fingerprints the
// records keep, which a strict release before or after this one compares:
// the warning says so.) A setting the operation inherits from the document
// root is not reported when the operation gives the semantics (or the
// key's required) itself: the root's setting is there for the others.
func noEffect(b Block, sem ir.Semantics, required bool, diags *diag.List) {
	// own: the operation (not the root) says why the setting does nothing.
	own := b.base == nil || b.Semantics.Pos != b.base.Semantics.Pos
	inert := func(pos, basePos ir.Pos) bool {
		return !(own && b.base != nil && pos == basePos)
	}
	if b.ConflictStatus.Set && sem != ir.Strict && inert(b.ConflictStatus.Pos, baseOf(b, func(r *Block) ir.Pos { return r.ConflictStatus.Pos })) {
		diags.Warnf(b.ConflictStatus.Pos, RuleConflictStatusNoEffect, "conflict-status has no effect under %s semantics, which never refuse a retry with the key of another request: it gets the first one's replay (conflict-status is the status of IDEMPOTENCY_KEY_REUSED, under strict semantics only)", sem)
	}
	var why string
	switch {
	case !fingerprintInert(sem, required):
		return
	case sem == ir.Loose:
		why = "under loose semantics: a retry with the key of an earlier request gets its replay whatever its fingerprint"
	case sem == ir.Window && required:
		own = own || (b.base != nil && b.Key.Required.Pos != b.base.Key.Required.Pos)
		why = "under window semantics with key.required: true: every request has a key, and a retry with the key of an earlier request gets its replay whatever its fingerprint (only a request without a key is found by it)"
	}
	for _, f := range []struct {
		name, rule string
		field      Field[[]Field[string]]
		base       func(*Block) ir.Pos
	}{
		{"volatile", RuleVolatileNoEffect, b.Volatile, func(r *Block) ir.Pos { return r.Volatile.Pos }},
		{"unordered", RuleUnorderedNoEffect, b.Unordered, func(r *Block) ir.Pos { return r.Unordered.Pos }},
		{"fingerprint-headers", RuleFingerprintHeadersNoEffect, b.FingerprintHeaders, func(r *Block) ir.Pos { return r.FingerprintHeaders.Pos }},
	} {
		if !f.field.Set || len(f.field.V) == 0 || !inert(f.field.Pos, baseOf(b, f.base)) {
			continue
		}
		diags.Warnf(f.field.Pos, f.rule, "%s has no effect a client sees %s; it only keeps a retry that differs there from being reported as EventLooseMismatch, and shapes the fingerprints stored in records, which a strict release before or after this one compares during a deploy (keep it as that release has it while both may run)", f.name, why)
	}
}

// fingerprintInert reports whether the fingerprint only tells which
// replays are reported as EventLooseMismatch under semantics sem (with the
// key required or not): loose semantics, and window semantics with the
// key required (noEffect).
func fingerprintInert(sem ir.Semantics, required bool) bool {
	return sem == ir.Loose || (sem == ir.Window && required)
}

// unstableHeaders warns, at the entry, of a header b's fingerprint-headers
// lists whose value changes between the attempts of one call
// (RuleFingerprintHeaderPerAttempt): under strict semantics a retry after
// it changed (a refreshed token) is refused 422 IDEMPOTENCY_KEY_REUSED
// instead of getting its replay. Resolve calls it only where the list has
// an effect (not where fingerprint-headers-no-effect applies); a list the
// operations inherit from the root is warned of once (diag.List.Sorted
// drops the same warning at the same entry).
func unstableHeaders(b Block, diags *diag.List) {
	const what = "fingerprint-headers"
	for _, h := range b.FingerprintHeaders.V {
		if why := UnstableHeader(h.V); why != "" {
			diags.Warnf(h.Pos, RuleFingerprintHeaderPerAttempt, "%s lists %s, whose value changes between the attempts of one call: %s; a retry that sends another value (after a token refresh, say) is refused 422 IDEMPOTENCY_KEY_REUSED (strict) instead of getting its replay, or, without a key (window), is taken for another request; remove it from %s, or silence [%s] for the operation if its value never changes within a call", what, http.CanonicalHeaderKey(strings.TrimSpace(h.V)), why, what, RuleFingerprintHeaderPerAttempt)
		}
	}
}

// baseOf is the position get returns of b's base, the zero Pos when b has
// none.
func baseOf(b Block, get func(*Block) ir.Pos) ir.Pos {
	if b.base == nil {
		return ir.Pos{}
	}
	return get(b.base)
}

// pointers is the IR's form of a list of JSON pointers as written, nil for
// none.
func pointers(l []Field[string]) []ir.Pointer {
	var out []ir.Pointer
	for _, v := range l {
		out = append(out, ir.Pointer{Pointer: v.V, Pos: v.Pos})
	}
	return out
}

// values is the values of a list as written, without their positions, nil
// for none.
func values[T any](l []Field[T]) []T {
	var out []T
	for _, v := range l {
		out = append(out, v.V)
	}
	return out
}

// orCurrent is a list of a compatible-fingerprints entry: conv of the list
// the entry gives, or a copy of the current one (cur) when it leaves it out.
func orCurrent[T any](f Field[[]Field[string]], cur []T, conv func([]Field[string]) []T) []T {
	if !f.Set {
		return slices.Clone(cur)
	}
	return conv(f.V)
}
