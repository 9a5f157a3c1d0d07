package idemclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

const payload = `{"amount": 1.50, "coupon_ids": [3, 1], "client_time": "2025-03-01T12:00:00Z"}`

func post(t testing.TB, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func readBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestSameKeyAndBodyEveryAttempt(t *testing.T) {
	srv := newRecServer(t, nil)
	ft := faultnet.NewTransport(nil, faultnet.Script(
		faultnet.ResetFault, faultnet.DropFault, faultnet.UnavailableFault, faultnet.InFlightFault, faultnet.TruncateFault))
	clock := newFakeClock()
	var hl hookLog
	d := NewDoer(&http.Client{Transport: ft}, fastPolicy(6), WithClock(clock), WithAttemptHook(hl.hook))

	var observed []string
	ctx, call := Start(context.Background(), WithKeyObserver(func(k string) {
		observed = append(observed, k)
		assert.Empty(t, srv.Seen(), "the key is reported before the first attempt")
	}))
	resp, err := d.Do(post(t, ctx, srv.URL+"/claims", payload))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, `{"n":3}`, readBody(t, resp), "the final response arrives intact")

	key := call.Key()
	u, err := uuid.Parse(key)
	require.NoError(t, err)
	assert.Equal(t, uuid.Version(7), u.Version())
	assert.Equal(t, []string{key}, observed)
	assert.Equal(t, 6, call.Attempts())

	got := srv.Seen() // Reset, Unavailable and InFlight never reach the server
	require.Len(t, got, 3)
	for _, s := range got {
		assert.Equal(t, key, s.Key)
		assert.Equal(t, payload, s.Body, "identical body bytes on every attempt")
		assert.Equal(t, "application/json", s.Header.Get("Content-Type"))
	}
	assert.Equal(t, 3, ft.Stats().Forwarded)

	ms := time.Millisecond
	assert.Equal(t, []time.Duration{100 * ms, 200 * ms, time.Second, time.Second, 800 * ms}, clock.Sleeps(),
		"max(backoff, Retry-After: 1) after 503 and 409; the in-use 409 does not advance the backoff: the retry after it waits the ceiling of the fourth retry that counts")
	at := hl.attempts()
	require.Len(t, at, 6)
	wantClass := []Class{ClassConnection, ClassConnection, 0, 0, ClassConnection, 0}
	wantStatus := []int{0, 0, 503, 409, 0, 201}
	for i, a := range at {
		assert.Equal(t, i+1, a.N)
		assert.Equal(t, key, a.Key)
		assert.Equal(t, wantStatus[i], a.Status, "attempt %d", i+1)
		if a.Err != nil {
			assert.Equal(t, wantClass[i], a.Class, "attempt %d: %v", i+1, a.Err)
			assert.ErrorIs(t, a.Err, faultnet.ErrInjected)
		}
		assert.Equal(t, i < 5, a.Retry)
		if a.Retry {
			assert.Equal(t, clock.Sleeps()[i], a.Delay)
		}
	}
	assert.Equal(t, CodeKeyInUse, at[3].Code)
}

// inUseAttempts is how many attempts an IDEMPOTENCY_KEY_IN_USE answer
// gets in TestStatusDecisions: waited out beyond MaxAttempts, 100ms (the
// backoff) at a time, until the InUseWait of 1s: the first and ten more.
const inUseAttempts = 11

func TestStatusDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		on       RetryOn
		rep      reply
		attempts int
	}{
		{"400 never, even listed", RetryOn{Statuses: []int{400}}, problemReply(400, "IDEMPOTENCY_KEY_INVALID", nil), 1},
		{"422 never, even listed", RetryOn{Statuses: []int{422}}, problemReply(422, CodeKeyReused, nil), 1},
		{"409 reused never, even listed", RetryOn{Statuses: []int{409}}, problemReply(409, CodeKeyReused, nil), 1},
		{"409 in use always", RetryOn{Statuses: []int{503}}, problemReply(409, CodeKeyInUse, nil), inUseAttempts},
		{"423 in use always (another in-flight status)", RetryOn{Statuses: []int{503}}, problemReply(423, CodeKeyInUse, nil), inUseAttempts},
		{"503 in use always, even unlisted", RetryOn{Statuses: []int{502}}, problemReply(503, CodeKeyInUse, nil), inUseAttempts},
		{"429 in use as application/json", RetryOn{Statuses: []int{503}}, reply{status: 429, header: map[string]string{"Content-Type": "application/json"}, body: `{"code":"IDEMPOTENCY_KEY_IN_USE"}`}, inUseAttempts},
		{"400 in use never", RetryOn{}, problemReply(400, CodeKeyInUse, nil), 1},
		{"422 in use never", RetryOn{}, problemReply(422, CodeKeyInUse, nil), 1},
		{"503 reused never, even listed", RetryOn{Statuses: []int{503}}, problemReply(503, CodeKeyReused, nil), 1},
		{"409 response unavailable never, by default", RetryOn{}, problemReply(409, CodeResponseUnavailable, nil), 1},
		{"409 response unavailable never, even listed", RetryOn{Statuses: []int{409}}, problemReply(409, CodeResponseUnavailable, nil), 1},
		{"plain 409 unlisted", RetryOn{Statuses: []int{503}}, problemReply(409, "COUPON_TAKEN", nil), 1},
		{"plain 409 listed", RetryOn{Statuses: []int{409}}, reply{status: 409, body: "busy"}, 3},
		{"503 listed", RetryOn{Statuses: []int{503}}, reply{status: 503, body: "down"}, 3},
		{"503 unlisted", RetryOn{Statuses: []int{502}}, reply{status: 503, body: "down"}, 1},
		{"500 by default", RetryOn{}, reply{status: 500, body: "oops"}, 3},
		{"500 record unreadable never, by default", RetryOn{}, problemReply(500, CodeRecordUnreadable, nil), 1},
		{"500 record unreadable never, even listed", RetryOn{Statuses: []int{500}}, problemReply(500, CodeRecordUnreadable, nil), 1},
		{"500 principal unavailable retried", RetryOn{}, problemReply(500, "IDEMPOTENCY_PRINCIPAL_UNAVAILABLE", nil), 3},
		{"replayed 503 final, even listed", RetryOn{Statuses: []int{503}}, reply{status: 503, header: map[string]string{"Idempotent-Replayed": "true"}, body: "down"}, 1},
		{"replayed 500 final, by default", RetryOn{}, reply{status: 500, header: map[string]string{"Idempotent-Replayed": "true"}, body: "oops"}, 1},
		{"replayed 409 final, even listed", RetryOn{Statuses: []int{409}}, reply{status: 409, header: map[string]string{"Idempotent-Replayed": "true"}, body: "busy"}, 1},
		{"503 store unavailable retried (not a replay)", RetryOn{Statuses: []int{503}}, problemReply(503, "IDEMPOTENCY_STORE_UNAVAILABLE", nil), 3},
		{"503 replayed: false retried", RetryOn{Statuses: []int{503}}, reply{status: 503, header: map[string]string{"Idempotent-Replayed": "false"}, body: "down"}, 3},
		{"404 by default", RetryOn{}, reply{status: 404, body: "no"}, 1},
		{"200", RetryOn{}, reply{status: 200, body: "ok"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRecServer(t, func(int, *http.Request) reply { return tc.rep })
			p := fastPolicy(3)
			p.On = tc.on
			p.InUseWait = time.Second
			d := NewDoer(http.DefaultClient, p, WithClock(newFakeClock()))
			ctx, call := Start(context.Background())
			resp, err := d.Do(post(t, ctx, srv.URL, payload))
			if tc.attempts == inUseAttempts {
				require.ErrorIs(t, err, ErrInUseWaitExhausted)
				require.Nil(t, resp)
				var pe *ProblemError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, CodeKeyInUse, pe.Code)
				assert.Equal(t, tc.rep.status, pe.Status)
				assert.Equal(t, tc.attempts, call.Attempts())
				assert.Len(t, srv.Seen(), tc.attempts)
				return
			}
			require.NoError(t, err, "statuses end as responses")
			assert.Equal(t, tc.rep.status, resp.StatusCode)
			assert.Equal(t, tc.rep.body, readBody(t, resp), "the last response is returned intact")
			assert.Equal(t, tc.attempts, call.Attempts())
			assert.Len(t, srv.Seen(), tc.attempts)
		})
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header map[string]string
		lo, hi time.Duration
	}{
		{"seconds above backoff", map[string]string{"Retry-After": "3"}, 3 * time.Second, 3 * time.Second},
		{"ms below backoff", map[string]string{"Retry-After-Ms": "50"}, 100 * time.Millisecond, 100 * time.Millisecond},
		{"ms above backoff", map[string]string{"Retry-After-Ms": "1500", "Retry-After": "9"}, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"date", map[string]string{"Retry-After": time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}, time.Second, 3 * time.Second},
		{"garbage", map[string]string{"Retry-After": "later"}, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRecServer(t, func(n int, _ *http.Request) reply {
				if n == 1 {
					return reply{status: 503, header: tc.header}
				}
				return reply{status: 201}
			})
			clock := newFakeClock()
			d := NewDoer(http.DefaultClient, fastPolicy(2), WithClock(clock))
			ctx, _ := Start(context.Background())
			resp, err := d.Do(post(t, ctx, srv.URL, payload))
			require.NoError(t, err)
			resp.Body.Close()
			require.Len(t, clock.Sleeps(), 1)
			assert.GreaterOrEqual(t, clock.Sleeps()[0], tc.lo)
			assert.LessOrEqual(t, clock.Sleeps()[0], tc.hi)
		})
	}
}

