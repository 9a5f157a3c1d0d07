package contract

import (
	"net/http"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem"
)

// perAttemptHeaders are the headers that name one attempt, or its trace,
// or sign it, rather than what a request asks or what its response says:
// request and correlation ids, W3C trace context and baggage, AWS X-Ray,
// Sentry, Jaeger, Google Cloud Trace, RFC 9421 HTTP message signatures
// (they cover the attempt's own headers, Date among them), AWS SigV4's
// clock (X-Amz-Date). Neither a fingerprint nor a replay should carry
// them (canonical names); nor those of perAttemptPrefixes (Zipkin's B3,
// Datadog's), nor a name VolatileName accepts.
var perAttemptHeaders = []string{
	"Request-Id", "X-Request-Id", "X-Correlation-Id", "Correlation-Id", "Traceparent", "Tracestate",
	"Baggage", "X-Amzn-Trace-Id", "Sentry-Trace", "Uber-Trace-Id", "X-Cloud-Trace-Context",
	"B3", "Signature", "Signature-Input", "X-Amz-Date",
}

// perAttemptPrefixes are the canonical prefixes of per-attempt headers.
var perAttemptPrefixes = []string{"X-B3-", "X-Datadog-"}

// pathHeaders are the request headers (canonical names) that proxies add
// about the way one attempt came (the client's address, the proxies it
// went through): another network or another proxy changes them between
// the attempts of one call.
var pathHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Via"}

// volatileNames are names (normalized: lower case, letters and digits only)
// that usually change from one retry to the next without changing what is
// asked: client clocks, retry counters, tracing ids. Body members and
// request headers share them.
var volatileNames = map[string]bool{
	"clienttime": true, "clienttimestamp": true, "clientts": true, "requesttime": true, "requesttimestamp": true,
	"timestamp": true, "ts": true, "sentat": true, "senttime": true, "sendtime": true, "localtime": true, "devicetime": true,
	"retrycount": true, "retries": true, "retry": true, "retrynumber": true, "retryattempt": true, "attempt": true,
	"attempts": true, "attemptcount": true, "attemptnumber": true,
	"traceid": true, "spanid": true, "traceparent": true, "tracestate": true, "correlationid": true, "nonce": true,
}

// VolatileName reports whether a body member or header name usually
// changes from one retry to the next without changing what is asked
// (client_time, retryCount, Trace-Id, ...): its letters and digits, in
// lower case, are in the list. A header's `x-` prefix is dropped first
// (X-Retry-Count, X-Timestamp).
func VolatileName(name string) bool {
	return volatileNames[NormName(name)]
}

// NormName lower-cases a name and keeps its letters and digits:
// "Client-Time", "client_time" and "clientTime" all become "clienttime".
// The naming conventions (volatile members and headers, key names) compare
// names in this form.
func NormName(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// perAttempt reports whether a header (canonical name) is one attempt's
// (perAttemptHeaders, perAttemptPrefixes, or a volatile name once an
// `X-` prefix is dropped).
func perAttempt(c string) bool {
	if slices.Contains(perAttemptHeaders, c) || VolatileName(strings.TrimPrefix(c, "X-")) {
		return true
	}
	for _, p := range perAttemptPrefixes {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}

// ReplayCandidate reports whether a response header a spec declares on a
// 2xx response belongs in response.headers: whether a replay without it
// would differ from the first response in a way a client may rely on
// (Location, ETag, Content-Location, ...). It is false for the headers the
// runtime never stores (Set-Cookie, hop-by-hop and framing headers, Date),
// for those it always stores and replays (Content-Type and Content-Encoding,
// Cache-Control, Expires and Pragma: idem.AlwaysStoredHeader) or writes itself
// (Idempotent-Replayed, Retry-After), and for those that describe one
// response rather than its outcome (rate limits, request and trace ids).
func ReplayCandidate(name string) bool {
	c := http.CanonicalHeaderKey(strings.TrimSpace(name))
	if idem.NeverStoredHeader(c) || idem.AlwaysStoredHeader(c) || perAttempt(c) {
		return false
	}
	switch c {
	case "", "Ratelimit", "Ratelimit-Policy":
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
	"X-Amz-Security-Token", "X-Csrf-Token", "X-Xsrf-Token",
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
// WWW-Authenticate, Proxy-*, X-Amz-Security-Token, CSRF tokens: the scope's business), those
// proxies add about the way an attempt came (Forwarded, X-Forwarded-*,
// X-Real-Ip, Via), those of one attempt
// (request and trace ids, B3, X-Amzn-Trace-Id, message signatures,
// User-Agent, Date, and any name VolatileName accepts with an `X-` prefix
// dropped: X-Trace-Id, X-Retry-Count, X-Timestamp; following
// [header-not-fingerprinted] for them would make every retry a 422) and
// content negotiation (Accept, Accept-*). The name is matched
// case-insensitively; the key's own header is the caller's to leave out.
func FingerprintCandidate(name string) bool {
	c := http.CanonicalHeaderKey(strings.TrimSpace(name))
	return c != "" && !perAttempt(c) && !slices.Contains(notFingerprinted, c) && !slices.Contains(pathHeaders, c) && !strings.HasPrefix(c, "Accept-")
}

// RuleFingerprintHeaderPerAttempt is the rule of the warning that
// fingerprint-headers lists a header whose value changes between the
// attempts of one call (UnstableHeader).
const RuleFingerprintHeaderPerAttempt = "fingerprint-header-per-attempt"

// callerHeaders are the request headers (canonical names) that say who
// calls and how it proves it: a refreshed token, a new session or a
// challenge's answer changes them between the attempts of one call.
var callerHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "Www-Authenticate", "Proxy-Authenticate",
	"X-Amz-Security-Token", "X-Csrf-Token", "X-Xsrf-Token"}

// UnstableHeader says why the value of a request header usually changes
// from one attempt of a call to the next without changing what is asked,
// "" when it does not: those that say who calls (Authorization, Cookie,
// ...: a token refreshed between attempts), those of one attempt (request
// and trace ids, B3, X-Amzn-Trace-Id, RFC 9421 message signatures, and
// any name VolatileName accepts with an `X-` prefix dropped), the
// client's clock (Date) and software (User-Agent). A header listed in
// fingerprint-headers that is one of them makes a retry after the change
// a 422 IDEMPOTENCY_KEY_REUSED under strict semantics. FingerprintCandidate
// turns down the same headers, for the same reasons.
func UnstableHeader(name string) string {
	c := http.CanonicalHeaderKey(strings.TrimSpace(name))
	switch {
	case c == "":
		return ""
	case slices.Contains(callerHeaders, c):
		return "it says who calls and how they prove it (a token refreshed, a new session, a challenge's answer); who calls is the key's scope (Options.Principal), not the request's fingerprint"
	case slices.Contains(pathHeaders, c):
		return "a proxy sets it for the way one attempt came (the client's address, the proxies it went through), which another network or proxy changes"
	case c == "Signature" || c == "Signature-Input":
		return "it signs one attempt (RFC 9421: the signature covers the attempt's own headers, Date among them)"
	case perAttempt(c):
		return "it names or traces one attempt (a request or trace id, a retry counter, a client clock)"
	case c == "Date":
		return "it is the client's clock at each attempt"
	case c == "User-Agent":
		return "it is the client's software, which an upgrade changes between a call and its resumption"
	}
	return ""
}
