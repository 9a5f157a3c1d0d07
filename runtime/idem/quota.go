package idem

import (
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// quotaLogEvery is how often at most the engine logs the claims its store
// refused for their callers' share (ErrQuotaExceeded): a flood of them is
// one line a minute, not one per request.
const quotaLogEvery = time.Minute

// quotaLog counts the claims refused with ErrQuotaExceeded, and when they
// were last logged.
type quotaLog struct {
	n      atomic.Uint64 // refused, in all
	logged atomic.Uint64 // n when last logged
	at     atomic.Int64  // when last logged (Unix ns, wall clock; 0: never)
	every  time.Duration // quotaLogEvery (tests change it)
}

// refuseQuota answers a claim the store refused for its caller's share
// (err is ErrQuotaExceeded): 429 CodeQuotaExceeded with the store's
// RetryHint as Retry-After, an EventRejected, never FailOpen's unprotected
// run (the store works: it keeps room for the other callers), and a log
// line at most once per quotaLogEvery.
func (c *Call) refuseQuota(err error) {
	e := c.e
	ra := e.unavailRA
	if hint := RetryHint(nil); errors.As(err, &hint) {
		if d := hint.RetryAfter(); d > 0 {
			ra = []string{retryAfterValue(min(d, maxRetryHint))}
		}
	}
	e.quota.note(c, err)
	c.reject(problem{status: http.StatusTooManyRequests, code: CodeQuotaExceeded, retryAfter: ra,
		detail: "this caller holds too large a share of the idempotency records; nothing was executed"}, err)
}

// note counts a refusal, and logs it when none was logged within every.
func (q *quotaLog) note(c *Call, err error) {
	n := q.n.Add(1)
	now := time.Now().UnixNano()
	every := q.every
	if every == 0 {
		every = quotaLogEvery
	}
	at := q.at.Load()
	if at != 0 && now-at < int64(every) || !q.at.CompareAndSwap(at, now) {
		return
	}
	since := n - q.logged.Swap(n)
	c.e.log.LogAttrs(c.ctx, slog.LevelWarn, "idem: claims refused: the caller holds too large a share of the record store (429 "+CodeQuotaExceeded+"; nothing ran; logged at most once a minute)",
		slog.String("operation", c.p.spec.Operation), slog.String("principal", c.principal),
		slog.Uint64("refused_since_last_log", since), slog.Any("error", err))
}
