package idemclient

import (
	"log/slog"
	"time"
)

// Attempt describes one attempt of a call, as given to the hook set with
// [WithAttemptHook] and logged by [WithLogger].
type Attempt struct {
	Method string
	// URL is the request's URL without its password and fragment, with the
	// values of its query parameters replaced by xxxxx (a query may carry a
	// credential), and a query pair without "=" replaced whole.
	URL string
	// Key is the idempotency key (the same on every attempt of a call).
	Key string
	// N is the attempt number, from 1, counting every attempt sent (those
	// answered IDEMPOTENCY_KEY_IN_USE included, which do not count toward
	// the policy's MaxAttempts).
	N int
	// Status is the response status, 0 when Err is set.
	Status int
	// Code is the problem+json code of the response, when it has one (error statuses only).
	Code string
	// Err is the transport error (or the error met reading the response body).
	Err error
	// Class is Classify's verdict on Err (a per-attempt timeout counts as ClassConnection).
	Class Class
	// RetryAfter is the wait the server asked for (0 if none).
	RetryAfter time.Duration
	// Retry reports whether another attempt follows, after Delay.
	Retry bool
	// Delay is the wait before the next attempt: max(backoff, RetryAfter).
	Delay time.Duration
}

// LogValue makes an Attempt log as a group of its set fields.
func (a Attempt) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("method", a.Method),
		slog.String("url", a.URL),
		slog.String("key", a.Key),
		slog.Int("n", a.N))
	if a.Status != 0 {
		attrs = append(attrs, slog.Int("status", a.Status))
	}
	if a.Code != "" {
		attrs = append(attrs, slog.String("code", a.Code))
	}
	if a.Err != nil {
		attrs = append(attrs, slog.String("error", a.Err.Error()), slog.String("class", a.Class.String()))
	}
	if a.RetryAfter != 0 {
		attrs = append(attrs, slog.Duration("retry_after", a.RetryAfter))
	}
	attrs = append(attrs, slog.Bool("retry", a.Retry))
	if a.Retry {
		attrs = append(attrs, slog.Duration("delay", a.Delay))
	}
	return slog.GroupValue(attrs...)
}
