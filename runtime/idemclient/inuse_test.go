package idemclient

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inUseReply is the engine's answer to a duplicate of a key whose first
// request still runs (or whose crashed holder's lease has not run out).
func inUseReply(retryAfter string) reply {
	h := map[string]string{}
	if retryAfter != "" {
		h["Retry-After"] = retryAfter
	}
	return problemReply(http.StatusConflict, CodeKeyInUse, h)
}

// IDEMPOTENCY_KEY_IN_USE answers do not count toward MaxAttempts: a key
// held longer than MaxAttempts × Retry-After (a slow first request, or a
// crashed holder whose 30s lease must run out) is waited out, and the
// call ends with the first request's answer, under one key.
func TestInUseWaitedBeyondAttempts(t *testing.T) {
	clock := newFakeClock()
	start := clock.Now()
	const lease = 30 * time.Second
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if clock.Now().Sub(start) < lease { // the holder's lease has not run out
			return inUseReply("2")
		}
		return reply{status: http.StatusCreated, body: `{"n":` + strconv.Itoa(n) + `}`}
	})
	var hl hookLog
	d := NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(clock), WithAttemptHook(hl.hook), WithAttemptHeader("Attempt"))
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(60*time.Second))
	defer cancel()
	ctx, call := Start(ctx)
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err, "the in-use answers did not use up the 4 attempts")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, `{"n":16}`, readBody(t, resp), "15 in-use answers 2s apart, then the takeover")

	seen := srv.Seen()
	require.Len(t, seen, 16)
	for i, s := range seen {
		assert.Equal(t, call.Key(), s.Key, "one key")
		assert.Equal(t, strconv.Itoa(i+1), s.Header.Get("Attempt"), "the attempt header numbers every attempt sent")
	}
	assert.Equal(t, 16, call.Attempts())
	for _, w := range clock.Sleeps() {
		assert.Equal(t, 2*time.Second, w, "max(backoff ≤ 500ms: not advanced by in-use answers, Retry-After 2s)")
	}
	at := hl.attempts()
	require.Len(t, at, 16)
	for i, a := range at {
		assert.Equal(t, i+1, a.N)
		assert.Equal(t, i < 15, a.Retry)
	}
}

// Only answers other than in use count toward MaxAttempts: 503, six
// in-use answers, then 503s: the fourth 503 is the last attempt that
// counts, and is returned as today.
func TestInUseNotCounted(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n >= 2 && n <= 7 {
			return inUseReply("1")
		}
		return reply{status: http.StatusServiceUnavailable, body: "down"}
	})
	clock := newFakeClock()
	d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(clock))
	ctx, call := Start(context.Background())
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "down", readBody(t, resp))
	assert.Equal(t, 10, call.Attempts(), "4 that count and 6 in use")
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{100 * ms, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, 200 * ms, 400 * ms},
		clock.Sleeps(), "the backoff goes on from where the in-use answers found it")
}

// A server that answers in use forever: the call ends when the next wait
// would take the waits past InUseWait, with the in-use problem.
func TestInUseForeverEndsAtTheBound(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return inUseReply("2") })
	clock := newFakeClock()
	d := NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(clock))
	ctx, call := Start(context.Background()) // no deadline: the bound alone ends it
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrInUseWaitExhausted)
	assert.False(t, errors.Is(err, ErrAttemptsExhausted))
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
	var e *Error
	require.ErrorAs(t, err, &e)
	var pe *ProblemError
	require.ErrorAs(t, err, &pe, "the last answer's problem")
	assert.Same(t, e.Problem, pe)
	assert.Equal(t, CodeKeyInUse, pe.Code)
	assert.Equal(t, ProblemError{Status: 409, Code: CodeKeyInUse, Title: "x", RetryAfter: 2 * time.Second, Key: call.Key(), Attempts: 20}, *pe)
	assert.Equal(t, 20, e.Attempts, "19 waits of 2s fill the 38s of the default InUseWait")
	assert.Equal(t, 409, e.Status)
	assert.Equal(t, 2*time.Second, e.RetryAfter)
	var total time.Duration
	for _, w := range clock.Sleeps() {
		total += w
	}
	assert.Equal(t, 38*time.Second, total)
	assert.Len(t, srv.Seen(), 20)
	assert.Contains(t, err.Error(), "key still in use when the in-use wait ran out")
	assert.Contains(t, err.Error(), "attempts=20 last-status=409 code=IDEMPOTENCY_KEY_IN_USE retry-after=2s: 38s since the first IDEMPOTENCY_KEY_IN_USE answer; 2s more would pass the in-use wait of 38s (Policy.InUseWait)")
}

// InUseWait bounds the time since the first in-use answer, not the sum
// of the waits: a server with in-flight.wait > 0 holds each duplicate (here
// 20s) before answering in use, and the attempts' own durations count. The
// sum of the sleeps alone let a call of the default policy (38s) run 19
// answers of 22s: 7 minutes.
func TestInUseWaitCountsTheAttempts(t *testing.T) {
	clock := newFakeClock()
	const hold = 20 * time.Second
	srv := newRecServer(t, func(int, *http.Request) reply {
		clock.Advance(hold) // the server waits for the first request, which still runs
		return inUseReply("2")
	})
	start := clock.Now()
	ctx, call := Start(context.Background())
	_, err := NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(clock)).Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrInUseWaitExhausted)
	// Answers at 20s, 42s and 64s: after the first, attempts start 2s
	// and 24s into the wait; the next would start at 46s, past 38s.
	assert.Equal(t, 3, call.Attempts())
	assert.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second}, clock.Sleeps())
	assert.Equal(t, 64*time.Second, clock.Now().Sub(start))
	assert.Contains(t, err.Error(), "44s since the first IDEMPOTENCY_KEY_IN_USE answer; 2s more would pass the in-use wait of 38s (Policy.InUseWait)")
}