func TestDeadline(t *testing.T) {
	always503 := func(h map[string]string) func(int, *http.Request) reply {
		return func(int, *http.Request) reply { return reply{status: 503, header: h, body: "down"} }
	}
	t.Run("server asks past the deadline", func(t *testing.T) {
		srv := newRecServer(t, always503(map[string]string{"Retry-After": "10"}))
		clock := newFakeClock()
		d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(clock))
		ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(5*time.Second))
		defer cancel()
		ctx, call := Start(ctx)
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrRetryAfterTooLong)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, 503, e.Status)
		assert.Equal(t, 10*time.Second, e.RetryAfter)
		assert.Equal(t, call.Key(), e.Key)
		assert.Equal(t, 1, e.Attempts)
		assert.Empty(t, clock.Sleeps(), "never sleeps past the deadline")
		assert.Contains(t, err.Error(), "key="+call.Key())
		assert.Contains(t, err.Error(), "retry-after=10s: beyond the context deadline, 5s away", "the bound passed")
		assert.NotContains(t, err.Error(), "limit")
	})
	t.Run("key in use past the deadline keeps the problem", func(t *testing.T) {
		for _, tc := range []struct {
			retryAfter string
			reason     error
		}{{"10", ErrRetryAfterTooLong}, {"1", ErrNoTimeLeft}} {
			srv := newRecServer(t, func(int, *http.Request) reply {
				return problemReply(423, CodeKeyInUse, map[string]string{"Retry-After": tc.retryAfter})
			})
			clock := newFakeClock()
			p := fastPolicy(4)
			p.Backoff.Initial, p.Backoff.Max = 3*time.Second, 3*time.Second
			d := NewDoer(http.DefaultClient, p, WithClock(clock))
			ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(2*time.Second))
			ctx, call := Start(ctx)
			resp, err := d.Do(post(t, ctx, srv.URL, payload))
			cancel()
			require.Nil(t, resp)
			require.ErrorIs(t, err, tc.reason)
			var e *Error
			require.ErrorAs(t, err, &e)
			var pe *ProblemError
			require.ErrorAs(t, err, &pe, "the problem the last response carried")
			assert.Same(t, e.Problem, pe)
			ra, _ := strconv.Atoi(tc.retryAfter)
			assert.Equal(t, ProblemError{Status: 423, Code: CodeKeyInUse, Title: "x", RetryAfter: time.Duration(ra) * time.Second,
				Key: call.Key(), Attempts: 1}, *pe)
			assert.Contains(t, err.Error(), "last-status=423 code=IDEMPOTENCY_KEY_IN_USE")
		}
		// Canceled while waiting: the problem too.
		srv := newRecServer(t, func(int, *http.Request) reply {
			return problemReply(409, CodeKeyInUse, map[string]string{"Retry-After": "1"})
		})
		clock := newFakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		clock.onLoop = cancel
		ctx, _ = Start(ctx)
		_, err := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(clock)).Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, context.Canceled)
		var pe *ProblemError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, CodeKeyInUse, pe.Code)
		// A response that is no problem: none.
		srv = newRecServer(t, func(int, *http.Request) reply {
			return reply{status: 503, header: map[string]string{"Retry-After": "10"}}
		})
		ctx, _ = Start(context.Background())
		_, err = NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock()), WithRetryAfterLimit(time.Second)).Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, ErrRetryAfterTooLong)
		assert.False(t, errors.As(err, &pe))
	})
	t.Run("backoff past the deadline", func(t *testing.T) {
		srv := newRecServer(t, always503(nil))
		clock := newFakeClock()
		p := fastPolicy(20)
		d := NewDoer(http.DefaultClient, p, WithClock(clock))
		ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(2*time.Second))
		defer cancel()
		ctx, _ = Start(ctx)
		_, err := d.Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, ErrNoTimeLeft)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var total time.Duration
		for _, s := range clock.Sleeps() {
			total += s
		}
		assert.Equal(t, 1500*time.Millisecond, total, "100+200+400+800ms fit in 2s, the next 1s does not")
		assert.Len(t, srv.Seen(), 5)
	})
	t.Run("deadline passed while the response came, no Retry-After", func(t *testing.T) {
		srv := newRecServer(t, always503(nil))
		clock := newFakeClock()
		ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(time.Hour))
		defer cancel()
		ctx, _ = Start(ctx)
		clock.mu.Lock()
		clock.now = clock.now.Add(2 * time.Hour) // the deadline is behind us when the 503 comes
		clock.mu.Unlock()
		_, err := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(clock)).Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, ErrNoTimeLeft, "the server asked for no wait")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, ErrRetryAfterTooLong)
		assert.Len(t, srv.Seen(), 1)
	})
	t.Run("retry-after limit without a deadline", func(t *testing.T) {
		srv := newRecServer(t, always503(map[string]string{"Retry-After": "3600"}))
		clock := newFakeClock()
		d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(clock), WithRetryAfterLimit(time.Minute))
		ctx, _ := Start(context.Background())
		_, err := d.Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, ErrRetryAfterTooLong)
		assert.Empty(t, clock.Sleeps())
		assert.Contains(t, err.Error(), "retry-after=1h0m0s: longer than the Retry-After limit of 1m0s (WithRetryAfterLimit)", "the bound passed")
		assert.NotContains(t, err.Error(), "deadline", "there is none")
	})
	t.Run("retry-after limit 0 honours no wait", func(t *testing.T) {
		for _, limit := range []time.Duration{0, -time.Second} {
			srv := newRecServer(t, always503(map[string]string{"Retry-After": "1"}))
			clock := newFakeClock()
			d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(clock), WithRetryAfterLimit(limit))
			ctx, call := Start(context.Background())
			_, err := d.Do(post(t, ctx, srv.URL, payload))
			require.ErrorIs(t, err, ErrRetryAfterTooLong, "limit %v", limit)
			assert.Equal(t, 1, call.Attempts())
			assert.Empty(t, clock.Sleeps())

			// Without a Retry-After (or with 0), the backoff alone: retried.
			for _, h := range []map[string]string{nil, {"Retry-After": "0"}} {
				srv = newRecServer(t, always503(h))
				clock = newFakeClock()
				d = NewDoer(http.DefaultClient, fastPolicy(4), WithClock(clock), WithRetryAfterLimit(limit))
				ctx, call = Start(context.Background())
				resp, err := d.Do(post(t, ctx, srv.URL, payload))
				require.NoError(t, err, "limit %v, header %v", limit, h)
				assert.Equal(t, 503, resp.StatusCode)
				assert.Equal(t, 4, call.Attempts(), "limit %v, header %v", limit, h)
			}
		}
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		srv := newRecServer(t, always503(nil))
		clock := newFakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		clock.onLoop = cancel
		d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(clock))
		ctx, _ = Start(ctx)
		_, err := d.Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, context.Canceled)
		assert.Len(t, srv.Seen(), 1)
	})
	t.Run("deadline already passed", func(t *testing.T) {
		srv := newRecServer(t, nil)
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		ctx, _ = Start(ctx)
		_, err := NewDoer(http.DefaultClient, Policy{}).Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Empty(t, srv.Seen())
		assert.Equal(t, 1, strings.Count(err.Error(), "context deadline exceeded"), "said once: %s", err)
	})
}

