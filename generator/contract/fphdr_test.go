package contract_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/generator/contract"
	"github.com/idemgen/idemgen/generator/diag"
)

// M-6 (the trial's TestAuthorizationInFingerprint): fingerprint-headers
// listing a header whose value changes between the attempts of one call
// (a credential refreshed between them, a trace id, a signature, the
// client's clock) is a warning at the list entry: a retry after the change
// would be refused 422 IDEMPOTENCY_KEY_REUSED. A header that asks for
// something (X-Tenant, If-Match, Prefer) is not.
func TestFingerprintHeaderPerAttempt(t *testing.T) {
	src := `semantics: strict
fingerprint-headers:
  - X-Tenant
  - authorization
  - Date
  - traceparent
  - Signature
  - X-Request-Id
  - Cookie
  - If-Match
  - Prefer
  - X-Retry-Count
`
	got := map[int]string{}
	for _, d := range resolveDiags(t, src) {
		if d.Rule == "key-optional" {
			continue
		}
		assert.Equal(t, contract.RuleFingerprintHeaderPerAttempt, d.Rule, "%s", d)
		assert.Equal(t, diag.Warning, d.Severity, "%s", d)
		got[d.Pos.Line] = d.Message
		assert.Equal(t, 5, d.Pos.Col, "at the entry's value: %s", d)
	}
	for line, h := range map[int]string{4: "Authorization", 5: "Date", 6: "Traceparent", 7: "Signature", 8: "X-Request-Id", 9: "Cookie", 12: "X-Retry-Count"} {
		assert.Contains(t, got[line], "lists "+h+",", "line %d", line)
		assert.Contains(t, got[line], "422 IDEMPOTENCY_KEY_REUSED", "line %d", line)
	}
	assert.Len(t, got, 7, "X-Tenant, If-Match and Prefer ask for something: %v", got)

	// compatible-fingerprints entries describe another release: not reported there.
	for _, d := range resolveDiags(t, "{semantics: strict, compatible-fingerprints: [{fingerprint-headers: [Authorization]}]}") {
		assert.NotEqual(t, contract.RuleFingerprintHeaderPerAttempt, d.Rule, "%s", d)
	}

	// Where fingerprint-headers has no effect (loose semantics; window
	// with the key required), fingerprint-headers-no-effect says so, and
	// the 422 the per-attempt warning speaks of cannot happen: not
	// reported. (Before: reported at parse, whatever the semantics.)
	for _, src := range []string{
		"{semantics: loose, fingerprint-headers: [Authorization, X-Amz-Date]}",
		"{semantics: window, key: {required: true}, fingerprint-headers: [Authorization]}",
	} {
		var noEffect bool
		for _, d := range resolveDiags(t, src) {
			assert.NotEqual(t, contract.RuleFingerprintHeaderPerAttempt, d.Rule, "%s: %s", src, d)
			noEffect = noEffect || d.Rule == contract.RuleFingerprintHeadersNoEffect
		}
		assert.True(t, noEffect, src)
	}
}

// resolveDiags is the diagnostics of parsing src as an operation's block
// and resolving it.
func resolveDiags(t *testing.T, src string) diag.List {
	t.Helper()
	b, diags := parse(t, src, contract.Operation)
	_, rd, _ := contract.Resolve(b)
	return append(diags, rd...)
}

// UnstableHeader and FingerprintCandidate agree: a header is one a
// contract should fingerprint only if its value does not change between
// attempts.
func TestUnstableHeaderNotCandidate(t *testing.T) {
	for _, h := range []string{"Authorization", "Proxy-Authorization", "Cookie", "WWW-Authenticate", "Date", "User-Agent",
		"traceparent", "tracestate", "b3", "X-B3-TraceId", "X-Amzn-Trace-Id", "Signature", "Signature-Input",
		"X-Request-Id", "Request-Id", "X-Correlation-Id", "X-Trace-Id", "X-Retry-Count", "X-Timestamp", "Client-Time", "X-Nonce",
		// The reviewer's (check rule fingerprint-header-per-attempt missed them,
		// header-not-fingerprinted recommended them).
		"X-Amz-Date", "X-Amz-Security-Token", "Baggage", "Sentry-Trace", "Uber-Trace-Id", "X-Cloud-Trace-Context",
		"X-Datadog-Trace-Id", "X-Datadog-Parent-Id", "X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Csrf-Token"} {
		assert.NotEmpty(t, contract.UnstableHeader(h), h)
		assert.False(t, contract.FingerprintCandidate(h), h)
	}
	for _, h := range []string{"X-Tenant", "X-Account", "If-Match", "If-None-Match", "Prefer", "Accept", "Content-Type", ""} {
		assert.Empty(t, contract.UnstableHeader(h), h)
	}
}
