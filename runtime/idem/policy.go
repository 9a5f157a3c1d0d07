package idem

import (
	"errors"
	"fmt"
	"github.com/idemgen/idemgen/runtime/internal/httpsyntax"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// Semantics says what "the same request again" means for an operation.
type Semantics uint8

const (
	// Strict: the key is required; a duplicate with the same fingerprint gets
	// the stored response, one with another fingerprint gets ConflictStatus
	// with code IDEMPOTENCY_KEY_REUSED.
	Strict Semantics = iota + 1
	// Loose: the key is required; any duplicate gets the stored response (a
	// different fingerprint is reported to the Observer as EventLooseMismatch).
	Loose
	// Window: the key is optional (without one, principal + operation +
	// fingerprint act as the key); any duplicate inside the window gets the
	// stored response; after the window the request is new.
	Window
)

func (s Semantics) String() string {
	switch s {
	case Strict:
		return "strict"
	case Loose:
		return "loose"
	case Window:
		return "window"
	}
	return "Semantics(" + strconv.Itoa(int(s)) + ")"
}

// Carrier says where the idempotency key travels.
type Carrier uint8

const (
	// CarrierHeader: a request header (Name defaults to "Idempotency-Key").
	CarrierHeader Carrier = iota
	// CarrierBody: a string member of the JSON request body; Name is its RFC 6901 JSON pointer.
	CarrierBody
	// CarrierQuery: a query parameter named Name.
	CarrierQuery
)

func (c Carrier) String() string {
	switch c {
	case CarrierHeader:
		return "header"
	case CarrierBody:
		return "body"
	case CarrierQuery:
		return "query"
	}
	return "Carrier(" + strconv.Itoa(int(c)) + ")"
}

// Format is the syntax a key must have.
type Format uint8

const (
	// FormatToken (the default): 1 to MaxLength visible ASCII characters (0x21-0x7E).
	FormatToken Format = iota
	// FormatUUID: a UUID of any RFC 9562 version (1-8, variant 10xx) in the
	// canonical 8-4-4-4-12 hex form, either case; the nil and max UUIDs are
	// refused. Keys are compared case-insensitively (normalized to lower case).
	FormatUUID
	// FormatUUIDv4: as FormatUUID, version 4 only.
	FormatUUIDv4
	// FormatUUIDv7: as FormatUUID, version 7 only.
	FormatUUIDv7
)

func (f Format) String() string {
	switch f {
	case FormatToken:
		return "token"
	case FormatUUID:
		return "uuid"
	case FormatUUIDv4:
		return "uuidv4"
	case FormatUUIDv7:
		return "uuidv7"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Requirement says whether a request must carry a key.
type Requirement uint8

const (
	// DefaultRequirement: Required for Strict and Loose, Optional for Window.
	DefaultRequirement Requirement = iota
	// Required: a request without a key is refused with 400 IDEMPOTENCY_KEY_MISSING.
	Required
	// Optional: a request without a key runs (Window: protected by its
	// fingerprint; Strict and Loose: unprotected, as a plain request).
	Optional
)

// FailurePolicy says what a failed execution (status >= 500, or a handler
// panic or error) leaves behind.
type FailurePolicy uint8

const (
	// FailuresRetry (the default): the key is freed, so a retry executes again
	// (under Strict only with the same fingerprint).
	FailuresRetry FailurePolicy = iota
	// FailuresReplay: a 5xx response is stored and replayed like a success, as
	// Stripe does, and so is the strict server's answer to a strict-server
	// handler's returned error when the generated error handler records it
	// (Call.HandlerFailed, AnswerHandlerError). A panic, or a handler that
	// ends without a response the engine records (a returned error whose
	// answer is not recorded: the strict server writes it after the
	// engine's wrapper returned), still frees the key, so a retry runs the
	// operation again; the engine warns about the latter once per
	// operation.
	FailuresReplay
)

// Scope says whose requests share a key space (always one operation's).
type Scope uint8

const (
	// ScopePrincipal (the default): each principal (Options.Principal) has
	// its own keys.
	ScopePrincipal Scope = iota
	// ScopeShared: all callers of the operation share its keys (and, under
	// Window, its fingerprints of requests without a key): two principals
	// who send the same key share one record, and the second gets the first
	// one's response. Options.Principal still runs (its error still refuses
	// the request, and events still carry the principal).
	ScopeShared
)

func (s Scope) String() string {
	switch s {
	case ScopePrincipal:
		return "principal"
	case ScopeShared:
		return "shared"
	}
	return "Scope(" + strconv.Itoa(int(s)) + ")"
}

// KeySpec says where the key is and what it looks like.
type KeySpec struct {
	// Carrier is where the key travels: a header (the default), a query
	// parameter or a body member.
	Carrier Carrier
	// Name is the header name (default "Idempotency-Key"), the query parameter
	// name, or the body member's JSON pointer (e.g. "/idempotency_key");
	// required for the query and body carriers.
	Name string
	// Required says whether a request must carry a key (default: required
	// under Strict and Loose, optional under Window).
	Required Requirement
	// Format is the syntax a key must have (default FormatToken); a key
	// that does not have it is refused with 400 IDEMPOTENCY_KEY_INVALID.
	Format    Format
	MaxLength int // default and upper bound 255
}

// InFlightSpec says how a duplicate of a request still in flight is answered.
type InFlightSpec struct {
	Status     int           // default 409; any 4xx or 5xx but 400 and 422, which clients never retry
	RetryAfter time.Duration // default 2s; sent in whole seconds, rounded up
	Lease      time.Duration // default 30s; how long a claim holds before it may be taken over
	Wait       time.Duration // default 0: answer at once; > 0: wait up to Wait for the replay
}

// ResponseSpec says what of a response is stored and replayed.
type ResponseSpec struct {
	// MaxBytes bounds the stored body (default 1 MiB). A larger response still
	// reaches the client; the record is completed as not replayable, and a
	// duplicate gets 409 IDEMPOTENCY_RESPONSE_UNAVAILABLE (see CodeResponseUnavailable).
	MaxBytes int
	// Headers are the response headers stored and replayed, beside
	// Content-Type and Content-Encoding (always: they say what the stored
	// body is). Set-Cookie, hop-by-hop headers and Trailer are refused:
	// trailers are never stored, so a replay has none.
	Headers []string
}

// RequestSpec bounds what the engine reads of a request.
type RequestSpec struct {
	MaxBytes int64 // default 1 MiB; a larger body is refused with 413 IDEMPOTENCY_REQUEST_TOO_LARGE
	// MediaTypes lists the request media types the operation declares
	// (the keys of the OpenAPI requestBody's content; generated code
	// fills it in, an empty list for an operation without a request
	// body). With it, the fingerprint reads a body as JSON or as a form
	// only when the request's media type (parameters aside, in any case)
	// is one of them; a body of any other media type is compared byte for
	// byte, with its Content-Type parameters: oapi-codegen's handlers
	// decode JSON whatever the Content-Type says, so a JSON body labelled
	// application/x-www-form-urlencoded must not be compared as form
	// fields. A range ("application/*", "*/*") or an entry that is not a
	// media type matches nothing. nil (a Spec written by hand without it,
	// or generated by an idemgen that did not fill it in) reads every body
	// as its Content-Type says: see docs/security.md. The
	// CompatibleFingerprints settings read bodies by this list too.
	MediaTypes []string
}

// Spec is the idempotency policy of one operation, as generated code emits
// it (a plain struct literal). Zero fields take the documented defaults;
// Compile fills them in and checks the rest. Operation and Semantics have
// no default: Compile refuses a Spec without them.
type Spec struct {
	Operation string // operationId; required, at most 128 bytes
	Method    string // informational (documentation, events)
	Path      string // informational
	// Semantics is required (Strict, Loose or Window): it has no default,
	// and Compile refuses a Spec without it.
	Semantics Semantics
	Window    time.Duration // how long a key is remembered; default 24h
	// Key says where the key travels and what it looks like (default: the
	// Idempotency-Key header, any token of up to 255 characters).
	Key KeySpec
	// Volatile lists JSON pointers (with "*") of body members left out of the fingerprint.
	Volatile []string
	// Unordered lists JSON pointers (with "*") of arrays fingerprinted as multisets.
	Unordered []string
	// FingerprintHeaders lists request headers covered by the fingerprint.
	FingerprintHeaders []string
	Scope              Scope // whose requests share a key space; default per principal
	ConflictStatus     int   // 422 (default) or 409
	// InFlight says how a duplicate of a request still in flight is
	// answered, and how long a claim's lease holds.
	InFlight InFlightSpec
	// Failures says what a failed execution leaves behind (default
	// FailuresRetry: the key is freed).
	Failures FailurePolicy
	// Response says what of a response is stored and replayed.
	Response ResponseSpec
	// Request bounds the body the engine reads.
	Request RequestSpec
	// CompatibleFingerprints lists fingerprint settings (Volatile, Unordered,
	// FingerprintHeaders) of another release of this operation whose
	// records may be retried here: a rolling deploy runs both releases at
	// once, so a change of the settings takes two releases, each listing
	// the other's: release N keeps its settings and lists the new ones,
	// release N+1 switches to the new settings and lists N's, and a
	// release after it, two windows after N+1 is everywhere, drops the entry.
	// Without them a strict replica refuses the identical retry of a
	// request the other release took (a rollback is the same). A keyed request whose
	// fingerprint differs from its key's record is the same request when
	// its fingerprint under one of them (in the record's fingerprint
	// version) equals the record's: it is replayed, waits for or takes over
	// an expired lease, or re-claims a failed attempt, as with an equal
	// fingerprint; one that matches no setting is another request. The
	// extra fingerprints are computed only then (a conflict costs one
	// canonicalization per entry); first requests and replays of records
	// made under the current setting cost what they cost without CompatibleFingerprints.
	// An entry applies to every record of the key, whoever made it: one
	// that ignores what the current setting reads (a member no longer
	// volatile) keeps requests that differ only there the same request
	// while it is listed. A record taken over or re-claimed this
	// way keeps its fingerprint (the store compares it), for a window from
	// that claim. A request without a key (Window semantics) is not
	// covered: its record is named by its fingerprint, and one made under
	// another setting is not found. Compile checks each entry as it checks
	// the fields of the same names; errors name an entry by its position
	// from 1 ("compatible fingerprint 2: ..."). See docs/runtime.md,
	// "Changing the fingerprint settings".
	CompatibleFingerprints []FingerprintSpec
}

// FingerprintSpec is the fingerprint settings of another release
// (Spec.CompatibleFingerprints: the one before, or the one after), each
// list as Spec's field of the same name: nil is none, not Spec's. Its
// FingerprintHeaders need not be Spec's: a request's fingerprint is
// computed from all its headers.
type FingerprintSpec struct {
	Volatile           []string
	Unordered          []string
	FingerprintHeaders []string
}

// Defaults.
const (
	DefaultWindow           = 24 * time.Hour
	DefaultKeyHeader        = "Idempotency-Key"
	DefaultMaxKeyLength     = 255
	DefaultConflictStatus   = http.StatusUnprocessableEntity
	DefaultInFlightStatus   = http.StatusConflict
	DefaultRetryAfter       = 2 * time.Second
	DefaultLease            = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxRequestBytes  = 1 << 20
	maxOperationLength      = 128
)

// Policy is a compiled Spec: immutable and safe for concurrent use. Compile
// it once per operation (at init) and share it.
type Policy struct {
	spec          Spec
	hasher        *fingerprint.Hasher
	id            uint64   // for the engine's fingerprint cache
	fpHeaders     []string // canonical names of FingerprintHeaders
	keyName       string   // canonical header name, or query name, or JSON pointer
	keyPtr        []string
	keyRequired   bool
	maxKey        int
	respHeaders   []string // canonical, Content-Type and Content-Encoding first
	inFlightRA    []string // Retry-After header value
	reqMax        int64
	respMax       int
	sameFPReclaim bool
	// anonKeyScope is appendScopeHead(nil, "", operation, kindKey): the
	// head of the scope of every keyed request without a principal (of
	// every keyed request under ScopeShared).
	anonKeyScope string
	// compat holds a Hasher per Spec.CompatibleFingerprints entry, in its order: a
	// keyed request's fingerprint under each is computed only when its
	// own differs from its key's record (Call.sameCompatible).
	compat []*fingerprint.Hasher
	// maxReclaims bounds the claims a request retries with a record's
	// fingerprint that is its own in another version or under a compatible
	// setting: once per fingerprint it may have (fingerprint.Version for
	// each setting, the current one and each compatible one, and as many
	// process-local ones: fingerprint.Local).
	maxReclaims int
}

// Spec returns the policy's Spec with every default filled in. Its slices
// are copies: changing them does not change the policy.
func (p *Policy) Spec() Spec { return cloneSpec(p.spec) }

// cloneSpec returns s with copies of its slices.
func cloneSpec(s Spec) Spec {
	s.Volatile = slices.Clone(s.Volatile)
	s.Unordered = slices.Clone(s.Unordered)
	s.FingerprintHeaders = slices.Clone(s.FingerprintHeaders)
	s.Response.Headers = slices.Clone(s.Response.Headers)
	s.Request.MediaTypes = slices.Clone(s.Request.MediaTypes) // nil stays nil, empty stays empty
	if s.CompatibleFingerprints != nil {
		compat := make([]FingerprintSpec, len(s.CompatibleFingerprints))
		for i, f := range s.CompatibleFingerprints {
			compat[i] = FingerprintSpec{Volatile: slices.Clone(f.Volatile), Unordered: slices.Clone(f.Unordered),
				FingerprintHeaders: slices.Clone(f.FingerprintHeaders)}
		}
		s.CompatibleFingerprints = compat
	}
	return s
}

// Operation returns the operation id.
func (p *Policy) Operation() string { return p.spec.Operation }

// MustCompile is Compile that panics on error, for package-level policies.
func MustCompile(s Spec) *Policy {
	p, err := Compile(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Compile checks s, fills in its defaults and compiles its fingerprint.
func Compile(s Spec) (*Policy, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if s.Operation == "" {
		bad("operation id is empty")
	} else if len(s.Operation) > maxOperationLength {
		bad("operation id is longer than %d bytes", maxOperationLength)
	}
	switch s.Semantics {
	case Strict, Loose, Window:
	case 0:
		bad("semantics is not set (strict, loose or window)")
	default:
		bad("unknown semantics %d", s.Semantics)
	}
	if s.Scope > ScopeShared {
		bad("unknown scope %d", s.Scope)
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	} else if s.Window < time.Millisecond {
		bad("window %v is shorter than 1ms", s.Window)
	}

	p := &Policy{}
	k := &s.Key
	switch k.Carrier {
	case CarrierHeader:
		if k.Name == "" {
			k.Name = DefaultKeyHeader
		}
		if !validToken(k.Name) {
			bad("key header name %q is not a valid header name", k.Name)
		}
		k.Name = textproto.CanonicalMIMEHeaderKey(k.Name)
	case CarrierQuery:
		if k.Name == "" {
			bad("key query parameter name is empty")
		}
	case CarrierBody:
		ptr, err := parsePointer(k.Name)
		if err != nil {
			bad("key body pointer: %v", err)
		} else if len(ptr) == 0 {
			bad("key body pointer %q names the whole body", k.Name)
		}
		p.keyPtr = ptr
	default:
		bad("unknown key carrier %d", k.Carrier)
	}
	p.keyName = k.Name
	switch k.Required {
	case DefaultRequirement:
		if s.Semantics == Window {
			k.Required = Optional
		} else {
			k.Required = Required
		}
	case Required, Optional:
	default:
		bad("unknown key requirement %d", k.Required)
	}
	p.keyRequired = k.Required == Required
	switch k.Format {
	case FormatToken, FormatUUID, FormatUUIDv4, FormatUUIDv7:
	default:
		bad("unknown key format %d", k.Format)
	}
	switch {
	case k.MaxLength == 0:
		k.MaxLength = DefaultMaxKeyLength
	case k.MaxLength < 0 || k.MaxLength > DefaultMaxKeyLength:
		bad("key max length %d is outside 1..%d", k.MaxLength, DefaultMaxKeyLength)
	}
	if k.Format != FormatToken && k.MaxLength < 36 {
		bad("key max length %d is shorter than a UUID (36)", k.MaxLength)
	}
	p.maxKey = k.MaxLength

	switch s.ConflictStatus {
	case 0:
		s.ConflictStatus = DefaultConflictStatus
	case http.StatusConflict, http.StatusUnprocessableEntity:
	default:
		bad("conflict status %d is neither 409 nor 422", s.ConflictStatus)
	}
	f := &s.InFlight
	if f.Status == 0 {
		f.Status = DefaultInFlightStatus
	} else if f.Status < 400 || f.Status > 599 {
		bad("in-flight status %d is not a 4xx or 5xx status", f.Status)
	} else if f.Status == http.StatusBadRequest || f.Status == http.StatusUnprocessableEntity {
		// The contract's in-flight-status-final rule.
		bad("in-flight status %d is an answer clients never retry (idemclient included): a duplicate told that its key is in use would give up instead of waiting for the first request; use 409 (the default), 423, 429 or 503", f.Status)
	}
	if f.RetryAfter == 0 {
		f.RetryAfter = DefaultRetryAfter
	} else if f.RetryAfter < 0 {
		bad("in-flight retry-after %v is negative", f.RetryAfter)
	}
	if f.Lease == 0 {
		f.Lease = DefaultLease
	} else if f.Lease < time.Millisecond {
		bad("in-flight lease %v is shorter than 1ms", f.Lease)
	}
	if f.Lease > s.Window {
		bad("in-flight lease %v is longer than the window %v", f.Lease, s.Window)
	}
	if f.Wait < 0 {
		bad("in-flight wait %v is negative", f.Wait)
	}
	p.inFlightRA = []string{retryAfterValue(f.RetryAfter)}

	switch s.Failures {
	case FailuresRetry, FailuresReplay:
	default:
		bad("unknown failure policy %d", s.Failures)
	}
	if s.Response.MaxBytes == 0 {
		s.Response.MaxBytes = DefaultMaxResponseBytes
	} else if s.Response.MaxBytes < 0 {
		bad("response max bytes %d is negative", s.Response.MaxBytes)
	}
	p.respMax = s.Response.MaxBytes
	// Content-Type and Content-Encoding say what the stored bytes are: always
	// kept, first; then the listed headers; then cacheHeaders not listed.
	p.respHeaders = slices.Clone(representationHeaders[:])
	for _, h := range s.Response.Headers {
		if !validToken(h) {
			bad("response header %q is not a valid header name", h)
			continue
		}
		c := textproto.CanonicalMIMEHeaderKey(h)
		if forbiddenRecordHeader(c) {
			bad("response header %q is never stored (Set-Cookie, hop-by-hop, framing and replay headers are refused)", h)
			continue
		}
		dup := false
		for _, have := range p.respHeaders {
			dup = dup || have == c
		}
		if !dup {
			p.respHeaders = append(p.respHeaders, c)
		}
	}
	s.Response.Headers = append([]string(nil), p.respHeaders[alwaysStored:]...)
	for _, c := range cacheHeaders {
		if !slices.Contains(p.respHeaders, c) {
			p.respHeaders = append(p.respHeaders, c)
		}
	}
	if s.Request.MaxBytes == 0 {
		s.Request.MaxBytes = DefaultMaxRequestBytes
	} else if s.Request.MaxBytes < 0 {
		bad("request max bytes %d is negative", s.Request.MaxBytes)
	}
	p.reqMax = s.Request.MaxBytes
	p.sameFPReclaim = s.Semantics == Strict

	h, err := fingerprint.New(fingerprint.Options{
		Volatile:   s.Volatile,
		Unordered:  s.Unordered,
		Headers:    s.FingerprintHeaders,
		MediaTypes: s.Request.MediaTypes,
	})
	if err != nil {
		bad("fingerprint: %v", err)
	}
	p.hasher = h
	for i, ps := range s.CompatibleFingerprints {
		// The operation's declared media types, not the other release's:
		// a body this release's handler may read otherwise must not match
		// through an entry.
		ph, err := fingerprint.New(fingerprint.Options{
			Volatile:   ps.Volatile,
			Unordered:  ps.Unordered,
			Headers:    ps.FingerprintHeaders,
			MediaTypes: s.Request.MediaTypes,
		})
		if err != nil {
			bad("compatible fingerprint %d: %v", i+1, err)
			continue
		}
		p.compat = append(p.compat, ph)
	}
	p.maxReclaims = 2 * fingerprint.Version * (1 + len(s.CompatibleFingerprints))
	p.id = policyIDs.Add(1)
	for _, name := range s.FingerprintHeaders {
		p.fpHeaders = append(p.fpHeaders, textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("idem: policy %q: %w", s.Operation, errors.Join(errs...))
	}
	p.spec = cloneSpec(s) // not the caller's slices
	p.anonKeyScope = string(appendScopeHead(nil, "", s.Operation, kindKey))
	return p, nil
}

// retryAfterValue renders d in whole seconds, rounded up, at least 1.
func retryAfterValue(d time.Duration) string {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// representationHeaders are the response headers that describe the stored
// body: stored whatever Response.Headers lists, first in Policy.respHeaders,
// and left out of a replay that sends a problem instead
// (CodeResponseUnavailable; representationHeader).
var representationHeaders = [...]string{"Content-Type", "Content-Encoding"}

// alwaysStored is how many of Policy.respHeaders are stored whatever
// Response.Headers lists: representationHeaders.
const alwaysStored = len(representationHeaders)

// cacheHeaders are the response headers that say whether, and for how
// long, a response may be cached: stored and replayed whatever
// Response.Headers lists (after the listed headers; Spec reports only
// those). A handler that answers a sensitive response (a card token, a
// secret shown once) with Cache-Control: no-store must not see its replay
// lose the directive: a cache between the server and the client that
// would not keep the first response could keep the replay. They are not
// representation headers: the recorder records them as it records a
// listed header, whoever set them.
var cacheHeaders = [...]string{"Cache-Control", "Expires", "Pragma"}

// AlwaysStoredHeader reports whether a response header is stored and
// replayed whatever ResponseSpec.Headers lists: Content-Type and
// Content-Encoding (what the stored body is) and Cache-Control, Expires
// and Pragma (whether a cache may keep it). The name is matched
// case-insensitively.
func AlwaysStoredHeader(name string) bool {
	c := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
	return representationHeader(c) || cacheHeader(c)
}

// NeverStoredHeader reports whether a response header is one the runtime
// never stores or replays, which ResponseSpec.Headers refuses: Set-Cookie,
// hop-by-hop and framing headers, Date, and the headers a replay writes
// itself (Idempotent-Replayed, Retry-After). The name is matched
// case-insensitively. idemgen's contract parser refuses the same names in
// response.headers.
func NeverStoredHeader(name string) bool {
	return forbiddenRecordHeader(textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)))
}

// forbiddenRecordHeader reports headers that are never stored or replayed.
func forbiddenRecordHeader(canonical string) bool {
	switch canonical {
	case "Set-Cookie", "Set-Cookie2",
		"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Trailer", "Upgrade",
		"Proxy-Authenticate", "Proxy-Authorization",
		"Content-Length", "Date", "Idempotent-Replayed", "Retry-After":
		return true
	}
	return false
}

// validToken reports whether s is an RFC 9110 token (a valid header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpsyntax.IsTchar(s[i]) {
			return false
		}
	}
	return true
}
