package idemclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A per-attempt timeout shorter than the server's in-flight wait: the
// server holds a duplicate (here every request, for 300ms) before it
// answers. An attempt the server may hold (a retry, or a first attempt
// with a supplied key, which another call may run) gets the timeout plus
// the policy's InFlightWait, so the call gets the answer instead of
// ErrAttemptsExhausted; a first attempt with a key the Doer just created
// keeps the bare timeout.
func TestAttemptTimeoutCoversInFlightWait(t *testing.T) {
	const hold = 300 * time.Millisecond
	var n atomic.Int32
	srv := newRecServer(t, func(int, *http.Request) reply {
		n.Add(1)
		time.Sleep(hold)
		return reply{status: http.StatusCreated, body: `{}`}
	})
	p := Policy{MaxAttempts: 2, Backoff: Backoff{Initial: time.Millisecond, Max: time.Millisecond}, InFlightWait: 2 * time.Second}
	d := NewDoer(http.DefaultClient, p, WithAttemptTimeout(100*time.Millisecond))

	for _, tc := range []struct {
		name     string
		opts     []CallOption
		attempts int
	}{
		{"supplied key: the first attempt may be held", []CallOption{WithKey("0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d")}, 1},
		{"generated key: the retry may be held", nil, 2},
		{"key generator: the first attempt may be held", []CallOption{WithKeyGenerator(func(KeyFormat) (string, error) { return "k-gen", nil })}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, call := Start(context.Background(), tc.opts...)
			resp, err := d.Do(post(t, ctx, srv.URL, payload))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, tc.attempts, call.Attempts())
		})
	}

	// A key FixKey just made (a generated helper's typed key parameter
	// carries it) is no one else's: the first attempt keeps the bare
	// timeout.
	ctx, call := Start(context.Background(), WithPolicyOverride(func(p *Policy) { p.MaxAttempts = 1 }))
	key, err := call.FixKey("")
	require.NoError(t, err)
	req := post(t, ctx, srv.URL, payload)
	req.Header.Set(DefaultKeyName, key)
	_, err = d.Do(req)
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.Contains(t, err.Error(), "attempt timed out after 100ms")

	// Without an in-flight wait the timeout is the timeout.
	ctx, _ = Start(context.Background(), WithPolicyOverride(func(p *Policy) { p.InFlightWait = 0 }))
	_, err = d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.Contains(t, err.Error(), "attempt timed out after 100ms")

	require.ErrorIs(t, Policy{InFlightWait: -1}.Validate(), ErrInvalidPolicy)
}

// A Retry-After cut short by the context's deadline matches
// context.DeadlineExceeded, as ErrNoTimeLeft does; one past the Doer's
// Retry-After limit does not (the deadline was not the limit).
func TestRetryAfterPastDeadlineIsDeadlineExceeded(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply {
		return reply{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "30"}}
	})
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, _ = Start(ctx)
	_, err := d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrRetryAfterTooLong)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "beyond the context deadline")

	d = NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()), WithRetryAfterLimit(time.Second))
	ctx, _ = Start(ctx)
	_, err = d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrRetryAfterTooLong)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

// stalled is a body that never yields a byte; closing it ends the read
// when closes is true.
type stalled struct {
	closed  chan struct{}
	release chan struct{} // ends a read that closing does not stop
	closes  bool
}

func (s *stalled) Read([]byte) (int, error) {
	if !s.closes {
		<-s.release // a reader that closing does not stop
		return 0, io.EOF
	}
	<-s.closed
	return 0, errors.New("read on closed body")
}

func (s *stalled) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}

// A request body the Doer must read first (no GetBody) that stalls does
// not hold the call past its context: the body is closed and the call
// ends with the context's error, nothing sent.
func TestStalledRequestBodyEndsWithTheContext(t *testing.T) {
	srv := newRecServer(t, nil)
	d := NewDoer(http.DefaultClient, Policy{})
	for _, closes := range []bool{true, false} {
		t.Run(fmt.Sprint("closes=", closes), func(t *testing.T) {
			body := &stalled{closed: make(chan struct{}), release: make(chan struct{}), closes: closes}
			defer close(body.release)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			ctx, call := Start(ctx)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { _, err := d.Do(req); done <- err }()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the call outlived its deadline by 5s")
			}
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Zero(t, call.Attempts())
			assert.Empty(t, srv.Seen())
			select {
			case <-body.closed:
			default:
				t.Error("the body was not closed")
			}
		})
	}
}

// A call whose context is already done sends nothing and reports no
// attempt: no hook, no key observed, Attempts 0.
func TestDoneContextSendsNothing(t *testing.T) {
	srv := newRecServer(t, nil)
	var hooks int
	d := NewDoer(http.DefaultClient, Policy{}, WithAttemptHook(func(context.Context, Attempt) { hooks++ }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var observed []string
	ctx, call := Start(ctx, WithKeyObserver(func(k string) { observed = append(observed, k) }))
	_, err := d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, context.Canceled)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Zero(t, e.Attempts)
	assert.Zero(t, call.Attempts())
	assert.Zero(t, hooks)
	assert.Empty(t, observed)
	assert.Empty(t, srv.Seen())
}

// Keys from a generator: the call's wins over the Doer's, which wins over
// NewKey; FixKey uses the call's too. Policy overrides edit the call's
// policy.
func TestKeyGeneratorsAndOverrides(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n == 1 {
			return reply{status: http.StatusServiceUnavailable}
		}
		return reply{status: http.StatusCreated}
	})
	var seq atomic.Int32
	doerGen := func(f KeyFormat) (string, error) {
		return fmt.Sprintf("doer-%s-%d", f, seq.Add(1)), nil
	}
	d := NewDoer(http.DefaultClient, Policy{KeyFormat: FormatToken}, WithClock(newFakeClock()), WithDoerKeyGenerator(doerGen))

	ctx, call := Start(context.Background())
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "doer-token-1", call.Key())

	ctx, call = Start(context.Background(), WithKeyGenerator(func(KeyFormat) (string, error) { return "test-key-1", nil }),
		WithPolicyOverride(func(p *Policy) { p.MaxAttempts = 1 }))
	resp, err = d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "test-key-1", call.Key())
	assert.Equal(t, 1, call.Attempts(), "the override's MaxAttempts")
	seen := srv.Seen()
	assert.Equal(t, []string{"doer-token-1", "doer-token-1", "test-key-1"}, []string{seen[0].Key, seen[1].Key, seen[2].Key})

	_, call = Start(context.Background(), WithPolicy(Policy{KeyFormat: FormatUUIDv4}),
		WithKeyGenerator(func(f KeyFormat) (string, error) { return "fixed-" + string(f), nil }))
	k, err := call.FixKey("")
	require.NoError(t, err)
	assert.Equal(t, "fixed-uuidv4", k)

	// A generator's error ends the call before anything is sent.
	ctx, _ = Start(context.Background(), WithKeyGenerator(func(KeyFormat) (string, error) { return "", io.ErrUnexpectedEOF }))
	_, err = d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Len(t, srv.Seen(), 3)

	// Editors are carried for a generated helper to pass on.
	_, call = Start(context.Background(), WithRequestEditors(func(context.Context, *http.Request) error { return nil }),
		WithRequestEditors(func(context.Context, *http.Request) error { return nil }))
	assert.Len(t, call.RequestEditors(), 2)
}