func TestConnectionErrors(t *testing.T) {
	srv := newRecServer(t, nil)
	t.Run("not retried without on.connection", func(t *testing.T) {
		ft := faultnet.NewTransport(nil, faultnet.Script(faultnet.ResetFault))
		p := fastPolicy(4)
		p.On = RetryOn{Statuses: []int{503}}
		ctx, call := Start(context.Background())
		_, err := NewDoer(&http.Client{Transport: ft}, p, WithClock(newFakeClock())).Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, ErrNotRetryable)
		require.ErrorIs(t, err, syscall.ECONNRESET)
		assert.Equal(t, 1, call.Attempts())
	})
	t.Run("exhausted", func(t *testing.T) {
		ft := faultnet.NewTransport(nil, faultnet.PlanFunc(func(*http.Request) faultnet.Fault { return faultnet.DropFault }))
		ctx, call := Start(context.Background())
		_, err := NewDoer(&http.Client{Transport: ft}, fastPolicy(3), WithClock(newFakeClock())).Do(post(t, ctx, srv.URL+"/x", payload))
		require.ErrorIs(t, err, ErrAttemptsExhausted)
		require.ErrorIs(t, err, faultnet.ErrInjected)
		assert.Equal(t, 3, call.Attempts())
	})
	t.Run("certificate errors are not retried", func(t *testing.T) {
		tls := httptest.NewTLSServer(http.NotFoundHandler())
		defer tls.Close()
		ctx, call := Start(context.Background())
		_, err := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock())).Do(post(t, ctx, tls.URL, payload))
		require.ErrorIs(t, err, ErrNotRetryable)
		assert.Equal(t, 1, call.Attempts())
	})
	t.Run("attempt timeout", func(t *testing.T) {
		ft := faultnet.NewTransport(nil, faultnet.Script(faultnet.DelayFault(time.Hour)))
		var hl hookLog
		ctx, call := Start(context.Background())
		d := NewDoer(&http.Client{Transport: ft}, fastPolicy(3), WithClock(newFakeClock()),
			WithAttemptTimeout(20*time.Millisecond), WithAttemptHook(hl.hook))
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 2, call.Attempts())
		assert.Equal(t, ClassConnection, hl.attempts()[0].Class)
		assert.ErrorIs(t, hl.attempts()[0].Err, errAttemptTimeout)
	})
	t.Run("inner client timeout", func(t *testing.T) {
		ft := faultnet.NewTransport(nil, faultnet.Script(faultnet.DelayFault(time.Hour)))
		ctx, call := Start(context.Background())
		d := NewDoer(&http.Client{Transport: ft, Timeout: 20 * time.Millisecond}, fastPolicy(3), WithClock(newFakeClock()))
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 2, call.Attempts())
	})
}

func TestMidBodyLoss(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		return reply{status: 201, body: strings.Repeat("x", 1000) + strconv.Itoa(n)}
	})
	t.Run("buffered: retried", func(t *testing.T) {
		ft := faultnet.NewTransport(nil, faultnet.Script(faultnet.TruncateFault))
		ctx, call := Start(context.Background())
		resp, err := NewDoer(&http.Client{Transport: ft}, fastPolicy(3), WithClock(newFakeClock())).Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(readBody(t, resp), "x2"))
		assert.Equal(t, 2, call.Attempts())
	})
	t.Run("streamed: the caller sees it", func(t *testing.T) {
		ft := faultnet.NewTransport(nil, faultnet.Script(faultnet.TruncateFault))
		ctx, call := Start(context.Background())
		resp, err := NewDoer(&http.Client{Transport: ft}, fastPolicy(3), WithResponseBuffer(0)).Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Equal(t, 1, call.Attempts())
	})
	t.Run("longer than the buffer streams intact", func(t *testing.T) {
		ctx, _ := Start(context.Background())
		resp, err := NewDoer(http.DefaultClient, fastPolicy(3), WithResponseBuffer(10)).Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		body := readBody(t, resp)
		assert.Len(t, body, 1001)
	})
}

// TestDrainsDiscardedResponses: a response the Doer discards (it retries)
// is read to its end before it is closed, so that its connection can serve
// the next attempt; one longer than the Doer drains is closed early.
//
// Whether a drained connection is reused is net/http's decision too: it
// puts one back only once its write loop has reported the request written,
// and waits 50ms for that (maxWriteWaitBeforeConnReuse). On a loaded machine
// the write loop was descheduled longer: the server saw 2 connections where
// the Doer had drained every body. So what the Doer decides is checked at
// the bodies; the connection count only where it does not depend on the
// scheduler (a body closed early ends its connection).
func TestDrainsDiscardedResponses(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if (n-1)%3 < 2 { // 503, 503, 201 for each call
			return reply{status: 503, body: strings.Repeat("z", 10_000)}
		}
		return reply{status: 201}
	})
	// Streamed, with or without an attempt timeout (the drain runs within
	// the attempt's: a generous one here).
	for i, timeout := range []time.Duration{0, time.Minute} {
		bw := &bodyWatch{next: &http.Transport{}}
		ctx, _ := Start(context.Background())
		resp, err := NewDoer(&http.Client{Transport: bw}, fastPolicy(4), WithClock(newFakeClock()), WithResponseBuffer(0),
			WithAttemptTimeout(timeout)).Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		readBody(t, resp)
		assert.Len(t, srv.Seen(), 3*(i+1))
		assert.Equal(t, []string{"503 drained", "503 drained", "201 drained"}, bw.report(), "every body is read to its end (attempt timeout %v)", timeout)
	}

	// With the response buffer: drained up to the buffer plus 64 KiB, not beyond.
	for _, tc := range []struct {
		size    int
		drained bool
	}{{DefaultResponseBuffer - 10<<10, true}, {DefaultResponseBuffer + 60<<10, true}, {DefaultResponseBuffer + 100<<10, false}} {
		srv := newRecServer(t, func(n int, _ *http.Request) reply {
			if n < 3 {
				return reply{status: 503, body: strings.Repeat("z", tc.size)}
			}
			return reply{status: 201}
		})
		bw := &bodyWatch{next: &http.Transport{}}
		ctx, _ := Start(context.Background())
		resp, err := NewDoer(&http.Client{Transport: bw}, fastPolicy(4), WithClock(newFakeClock())).Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		readBody(t, resp)
		discarded := "503 drained"
		if !tc.drained {
			discarded = "503 closed early"
			assert.Equal(t, int32(3), srv.conns.Load(), "body of %d bytes: a body closed early ends its connection", tc.size)
		}
		assert.Equal(t, []string{discarded, discarded, "201 drained"}, bw.report(), "body of %d bytes", tc.size)
	}
}

