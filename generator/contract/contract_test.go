package contract_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/contract"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/runtime/idem"
)

func node(t testing.TB, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(src), &doc))
	return doc.Content[0]
}

func loc(file string) contract.Locator {
	return func(n *yaml.Node, ptr string) ir.Pos {
		return ir.Pos{File: file, Line: n.Line, Col: n.Column, Pointer: ptr}
	}
}

func parse(t testing.TB, src string, level contract.Level) (contract.Block, diag.List) {
	return contract.Parse(node(t, src), level, loc("x.yaml"))
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"10m", 10 * time.Minute, true},
		{"24h", 24 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"500ms", 500 * time.Millisecond, true},
		{"1h30m", 90 * time.Minute, true},
		{"", 0, false},
		{"10", 0, false},
		{"10 minutes", 0, false},
		{"d", 0, false},
		{"7dd", 0, false},
		{"99999999999d", 0, false},
		{"1d-23h", 0, false},
		{"+5m", 0, false},
		{"-5s", 0, false},
		{"1h+30m", 0, false},
		{"1h-30m", 0, false},
	}
	for _, tt := range tests {
		got, err := contract.ParseDuration(tt.in)
		if !tt.ok {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
	// A duration that overflows is too long, not negative or malformed.
	for _, long := range []string{"99999999999d", "100000d2562047h", "9999999999h", "1d9999999999h", "2562048h"} {
		_, err := contract.ParseDuration(long)
		assert.ErrorContains(t, err, "is too long", long)
	}
	for _, bad := range []string{"99999999999dx", "7dd", "10 minutes"} {
		_, err := contract.ParseDuration(bad)
		assert.ErrorContains(t, err, "is not a duration", bad)
	}
}

func TestCheckPointer(t *testing.T) {
	for _, ok := range []string{"", "/a", "/a/*/b", "/a~1b", "/~0", "/"} {
		assert.NoError(t, contract.CheckPointer(ok), ok)
	}
	for _, bad := range []string{"a", "/a~", "/a~2", "*/a"} {
		assert.Error(t, contract.CheckPointer(bad), bad)
	}
	assert.Equal(t, []string{"a/b", "~c", "*"}, contract.SplitPointer("/a~1b/~0c/*"))
}

// TestDefaults checks every built-in default the runtime relies on.
func TestDefaults(t *testing.T) {
	b, diags := parse(t, "semantics: strict", contract.Operation)
	require.Empty(t, diags)
	r, diags, ok := contract.Resolve(contract.Merge(contract.Block{}, b))
	require.True(t, ok)
	require.Empty(t, diags)
	p := r.Policy
	assert.Equal(t, ir.Strict, p.Semantics)
	assert.Equal(t, 24*time.Hour, p.Window)
	assert.Equal(t, ir.Key{Carrier: ir.CarrierHeader, Name: "Idempotency-Key", Required: true, Format: "token", MaxLength: 255, Pos: r.Key.Pos}, r.Key)
	assert.Equal(t, []string{"principal"}, p.Scope)
	assert.Equal(t, 422, p.ConflictStatus)
	assert.Equal(t, ir.InFlight{Status: 409, RetryAfter: 2 * time.Second, Lease: 30 * time.Second, Wait: 0}, p.InFlight)
	assert.Equal(t, "retry", p.Failures)
	assert.Equal(t, ir.Response{MaxBytes: 1 << 20, Headers: []string{}}, p.Response)
	assert.Equal(t, ir.Request{MaxBytes: 1 << 20}, p.Request)
	assert.Equal(t, 4, p.Retry.MaxAttempts)
	assert.Equal(t, ir.Backoff{Initial: 500 * time.Millisecond, Max: 8 * time.Second, Multiplier: 2, Jitter: "full"}, p.Retry.Backoff)
	assert.Equal(t, []string{"connection", "408", "409", "425", "429", "500", "502", "503", "504"}, p.Retry.On)
	assert.True(t, p.Retry.Connection)
	assert.Equal(t, []int{408, 409, 425, 429, 500, 502, 503, 504}, p.Retry.Statuses)

	w, _ := parse(t, "semantics: window", contract.Operation)
	r, _, _ = contract.Resolve(w)
	assert.False(t, r.Key.Required, "window semantics: the key is optional by default")
}

// TestMergeOrder: built-in defaults < document root < operation.
func TestMergeOrder(t *testing.T) {
	root, diags := parse(t, `
semantics: loose
window: 1h
key: {header: X-Key, max-length: 64}
retry: {max-attempts: 3, backoff: {initial: 1s}}
apply-to: [post]
`, contract.Root)
	require.Empty(t, diags)
	op, diags := parse(t, `
semantics: strict
key: {body: /request_key, required: false}
retry: {backoff: {max: 4s}}
`, contract.Operation)
	require.Empty(t, diags)
	r, _, ok := contract.Resolve(contract.Merge(root, op))
	require.True(t, ok)
	assert.Equal(t, ir.Strict, r.Policy.Semantics)               // operation
	assert.Equal(t, time.Hour, r.Policy.Window)                  // root
	assert.Equal(t, ir.CarrierBody, r.Key.Carrier)               // operation replaces the carrier
	assert.Equal(t, "/request_key", r.Key.Name)                  //
	assert.Equal(t, 64, r.Key.MaxLength)                         // root
	assert.False(t, r.Key.Required)                              // operation
	assert.Equal(t, 3, r.Policy.Retry.MaxAttempts)               // root
	assert.Equal(t, time.Second, r.Policy.Retry.Backoff.Initial) // root
	assert.Equal(t, 4*time.Second, r.Policy.Retry.Backoff.Max)   // operation
	assert.Equal(t, 2.0, r.Policy.Retry.Backoff.Multiplier)      // built-in
	assert.Equal(t, 30*time.Second, r.Policy.InFlight.Lease)     // built-in
	assert.Equal(t, "x.yaml", r.Key.Pos.File)
}

func TestBooleans(t *testing.T) {
	b, diags := parse(t, "true", contract.Operation)
	assert.Empty(t, diags)
	assert.True(t, b.Enabled.Set && b.Enabled.V)
	b, _ = parse(t, "false", contract.Operation)
	assert.True(t, b.Enabled.Set && !b.Enabled.V)
	_, diags = parse(t, "true", contract.Root)
	require.Len(t, diags, 1)
	assert.Equal(t, "wrong-type", diags[0].Rule)
}

// TestCollectsEverything: one block with many mistakes reports each of them,
// each at the line of the offending value.
func TestCollectsEverything(t *testing.T) {
	_, diags := parse(t, `semantics: sometimes
window: forever
volatile: [client_time]
key: {cookie: k, max-length: -1}
unknown: 1
retry: {on: [422, teapot]}
`, contract.Operation)
	rules := map[string]int{}
	for _, d := range diags {
		rules[d.Rule] = d.Pos.Line
	}
	assert.Equal(t, map[string]int{"bad-enum": 6, "bad-duration": 2, "bad-pointer": 3, "key-in-cookie": 4, "bad-value": 4, "unknown-field": 5}, rules)
	for _, d := range diags {
		if d.Rule == "key-in-cookie" {
			assert.Equal(t, diag.Unsupported, d.Kind)
		}
	}
}

func ExampleParse() {
	var doc yaml.Node
	_ = yaml.Unmarshal([]byte("semantics: strict\nwindow: 10m\nvolatile: [/client_time]\n"), &doc)
	b, _ := contract.Parse(doc.Content[0], contract.Operation, func(n *yaml.Node, ptr string) ir.Pos {
		return ir.Pos{File: "openapi.yaml", Line: n.Line, Col: n.Column, Pointer: ptr}
	})
	r, diags, _ := contract.Resolve(b)
	fmt.Println(r.Policy.Semantics, r.Policy.Window, r.Policy.Volatile[0].Pointer, r.Key.Name, len(diags))
	// Output: strict 10m0s /client_time Idempotency-Key 0
}

// FuzzParse feeds random YAML at x-idempotency: Parse and Resolve must never
// panic, and every diagnostic must carry a position.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"true", "false", "semantics: strict", "[1, 2]", "null", "~", "{a: *b}",
		"semantics: strict\nwindow: 10m\nvolatile: [/a, /b/*/c]\nkey: {header: Idempotency-Key, format: uuid}\n",
		"retry: {max-attempts: 1000, backoff: {multiplier: .nan, initial: 1ns, max: 9999999h}, on: [connection, 0x1f7]}",
		"in-flight: {status: 409, retry-after: -1s, lease: 7d, wait: 1d1d}\nscope: []\n",
		"key: {body: '/a~', query: q, header: 'a b', cookie: c}",
		"&a [*a]", "window: !!binary aGVsbG8=", "response: {max-bytes: 1e99, headers: [a, A, a]}",
		"volatile: [/a]\ncompatible-fingerprints: [{volatile: [/a, '/b~', /a]}, {}, {unordered: ['']}, {fingerprint-headers: [X-T, x-t, 'a b']}, 7, {volatil: []}]",
		"semantics: strict\ncompatible-fingerprints: {volatile: [/a]}",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, src string, root bool) {
		watchdog := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("HANG on %q", src)) })
		defer watchdog.Stop()
		var doc yaml.Node
		if yaml.Unmarshal([]byte(src), &doc) != nil || len(doc.Content) == 0 {
			return
		}
		level := contract.Operation
		if root {
			level = contract.Root
		}
		check := func(diags diag.List) {
			for _, d := range diags {
				if d.Pos.File == "" || d.Pos.Line == 0 {
					t.Fatalf("diagnostic without a position: %s", d)
				}
				if strings.TrimSpace(d.Message) == "" || d.Rule == "" {
					t.Fatalf("diagnostic without message or rule: %#v", d)
				}
			}
		}
		b, diags := contract.Parse(doc.Content[0], level, loc("f.yaml"))
		check(diags)
		base := contract.Block{Pos: ir.Pos{File: "f.yaml", Line: 1, Col: 1}}
		_, diags, _ = contract.Resolve(contract.Merge(base, b))
		for i := range diags {
			if diags[i].Pos.Line == 0 {
				t.Fatalf("resolve diagnostic without a position: %s", diags[i])
			}
		}
	})
}

