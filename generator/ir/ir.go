// Package ir is the intermediate representation of an OpenAPI spec's
// x-idempotency contracts: plain structs, filled and checked by the compiler
// (package generator/compile) and read by the emitters.
//
// The package imports neither kin-openapi nor jennifer (a test enforces it),
// so emitters and tools depend on the contract, not on how it was parsed.
// Every value is final: defaults are filled, durations are time.Duration,
// statuses are ints. Operations are sorted by path, then method.
package ir

import (
	"math"
	"slices"
	"strings"
	"time"
)

// httpMethods are the keys of an OpenAPI path item that name an operation.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace", "query"}

// HTTPMethod reports whether k, a path item key in lower case, names an
// operation (an HTTP method).
func HTTPMethod(k string) bool { return slices.Contains(httpMethods, k) }

// Pos locates a node of the spec (or of an overlay that put it there):
// the file, the 1-based line and column, and the JSON pointer of the node in
// the document it was written in.
type Pos struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Pointer string `json:"pointer,omitempty"`
}

// IsZero reports whether p locates nothing.
func (p Pos) IsZero() bool { return p.File == "" && p.Line == 0 && p.Col == 0 }

// FirstPos is the first of ps that locates something (not IsZero), the
// zero Pos when none does.
func FirstPos(ps ...Pos) Pos {
	for _, p := range ps {
		if !p.IsZero() {
			return p
		}
	}
	return Pos{}
}

// Spec is one loaded, checked spec.
type Spec struct {
	Title      string       `json:"title"`
	Version    string       `json:"version"`
	OpenAPI    string       `json:"openapi"`            // the document's openapi field: 3.0.x or 3.1.x
	Source     string       `json:"source"`             // the spec file as given
	Overlays   []string     `json:"overlays,omitempty"` // overlay files applied, in order
	Operations []*Operation `json:"operations"`         // idempotent operations only, by path then method
	// Routes are every operation of the spec, idempotent or not, by path then
	// method: what a router sees. A plain net/http wrapper needs them to
	// match a request to an idempotent operation with the router's
	// precedence (a static /a/b wins over /a/{x}, even when /a/b is not
	// idempotent).
	Routes []Route `json:"routes,omitempty"`
	// BasePaths are the paths of the spec's top-level servers, in the
	// spec's order without repeats: each URL with its variables replaced
	// by their default values, its path resolved against "/" (a relative
	// URL such as ./v1 gives /v1), escaped as in a URL. The root path (a
	// URL without a path) is no base path: every path is under it, so it
	// is left out, as is a URL idemgen cannot read (one that does not
	// parse, a variable the server does not declare). Path-item and
	// operation servers are not read. A client that does not know its
	// server URL matches requests under these first
	// (idemclient.NewRouteTable).
	BasePaths []string `json:"basePaths,omitempty"`
	// Types are the package-level Go types oapi-codegen declares for the
	// spec's components (schemas, parameters, responses, request bodies), so
	// emitters can avoid their names. Sorted by name.
	Types []Decl `json:"types,omitempty"`
}

// Route is one operation of the spec as a router sees it.
type Route struct {
	Method     string `json:"method"` // upper case
	Path       string `json:"path"`   // path template
	GoName     string `json:"goName"` // oapi-codegen's name for the operation
	Idempotent bool   `json:"idempotent,omitempty"`
	Pos        Pos    `json:"pos"`
}

// Where names the route in messages and as a map key: its method and
// path template, e.g. "POST /orders".
func (r Route) Where() string { return Where(r.Method, r.Path) }

// Where names an operation by its method, in upper case whatever case it
// is given in, and its path template, e.g. "POST /orders": how messages,
// diagnostics' Ops, ignores and indexes by route spell it.
func Where(method, path string) string { return strings.ToUpper(method) + " " + path }

// Decl is a Go identifier declared by oapi-codegen's output, and what in
// the spec declares it.
type Decl struct {
	Name string `json:"name"`
	What string `json:"what"` // e.g. "schema Pet"
	Pos  Pos    `json:"pos"`
}