// TestStalledErrorBody: a retryable response whose body stalls after the
// headers. The reads the Doer does itself (the head of a JSON error body,
// for its problem code; the drain of a discarded body) are bounded by the
// attempt timeout, whether the body streams or not, and the call goes on
// to the retry the timeout exists for instead of hanging until the
// caller's deadline (10s here: a generous bound, only the outcome is
// checked).
func TestStalledErrorBody(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		buffer      int64
		drained     string // what became of the stalled body
	}{
		{"application/problem+json", 0, "head read timed out"},
		{"application/json", 16, "head read timed out"},
		{"application/problem+json", DefaultResponseBuffer, "head read timed out"},
		{"text/plain", 0, "drain cut"},
		{"text/plain", 16, "drain cut"},
	} {
		t.Run(fmt.Sprint(tc.contentType, " ", tc.buffer), func(t *testing.T) {
			var n atomic.Int32
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) > 1 {
					w.WriteHeader(201)
					return
				}
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(503)
				_, _ = io.WriteString(w, `{"code":"IDEMPOTENCY_STORE_UN`)
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			defer srv.Close()
			defer close(release)
			var hl hookLog
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctx, call := Start(ctx)
			d := NewDoer(srv.Client(), fastPolicy(3), WithClock(newFakeClock()), WithResponseBuffer(tc.buffer),
				WithAttemptTimeout(100*time.Millisecond), WithAttemptHook(hl.hook))
			resp, err := d.Do(post(t, ctx, srv.URL, payload))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 201, resp.StatusCode)
			assert.Equal(t, 2, call.Attempts())
			at := hl.attempts()
			require.Len(t, at, 2)
			if tc.drained == "head read timed out" {
				// The head is read within the attempt: the attempt timed out.
				assert.ErrorIs(t, at[0].Err, errAttemptTimeout)
				assert.Equal(t, ClassConnection, at[0].Class)
			} else {
				// A 503 without a JSON body: retried on its status, its
				// drain cut at the attempt's deadline.
				assert.NoError(t, at[0].Err)
				assert.Equal(t, 503, at[0].Status)
			}
			assert.True(t, at[0].Retry)
		})
	}
}

// TestErrorBodyHead: the head of a JSON error body is read within the
// attempt whatever the response buffer, for its problem code, and the
// caller still gets the whole body.
func TestErrorBodyHead(t *testing.T) {
	codeFirst := func(size int) string {
		return `{"title":"x","status":422,"code":"` + CodeKeyReused + `","detail":"` + strings.Repeat("d", size) + `"}`
	}
	for _, tc := range []struct {
		name, body string
		inHead     bool
	}{
		{"short", codeFirst(10), true},
		{"code first, body past the head", codeFirst(100 << 10), true},
		{"code past the head", `{"detail":"` + strings.Repeat("d", 100<<10) + `","code":"` + CodeKeyReused + `"}`, false},
	} {
		body := tc.body
		srv := newRecServer(t, func(int, *http.Request) reply {
			return reply{status: 422, header: map[string]string{"Content-Type": "application/problem+json"}, body: body}
		})
		for _, buffer := range []int64{0, 16, DefaultResponseBuffer} {
			var hl hookLog
			ctx, _ := Start(context.Background())
			resp, err := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock()), WithResponseBuffer(buffer),
				WithAttemptTimeout(time.Minute), WithAttemptHook(hl.hook)).Do(post(t, ctx, srv.URL, payload))
			require.NoError(t, err)
			assert.Equal(t, body, readBody(t, resp), "%s, buffer %d", tc.name, buffer)
			code := CodeKeyReused
			if !tc.inHead {
				code = ""
			}
			require.Len(t, hl.attempts(), 1)
			assert.Equal(t, code, hl.attempts()[0].Code, "%s, buffer %d", tc.name, buffer)
		}
	}
}

// TestLongProblemNotRetried: a 409 IDEMPOTENCY_KEY_REUSED (or
// _RESPONSE_UNAVAILABLE) whose body runs past the part read within the
// attempt (a long detail, extension members) is still never retried: its
// code, at the start, is found in the head although the JSON text is cut
// there. It used to be retried to the last attempt, each getting the same
// answer.
func TestLongProblemNotRetried(t *testing.T) {
	for _, code := range []string{CodeKeyReused, CodeResponseUnavailable} {
		for _, size := range []int{70 << 10, 2 << 20} { // past the 64 KiB head; past the 1 MiB buffer too
			body := `{"title":"x","status":409,"code":"` + code + `","detail":"` + strings.Repeat("d", size) + `"}`
			srv := newRecServer(t, func(int, *http.Request) reply {
				return reply{status: 409, header: map[string]string{"Content-Type": "application/problem+json"}, body: body}
			})
			var hl hookLog
			ctx, call := Start(context.Background())
			resp, err := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock()), WithAttemptHook(hl.hook)).
				Do(post(t, ctx, srv.URL, payload))
			require.NoError(t, err)
			assert.Equal(t, body, readBody(t, resp), "%s, %d", code, size)
			assert.Equal(t, 1, len(srv.Seen()), "%s, %d: retried", code, size)
			require.Len(t, hl.attempts(), 1)
			assert.Equal(t, code, hl.attempts()[0].Code)
			var pe *ProblemError
			require.ErrorAs(t, call.Check(resp, []byte(body)), &pe)
			assert.Equal(t, code, pe.Code)
		}
	}
}

// TestLongProblemAtTheDeadline: the problem an *Error carries when the call
// stops on a long IDEMPOTENCY_KEY_IN_USE (its Retry-After beyond the
// deadline) is found in the head too.
func TestLongProblemAtTheDeadline(t *testing.T) {
	body := `{"title":"busy","status":409,"code":"` + CodeKeyInUse + `","detail":"` + strings.Repeat("d", 100<<10) + `"}`
	srv := newRecServer(t, func(int, *http.Request) reply {
		return reply{status: 409, header: map[string]string{"Content-Type": "application/problem+json", "Retry-After": "3600"}, body: body}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, _ = Start(ctx)
	_, err := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock())).Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrRetryAfterTooLong)
	var pe *ProblemError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, CodeKeyInUse, pe.Code)
	assert.Equal(t, "busy", pe.Title)
}

// bodyWatch is a RoundTripper that records, for each response, whether its
// body was read to its end before it was closed.
type bodyWatch struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies []*watchedBody
}

func (w *bodyWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b := &watchedBody{ReadCloser: resp.Body, status: resp.StatusCode}
	resp.Body = b
	w.mu.Lock()
	w.bodies = append(w.bodies, b)
	w.mu.Unlock()
	return resp, nil
}

// report returns "<status> drained" or "<status> closed early" per response
// ("open" if it was not closed).
func (w *bodyWatch) report() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, b := range w.bodies {
		b.mu.Lock()
		state := "open"
		switch {
		case b.closed && b.eofAtClose:
			state = "drained"
		case b.closed:
			state = "closed early"
		}
		out = append(out, strconv.Itoa(b.status)+" "+state)
		b.mu.Unlock()
	}
	return out
}

type watchedBody struct {
	io.ReadCloser
	status int

	mu         sync.Mutex
	eof        bool
	closed     bool
	eofAtClose bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed, b.eofAtClose = true, b.eof
	}
	b.mu.Unlock()
	return b.ReadCloser.Close()
}

