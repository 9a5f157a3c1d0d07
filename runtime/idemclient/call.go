package idemclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/idemgen/idemgen/runtime/internal/keysyntax"
)

// Call is one logical call: one key, whatever the number of attempts.
// [Start] puts a Call into a context; a [Doer] that receives a request with
// that context adds the key and retries it. A Call serves one request only
// (a second request with the same Call fails with [ErrCallReused], since
// two requests sharing a key would be one request to the server).
//
// Its methods are safe for concurrent use.
type Call struct {
	supplied string
	// keyGiven: a key was supplied with WithKey, even "" (which fails the
	// call with ErrInvalidKey: a resume whose saved key is empty must not
	// run the operation again under a new key).
	keyGiven bool
	// noKey: the call sends no key (WithoutKey).
	noKey bool
	// safe: a safe method's request the Doer manages without a Call
	// (WithSafeRetries).
	safe bool
	// sender: the Doer sending the call's attempts, set before the first
	// (a nested Doer that receives one passes it through).
	sender    *Doer
	policy    *Policy
	overrides []func(*Policy)
	// effOnce, eff: the policy given with WithPolicy, edited by the
	// overrides, computed once per call (effectivePolicy).
	effOnce  sync.Once
	eff      Policy
	observer func(key string)
	recorder func(ctx context.Context, key string) error
	keyGen   KeyGenerator
	editors  []func(context.Context, *http.Request) error
	// made: the supplied key is one FixKey created (no concurrent call
	// can hold it), not the caller's.
	made bool
	// fixKeyDone: FixKey fixed the key (a second FixKey returns it).
	fixKeyDone bool

	mu       sync.Mutex
	used     bool
	fixed    bool // key set by the Doer
	key      string
	attempts int
	clock    Clock // the Doer's, once one handles the call
}

// CallOption configures a [Call].
type CallOption func(*Call)

// WithKey supplies the key instead of creating one: to resume a call after
// the caller's own crash, pass back the key persisted from [Call.Key] or
// [WithKeyObserver]. If the request already carries a different key, the
// call fails with [ErrKeyConflict]. It is one call's: options meant for
// every call (a generated client's WithCallOptions) must not hold it
// ([CheckClientOptions]).
//
// An empty key is not "no key": the call fails with [ErrInvalidKey],
// nothing sent (a resume whose saved key was lost must not run the
// operation again under a new key); to let the call make its key, give
// no WithKey.
func WithKey(key string) CallOption {
	return func(c *Call) { c.supplied, c.keyGiven, c.noKey = key, true, false }
}

// WithoutKey makes the call send no key, for an operation whose key is
// optional (the policy's KeyOptional; else the call fails with
// [ErrInvalidKey], nothing sent): under the contract's window semantics
// the server then recognises a duplicate by its fingerprint (the caller,
// the operation and the request), so that a double click, two calls with
// the same arguments within the window, runs the operation once, which
// two calls with a key each (two keys) would not. The call is retried
// when the policy's KeylessDedupe says the server dedupes such requests
// (generated policies of window operations without fingerprint headers),
// else sent once. Limits: a retry is recognised only when every attempt
// has the same fingerprint, so not when the fingerprint covers a header
// that changes between attempts (an Authorization a transport below the
// Doer refreshes or re-signs: generated policies of operations with
// fingerprint-headers leave KeylessDedupe false); a keyless record is not
// found under the contract's compatible-fingerprints, so across a rollout
// that changes the fingerprint a keyless retry may run again; and a
// keyless call is resumed (after a crash, say) by sending the same request
// again within the window, there being no key to save. A key the
// request carries all the same (a typed parameter the caller filled, an
// editor's header) is sent as is; a header or query parameter of the
// key's name that carries none (the nil UUID, which oapi-codegen writes
// for a typed key parameter it always sends, or an empty value: the
// server would refuse them with a 400) is dropped. The call's key is "" and no key
// observer is called. [WithKey] after it wins, and WithoutKey after
// WithKey.
func WithoutKey() CallOption {
	return func(c *Call) { c.noKey, c.supplied, c.keyGiven = true, "", false }
}

// WithKeyObserver calls fn with the call's key once it is fixed, before
// the first attempt is sent: the moment to persist it for a later resume.
// fn runs on the calling goroutine and must not block for long.
func WithKeyObserver(fn func(key string)) CallOption { return func(c *Call) { c.observer = fn } }

