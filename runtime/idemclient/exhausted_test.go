package idemclient

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// By default a call whose attempts ran out on a retryable status returns
// that last response and no error (as http.Client does); under
// WithErrorOnExhausted it returns an *Error whose Reason is
// ErrAttemptsExhausted, with the last status, problem and response (its
// body readable), and no response.
func TestErrorOnExhausted(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply {
		return problemReply(503, CodeStoreUnavailable, map[string]string{"Retry-After": "0"})
	})
	do := func(opts ...Option) (*http.Response, error) {
		d := NewDoer(http.DefaultClient, fastPolicy(3), append([]Option{WithClock(newFakeClock())}, opts...)...)
		ctx, _ := Start(context.Background())
		return d.Do(post(t, ctx, srv.URL, payload))
	}

	resp, err := do()
	require.NoError(t, err, "the default is unchanged")
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)

	var ends []CallEnd
	resp, err = do(WithErrorOnExhausted(), WithCallHook(func(_ context.Context, e CallEnd) { ends = append(ends, e) }))
	assert.Nil(t, resp)
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, 3, e.Attempts)
	assert.Equal(t, 503, e.Status)
	require.NotNil(t, e.Problem)
	assert.Equal(t, CodeStoreUnavailable, e.Problem.Code)
	var pe *ProblemError
	assert.True(t, errors.As(err, &pe))
	require.NotNil(t, e.Response, "the last response")
	assert.Equal(t, 503, e.Response.StatusCode)
	body, rerr := io.ReadAll(e.Response.Body)
	require.NoError(t, rerr)
	assert.Contains(t, string(body), CodeStoreUnavailable)
	assert.Contains(t, err.Error(), "last-status=503")
	require.Len(t, ends, 1)
	assert.ErrorIs(t, ends[0].Err, ErrAttemptsExhausted)
	assert.Len(t, srv.Seen(), 6)

	// The last attempt, which ends the call with an error under the
	// option, is logged as a give-up (Warn), as other errors are; without
	// the option the call ends with a response, logged at Debug.
	for _, on := range []bool{false, true} {
		var logs strings.Builder
		var last Attempt
		opts := []Option{
			WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			WithAttemptHook(func(_ context.Context, a Attempt) { last = a }),
		}
		if on {
			opts = append(opts, WithErrorOnExhausted())
		}
		resp, err = do(opts...)
		if err == nil {
			resp.Body.Close()
		}
		assert.Equal(t, 3, last.N, "on=%v", on)
		assert.Equal(t, 503, last.Status, "on=%v", on)
		assert.False(t, last.Retry, "on=%v: the last attempt", on)
		if on {
			assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN msg=\"idemclient attempt\""), "a give-up: %s", logs.String())
		} else {
			assert.Empty(t, logs.String(), "a response, not a give-up")
		}
	}

	// A final answer the policy does not retry is returned as before.
	ok := newRecServer(t, nil)
	d := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock()), WithErrorOnExhausted())
	ctx, _ := Start(context.Background())
	resp, err = d.Do(post(t, ctx, ok.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)

	// A body longer than the response buffer, which streamed past the
	// attempt: kept up to max(buffer, 64 KiB), the connection released.
	big := newRecServer(t, func(int, *http.Request) reply {
		return reply{status: 503, body: strings.Repeat("x", 100<<10)}
	})
	d = NewDoer(http.DefaultClient, fastPolicy(2), WithClock(newFakeClock()), WithErrorOnExhausted(), WithResponseBuffer(16))
	ctx, _ = Start(context.Background())
	_, err = d.Do(post(t, ctx, big.URL, payload))
	require.True(t, errors.As(err, &e))
	body, rerr = io.ReadAll(e.Response.Body)
	require.NoError(t, rerr)
	assert.Len(t, body, headMax)
}

// The last body kept under WithErrorOnExhausted is read within the
// attempt's deadline (WithAttemptTimeout), as a discarded body is drained:
// a body that stalls mid-way does not hold the call.
func TestErrorOnExhaustedStalledBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		_, _ = io.WriteString(w, strings.Repeat("y", 32))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the handler
	d := NewDoer(http.DefaultClient, fastPolicy(1), WithErrorOnExhausted(), WithResponseBuffer(16), WithAttemptTimeout(300*time.Millisecond))
	// The call and the read of the kept body, both bounded: a body kept
	// unread (still streaming) would block its read until the handler is
	// released, at the test's end.
	type result struct {
		err  error
		body string
	}
	done := make(chan result, 1)
	go func() {
		ctx, _ := Start(context.Background())
		_, err := d.Do(post(t, ctx, srv.URL, payload))
		r := result{err: err}
		var e *Error
		if errors.As(err, &e) && e.Response != nil {
			b, _ := io.ReadAll(e.Response.Body)
			r.body = string(b)
		}
		done <- r
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case r := <-done:
		var e *Error
		require.True(t, errors.As(r.err, &e), "%v", r.err)
		require.ErrorIs(t, r.err, ErrAttemptsExhausted)
		require.NotNil(t, e.Response)
		assert.Equal(t, strings.Repeat("y", 32), r.body, "what came before the stall")
	case <-timer.C:
		t.Fatal("the call is held by the stalled body")
	}
}