func TestKeys(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n%2 == 1 {
			return reply{status: 503}
		}
		return reply{status: 201}
	})
	d := NewDoer(http.DefaultClient, fastPolicy(2), WithClock(newFakeClock()))
	last := func() seen { s := srv.Seen(); return s[len(s)-1] }

	t.Run("caller supplied", func(t *testing.T) {
		ctx, call := Start(context.Background(), WithKey("k-123"))
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "k-123", call.Key())
		s := srv.Seen()
		assert.Equal(t, "k-123", s[len(s)-2].Key)
		assert.Equal(t, "k-123", s[len(s)-1].Key)
	})
	t.Run("already on the request", func(t *testing.T) {
		ctx, call := Start(context.Background())
		req := post(t, ctx, srv.URL, payload)
		req.Header.Set("Idempotency-Key", "pre-set")
		resp, err := d.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "pre-set", call.Key())
		assert.Equal(t, "pre-set", last().Key)
	})
	t.Run("conflict", func(t *testing.T) {
		before := len(srv.Seen())
		ctx, _ := Start(context.Background(), WithKey("mine"))
		req := post(t, ctx, srv.URL, payload)
		req.Header.Set("Idempotency-Key", "other")
		_, err := d.Do(req)
		require.ErrorIs(t, err, ErrKeyConflict)
		assert.Len(t, srv.Seen(), before, "nothing sent")
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "mine", e.Key, "the key the call would have used")
		assert.Contains(t, err.Error(), "key=mine attempts=0")

		// As a generated helper does: FixKey's key is the Error's.
		ctx, call := Start(context.Background(), WithKey("mine"))
		key, err := call.FixKey("other")
		require.NoError(t, err)
		req = post(t, ctx, srv.URL, payload)
		req.Header.Set("Idempotency-Key", "other")
		_, err = d.Do(req)
		require.ErrorAs(t, err, &e)
		assert.Equal(t, key, e.Key)
		assert.Equal(t, key, call.Key(), "never fixed by the Doer: the key the call would have used, as the Error's")
	})
	t.Run("uuidv4", func(t *testing.T) {
		ctx, call := Start(context.Background(), WithPolicy(Policy{MaxAttempts: 2, KeyFormat: FormatUUIDv4}))
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, uuid.Version(4), uuid.MustParse(call.Key()).Version())
	})
	t.Run("query", func(t *testing.T) {
		ctx, call := Start(context.Background(), WithPolicy(Policy{MaxAttempts: 2, KeyCarrier: CarrierQuery, KeyName: "request_id"}))
		resp, err := d.Do(post(t, ctx, srv.URL+"/c?b=%2F&a=1", payload))
		require.NoError(t, err)
		resp.Body.Close()
		s := srv.Seen()
		for _, r := range s[len(s)-2:] {
			assert.Equal(t, "b=%2F&a=1&request_id="+call.Key(), r.RawQuery)
			assert.Empty(t, r.Key, "no header")
		}
	})
	t.Run("query pairs of the key's name", func(t *testing.T) {
		pol := WithPolicy(Policy{MaxAttempts: 2, KeyCarrier: CarrierQuery, KeyName: "request_id"})
		for _, tc := range []struct{ query, key, sent string }{
			{"request_id=abc&x=1", "abc", "request_id=abc&x=1"}, // one pair: as spelled
			{"request_id=&request_id=abc", "abc", "request_id=abc"},
			{"request_id=abc&x=1&request_id=abc", "abc", "x=1&request_id=abc"},
			{"request_id=&x=1&request_id=", "", "x=1&request_id="},
			// A pair holding a semicolon is no key to the server (url.ParseQuery and
			// runtime/idem skip it): it is replaced, not reported as the call's key.
			{"request_id=K;x", "", "request_id="},
			{"request_id=K;x&request_id=abc", "abc", "request_id=K;x&request_id=abc"},
			// Nor is a badly escaped value (runtime/idem answers 400): replaced too.
			{"request_id=%zz&x=1", "", "x=1&request_id="},
			{"request_id=%zz&request_id=abc", "abc", "request_id=abc"},
		} {
			ctx, call := Start(context.Background(), pol)
			resp, err := d.Do(post(t, ctx, srv.URL+"/c?"+tc.query, payload))
			require.NoError(t, err)
			resp.Body.Close()
			if tc.key != "" {
				assert.Equal(t, tc.key, call.Key(), tc.query)
			}
			s := srv.Seen()
			for _, r := range s[len(s)-2:] {
				assert.Equal(t, tc.sent+strings.TrimPrefix(call.Key(), tc.key), r.RawQuery, "%s: one key, the first one carried", tc.query)
				q, _ := url.ParseQuery(r.RawQuery)
				assert.Equal(t, []string{call.Key()}, q["request_id"], "%s: the server reads the key reported", tc.query)
			}
		}
		before := len(srv.Seen())
		ctx, _ := Start(context.Background(), pol)
		_, err := d.Do(post(t, ctx, srv.URL+"/c?request_id=a&request_id=b", payload))
		require.ErrorIs(t, err, ErrKeyConflict)
		assert.Len(t, srv.Seen(), before, "nothing sent")
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Empty(t, e.Key, "no key supplied: none")
	})
	t.Run("body", func(t *testing.T) {
		ctx, call := Start(context.Background(), WithPolicy(Policy{MaxAttempts: 2, KeyCarrier: CarrierBody, KeyName: "/idempotency_key"}))
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		want := `{"idempotency_key":"` + call.Key() + `",` + payload[1:]
		s := srv.Seen()
		for _, r := range s[len(s)-2:] {
			assert.Equal(t, want, r.Body, "spliced once, identical on every attempt")
			assert.Equal(t, strconv.Itoa(len(want)), r.Header.Get("Content-Length"))
		}
	})
	t.Run("body already carries one", func(t *testing.T) {
		ctx, call := Start(context.Background(), WithPolicy(Policy{MaxAttempts: 2, KeyCarrier: CarrierBody, KeyName: "/k"}))
		resp, err := d.Do(post(t, ctx, srv.URL, `{"k":"from-body","a":1}`))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "from-body", call.Key())
		assert.Equal(t, `{"k":"from-body","a":1}`, last().Body)
	})
	t.Run("body carrier without a body", func(t *testing.T) {
		ctx, _ := Start(context.Background(), WithPolicy(Policy{KeyCarrier: CarrierBody, KeyName: "/k"}))
		_, err := d.Do(post(t, ctx, srv.URL, ""))
		require.ErrorIs(t, err, ErrBadKeyCarrier)
	})
}

// A caller persists the key, crashes, and resumes with it: the server
// executes once and replays.
func TestResumeWithPersistedKey(t *testing.T) {
	dd := newDedupe()
	srv := httptest.NewServer(dd)
	defer srv.Close()

	// First life: the server executes, but every response is lost.
	var saved string
	lossy := faultnet.NewTransport(nil, faultnet.PlanFunc(func(*http.Request) faultnet.Fault { return faultnet.DropFault }))
	ctx, _ := Start(context.Background(), WithKeyObserver(func(k string) { saved = k }))
	_, err := NewDoer(&http.Client{Transport: lossy}, fastPolicy(3), WithClock(newFakeClock())).Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	require.NotEmpty(t, saved)
	assert.Equal(t, 1, dd.effects(), "executed once, replayed twice")

	// Second life: resume with the saved key.
	ctx, call := Start(context.Background(), WithKey(saved))
	resp, err := NewDoer(http.DefaultClient, fastPolicy(3)).Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, dd.first(saved), readBody(t, resp))
	assert.Equal(t, 1, call.Attempts())
	assert.Equal(t, 1, dd.effects())
}