// WithKeyRecorder is [WithKeyObserver] for a caller that must not send
// the request unless the key is persisted: fn is called with the request's
// context and the call's key once it is fixed, before the first attempt
// (after an observer's fn), and an error it returns ends the call before
// anything is sent, with an [*Error] whose Reason is [ErrKeyNotRecorded]
// and whose Err is fn's error (errors.Is finds both): the key was not
// used, the operation did not run. fn runs on the calling goroutine.
func WithKeyRecorder(fn func(ctx context.Context, key string) error) CallOption {
	return func(c *Call) { c.recorder = fn }
}

// WithPolicy sets the call's policy, overriding the Doer's and its matcher's.
// Generated helpers pass their operation's policy this way, before the
// caller's options. A WithPolicy after another keeps the earlier one's
// window ([Policy].Window, the operation's, which generated policies
// carry) when p's is 0 or longer: the smaller non-zero window of the two
// stays, so that a hand-written policy given to a generated helper is
// checked against the operation's window, as a [WithPolicyOverride] is,
// rather than lifting the check.
func WithPolicy(p Policy) CallOption {
	return func(c *Call) {
		if c.policy != nil {
			p.Window = minWindow(c.policy.Window, p.Window)
		}
		c.policy = &p
	}
}

// minWindow returns the smaller non-zero window of a and b, 0 when both are.
func minWindow(a, b time.Duration) time.Duration {
	if a > 0 && (b <= 0 || b > a) {
		return a
	}
	return b
}

// WithPolicyOverride edits the call's policy, whichever it is (the one
// given with [WithPolicy], as a generated helper passes its operation's,
// else the Doer's matcher's or the Doer's), before its defaults are
// filled in: for one knob across operations, such as
//
//	idemclient.WithPolicyOverride(func(p *idemclient.Policy) { p.MaxAttempts = 2 })
//
// The edited policy is checked as any ([Policy.Validate]) before
// anything is sent, against the operation's window ([Policy].Window,
// which generated policies carry) too: an override whose retry schedule
// could outlast the window (its LongestSpan × [WindowRetryFactor] above
// it: a retry after the window would run the operation again) fails the
// call with [ErrInvalidPolicy], nothing sent. It is refused rather than
// clamped: a clamp would silently send fewer attempts, or wait less, than
// the override asked for, where an error shows at the first call (in a
// test) what to change. More attempts than the generated policy's are
// allowed when they fit the window: the window, not the contract's
// max-attempts, is what makes a retry safe. The override cannot lift the
// check: an edit of Window that lengthens it or sets it to 0 is undone.
//
// Several overrides apply in order, once per call (a generated helper
// whose key travels in a typed parameter reads the policy before the Doer
// does: both see the one edited policy). fn edits the call's own copy,
// whose On.Statuses is cloned first: it may edit that slice in place
// (slices.DeleteFunc) without changing the policy it came from, which a
// generated helper shares with every call of its operation. fn must not
// keep p.
func WithPolicyOverride(fn func(p *Policy)) CallOption {
	return func(c *Call) { c.overrides = append(c.overrides, fn) }
}

// KeyGenerator creates a new key in format f, in place of [NewKey]: for
// deterministic keys in tests, or keys with a prefix of one's own (which
// the server must accept: a uuid* format wants a UUID). It must be safe
// for concurrent use when shared by calls.
type KeyGenerator func(f KeyFormat) (string, error)

// WithKeyGenerator makes the call create its key with gen instead of
// [NewKey] (when no key is supplied or carried); it wins over the Doer's
// ([WithDoerKeyGenerator]). A key it makes is checked as a supplied one
// (the policy's KeyMaxLength, and its KeyFormat only under
// EnforceKeyFormat, which generated policies set). A generator that fails
// or returns "" fails the call with [ErrKeyGenerator], nothing sent.
// Generated helpers
// whose key travels in a typed parameter create the key before the Doer
// sees the request: give them this option (for every call at once,
// through the generated client's WithCallOptions), not the Doer's.
func WithKeyGenerator(gen KeyGenerator) CallOption { return func(c *Call) { c.keyGen = gen } }