// Under WithErrorOnExhausted the other endings on an answer the policy
// retries (a Retry-After too long, no time left before the deadline, the
// retry budget empty, the in-use wait over) keep that last answer too:
// Error.Response, its body in memory. Without the option they keep none.
func TestErrorOnExhaustedOtherEndingsKeepResponse(t *testing.T) {
	unavailable := func(h map[string]string) *recServer {
		return newRecServer(t, func(int, *http.Request) reply { return problemReply(503, CodeStoreUnavailable, h) })
	}
	inUse := newRecServer(t, func(int, *http.Request) reply { return problemReply(409, CodeKeyInUse, nil) })
	noInUseWait := fastPolicy(3)
	noInUseWait.InUseWait = time.Nanosecond // below Backoff.Initial: no in-use wait
	for _, tc := range []struct {
		name    string
		srv     *recServer
		p       Policy
		opts    []Option
		timeout time.Duration
		reason  error
		code    string
	}{
		{"retry-after", unavailable(map[string]string{"Retry-After": "10"}), fastPolicy(3), []Option{WithRetryAfterLimit(time.Second)}, 0, ErrRetryAfterTooLong, CodeStoreUnavailable},
		{"no time left", unavailable(nil), fastPolicy(3), nil, 50 * time.Millisecond, ErrNoTimeLeft, CodeStoreUnavailable},
		{"budget", unavailable(nil), fastPolicy(3), []Option{WithRetryBudget(NewRetryBudget(DefaultRetryCost - 1))}, 0, ErrRetryBudgetExhausted, CodeStoreUnavailable},
		{"in use", inUse, noInUseWait, nil, 0, ErrInUseWaitExhausted, CodeKeyInUse},
	} {
		for _, on := range []bool{false, true} {
			opts := append([]Option{WithClock(newFakeClock())}, tc.opts...)
			if on {
				opts = append(opts, WithErrorOnExhausted())
			}
			d := NewDoer(http.DefaultClient, tc.p, opts...)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			ctx, _ = Start(ctx)
			resp, err := d.Do(post(t, ctx, tc.srv.URL, payload))
			assert.Nil(t, resp, tc.name)
			require.ErrorIs(t, err, tc.reason, tc.name)
			var e *Error
			require.True(t, errors.As(err, &e), tc.name)
			if !on {
				assert.Nil(t, e.Response, "%s: no response kept without the option", tc.name)
				continue
			}
			require.NotNil(t, e.Response, "%s: the last answer kept", tc.name)
			assert.Equal(t, e.Status, e.Response.StatusCode, tc.name)
			body, rerr := io.ReadAll(e.Response.Body)
			require.NoError(t, rerr, tc.name)
			assert.Contains(t, string(body), tc.code, tc.name)
		}
	}
}

// A call allowed one attempt (MaxAttempts 1, an ambiguous request, a
// keyless call the server does not dedupe) runs out after it: under
// WithErrorOnExhausted an answer the policy retries ends it with
// ErrAttemptsExhausted, as a connection error does, the error saying that
// no retry was allowed; the response is kept. A failing service does not
// pass for an answer because the call could not be retried.
func TestErrorOnExhaustedSingleAttempt(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply {
		return problemReply(503, CodeStoreUnavailable, nil)
	})
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()), WithErrorOnExhausted())
	ambiguous := fastPolicy(3)
	ambiguous.Ambiguous = true
	keyless := fastPolicy(3)
	keyless.KeyOptional = true
	for name, start := range map[string]func() context.Context{
		"max attempts 1": func() context.Context { ctx, _ := fastPolicy(1).Start(context.Background()); return ctx },
		"ambiguous":      func() context.Context { ctx, _ := ambiguous.Start(context.Background()); return ctx },
		"without key":    func() context.Context { ctx, _ := keyless.Start(context.Background(), WithoutKey()); return ctx },
	} {
		before := len(srv.Seen())
		resp, err := d.Do(post(t, start(), srv.URL, payload))
		assert.Nil(t, resp, name)
		require.ErrorIs(t, err, ErrAttemptsExhausted, name)
		assert.ErrorContains(t, err, "allowed one attempt, no retry", name)
		var e *Error
		require.True(t, errors.As(err, &e), name)
		assert.Equal(t, 1, e.Attempts, name)
		require.NotNil(t, e.Response, name)
		assert.Equal(t, 503, e.Response.StatusCode, name)
		assert.Len(t, srv.Seen(), before+1, "%s: sent once", name)
	}

	// A call that could retry does not say so.
	ctx, _ := fastPolicy(2).Start(context.Background())
	_, err := d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.NotContains(t, err.Error(), "allowed one attempt")
}