func TestBodyWithoutGetBody(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n == 1 {
			return reply{status: 503}
		}
		return reply{status: 201}
	})
	mk := func(ctx context.Context) *http.Request {
		req := post(t, ctx, srv.URL, "")
		req.Body = io.NopCloser(io.MultiReader(strings.NewReader(payload[:10]), strings.NewReader(payload[10:])))
		req.GetBody, req.ContentLength = nil, -1
		return req
	}
	ctx, _ := Start(context.Background())
	resp, err := NewDoer(http.DefaultClient, fastPolicy(2), WithClock(newFakeClock())).Do(mk(ctx))
	require.NoError(t, err)
	resp.Body.Close()
	for _, s := range srv.Seen() {
		assert.Equal(t, payload, s.Body)
	}
	ctx, _ = Start(context.Background())
	_, err = NewDoer(http.DefaultClient, fastPolicy(2), WithRequestBodyLimit(16)).Do(mk(ctx))
	require.ErrorIs(t, err, ErrBodyNotReplayable)
	assert.Len(t, srv.Seen(), 2, "nothing sent")

	// The limit is exact, the largest one means no limit, and 0 or less
	// buffers nothing (only an empty body passes).
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{int64(len(payload)), true}, {int64(len(payload)) - 1, false}, {math.MaxInt64, true}, {math.MaxInt64 - 1, true}, {0, false}, {-1, false}, {math.MinInt64, false}} {
		before := len(srv.Seen())
		ctx, _ = Start(context.Background())
		resp, err = NewDoer(http.DefaultClient, fastPolicy(1), WithRequestBodyLimit(tc.limit)).Do(mk(ctx))
		if !tc.ok {
			require.ErrorIs(t, err, ErrBodyNotReplayable, "limit %d", tc.limit)
			assert.Len(t, srv.Seen(), before, "limit %d: nothing sent", tc.limit)
			continue
		}
		require.NoError(t, err, "limit %d", tc.limit)
		resp.Body.Close()
		require.Len(t, srv.Seen(), before+1)
		assert.Equal(t, payload, srv.Seen()[before].Body, "limit %d: the whole body is sent", tc.limit)
	}
	for _, limit := range []int64{0, -1} {
		ctx, _ = Start(context.Background())
		req := mk(ctx)
		req.Body = io.NopCloser(strings.NewReader(""))
		resp, err = NewDoer(http.DefaultClient, fastPolicy(1), WithRequestBodyLimit(limit)).Do(req)
		require.NoError(t, err, "limit %d: an empty body needs no buffer", limit)
		resp.Body.Close()
	}
}

// TestGetBodyFailure: a retry whose GetBody fails is never sent, so it
// is not counted: Attempts() and the Error say what the server saw.
func TestGetBodyFailure(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return reply{status: 503} })
	ctx, call := Start(context.Background())
	req := post(t, ctx, srv.URL, payload)
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	_, err := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock())).Do(req)
	require.ErrorIs(t, err, ErrBodyNotReplayable)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Len(t, srv.Seen(), 1)
	assert.Equal(t, 1, call.Attempts(), "the second attempt was not sent")
	assert.Equal(t, 1, e.Attempts)
}

func TestWhichRequests(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return reply{status: 503} })
	t.Run("unmarked passes through", func(t *testing.T) {
		before := len(srv.Seen())
		resp, err := NewDoer(http.DefaultClient, fastPolicy(3)).Do(post(t, context.Background(), srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		s := srv.Seen()
		require.Len(t, s, before+1, "no retries")
		assert.Empty(t, s[len(s)-1].Key, "no key")
	})
	t.Run("matcher", func(t *testing.T) {
		before := len(srv.Seen())
		var hl hookLog
		d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()), WithAttemptHook(hl.hook),
			WithMatcher(MatchMethods(fastPolicy(2), http.MethodPost, http.MethodPatch)))
		resp, err := d.Do(post(t, context.Background(), srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		s := srv.Seen()[before:]
		require.Len(t, s, 2)
		assert.NotEmpty(t, s[0].Key)
		assert.Equal(t, s[0].Key, s[1].Key)
		assert.Equal(t, s[0].Key, hl.attempts()[0].Key, "the hook reports the key of matched requests")
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err = d.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, srv.Seen(), before+3)
	})
	t.Run("nested doers add one key", func(t *testing.T) {
		before := len(srv.Seen())
		inner := NewDoer(http.DefaultClient, fastPolicy(3), WithMatcher(MatchMethods(fastPolicy(3), http.MethodPost)))
		outer := NewDoer(inner, fastPolicy(2), WithClock(newFakeClock()))
		ctx, call := Start(context.Background())
		resp, err := outer.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, srv.Seen(), before+2)
		assert.Equal(t, 2, call.Attempts())
	})
	t.Run("a call serves one request", func(t *testing.T) {
		d := NewDoer(http.DefaultClient, fastPolicy(1))
		ctx, _ := Start(context.Background())
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		_, err = d.Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, ErrCallReused)
	})
	t.Run("invalid policy", func(t *testing.T) {
		before := len(srv.Seen())
		ctx, _ := Start(context.Background(), WithPolicy(Policy{MaxAttempts: -2}))
		_, err := NewDoer(http.DefaultClient, Policy{}).Do(post(t, ctx, srv.URL, payload))
		require.ErrorIs(t, err, ErrInvalidPolicy)
		assert.Len(t, srv.Seen(), before)
	})
}

func TestAttemptHeaderOptIn(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n < 3 {
			return reply{status: 502}
		}
		return reply{status: 201}
	})
	ctx, _ := Start(context.Background())
	resp, err := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock()), WithAttemptHeader("Idempotency-Attempt")).
		Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	for i, s := range srv.Seen() {
		assert.Equal(t, strconv.Itoa(i+1), s.Header.Get("Idempotency-Attempt"))
	}
	// Off by default: the headers of all attempts are the same.
	srv2 := newRecServer(t, func(n int, _ *http.Request) reply {
		if n < 3 {
			return reply{status: 502}
		}
		return reply{status: 201}
	})
	ctx, _ = Start(context.Background())
	resp, err = NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock())).Do(post(t, ctx, srv2.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	s := srv2.Seen()
	require.Len(t, s, 3)
	assert.Equal(t, s[0].Header, s[1].Header)
	assert.Equal(t, s[0].Header, s[2].Header)
}

func TestLogger(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n == 1 {
			return reply{status: 503, header: map[string]string{"Retry-After": "2"}}
		}
		return reply{status: 201}
	})
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, call := Start(context.Background())
	resp, err := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock()), WithLogger(logger)).Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, "two attempts, then the call's end")
	assert.Contains(t, lines[2], `"msg":"idemclient call"`)
	assert.Contains(t, lines[2], `"attempts":2`)
	assert.Contains(t, lines[0], `"level":"INFO"`)
	assert.Contains(t, lines[0], `"key":"`+call.Key()+`"`)
	assert.Contains(t, lines[0], `"status":503`)
	assert.Contains(t, lines[0], `"retry_after":2000000000`)
	assert.Contains(t, lines[1], `"level":"DEBUG"`)
	assert.Contains(t, lines[1], `"retry":false`)
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Method: "POST", URL: "http://h/x", Key: "k", Attempts: 4, Status: 503, Reason: ErrAttemptsExhausted, Err: errors.New("boom")}
	assert.Equal(t, "idemclient: attempts exhausted: POST http://h/x key=k attempts=4 last-status=503: boom", e.Error())
	assert.ErrorIs(t, e, ErrAttemptsExhausted)

	// A context reason the cause already says is said once.
	for _, tc := range []struct {
		reason, err error
		want        string
	}{
		{context.DeadlineExceeded, &url.Error{Op: "Post", URL: "http://h/x", Err: context.DeadlineExceeded},
			`idemclient: call stopped by its context: POST http://h/x key=k attempts=1: Post "http://h/x": context deadline exceeded`},
		{context.Canceled, context.Canceled, "idemclient: call stopped by its context: POST http://h/x key=k attempts=1: context canceled"},
		{context.Canceled, errors.New("net/http: request canceled"), "context canceled: POST http://h/x key=k attempts=1: net/http: request canceled"},
		{context.Canceled, nil, "context canceled: POST http://h/x key=k attempts=1"},
	} {
		e := &Error{Method: "POST", URL: "http://h/x", Key: "k", Attempts: 1, Reason: tc.reason, Err: tc.err}
		assert.Equal(t, tc.want, e.Error())
		assert.ErrorIs(t, e, tc.reason)
	}
}