// WithRequestEditors makes a generated helper pass fns to oapi-codegen's
// <Op>WithResponse as its per-call request editors (RequestEditorFn has
// this signature), after the client's own (WithRequestEditorFn): they
// edit the request once, before the [Doer] sees it, so what they set (a
// header on behalf of a user, a trace id) is carried by every attempt,
// as the rest of the request is. An editor that sets the key's header
// supplies the call's key as a request carrying one does, with a helper
// whose key travels in the header as a plain value; a helper whose key
// travels in a typed parameter has written its key there already, so a
// different key set by an editor fails the call with [ErrKeyConflict].
// An editor's error fails the call with [ErrRequestNotBuilt] (see
// [Call.RequestEditors]), nothing sent. Several
// WithRequestEditors add up. A request made by hand with [Start] is the
// caller's to edit: the Doer does not run them.
func WithRequestEditors(fns ...func(ctx context.Context, req *http.Request) error) CallOption {
	return func(c *Call) { c.editors = append(c.editors, fns...) }
}

// RequestEditors returns the editors given with [WithRequestEditors], for
// a generated helper to pass on. An error of one of them is returned as
// an [*Error] with [ErrRequestNotBuilt], the call's key and the editor's
// error (errors.Is finds it): the request was not sent.
func (c *Call) RequestEditors() []func(ctx context.Context, req *http.Request) error {
	if len(c.editors) == 0 {
		return nil
	}
	out := make([]func(context.Context, *http.Request) error, len(c.editors))
	for i, fn := range c.editors {
		out[i] = func(ctx context.Context, req *http.Request) error {
			if err := fn(ctx, req); err != nil {
				e := &Error{Key: c.Key(), Attempts: c.Attempts(), Reason: ErrRequestNotBuilt, Err: err}
				if req != nil {
					e.Method, e.URL = req.Method, redactedURL(req)
				}
				return e
			}
			return nil
		}
	}
	return out
}

// Start returns a context carrying a new [Call] configured by opts, and the
// Call, whose [Call.Key] and [Call.Attempts] tell, after the request, what
// happened. Typed helpers call Start; by hand:
//
//	ctx, call := idemclient.Start(ctx, idemclient.WithKey(saved))
//	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
//	resp, err := doer.Do(req)
func Start(ctx context.Context, opts ...CallOption) (context.Context, *Call) {
	c := &Call{}
	for _, o := range opts {
		o(c)
	}
	return context.WithValue(ctx, callKey{}, c), c
}

// Start begins a call under policy p: Start(ctx, WithPolicy(p), opts...),
// so options given later (even another WithPolicy) win. Generated helpers
// call it with their operation's policy:
//
//	ctx, call := claimCouponPolicy.Start(ctx, opts...)
func (p Policy) Start(ctx context.Context, opts ...CallOption) (context.Context, *Call) {
	return Start(ctx, append([]CallOption{WithPolicy(p)}, opts...)...)
}

// CallFromContext returns the Call that [Start] put into ctx, or nil.
func CallFromContext(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

type callKey struct{}

// Key returns the key of the call: the one a Doer fixed (before the first
// attempt), else the one the call would use, supplied with [WithKey] or
// fixed by [Call.FixKey], so that a call the Doer refused before fixing a
// key (an invalid or conflicting key) still names the key to log or resume
// with, as its [Error] does; "" when the call has none yet (the Doer
// would have created one).
func (c *Call) Key() string { return c.errKey() }

// Attempts returns how many attempts were sent so far.
func (c *Call) Attempts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts
}

