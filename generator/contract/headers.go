package contract

import (
	"net/http"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem"
)

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
	if idem.NeverStoredHeader(c) {
		return false
	}
	switch c {
	case "", "Content-Type", "Content-Encoding",
		"Request-Id", "X-Request-Id", "X-Correlation-Id", "Correlation-Id", "Traceparent", "Tracestate",
		"Ratelimit", "Ratelimit-Policy":
		return false
	}
	for _, p := range []string{"Ratelimit-", "X-Ratelimit-", "X-Rate-Limit-"} {
		if strings.HasPrefix(c, p) {
			return false
		}
	}
	return true
}