func TestBareRequest(t *testing.T) {
	srv := newRecServer(t, nil)
	ctx, call := Start(context.Background())
	req := (&http.Request{Method: http.MethodPost, URL: mustURL(t, srv.URL+"/bare")}).WithContext(ctx) // no Header map
	resp, err := NewDoer(http.DefaultClient, Policy{}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, call.Key(), srv.Seen()[0].Key)

	ctx, _ = Start(context.Background())
	_, err = NewDoer(http.DefaultClient, Policy{}).Do((&http.Request{Method: http.MethodPost}).WithContext(ctx))
	require.ErrorIs(t, err, ErrNotRetryable)
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestPolicyStart(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return reply{status: 503} })
	d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock()))
	ctx, call := fastPolicy(2).Start(context.Background(), WithKey("k"))
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 2, call.Attempts(), "the call's policy wins over the Doer's")
	ctx, call = fastPolicy(2).Start(context.Background(), WithPolicy(fastPolicy(3)))
	resp, err = d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 3, call.Attempts(), "later options win")
}

// Call.Check measures a Retry-After date on the Doer's clock, as the Doer does.
func TestCheckUsesTheDoersClock(t *testing.T) {
	clock := newFakeClock()
	clock.now = time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	srv := newRecServer(t, func(int, *http.Request) reply {
		return problemReply(409, CodeKeyInUse, map[string]string{"Retry-After": clock.Now().Add(30 * time.Second).Format(http.TimeFormat)})
	})
	var hl hookLog
	ctx, call := Start(context.Background())
	resp, err := NewDoer(http.DefaultClient, Policy{MaxAttempts: 1}, WithClock(clock), WithAttemptHook(hl.hook)).Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	body := readBody(t, resp)
	var pe *ProblemError
	require.ErrorAs(t, call.Check(resp, []byte(body)), &pe)
	assert.Equal(t, 30*time.Second, pe.RetryAfter)
	assert.Equal(t, 30*time.Second, hl.attempts()[0].RetryAfter)
}

func TestDecodeProblemCut(t *testing.T) {
	for _, c := range []struct {
		b       string
		cut, ok bool
		want    problemMembers
	}{
		{`{"code":"C","title":"T","detail":"D"}`, false, true, problemMembers{Code: "C", Title: "T", Detail: "D"}},
		{`{"code":"C","title":"T","detail":"D`, false, false, problemMembers{}},
		{`{"code":"C","title":"T","detail":"D`, true, true, problemMembers{Code: "C", Title: "T"}},
		{`{"code":"C","ext":[1,2,{"a":`, true, true, problemMembers{Code: "C"}},
		{`{"code":"C",`, true, true, problemMembers{Code: "C"}},
		{`{"code":"C"`, true, true, problemMembers{Code: "C"}},
		{`{"Code":"C","x":"`, true, true, problemMembers{Code: "C"}}, // as json.Unmarshal matches names
		{`{"code":"C","code":"E","x":"`, true, true, problemMembers{Code: "E"}},
		{`{"cod`, true, true, problemMembers{}},
		{`{"code":"C", garbage`, true, false, problemMembers{}}, // not JSON up to the cut
		{`{"code":7,"x":"`, true, false, problemMembers{}},      // a member of another type spoils it, as for json.Unmarshal
		{`["code","C"`, true, false, problemMembers{}},
		{`<html>`, true, false, problemMembers{}},
	} {
		got, ok := decodeProblem([]byte(c.b), c.cut)
		assert.Equal(t, c.ok, ok, "%s cut=%v", c.b, c.cut)
		assert.Equal(t, c.want, got, "%s cut=%v", c.b, c.cut)
	}
}

// TestLogAndErrorsRedactTheQuery: a query may carry a credential (an API
// key declared "in: query", which oapi-codegen's security provider adds to
// every request). The attempts' log lines (Info on every retry) and the
// *Error, with the inner client's *url.Error it wraps, used to spell it
// out; they now name the parameters without their values, and no password
// (the body is never logged).
func TestLogAndErrorsRedactTheQuery(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return reply{status: 503} })
	refused := func() string { // a port nothing listens on
		s := httptest.NewServer(http.NotFoundHandler())
		s.Close()
		return s.URL
	}()
	for _, base := range []string{srv.URL, refused} {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		u := strings.Replace(base, "http://", "http://user:pw-secret@", 1) + "/orders?api_key=q-secret&BARESECRET&n=1#access_token=frag-secret"
		ctx, _ := Start(context.Background())
		resp, err := NewDoer(http.DefaultClient, fastPolicy(2), WithClock(newFakeClock()), WithLogger(logger)).
			Do(post(t, ctx, u, `{"card":"body-secret"}`))
		out := buf.String()
		if err != nil {
			var ue *url.Error
			require.ErrorAs(t, err, &ue, "the inner client's error is still there")
			out += "\n" + err.Error()
		} else {
			resp.Body.Close()
		}
		require.Contains(t, out, "/orders?api_key=xxxxx&xxxxx&n=xxxxx")
		for _, secret := range []string{"q-secret", "BARESECRET", "frag-secret", "pw-secret", "body-secret"} {
			assert.NotContains(t, out, secret, base)
		}
	}
	assert.Equal(t, "api_key=q-secret&BARESECRET&n=1", srv.Seen()[0].RawQuery, "sent as is")
}

// wrapDoer is an HTTPDoer that wraps its inner client's errors in one of
// its own, as a transport middleware may.
type wrapDoer struct{ inner HTTPDoer }

type transportError struct{ err error }

func (e *transportError) Error() string { return "transport: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func (w wrapDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := w.inner.Do(req)
	if err != nil {
		return nil, &transportError{err}
	}
	return resp, nil
}

// TestWrappedURLErrorRedacted: a *url.Error an inner HTTPDoer wrapped in an
// error of its own is redacted in the whole message, and the chain stays
// (errors.As finds the wrapper and the *url.Error, errors.Is the cause).
func TestWrappedURLErrorRedacted(t *testing.T) {
	refused := func() string { // a port nothing listens on
		s := httptest.NewServer(http.NotFoundHandler())
		s.Close()
		return s.URL
	}()
	ctx, _ := Start(context.Background())
	_, err := NewDoer(wrapDoer{http.DefaultClient}, fastPolicy(1), WithClock(newFakeClock())).
		Do(post(t, ctx, refused+"/orders?api_key=q-secret", `{}`))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "q-secret")
	assert.Contains(t, err.Error(), "transport: ")
	assert.Contains(t, err.Error(), "/orders?api_key=xxxxx")
	var te *transportError
	assert.ErrorAs(t, err, &te)
	var ue *url.Error
	assert.ErrorAs(t, err, &ue)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
}