// FixKey fixes the call's key before its request is built, for code that
// must write the key into the request itself (a generated helper filling a
// typed key parameter of oapi-codegen's <Op>Params). The key is the one
// given with [WithKey] (a UUID in upper case lower-cased when the call's
// policy, given with [WithPolicy], has a uuid* key format and carried is
// "" or that lower-cased key: the server reads it so, and a typed UUID
// parameter holds it so); else carried, the key
// the request will already carry ("" if none); else a new one in the
// format of the call's policy ([WithPolicy], default UUID v7), made by
// the call's [KeyGenerator] if it has one (a generator that fails or
// returns "" fails FixKey with an [*Error] whose Reason is
// [ErrKeyGenerator]). The key is checked as the Doer checks it, under
// the call's policy: longer than its KeyMaxLength, or not in its
// KeyFormat under EnforceKeyFormat, it fails FixKey with an [*Error]
// whose Reason is [ErrInvalidKey] (the key returned with it, to log), as
// does an empty key given with WithKey (never replaced by a new one). It
// returns the key and remembers it as
// the call's supplied key, so the [Doer] finds the request carrying it (a
// request carrying another fails with [ErrKeyConflict]) and reports it to
// the [WithKeyObserver] before the first attempt, as for any call.
//
// A second FixKey returns the key fixed by the first.
func (c *Call) FixKey(carried string) (string, error) {
	format, set := FormatUUID, KeyFormat("")
	var p Policy
	if c.policy != nil {
		p = c.effectivePolicy(Policy{})
		set = p.KeyFormat
		format = cmp.Or(set, format)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixKeyDone {
		return c.supplied, nil
	}
	if c.policy != nil {
		if err := c.keyOptionErr(p); err != nil {
			return "", &Error{Attempts: c.attempts, Reason: ErrInvalidKey, Err: err}
		}
	}
	switch {
	case c.noKey:
		c.supplied, c.fixKeyDone = carried, true // a key the request carries is sent as is
		return carried, nil
	case c.keyGiven && c.supplied == "":
		return "", &Error{Attempts: c.attempts, Reason: ErrInvalidKey, Err: errEmptyKeyGiven}
	case c.supplied != "":
		// Only under a policy that says the key is a UUID: an unset
		// format is the contract's default, token, whose keys are
		// case-sensitive.
		if set == FormatUUID || set == FormatUUIDv4 || set == FormatUUIDv7 {
			// Not when the request carries the key as given: it stays one key.
			if k, err := keysyntax.ParseUUID(c.supplied, keysyntax.UUID); err == nil && (carried == "" || carried == k) {
				c.supplied = k
			}
		}
	case carried != "":
		c.supplied = carried
	default:
		k, err := c.newKey(nil, format)
		if err != nil {
			return "", &Error{Attempts: c.attempts, Reason: ErrKeyGenerator, Err: err}
		}
		c.supplied, c.made = k, c.keyGen == nil
	}
	// Checked as the Doer would (KeyMaxLength; the format under
	// EnforceKeyFormat), before a helper writes the key into a typed
	// parameter that could not hold it: ErrInvalidKey, not a carrier error.
	if c.policy != nil {
		if err := checkKey(c.supplied, p); err != nil {
			return c.supplied, &Error{Key: c.supplied, Attempts: c.attempts, Reason: ErrInvalidKey, Err: err}
		}
	}
	c.fixKeyDone = true
	return c.supplied, nil
}

// effectivePolicy returns the call's policy: the one given with
// [WithPolicy], else base (the Doer's or its matcher's), edited by the
// call's overrides on a copy whose On.Statuses (a Policy's only slice) is
// cloned first, so that an override editing it in place leaves the policy
// it came from as it was. The policy given with WithPolicy is edited once
// per call, FixKey and the Doer both reading it.
func (c *Call) effectivePolicy(base Policy) Policy {
	if c.policy == nil {
		return applyOverrides(base, c.overrides)
	}
	c.effOnce.Do(func() { c.eff = applyOverrides(*c.policy, c.overrides) })
	return c.eff
}

// applyOverrides returns p edited by overrides, its On.Statuses cloned
// first (not when there are none: nothing edits it). p's Window, the
// contract's, stays: an override may shorten it, not lift or lengthen it.
func applyOverrides(p Policy, overrides []func(*Policy)) Policy {
	if len(overrides) == 0 {
		return p
	}
	window := p.Window
	p.On.Statuses = slices.Clone(p.On.Statuses)
	for _, o := range overrides {
		o(&p)
	}
	p.Window = minWindow(window, p.Window)
	return p
}

// newKey creates a key in format f with the call's generator, else the
// Doer's (doerGen, nil for none), else [NewKey].
func (c *Call) newKey(doerGen KeyGenerator, f KeyFormat) (string, error) {
	gen := c.keyGen
	if gen == nil {
		gen = doerGen
	}
	if gen == nil {
		return NewKey(f)
	}
	k, err := gen(f)
	switch {
	case err != nil:
		return "", fmt.Errorf("idemclient: creating a key: %w", err)
	case k == "":
		return "", errors.New("idemclient: the key generator returned an empty key")
	}
	return k, nil
}

// Check reports what a response that ended the call means for it, after
// the [Doer] returned it: a [*ProblemError] when it is one of the contract's
// problems (application/problem+json or application/json with a code
// IDEMPOTENCY_*: a reused key, a missing or invalid key, the key still in
// use when the attempts ran out, the store unavailable, ...), nil for any
// other response (the API's own answer, whatever its status). body is the
// response body, already read (oapi-codegen's <Op>Response.Body). A
// Retry-After given as a date is measured on the Doer's clock ([WithClock]).
//
// It returns an error wrapping [ErrNotManaged] when no Doer handled the
// call's request (no attempt was counted): the request was sent once,
// without retries and maybe without a key.
func (c *Call) Check(resp *http.Response, body []byte) error {
	if c.Attempts() == 0 {
		return fmt.Errorf("%w: build the client's HTTP doer with idemclient.NewDoer", ErrNotManaged)
	}
	if resp == nil {
		return nil
	}
	c.mu.Lock()
	clock := c.clock
	c.mu.Unlock()
	if clock == nil {
		clock = SystemClock
	}
	pe := parseProblem(resp.StatusCode, resp.Header, body, false, clock.Now())
	if pe == nil {
		return nil
	}
	pe.Key, pe.Attempts = c.Key(), c.Attempts()
	return pe
}

func (c *Call) claim() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used {
		return false
	}
	c.used = true
	return true
}