// response.headers refuses exactly the headers the runtime refuses
// (idem.NeverStoredHeader, which both use): check accepts no contract that
// generate would then fail on.
func TestResponseHeadersInStepWithRuntime(t *testing.T) {
	for _, h := range []string{
		"Set-Cookie", "set-cookie2", "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "TE", "Trailer",
		"Upgrade", "Proxy-Authenticate", "Proxy-Authorization", "Content-Length", "Date", "Idempotent-Replayed", "Retry-After",
		"Location", "ETag", "Content-Location", "Content-Type", "Content-Encoding", "X-Custom", "Last-Modified",
	} {
		_, diags := parse(t, "{semantics: strict, response: {headers: ['"+h+"']}}", contract.Operation)
		_, err := idem.Compile(idem.Spec{Operation: "op", Semantics: idem.Strict, Response: idem.ResponseSpec{Headers: []string{h}}})
		assert.Equal(t, err != nil, diags.HasErrors(), "%s: runtime %v, contract %v", h, err, diags)
		if diags.HasErrors() {
			assert.Equal(t, "bad-value", diags[0].Rule, h)
		}
	}
}

// TestRefNotFollowed: a $ref in an x-idempotency block says that it is not
// followed and what to do instead, and gives no knock-on semantics-missing.
func TestRefNotFollowed(t *testing.T) {
	b, diags := parse(t, "{$ref: '#/components/x-idem/strict'}", contract.Operation)
	require.Len(t, diags, 1, "%v", diags)
	assert.Contains(t, diags[0].Message, "not resolve x-idempotency through $ref")
	assert.Contains(t, diags[0].Message, "overlay")
	_, rdiags, ok := contract.Resolve(contract.Merge(contract.Block{}, b))
	assert.False(t, ok)
	for _, d := range rdiags {
		assert.NotEqual(t, "semantics-missing", d.Rule, "%s", d)
	}
	// With semantics written beside it, the block still resolves.
	b, diags = parse(t, "{$ref: '#/x', semantics: strict}", contract.Operation)
	require.Len(t, diags, 1, "%v", diags)
	_, _, ok = contract.Resolve(contract.Merge(contract.Block{}, b))
	assert.True(t, ok)
}

