package idemclient

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// maxDuration stands for "longer than any deadline": what an absurdly large
// Retry-After parses to, so that the caller stops instead of ignoring it.
const maxDuration = time.Duration(math.MaxInt64)

// ParseRetryAfter returns how long the server asks the client to wait
// before retrying, from the response header h read at time now:
//
//   - Retry-After-Ms: a non-negative integer of milliseconds; it wins when valid
//     (it is the more precise of the two);
//   - Retry-After: delta-seconds (a non-negative integer) or an HTTP-date
//     (IMF-fixdate, RFC 850 or asctime, as [http.ParseTime] reads them); a
//     date in the past means 0.
//
// Values too large for a time.Duration saturate at the largest Duration
// (so a caller with any deadline stops rather than ignoring the ask).
// Garbage, negative numbers, fractions and empty values are ignored:
// ok is false when neither header holds a valid value.
func ParseRetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if n, ok := parseUint(strings.TrimSpace(v), time.Millisecond); ok {
			return n, true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, ok := parseUint(v, time.Second); ok {
		return n, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true // Sub saturates
	}
	return 0, true
}

// parseUint parses 1*DIGIT times unit, saturating at maxDuration.
func parseUint(s string, unit time.Duration) (time.Duration, bool) {
	if t := strings.TrimLeft(s, "0"); len(t) < len(s) { // leading zeros: no magnitude
		if t == "" {
			return 0, true
		}
		s = t
	}
	if s == "" || len(s) > 64 {
		if len(s) > 64 && allDigits(s) {
			return maxDuration, true
		}
		return 0, false
	}
	limit := int64(maxDuration / unit)
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (limit-int64(c-'0'))/10 {
			if !allDigits(s[i:]) {
				return 0, false
			}
			return maxDuration, true
		}
		n = n*10 + int64(c-'0')
	}
	return time.Duration(n) * unit, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
