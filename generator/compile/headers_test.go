package compile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
)

// TestHeaderNotFingerprinted: an idempotent operation that declares a
// request header fingerprint-headers does not list gets
// [header-not-fingerprinted] at the parameter's declaration (a $ref'd
// one's at its component, a path item's at the path item), about the
// operation, required or not; not for a header listed in another case, the
// key's own header, another conventional key, Content-Type, headers that
// say who calls (Authorization, WWW-Authenticate, an apiKey scheme's
// header) or name one attempt (X-Request-Id, traceparent, User-Agent),
// Accept*, nor under loose semantics. A header the path item and the
// operation both declare, in two cases, is reported once, at the
// operation's. If-Match is reported: a retry
// sends it again, another value is another request. Window says what
// happens to requests without a key.
func TestHeaderNotFingerprinted(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: Headers, version: 1.0.0}
components:
  securitySchemes:
    apiKey: {type: apiKey, in: header, name: X-Api-Key}
  parameters:
    Tenant: {name: X-Tenant, in: header, required: true, schema: {type: string}}
paths:
  /orders:
    parameters:
      - {name: X-Region, in: header, schema: {type: string}}
    post:
      x-idempotency: {semantics: strict, fingerprint-headers: [x-channel]}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
        - $ref: '#/components/parameters/Tenant'
        - {name: X-Channel, in: header, schema: {type: string}}
        - {name: idempotency-key-v2, in: header, schema: {type: string}}
        - {name: content-type, in: header, schema: {type: string}}
        - {name: Authorization, in: header, schema: {type: string}}
        - {name: WWW-Authenticate, in: header, schema: {type: string}}
        - {name: x-api-key, in: header, schema: {type: string}}
        - {name: X-Request-Id, in: header, schema: {type: string}}
        - {name: traceparent, in: header, schema: {type: string}}
        - {name: User-Agent, in: header, schema: {type: string}}
        - {name: Accept-Language, in: header, schema: {type: string}}
        - {name: If-Match, in: header, schema: {type: string}}
        - {name: dryRun, in: query, schema: {type: boolean}}
      responses: {'201': {description: ok}}
  /carts:
    parameters:
      - {name: x-tenant, in: header, schema: {type: string}}
    post:
      x-idempotency: {semantics: window, window: 1h}
      parameters:
        - {name: X-Tenant, in: header, schema: {type: string}}
      responses: {'201': {description: ok}}
  /notes:
    post:
      x-idempotency: {semantics: loose}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
        - {name: X-Tenant, in: header, schema: {type: string}}
      responses: {'201': {description: ok}}
`), 0o644))
	_, diags := compile.Compile(spec, compile.Options{})
	var got []diag.Diagnostic
	for _, d := range diags {
		if d.Rule == compile.RuleHeaderNotFingerprinted {
			got = append(got, d)
		}
	}
	require.Len(t, got, 4, "%v", diags)
	type at struct {
		line int
		ops  []string
		name string
	}
	want := []at{
		{7, []string{"POST /orders"}, "X-Tenant"},  // the component's declaration
		{11, []string{"POST /orders"}, "X-Region"}, // the path item's
		{27, []string{"POST /orders"}, "If-Match"},
		{36, []string{"POST /carts"}, "X-Tenant"}, // the operation's, not its path item's x-tenant,
	}
	for i, w := range want {
		d := got[i]
		assert.Equal(t, diag.Warning, d.Severity, "%s", d)
		assert.Equal(t, w.line, d.Pos.Line, "%s", d)
		assert.Equal(t, w.ops, d.Ops, "%s", d)
		assert.Contains(t, d.Message, "declares the request header "+w.name+", which the fingerprint does not cover", "%s", d)
		assert.Contains(t, d.Message, "list it in fingerprint-headers, or silence [header-not-fingerprinted] for the operation", "%s", d)
	}
	assert.Contains(t, got[0].Message, "a request with the key of an earlier one and another X-Tenant gets the earlier one's replay, not 422 IDEMPOTENCY_KEY_REUSED")
	assert.Contains(t, got[3].Message, "two requests without a key that differ only in X-Tenant are taken for one: the second gets the first's replay")
	assert.Empty(t, diag.CheckIgnoreRule(compile.RuleHeaderNotFingerprinted), "an ignore may name it")
}

// TestHeaderNotFingerprintedPerAttempt: headers that change between the
// attempts of one call (tracing ids, retry counters, client clocks,
// message signatures) are not reported: fingerprinting them, as the
// warning advises, would make every retry a 422. Names the body's volatile
// list holds count with an X- prefix dropped; X-Tenant still is reported.
func TestHeaderNotFingerprintedPerAttempt(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: Headers, version: 1.0.0}
paths:
  /a:
    post:
      x-idempotency: {semantics: strict}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
        - {name: X-Trace-Id, in: header, schema: {type: string}}
        - {name: X-Span-Id, in: header, schema: {type: string}}
        - {name: X-B3-TraceId, in: header, schema: {type: string}}
        - {name: x-b3-spanid, in: header, schema: {type: string}}
        - {name: b3, in: header, schema: {type: string}}
        - {name: X-Amzn-Trace-Id, in: header, schema: {type: string}}
        - {name: X-Retry-Count, in: header, schema: {type: string}}
        - {name: X-Attempt, in: header, schema: {type: string}}
        - {name: X-Timestamp, in: header, schema: {type: string}}
        - {name: Client-Time, in: header, schema: {type: string}}
        - {name: Signature, in: header, schema: {type: string}}
        - {name: Signature-Input, in: header, schema: {type: string}}
        - {name: X-Tenant, in: header, schema: {type: string}}
      responses: {'201': {description: ok}}
`), 0o644))
	_, diags := compile.Compile(spec, compile.Options{})
	var got []string
	for _, d := range diags {
		if d.Rule == compile.RuleHeaderNotFingerprinted {
			got = append(got, d.Message)
		}
	}
	require.Len(t, got, 1, "%v", diags)
	assert.Contains(t, got[0], "declares the request header X-Tenant,")
}

// TestKeyHeaderPointer: a key names a header (or a body member) only when
// it travels there.
func TestKeyHeaderPointer(t *testing.T) {
	assert.Equal(t, "Idempotency-Key", compile.KeyHeader(ir.CarrierHeader, "Idempotency-Key"))
	assert.Empty(t, compile.KeyHeader(ir.CarrierQuery, "idempotency_key"))
	assert.Empty(t, compile.KeyHeader(ir.CarrierBody, "/requestId"))
	assert.Equal(t, "/requestId", compile.KeyPointer(ir.CarrierBody, "/requestId"))
	assert.Empty(t, compile.KeyPointer(ir.CarrierHeader, "Idempotency-Key"))
}