// Operation is one operation that carries a contract.
type Operation struct {
	OperationID string   `json:"operationId"` // as written in the spec ("" when absent)
	GoName      string   `json:"goName"`      // oapi-codegen's name for it, e.g. ClaimCoupon
	Method      string   `json:"method"`      // upper case: POST, PATCH, PUT, DELETE
	Path        string   `json:"path"`        // path template, e.g. /coupons/{couponId}/claims
	Summary     string   `json:"summary,omitempty"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`

	PathParams []Param `json:"pathParams,omitempty"` // in path order
	Names      Names   `json:"names"`
	Key        Key     `json:"key"`
	Body       *Body   `json:"body,omitempty"` // nil without a request body
	Policy     Policy  `json:"policy"`

	Pos         Pos `json:"pos"`         // the operation object
	ContractPos Pos `json:"contractPos"` // its x-idempotency value (or the root apply-to entry that made it idempotent)
}

// RecordName is the name the runtime keeps the operation's idempotency
// records under (idem.Spec.Operation): its operationId, or oapi-codegen's
// Go name when it has none. The emitters and check -base use it alike.
func (op *Operation) RecordName() string {
	if op.OperationID != "" {
		return op.OperationID
	}
	return op.GoName
}

// Where names the operation in messages and as a map key: its method and
// path template, e.g. "POST /orders".
func (op *Operation) Where() string { return Where(op.Method, op.Path) }

// FingerprintDecides reports whether the request's fingerprint decides
// anything a client sees: under strict semantics (a reused key with another
// fingerprint is refused) and under window semantics with the key optional
// (a request without a key is found by its fingerprint). Under loose
// semantics, and window with the key required, a request with the key of
// an earlier one gets its replay whatever its fingerprint, and none
// without a key is found by it: volatile, unordered and
// fingerprint-headers do nothing a client sees (check's *-no-effect
// warnings; the runtime still reports a mismatch as EventLooseMismatch).
func (op *Operation) FingerprintDecides() bool {
	switch op.Policy.Semantics {
	case Strict:
		return true
	case Window:
		return !op.Key.Required
	}
	return false
}

// Names are the Go identifiers oapi-codegen generates for an operation
// (see package generator/naming for the rules).
type Names struct {
	Handler              string `json:"handler"`          // strict and plain server method: <Op>
	RequestObject        string `json:"requestObject"`    // strict server: <Op>RequestObject
	ResponseObject       string `json:"responseObject"`   // strict server: <Op>ResponseObject
	Params               string `json:"params,omitempty"` // <Op>Params, when the operation has query, header or cookie parameters
	ClientMethod         string `json:"clientMethod"`     // Client: <Op> (JSON body) ...
	ClientWithBody       string `json:"clientWithBody,omitempty"`
	WithResponse         string `json:"withResponse"`                   // ClientWithResponses: <Op>WithResponse
	WithBodyWithResponse string `json:"withBodyWithResponse,omitempty"` // <Op>WithBodyWithResponse
	ResponseType         string `json:"responseType"`                   // ClientWithResponses result: <Op>Response
	JSONRequestBody      string `json:"jsonRequestBody,omitempty"`      // <Op>JSONRequestBody, when the body has application/json
}

// Param is a parameter as oapi-codegen sees it.
type Param struct {
	Name     string `json:"name"`   // as in the spec
	In       string `json:"in"`     // path, query, header, cookie
	GoName   string `json:"goName"` // field name in <Op>Params, or argument name base for path params
	Required bool   `json:"required"`
	Pointer  bool   `json:"pointer"` // the <Op>Params field is a pointer (optional parameter)
	// GoType is oapi-codegen's Go type of the parameter: of the path argument
	// of the client's methods, or of the <Op>Params field without its
	// pointer. Types of other packages are qualified as oapi-codegen
	// qualifies them (openapi_types.UUID, time.Time, json.RawMessage). ""
	// when idemgen cannot tell (x-go-type overrides, objects, unions).
	GoType string `json:"goType,omitempty"`
	Pos    Pos    `json:"pos"`
}

