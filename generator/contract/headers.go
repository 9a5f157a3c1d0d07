package contract

import (
	"net/http"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem"
)

// perAttemptHeaders are the headers that name one attempt, or its trace,
// rather than what a request asks or what its response says: request and
// correlation ids, W3C trace context. Neither a fingerprint nor a replay
// should carry them (canonical names).
var perAttemptHeaders = []string{
	"Request-Id", "X-Request-Id", "X-Correlation-Id", "Correlation-Id", "Traceparent", "Tracestate",
}

// ReplayCandidate reports whether a response header a spec declares on a
// 2xx response belongs in response.headers: whether a replay without it
// would differ from the first response in a way a client may rely on
// (Location, ETag, Content-Location, ...). It is false for the headers the
// runtime never stores (Set-Cookie, hop-by-hop and framing headers, Date),
// for those it writes itself (Content-Type and Content-Encoding, always replayed;
// Idempotent-Replayed, Retry-After), and for those that describe one
// response rather than its outcome (rate limits, request and trace ids).
func ReplayCandidate(name string) bool {
	c := http.CanonicalHeaderKey(strings.TrimSpace(name))
	if idem.NeverStoredHeader(c) || slices.Contains(perAttemptHeaders, c) {
		return false
	}
	switch c {
	case "", "Content-Type", "Content-Encoding", "Ratelimit", "Ratelimit-Policy":
		return false
	}
	for _, p := range []string{"Ratelimit-", "X-Ratelimit-", "X-Rate-Limit-"} {
		if strings.HasPrefix(c, p) {
			return false
		}
	}
	return true
}

// notFingerprinted are the request headers (canonical names) that
// FingerprintCandidate turns down besides perAttemptHeaders, by reason.
var notFingerprinted = []string{
	// The media type is in the fingerprint already; the others frame
	// the message or its hop, not its meaning.
	"Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Proxy-Connection",
	"Te", "Trailer", "Upgrade", "Expect", "Host",
	// Who calls, or how it proves it: the key's scope (principal) is
	// their business, and an SCA or other challenge's answer changes
	// between attempts (Adyen declares WWW-Authenticate on its requests).
	"Authorization", "Proxy-Authorization", "Cookie", "Www-Authenticate", "Proxy-Authenticate",
	// One attempt's: the client's software and clock.
	"User-Agent", "Date",
	// Content negotiation (Accept, Accept-*): which representation of the
	// outcome comes back, not what is done; a replay sends the stored one.
	"Accept",
}

// FingerprintCandidate reports whether a request header an idempotent
// operation declares belongs in fingerprint-headers: whether another
// value of it may ask for something else, so that a request with the key
// of an earlier one and another value of it must not get the earlier
// one's replay (X-Tenant, X-Account, Prefer, If-Match: a retry sends the
// same value again). It is false for the headers in the fingerprint
// already (Content-Type, by its media type), the framing and hop-by-hop
// headers, those that say who calls (Authorization, Cookie,
// WWW-Authenticate, Proxy-*: the scope's business), those of one attempt
// (request and trace ids, User-Agent, Date) and content negotiation
// (Accept, Accept-*). The name is matched case-insensitively; the key's own
// header is the caller's to leave out.
func FingerprintCandidate(name string) bool {
	c := http.CanonicalHeaderKey(strings.TrimSpace(name))
	return c != "" && !slices.Contains(perAttemptHeaders, c) && !slices.Contains(notFingerprinted, c) && !strings.HasPrefix(c, "Accept-")
}
