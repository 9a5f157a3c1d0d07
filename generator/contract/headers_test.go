package contract_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/generator/contract"
)

// TestFingerprintCandidate: a request header that may change what is
// asked is a candidate, in any case; the fingerprinted media type,
// framing, who calls, one attempt's headers and content negotiation are
// not, nor the names the body's volatile list holds, with an X- prefix
// dropped (X-Trace-Id, X-Retry-Count, X-Timestamp): fingerprinted, they
// would make every retry a 422. The request and trace ids are turned down
// on both sides.
func TestFingerprintCandidate(t *testing.T) {
	for _, h := range []string{"X-Tenant", "x-tenant", " X-Account ", "If-Match", "If-None-Match", "Prefer", "X-Dry-Run"} {
		assert.True(t, contract.FingerprintCandidate(h), h)
	}
	for _, h := range []string{"", "Content-Type", "content-length", "Transfer-Encoding", "Host", "Expect",
		"Authorization", "cookie", "WWW-Authenticate", "Proxy-Authorization",
		"X-Request-Id", "request-id", "X-Correlation-ID", "traceparent", "Tracestate", "User-Agent", "Date",
		"Accept", "accept-language", "Accept-Encoding",
		"X-Trace-Id", "Trace-Id", "x-span-id", "X-B3-TraceId", "X-B3-Sampled", "b3", "X-Amzn-Trace-Id",
		"X-Retry-Count", "Retry-Attempt", "X-Attempt", "X-Timestamp", "Client-Time", "X-Nonce",
		"Signature", "signature-input"} {
		assert.False(t, contract.FingerprintCandidate(h), h)
	}
	// Cache-Control, Expires and Pragma are always replayed (idem.AlwaysStoredHeader):
	// a response that declares them draws no response-header-not-replayed warning.
	for _, h := range []string{"X-Request-Id", "traceparent", "X-Correlation-Id", "X-B3-TraceId", "X-Amzn-Trace-Id", "Signature",
		"Content-Type", "Content-Encoding", "Cache-Control", "cache-control", "Expires", "Pragma"} {
		assert.False(t, contract.ReplayCandidate(h), h)
	}
	assert.True(t, contract.ReplayCandidate("Location"))
}