// Carrier says where the idempotency key travels.
type Carrier string

// Carriers.
const (
	CarrierHeader Carrier = "header"
	CarrierBody   Carrier = "body"
	CarrierQuery  Carrier = "query"
)

// Key formats.
const (
	FormatToken  = "token"  // visible ASCII (0x21-0x7E)
	FormatUUID   = "uuid"   // any RFC 9562 UUID, canonical text form
	FormatUUIDv4 = "uuidv4" // version 4 only
	FormatUUIDv7 = "uuidv7" // version 7 only
)

// Key describes the idempotency key of an operation.
type Key struct {
	Carrier   Carrier `json:"carrier"`
	Name      string  `json:"name"` // header name (canonical as the contract spells it), query name, or body JSON pointer
	Required  bool    `json:"required"`
	Format    string  `json:"format"`
	MaxLength int     `json:"maxLength"`
	// Param is the spec's own declaration of the key as a header or query
	// parameter, nil when the spec does not declare it.
	Param *Param `json:"param,omitempty"`
	// BodyField is the Go field of a body key in oapi-codegen's type of the
	// request body (the strict server's <Op>RequestObject.Body), a string
	// or *string: "" when the key is not a body member or idemgen cannot
	// tell its field (a nested member, another body type than an object's
	// properties, another field type, more than one content type). The
	// strict middleware takes the key from it, else from the body's bytes.
	BodyField string `json:"bodyField,omitempty"`
	// GoKind says how the Go type of Param holds the key text, "" without
	// Param: KeyGoString for a type whose underlying type is string
	// (string, an enum type oapi-codegen names, a named type given with
	// x-go-type), KeyGoUUID for openapi_types.UUID.
	GoKind string `json:"goKind,omitempty"`
	// Schema is what the spec's declaration of the key (the parameter or
	// the body member) requires of its string beyond the contract, nil
	// when it requires none of it: the client emitter checks the keys its
	// helpers make against it.
	Schema *KeySchema `json:"schema,omitempty"`
	Pos    Pos        `json:"pos"`
}

// Go kinds of a key parameter (Key.GoKind).
const (
	KeyGoString = "string" // a type whose underlying type is string: converted to and from the key text
	KeyGoUUID   = "uuid"   // openapi_types.UUID: parsed from and printed to the key text
)

// KeySchema is what a key's declared schema requires of the key's text.
type KeySchema struct {
	Format    string `json:"format,omitempty"`    // the schema's format (uuid, ulid, ...)
	Pattern   string `json:"pattern,omitempty"`   // the schema's pattern, as written (ECMA-262)
	MinLength int    `json:"minLength,omitempty"` // the schema's minLength
}

// Body is the request body of an operation.
type Body struct {
	ContentTypes []string `json:"contentTypes"` // sorted
	JSON         bool     `json:"json"`         // one of them is read as JSON (MediaTypeReading; a range is not)
	Required     bool     `json:"required"`
	GoType       string   `json:"goType,omitempty"` // oapi-codegen's type of the default JSON body, e.g. NewPet or AddPetJSONBody
	// Alias is true when <Op>JSONRequestBody is an alias of GoType (a
	// component schema), false when it is a type defined from GoType (an
	// inline schema: a conversion is needed).
	Alias bool `json:"alias,omitempty"`
}

// Semantics is what a duplicate means.
type Semantics string

// Semantics.
const (
	Strict Semantics = "strict" // key + fingerprint; another fingerprint is a conflict
	Loose  Semantics = "loose"  // key only; replay whatever was stored
	Window Semantics = "window" // key optional; within the window a duplicate is replayed
)

// Failure policies.
const (
	FailuresRetry  = "retry"  // a 5xx or handler error frees the key
	FailuresReplay = "replay" // a stored 5xx is replayed
)

