package idemclient

import (
	"log/slog"
	"time"
)

// Attempt describes one attempt of a call, as given to the hook set with
// [WithAttemptHook] and logged by [WithLogger].
type Attempt struct {
	// Operation is the call's policy's Operation (the operationId, set by
	// generated policies; "" for none).
	Operation string
	Method    string
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
	// Duration is how long the attempt took, by the Doer's clock: from
	// sending it to its response (and the part of its body read within
	// the attempt), or to its error.
	Duration time.Duration
	// Replayed reports that the response is the server's replay of the
	// key's stored response (Idempotent-Replayed: true): the operation ran
	// before, not for this attempt.
	Replayed bool
}

// CallEnd describes a call the [Doer] managed, once it ended, as given to
// the hook set with [WithCallHook] (and logged at Debug by [WithLogger]):
// one event per call, whatever its number of attempts.
type CallEnd struct {
	// Operation is the call's policy's Operation ("" for none).
	Operation   string
	Method, URL string // URL redacted as [Attempt].URL is
	// Key is the call's key ("" when the call failed before it had one).
	Key string
	// Attempts is the number of attempts sent (0: the call failed before
	// sending anything, its Err says why).
	Attempts int
	// Duration is the call's time, by the Doer's clock: from the Doer
	// receiving the request to its answer, waits between attempts included.
	Duration time.Duration
	// Status is the final response's status (0 when Err is set, even when
	// the call ended with an error after a response, such as
	// [ErrRetryBudgetExhausted] or [ErrInUseWaitExhausted]: the [*Error]'s
	// Status and Problem have that response), Code its
	// problem code when it has one, Replayed whether it is the server's
	// replay of the key's stored response.
	Status   int
	Code     string
	Replayed bool
	// Err is the error the Doer returned (an [*Error]), nil with a response.
	Err error
}

// LogValue makes a CallEnd log as a group of its set fields.
func (c CallEnd) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 10)
	if c.Operation != "" {
		attrs = append(attrs, slog.String("operation", c.Operation))
	}
	attrs = append(attrs,
		slog.String("method", c.Method),
		slog.String("url", c.URL),
		slog.String("key", c.Key),
		slog.Int("attempts", c.Attempts),
		slog.Duration("duration", c.Duration))
	if c.Status != 0 {
		attrs = append(attrs, slog.Int("status", c.Status))
	}
	if c.Code != "" {
		attrs = append(attrs, slog.String("code", c.Code))
	}
	if c.Replayed {
		attrs = append(attrs, slog.Bool("replayed", true))
	}
	if c.Err != nil {
		attrs = append(attrs, slog.String("error", c.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}

// LogValue makes an Attempt log as a group of its set fields.
func (a Attempt) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 13)
	if a.Operation != "" {
		attrs = append(attrs, slog.String("operation", a.Operation))
	}
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
	attrs = append(attrs, slog.Duration("duration", a.Duration))
	if a.Replayed {
		attrs = append(attrs, slog.Bool("replayed", true))
	}
	attrs = append(attrs, slog.Bool("retry", a.Retry))
	if a.Retry {
		attrs = append(attrs, slog.Duration("delay", a.Delay))
	}
	return slog.GroupValue(attrs...)
}