// An ambiguous request (Policy.Ambiguous: it may be an operation that is
// not idempotent) is sent once, and its key is never added as a query
// parameter or body member it does not carry (a plain operation whose
// schema forbids other members would refuse it): only one carrying no key
// (the nil UUID, empty, null) is filled, a carried key kept, and a request
// without one sent unchanged.
func TestAmbiguousNeverAdds(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = append(sent, r.URL.RawQuery+" "+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	const nilKey = "00000000-0000-0000-0000-000000000000"
	body := Policy{MaxAttempts: 4, KeyCarrier: CarrierBody, KeyName: "/idempotency_key", Ambiguous: true}
	query := Policy{MaxAttempts: 4, KeyCarrier: CarrierQuery, KeyName: "request_id", Ambiguous: true}
	for _, tc := range []struct {
		name        string
		p           Policy
		query, body string
		same        bool   // sent unchanged
		fresh       bool   // the nil UUID replaced by a new key
		sentQuery   string // if not "", the query sent, as it must be
	}{
		{"body without the member", body, "", `{"name":"x"}`, true, false, ""},
		{"body not an object", body, "", `["x"]`, true, false, ""},
		{"body with an empty member", body, "", `{"idempotency_key":"","name":"x"}`, false, false, ""},
		{"body with a null member", body, "", `{"idempotency_key":null,"name":"x"}`, false, false, ""},
		{"body with a key", body, "", `{"idempotency_key":"k1","name":"x"}`, true, false, ""},
		{"body with the nil UUID", body, "", `{"idempotency_key":"` + nilKey + `","name":"x"}`, false, true, ""},
		{"body with a member that is not a string", body, "", `{"idempotency_key":5,"name":"x"}`, true, false, ""},
		{"body with the member twice", body, "", `{"idempotency_key":"","idempotency_key":null}`, true, false, ""},
		{"body not JSON", body, "", `{"idempotency_key":`, true, false, ""},
		{"body with a nested member, its parent missing", Policy{MaxAttempts: 4, KeyCarrier: CarrierBody, KeyName: "/meta/key", Ambiguous: true}, "", `{"name":"x"}`, true, false, ""},
		{"body with a nested member, its parent not an object", Policy{MaxAttempts: 4, KeyCarrier: CarrierBody, KeyName: "/meta/key", Ambiguous: true}, "", `{"meta":[]}`, true, false, ""},
		{"body with a nested empty member", Policy{MaxAttempts: 4, KeyCarrier: CarrierBody, KeyName: "/meta/key", Ambiguous: true}, "", `{"meta":{"key":""}}`, false, false, ""},
		{"query without the parameter", query, "a=1", `{}`, true, false, ""},
		{"query with a key", query, "request_id=k1", `{}`, true, false, ""},
		{"query with an empty key", query, "a=1&request_id=", `{}`, false, false, ""},
		{"query with the nil UUID", query, "request_id=" + nilKey, `{}`, false, true, ""},
		// The server refuses a key parameter given twice: one pair, the key.
		{"query with a key and an empty repeat", query, "request_id=k1&request_id=", `{}`, false, false, "request_id=k1"},
	} {
		mu.Lock()
		sent = nil
		mu.Unlock()
		d := NewDoer(http.DefaultClient, DefaultPolicy(), WithMatcher(func(*http.Request) (Policy, bool) { return tc.p, true }))
		u := srv.URL
		if tc.query != "" {
			u += "?" + tc.query
		}
		resp, err := d.Do(post(t, context.Background(), u, tc.body))
		require.NoError(t, err, tc.name)
		resp.Body.Close()
		mu.Lock()
		got := slices.Clone(sent)
		mu.Unlock()
		require.Len(t, got, 1, "%s: sent once", tc.name)
		want := tc.query + " " + tc.body
		if tc.same {
			assert.Equal(t, want, got[0], tc.name)
		}
		if tc.fresh {
			assert.NotContains(t, got[0], nilKey, tc.name)
			assert.Equal(t, len(want), len(got[0]), "%s: %s, one key for the other", tc.name, got[0])
		}
		if tc.sentQuery != "" {
			assert.Equal(t, tc.sentQuery+" "+tc.body, got[0], tc.name)
			continue
		}
		if !tc.same && !tc.fresh { // filled: a new key where none was
			assert.Regexp(t, `[0-9a-f]{8}-[0-9a-f]{4}-7`, got[0], tc.name)
		}
	}
}

// A key longer than the contract allows is refused before anything is
// sent, naming the limit.
func TestInvalidKeyRefusedBeforeSending(t *testing.T) {
	srv := newRecServer(t, nil)
	long := strings.Repeat("k", 65)
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()))
	for _, tc := range []struct {
		name   string
		p      Policy
		key    string // WithKey
		header string // carried by the request
		want   string // in the error; "" when sent
	}{
		{"WithKey too long", Policy{KeyMaxLength: 64}, long, "", "the key is 65 characters long, longer than the policy's KeyMaxLength 64"},
		{"carried too long", Policy{KeyMaxLength: 64}, "", long, "KeyMaxLength 64"},
		{"carried quoted, 64 unquoted", Policy{KeyMaxLength: 64}, "", `"` + long[1:] + `"`, ""},
		{"at the limit", Policy{KeyMaxLength: 64}, long[1:], "", ""},
		{"no limit", Policy{}, long, "", ""},
		{"created key longer than the limit", Policy{KeyMaxLength: 20}, "", "", "the key is 36 characters long, longer than the policy's KeyMaxLength 20"},
		// The format is the server's business (DefaultPolicy says uuid: the keys it creates).
		{"any format", DefaultPolicy(), "order-42", "", ""},
		// Under EnforceKeyFormat (generated policies) a key must be in the
		// contract's format, as the server reads it.
		{"uuid enforced", Policy{EnforceKeyFormat: true}, "order-42", "", `the key "order-42" is not a UUID in canonical form, which the policy's key format uuid requires`},
		{"uuid enforced, carried", Policy{KeyFormat: FormatUUID, EnforceKeyFormat: true}, "", "order-42", "not a UUID in canonical form"},
		{"uuid enforced, braced", Policy{EnforceKeyFormat: true}, "{0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d}", "", "not a UUID in canonical form"},
		{"uuid enforced, upper case", Policy{EnforceKeyFormat: true}, "0190B4A2-7C1E-7D3F-9A4B-2C6E8F0A1B3D", "", ""},
		{"uuidv4 enforced, a v7", Policy{KeyFormat: FormatUUIDv4, EnforceKeyFormat: true}, "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", "", "is a UUID of version 7, not 4"},
		{"uuidv7 enforced", Policy{KeyFormat: FormatUUIDv7, EnforceKeyFormat: true}, "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", "", ""},
		{"token enforced", Policy{KeyFormat: FormatToken, EnforceKeyFormat: true}, "order 42", "", "other than visible ASCII"},
		{"token enforced, quoted", Policy{KeyFormat: FormatToken, EnforceKeyFormat: true}, "", `"order-42"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.Seen())
			opts := []CallOption{WithPolicy(tc.p)}
			if tc.key != "" { // WithKey("") is an invalid key
				opts = append(opts, WithKey(tc.key))
			}
			ctx, call := Start(context.Background(), opts...)
			req := post(t, ctx, srv.URL, payload)
			if tc.header != "" {
				req.Header.Set("Idempotency-Key", tc.header)
			}
			resp, err := d.Do(req)
			if tc.want == "" {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Len(t, srv.Seen(), before+1)
				return
			}
			require.ErrorIs(t, err, ErrInvalidKey)
			assert.Contains(t, err.Error(), tc.want)
			assert.Len(t, srv.Seen(), before, "nothing sent")
			assert.Zero(t, call.Attempts())
		})
	}
	// An ambiguous request's key is left as it is (it may be another operation's).
	ctx, _ := Start(context.Background(), WithPolicy(Policy{KeyMaxLength: 64, Ambiguous: true}))
	req := post(t, ctx, srv.URL, payload)
	req.Header.Set("Idempotency-Key", long)
	resp, err := d.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	require.ErrorIs(t, Policy{KeyMaxLength: -1}.Validate(), ErrInvalidPolicy)
}