// The first in-use wait is always allowed, within the Retry-After limit
// and the deadline: a Retry-After longer than InUseWait (45s against the
// default 38s) is waited once, then the next answer ends the call. It used
// to end the call at the first answer, having waited 0s.
func TestInUseFirstWaitLongerThanInUseWait(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return inUseReply("45") })
	clock := newFakeClock()
	ctx, call := Start(context.Background())
	_, err := NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(clock)).Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrInUseWaitExhausted)
	assert.Equal(t, 2, call.Attempts())
	assert.Equal(t, []time.Duration{45 * time.Second}, clock.Sleeps())
	assert.Contains(t, err.Error(), "45s since the first IDEMPOTENCY_KEY_IN_USE answer; 45s more would pass the in-use wait of 38s (Policy.InUseWait)")

	// Answered in use at last, the key's first request done: its answer.
	done := newRecServer(t, func(n int, _ *http.Request) reply {
		if n == 1 {
			return inUseReply("45")
		}
		return reply{status: http.StatusCreated, body: "done"}
	})
	ctx, call = Start(context.Background())
	resp, err := NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(newFakeClock())).Do(post(t, ctx, done.URL, payload))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "done", readBody(t, resp))
	assert.Equal(t, 2, call.Attempts())

	// Still bounded by the deadline, and by the Retry-After limit.
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(40*time.Second))
	defer cancel()
	ctx, call = Start(ctx)
	_, err = NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(clock)).Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrRetryAfterTooLong)
	assert.Equal(t, 1, call.Attempts())
	ctx, call = Start(context.Background())
	_, err = NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(newFakeClock()), WithRetryAfterLimit(44*time.Second)).
		Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrRetryAfterTooLong)
	assert.Equal(t, 1, call.Attempts())
}

// An InUseWait below Backoff.Initial turns the in-use wait off: the call
// ends at the first in-use answer, while other answers are still retried.
func TestInUseWaitOff(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n == 1 {
			return reply{status: http.StatusServiceUnavailable, body: "down"}
		}
		return inUseReply("1")
	})
	clock := newFakeClock()
	p := fastPolicy(4)
	p.InUseWait = time.Nanosecond
	ctx, call := Start(context.Background())
	_, err := NewDoer(http.DefaultClient, p, WithClock(clock)).Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrInUseWaitExhausted)
	assert.Equal(t, 2, call.Attempts(), "the 503 retried, the in-use answer not")
	assert.Equal(t, []time.Duration{100 * time.Millisecond}, clock.Sleeps())
}

// Loop safety without a Retry-After: each in-use wait is at least
// Backoff.Initial, even when the jitter draws 0, so the call ends after
// InUseWait/Initial + 1 answers.
func TestInUseWithoutRetryAfterEnds(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return inUseReply("") })
	clock := newFakeClock()
	p := fastPolicy(4)
	p.Backoff.Jitter = JitterFull
	p.InUseWait = 2 * time.Second
	d := NewDoer(http.DefaultClient, p, WithClock(clock), WithRandom(func() float64 { return 0 }))
	ctx, call := Start(context.Background())
	_, err := d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrInUseWaitExhausted)
	assert.Equal(t, 21, call.Attempts())
	for _, w := range clock.Sleeps() {
		assert.Equal(t, 100*time.Millisecond, w)
	}
}

// A deadline shorter than the bound ends the call at the deadline, as
// before the in-use wait existed: the server's 2s would pass it.
func TestInUseDeadlineFirst(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return inUseReply("2") })
	clock := newFakeClock()
	d := NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(clock))
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(9*time.Second))
	defer cancel()
	ctx, call := Start(ctx)
	_, err := d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrRetryAfterTooLong)
	assert.False(t, errors.Is(err, ErrInUseWaitExhausted))
	var pe *ProblemError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, CodeKeyInUse, pe.Code)
	assert.Equal(t, 5, call.Attempts(), "4 waits of 2s, then 1s left")
	assert.Contains(t, err.Error(), "beyond the context deadline, 1s away")

	// The Retry-After limit still applies to in-use answers.
	ctx, call = Start(context.Background())
	_, err = NewDoer(http.DefaultClient, DefaultPolicy(), WithClock(newFakeClock()), WithRetryAfterLimit(time.Second)).
		Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrRetryAfterTooLong)
	assert.Equal(t, 1, call.Attempts())
}

// MaxAttempts 1 disables retries, the in-use wait included: the answer is
// returned as a response, as before.
func TestInUseOneAttempt(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return inUseReply("2") })
	ctx, call := Start(context.Background())
	resp, err := NewDoer(http.DefaultClient, Policy{MaxAttempts: 1}, WithClock(newFakeClock())).Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	resp.Body.Close()
	assert.Equal(t, 1, call.Attempts())
}