// TestDurationWithoutUnitHint: the duration a bad-duration message
// suggests for a number without a unit is itself accepted (no sign).
func TestDurationWithoutUnitHint(t *testing.T) {
	for _, in := range []string{"30", "-30", "+30", "1.5", "-1.5", "0", ".5"} {
		_, diags := parse(t, "{semantics: strict, in-flight: {lease: "+in+"}}", contract.Operation)
		require.Len(t, diags, 1, in)
		msg := diags[0].Message
		i := strings.Index(msg, "such as ")
		require.GreaterOrEqual(t, i, 0, msg)
		such, _, _ := strings.Cut(msg[i+len("such as "):], ",")
		d, err := contract.ParseDuration(such)
		assert.NoError(t, err, "%s: %s", in, msg)
		assert.Positive(t, d, "%s: %s", in, msg)
		if strings.ContainsAny(in, "+-") {
			assert.Contains(t, msg, "sign", msg)
		}
	}
}

// compatible-fingerprints resolves each entry whole: a list it leaves out is
// the operation's current one (merged from the root), a list it gives
// replaces it; the entries keep their order and positions.
func TestCompatibleFingerprintsResolve(t *testing.T) {
	root, diags := parse(t, "{semantics: strict, fingerprint-headers: [X-Tenant]}", contract.Root)
	require.Empty(t, diags)
	op, diags := parse(t, `volatile: [/a, /b]
unordered: [/c]
compatible-fingerprints:
  - volatile: [/a]
  - {fingerprint-headers: [], unordered: []}
`, contract.Operation)
	require.Empty(t, diags)
	r, diags, ok := contract.Resolve(contract.Merge(root, op))
	require.True(t, ok)
	require.Empty(t, diags)
	prev := r.Policy.CompatibleFingerprints
	require.Len(t, prev, 2)
	ptrs := func(l []ir.Pointer) (out []string) {
		for _, p := range l {
			out = append(out, p.Pointer)
		}
		return out
	}
	assert.Equal(t, []string{"/a"}, ptrs(prev[0].Volatile))
	assert.Equal(t, []string{"/c"}, ptrs(prev[0].Unordered))
	assert.Equal(t, []string{"X-Tenant"}, prev[0].FingerprintHeaders)
	assert.Equal(t, 4, prev[0].Pos.Line)
	assert.Equal(t, []string{"/a", "/b"}, ptrs(prev[1].Volatile))
	assert.Empty(t, prev[1].Unordered)
	assert.Empty(t, prev[1].FingerprintHeaders)
	assert.Equal(t, 5, prev[1].Pos.Line)

	// At the root it is misplaced, and not inherited.
	root, diags = parse(t, "{semantics: strict, compatible-fingerprints: [{volatile: [/a]}]}", contract.Root)
	require.Len(t, diags, 1)
	assert.Equal(t, "misplaced-field", diags[0].Rule)
	r, _, _ = contract.Resolve(contract.Merge(root, contract.Block{}))
	assert.Empty(t, r.Policy.CompatibleFingerprints)
}

// TestRetryOnQuotedStatus: a retry.on status written as a string in plain
// decimal ("503"), as idemgen's IR writes retry.on, is the status (one
// entry with 503 unquoted: duplicate-entry); a quoted odd spelling is
// bad-value as it is unquoted; max-attempts: "5" stays wrong-type.
func TestRetryOnQuotedStatus(t *testing.T) {
	b, diags := parse(t, `{semantics: strict, retry: {on: [connection, "503", 502, "408"]}}`, contract.Operation)
	require.Empty(t, diags)
	var on []string
	for _, f := range b.Retry.On.V {
		on = append(on, f.V)
	}
	assert.Equal(t, []string{"connection", "503", "502", "408"}, on)

	_, diags = parse(t, `{semantics: strict, retry: {on: ["503", 503, "+502", "0504", "0x1F7"], max-attempts: "5"}}`, contract.Operation)
	var rules []string
	for _, d := range diags {
		rules = append(rules, d.Rule)
	}
	assert.Equal(t, []string{"duplicate-entry", "bad-value", "bad-value", "bad-value", "wrong-type"}, rules, "%v", diags)
}