func (c *Call) setClock(clock Clock) {
	c.mu.Lock()
	c.clock = clock
	c.mu.Unlock()
}

// errKey is the key an [Error] names: the key the Doer fixed for the call
// once it did, else the key the call would have used (supplied with
// [WithKey] or fixed by [Call.FixKey]; "" if none).
func (c *Call) errKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed {
		return c.key
	}
	return c.supplied
}

func (c *Call) setKey(ctx context.Context, k string) error {
	c.mu.Lock()
	c.key, c.fixed = k, true
	c.mu.Unlock()
	if c.observer != nil {
		c.observer(k)
	}
	if c.recorder != nil {
		return c.recorder(ctx, k)
	}
	return nil
}

func (c *Call) countAttempt() {
	c.mu.Lock()
	c.attempts++
	c.mu.Unlock()
}

// CheckClientOptions reports an error when opts, meant for every call of
// a client (a generated client's WithCallOptions, which panics with it),
// supply a key ([WithKey]): every logical call would share it, and the
// server would take the second for a retry of the first (or refuse it as
// a reused key). Give WithKey to each call instead. Nor may they say
// [WithoutKey]: every call would go without a key, those of operations
// that require one (which would fail) and those of window operations
// (deduped by their fingerprint alone) alike; give it to the calls meant
// to be keyless. It looks at the options only: a request editor
// ([WithRequestEditors]) that sets the key header for every call shares
// one key just the same, and is not detected.
func CheckClientOptions(opts ...CallOption) error {
	var c Call
	for _, o := range opts {
		o(&c)
	}
	if c.keyGiven {
		return errors.New("idemclient: client-wide call options must not supply a key (idemclient.WithKey): every call would share it; give WithKey to each call")
	}
	if c.noKey {
		return errors.New("idemclient: client-wide call options must not say idemclient.WithoutKey: every call would go without a key; give WithoutKey to each keyless call")
	}
	return nil
}

// errEmptyKeyGiven: WithKey("").
var errEmptyKeyGiven = errors.New("the key supplied with idemclient.WithKey is empty (to let the call make one, give no WithKey)")

// keyOptionErr returns why the call's key options do not fit policy p
// (WithoutKey on an operation that requires a key, WithKey("")), or nil.
func (c *Call) keyOptionErr(p Policy) error {
	switch {
	case c.noKey && !p.KeyOptional:
		d := p.WithDefaults()
		return fmt.Errorf("idemclient.WithoutKey: the operation requires a key, in the %v %s (the policy's KeyOptional is not set: the contract's key.required is true, or the spec declares the key parameter required, which the client always sends); nothing sent", d.KeyCarrier, d.KeyName)
	case c.keyGiven && c.supplied == "":
		return errEmptyKeyGiven
	}
	return nil
}