// Policy is the merged contract of one operation, every default filled.
type Policy struct {
	Semantics          Semantics     `json:"semantics"`
	Window             time.Duration `json:"window"`
	Volatile           []Pointer     `json:"volatile,omitempty"`
	Unordered          []Pointer     `json:"unordered,omitempty"`
	FingerprintHeaders []string      `json:"fingerprintHeaders,omitempty"`
	Scope              []string      `json:"scope"`
	ConflictStatus     int           `json:"conflictStatus"`
	InFlight           InFlight      `json:"inFlight"`
	Failures           string        `json:"failures"`
	Response           Response      `json:"response"`
	Request            Request       `json:"request"`
	Retry              Retry         `json:"retry"`
	// CompatibleFingerprints are fingerprint settings of another release of
	// the operation, the one before or the one after, whose records a retry
	// may find (compatible-fingerprints, in the contract's order), each whole:
	// a list an entry leaves out is the current one. A keyed retry whose
	// record was made under one of them is recognized (idem.Spec.CompatibleFingerprints).
	CompatibleFingerprints []FingerprintSettings `json:"compatibleFingerprints,omitempty"`
}

// FingerprintSettings are the settings of the fingerprint that a contract
// can change: an entry of Policy.CompatibleFingerprints.
type FingerprintSettings struct {
	Volatile           []Pointer `json:"volatile,omitempty"`
	Unordered          []Pointer `json:"unordered,omitempty"`
	FingerprintHeaders []string  `json:"fingerprintHeaders,omitempty"`
	Pos                Pos       `json:"pos"` // the entry
}

// Fingerprint returns the policy's own fingerprint settings (its
// volatile, unordered and fingerprint-headers), without a position.
func (p Policy) Fingerprint() FingerprintSettings {
	return FingerprintSettings{Volatile: p.Volatile, Unordered: p.Unordered, FingerprintHeaders: p.FingerprintHeaders}
}

// Same reports whether s and o compute the same fingerprint: each list
// as a set, header names in any case (as the runtime canonicalises them).
func (s FingerprintSettings) Same(o FingerprintSettings) bool {
	return s.key() == o.key()
}

// Pointers returns the texts of the pointers l (nil for none).
func Pointers(l []Pointer) []string {
	var out []string
	for _, p := range l {
		out = append(out, p.Pointer)
	}
	return out
}

// Flow writes l as a YAML flow sequence ("[a, b]"), as diagnostics quote
// a list of pointers or headers.
func Flow(l []string) string { return "[" + strings.Join(l, ", ") + "]" }

// key identifies what s computes (Same).
func (s FingerprintSettings) key() string {
	set := func(l []string) string {
		l = slices.Clone(l)
		slices.Sort(l)
		return strings.Join(slices.Compact(l), "\x00")
	}
	ptrs := func(l []Pointer) string { return set(Pointers(l)) }
	var hs []string
	for _, h := range s.FingerprintHeaders {
		hs = append(hs, strings.ToLower(strings.TrimSpace(h)))
	}
	return ptrs(s.Volatile) + "\x01" + ptrs(s.Unordered) + "\x01" + set(hs)
}

// Pointer is a volatile or unordered JSON pointer ("*" matches any member or
// index) with the body schema members it matched, as pointers whose "*"
// tokens over objects are expanded (array items stay "*").
type Pointer struct {
	Pointer string   `json:"pointer"`
	Matches []string `json:"matches,omitempty"`
	Pos     Pos      `json:"pos"`
}

// InFlight is the answer to a duplicate that arrives while the first is running.
type InFlight struct {
	Status     int           `json:"status"`
	RetryAfter time.Duration `json:"retryAfter"`
	Lease      time.Duration `json:"lease"`
	Wait       time.Duration `json:"wait"`
}

// Response says what is stored and replayed.
type Response struct {
	MaxBytes int64    `json:"maxBytes"`
	Headers  []string `json:"headers"`
}

// Request bounds how much of the body the server reads to fingerprint it.
type Request struct {
	MaxBytes int64 `json:"maxBytes"`
}

