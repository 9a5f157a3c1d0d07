package initspec_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
)

// TestFingerprintHeadersProposed: the request headers an operation
// declares (its path item's and $ref'd ones included) that check would
// report [header-not-fingerprinted] for are proposed as its
// fingerprint-headers, marked to confirm: check then reports them as
// unconfirmed, never as header-not-fingerprinted, and once confirmed they
// are fingerprinted. The key, request and trace ids, retry counters, client
// clocks, signatures and who calls are not proposed,
// nor anything for a multipart operation (proposed loose, which compares
// no fingerprint).
func TestFingerprintHeadersProposed(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: T, version: 1.0.0}
components:
  parameters:
    Tenant: {name: X-Tenant, in: header, required: true, schema: {type: string}}
    Key: {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
paths:
  /orders:
    parameters:
      - {name: X-Region, in: header, schema: {type: string}}
    post:
      parameters:
        - $ref: '#/components/parameters/Key'
        - $ref: '#/components/parameters/Tenant'
        - {name: X-Request-Id, in: header, schema: {type: string}}
        - {name: Authorization, in: header, schema: {type: string}}
        - {name: X-Trace-Id, in: header, schema: {type: string}}
        - {name: X-B3-TraceId, in: header, schema: {type: string}}
        - {name: X-Retry-Count, in: header, schema: {type: string}}
        - {name: X-Timestamp, in: header, schema: {type: string}}
        - {name: Signature, in: header, schema: {type: string}}
      responses: {'201': {description: created}}
  /plain:
    post:
      parameters:
        - $ref: '#/components/parameters/Key'
      responses: {'201': {description: created}}
  /uploads:
    post:
      parameters:
        - $ref: '#/components/parameters/Key'
        - $ref: '#/components/parameters/Tenant'
      requestBody:
        content:
          multipart/form-data:
            schema: {type: object}
      responses: {'201': {description: created}}
`), 0o644))
	p, ov := propose(t, spec)
	require.Len(t, p.Candidates, 3)
	assert.Equal(t, []string{"X-Region", "X-Tenant"}, p.Candidates[0].FingerprintHeaders, "/orders")
	assert.Empty(t, p.Candidates[1].FingerprintHeaders, "/plain")
	assert.Empty(t, p.Candidates[2].FingerprintHeaders, "/uploads: loose")
	assert.Contains(t, string(p.Overlay), "fingerprint-headers: [X-Region, X-Tenant] # TODO(idemgen): confirm: request headers the operation declares")
	assert.Contains(t, string(p.Overlay), "x-idempotency: true", "/plain keeps the short form")

	unconfirmed := 0
	for _, d := range checkWith(t, spec, ov) {
		assert.NotEqual(t, compile.RuleHeaderNotFingerprinted, d.Rule, "%s", d)
		if d.Rule == "unconfirmed" && regexp.MustCompile(`fingerprint-headers`).MatchString(d.Message) {
			unconfirmed++
		}
	}
	assert.Equal(t, 1, unconfirmed)

	confirmed := filepath.Join(t.TempDir(), "confirmed.overlay.yaml")
	require.NoError(t, os.WriteFile(confirmed, regexp.MustCompile(` # TODO\(idemgen\):.*`).ReplaceAll(p.Overlay, nil), 0o644))
	s, diags := compile.Compile(spec, compile.Options{Overlays: []string{confirmed}})
	require.False(t, diags.HasErrors(), "%v", diags)
	for _, d := range diags {
		assert.NotEqual(t, compile.RuleHeaderNotFingerprinted, d.Rule, "%s", d)
	}
	require.Len(t, s.Operations, 3)
	assert.Equal(t, []string{"X-Region", "X-Tenant"}, s.Operations[0].Policy.FingerprintHeaders)
}
