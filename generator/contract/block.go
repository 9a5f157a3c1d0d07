// Package contract parses x-idempotency values (YAML nodes) into Blocks,
// merges them (built-in defaults < document root < operation) and checks
// what can be checked without the rest of the spec: field names and types,
// enums, durations, ranges, and the consistency of the merged policy.
//
// Every problem is reported with the position of the offending value and a
// stable rule id; parsing goes on after a problem so that one run reports
// every mistake.
package contract

import (
	"time"

	"github.com/idemgen/idemgen/generator/ir"
)

// Field is one value written in a block, with its position.
type Field[T any] struct {
	V   T
	Pos ir.Pos
	Set bool
}

func (f *Field[T]) set(v T, pos ir.Pos) { f.V, f.Pos, f.Set = v, pos, true }

// over returns o when it is set, f otherwise (o overrides f).
func over[T any](f, o Field[T]) Field[T] {
	if o.Set || !o.Pos.IsZero() { // set, or written with a bad value
		return o
	}
	return f
}

// Block is one x-idempotency value as written, before merging.
type Block struct {
	Pos ir.Pos // the value itself
	// Enabled is false for `x-idempotency: false`; a mapping or `true` enable.
	Enabled Field[bool]

	Semantics          Field[ir.Semantics]
	Window             Field[time.Duration]
	ApplyTo            []Field[string] // root only
	ApplyToSet         bool
	Volatile           Field[[]Field[string]]
	Unordered          Field[[]Field[string]]
	FingerprintHeaders Field[[]Field[string]]
	Key                KeyBlock
	Scope              Field[[]Field[string]]
	ConflictStatus     Field[int]
	InFlight           InFlightBlock
	Failures           Field[string]
	Response           ResponseBlock
	Request            RequestBlock
	Retry              RetryBlock
	// CompatibleFingerprints is compatible-fingerprints (operations only):
	// fingerprint settings of another release of the operation (the one
	// before, or the one after), as written.
	CompatibleFingerprints Field[[]CompatibleBlock]

	// base is the block Merge merged this one over (the document root's),
	// nil for a block as written: it tells a field the operation inherits
	// from one it writes.
	base *Block
}

// CompatibleBlock is one entry of compatible-fingerprints: each list it does
// not set is the operation's current one.
type CompatibleBlock struct {
	Pos ir.Pos // the entry
	// Refused is true when a value of the entry was refused (reported):
	// the entry is not compared with the others.
	Refused            bool
	Volatile           Field[[]Field[string]]
	Unordered          Field[[]Field[string]]
	FingerprintHeaders Field[[]Field[string]]
}

// KeyBlock is the key: field.
type KeyBlock struct {
	Pos       ir.Pos
	Carrier   Field[ir.Carrier] // which of header/body/query/cookie was written
	Name      Field[string]     // its value
	Required  Field[bool]
	Format    Field[string]
	MaxLength Field[int]
}

// InFlightBlock is the in-flight: field.
type InFlightBlock struct {
	Status     Field[int]
	RetryAfter Field[time.Duration]
	Lease      Field[time.Duration]
	Wait       Field[time.Duration]
}

// ResponseBlock is the response: field.
type ResponseBlock struct {
	MaxBytes Field[int64]
	Headers  Field[[]Field[string]]
}

// RequestBlock is the request: field.
type RequestBlock struct {
	MaxBytes Field[int64]
}

// RetryBlock is the retry: field.
type RetryBlock struct {
	Pos         ir.Pos
	MaxAttempts Field[int]
	Initial     Field[time.Duration]
	Max         Field[time.Duration]
	Multiplier  Field[float64]
	Jitter      Field[string]
	On          Field[[]Field[string]]
}

// Merge returns b with every field that o sets replaced by o's (o is the
// more specific block). The key carrier is replaced as a whole: an
// operation's `body:` discards the root's `header:`.
func Merge(b, o Block) Block {
	m := b
	m.base = &b
	m.Pos = o.Pos
	m.Enabled = over(b.Enabled, o.Enabled)
	m.Semantics = over(b.Semantics, o.Semantics)
	m.Window = over(b.Window, o.Window)
	m.Volatile = over(b.Volatile, o.Volatile)
	m.Unordered = over(b.Unordered, o.Unordered)
	m.FingerprintHeaders = over(b.FingerprintHeaders, o.FingerprintHeaders)
	if o.Key.Carrier.Set || !o.Key.Carrier.Pos.IsZero() { // set, or written with a bad value
		m.Key.Carrier, m.Key.Name = o.Key.Carrier, o.Key.Name
	}
	if !o.Key.Pos.IsZero() {
		m.Key.Pos = o.Key.Pos
	}
	m.Key.Required = over(b.Key.Required, o.Key.Required)
	m.Key.Format = over(b.Key.Format, o.Key.Format)
	m.Key.MaxLength = over(b.Key.MaxLength, o.Key.MaxLength)
	m.Scope = over(b.Scope, o.Scope)
	m.ConflictStatus = over(b.ConflictStatus, o.ConflictStatus)
	m.InFlight.Status = over(b.InFlight.Status, o.InFlight.Status)
	m.InFlight.RetryAfter = over(b.InFlight.RetryAfter, o.InFlight.RetryAfter)
	m.InFlight.Lease = over(b.InFlight.Lease, o.InFlight.Lease)
	m.InFlight.Wait = over(b.InFlight.Wait, o.InFlight.Wait)
	m.Failures = over(b.Failures, o.Failures)
	m.Response.MaxBytes = over(b.Response.MaxBytes, o.Response.MaxBytes)
	m.Response.Headers = over(b.Response.Headers, o.Response.Headers)
	m.Request.MaxBytes = over(b.Request.MaxBytes, o.Request.MaxBytes)
	if !o.Retry.Pos.IsZero() {
		m.Retry.Pos = o.Retry.Pos
	}
	m.Retry.MaxAttempts = over(b.Retry.MaxAttempts, o.Retry.MaxAttempts)
	m.Retry.Initial = over(b.Retry.Initial, o.Retry.Initial)
	m.Retry.Max = over(b.Retry.Max, o.Retry.Max)
	m.Retry.Multiplier = over(b.Retry.Multiplier, o.Retry.Multiplier)
	m.Retry.Jitter = over(b.Retry.Jitter, o.Retry.Jitter)
	m.Retry.On = over(b.Retry.On, o.Retry.On)
	m.CompatibleFingerprints = over(b.CompatibleFingerprints, o.CompatibleFingerprints)
	return m
}