// Retry is the client helper's retry policy.
type Retry struct {
	MaxAttempts int      `json:"maxAttempts"`
	Backoff     Backoff  `json:"backoff"`
	On          []string `json:"on"`         // as written: "connection" and status codes
	Connection  bool     `json:"connection"` // retry on connection errors
	Statuses    []int    `json:"statuses"`   // retry on these statuses, sorted
}

// Jitter kinds.
const (
	JitterFull  = "full"  // delay uniform in [0, d]
	JitterEqual = "equal" // delay uniform in [d/2, d]
	JitterNone  = "none"  // delay d
)

// Backoff is an exponential backoff.
type Backoff struct {
	Initial    time.Duration `json:"initial"`
	Max        time.Duration `json:"max"`
	Multiplier float64       `json:"multiplier"`
	Jitter     string        `json:"jitter"`
}

// Delay returns the longest delay before retry n (n = 1 for the first
// retry): initial × multiplier^(n-1), capped by max. Every jitter kind stays
// at or under it.
//
// The sequence is computed exactly as the client computes it
// (runtime/idemclient, over github.com/cenkalti/backoff/v5's
// ExponentialBackOff with no randomization): in whole nanoseconds, each
// step truncated, and capped once the delay reaches max/multiplier. The
// generator's window check and the client's Policy.LongestSpan therefore
// agree to the nanosecond.
func (b Backoff) Delay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	cur := b.Initial
	for i := 1; i < n && cur < b.Max; i++ {
		cur = b.next(cur)
	}
	return min(cur, b.Max)
}

// next is the step of cenkalti/backoff's ExponentialBackOff.
func (b Backoff) next(cur time.Duration) time.Duration {
	if float64(cur) >= float64(b.Max)/b.Multiplier {
		return b.Max
	}
	return time.Duration(float64(cur) * b.Multiplier)
}

// LongestSpan is the longest time the client can spend between its first
// attempt and its last: the sum of the longest delays before each of the
// MaxAttempts-1 retries (request durations not counted). It saturates at
// the largest time.Duration instead of overflowing.
func (r Retry) LongestSpan() time.Duration {
	b := r.Backoff
	var total time.Duration
	cur := b.Initial
	for n := 1; n < r.MaxAttempts; n++ {
		d := min(cur, b.Max)
		if d == b.Max { // every later retry waits max too
			rest := time.Duration(r.MaxAttempts - n)
			if d > 0 && rest > (math.MaxInt64-total)/d {
				return time.Duration(math.MaxInt64)
			}
			return total + rest*d
		}
		total += d
		cur = b.next(cur)
	}
	return total
}

// InUseWait is the longest the client helper keeps waiting on
// IDEMPOTENCY_KEY_IN_USE answers (idemclient.Policy.InUseWait), as the
// time elapsed since the call's first such answer (the waits and the
// attempts' own durations alike), which do not count toward
// retry.max-attempts: the lease, plus the longest wait between two of its
// attempts, max(the Retry-After the server sends with them
// (in-flight.retry-after in whole seconds, at least 1),
// retry.backoff.max). A first request whose process had crashed by the
// client's first in-use answer keeps its key until its lease runs out, at
// most `lease` after that answer; the waits are each at most that margin,
// so the client's last attempt within the bound is answered after the
// lease ran out, and takes the key over. (With heartbeats, a holder that
// crashes later keeps the key until its last heartbeat + lease, which may
// be past the bound.) It saturates at the largest time.Duration.
func (p Policy) InUseWait() time.Duration {
	ra := p.InFlight.RetryAfter.Truncate(time.Second)
	if ra < p.InFlight.RetryAfter {
		ra += time.Second // the header's whole seconds, rounded up as the server does
	}
	ra = max(ra, time.Second)
	margin := max(ra, p.Retry.Backoff.Max)
	if p.InFlight.Lease > math.MaxInt64-margin {
		return time.Duration(math.MaxInt64)
	}
	return p.InFlight.Lease + margin
}
