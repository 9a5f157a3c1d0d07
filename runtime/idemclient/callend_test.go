package idemclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowClock is a fake clock whose time moves by step at every Now.
type slowClock struct {
	*fakeClock
	step time.Duration
}

func (c slowClock) Now() time.Time {
	c.Advance(c.step)
	return c.fakeClock.Now()
}

// The attempt hook sees the operation (the policy's), each attempt's
// duration and whether its response is a replay; the call hook sees the
// call's end once: outcome, attempts, total time. (Before, Attempt had
// neither Operation, Duration nor Replayed, and there was no call event.)
func TestAttemptAndCallEvents(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n == 1 {
			return reply{status: 503}
		}
		return reply{status: 201, header: map[string]string{"Idempotent-Replayed": "true"}, body: `{}`}
	})
	var (
		h    hookLog
		mu   sync.Mutex
		ends []CallEnd
	)
	clock := slowClock{newFakeClock(), 10 * time.Millisecond}
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(clock), WithAttemptHook(h.hook),
		WithCallHook(func(_ context.Context, e CallEnd) { mu.Lock(); ends = append(ends, e); mu.Unlock() }))
	p := fastPolicy(3)
	p.Operation = "createPayment"
	ctx, call := p.Start(context.Background())
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()

	at := h.attempts()
	require.Len(t, at, 2)
	for _, a := range at {
		assert.Equal(t, "createPayment", a.Operation)
		assert.Equal(t, 10*time.Millisecond, a.Duration, "one tick of the clock between sending and the answer")
	}
	assert.False(t, at[0].Replayed)
	assert.True(t, at[1].Replayed)

	require.Len(t, ends, 1)
	e := ends[0]
	assert.Equal(t, "createPayment", e.Operation)
	assert.Equal(t, http.MethodPost, e.Method)
	assert.Equal(t, call.Key(), e.Key)
	assert.Equal(t, 2, e.Attempts)
	assert.Equal(t, 201, e.Status)
	assert.True(t, e.Replayed)
	assert.NoError(t, e.Err)
	assert.GreaterOrEqual(t, e.Duration, 100*time.Millisecond+2*10*time.Millisecond, "the backoff wait and both attempts")

	// A call that fails reports its error, before sending too.
	ends = nil
	ctx, _ = p.Start(context.Background(), WithKey(""))
	_, err = d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrInvalidKey)
	require.Len(t, ends, 1)
	assert.ErrorIs(t, ends[0].Err, ErrInvalidKey)
	assert.Zero(t, ends[0].Attempts)
	assert.Equal(t, "createPayment", ends[0].Operation)
}

// The hooks cost no allocation: a Doer with an attempt hook and a call
// hook allocates per call what one without them does.
func TestHooksAllocateNothing(t *testing.T) {
	body := []byte(payload)
	allocs := func(d *Doer) float64 {
		return testing.AllocsPerRun(200, func() {
			ctx, _ := Start(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://h/claims", bytes.NewReader(body))
			resp, err := d.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	plain := allocs(NewDoer(canned{}, Policy{}))
	hooked := allocs(NewDoer(canned{}, Policy{},
		WithAttemptHook(func(context.Context, Attempt) {}),
		WithCallHook(func(context.Context, CallEnd) {})))
	assert.Equal(t, plain, hooked)
}
