package idemclient

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A shared retry budget: retries take 5 tokens each; when the bucket
// cannot pay, the call stops with ErrRetryBudgetExhausted and the last
// answer; a call that succeeds after a retry gives its last retry's cost
// back, one that succeeds at once earns a token (up to the capacity).
// Two Doers share one bucket. (Before, there was no budget.)
func TestRetryBudget(t *testing.T) {
	var fail atomic.Int32
	srv := newRecServer(t, func(int, *http.Request) reply {
		if fail.Add(-1) >= 0 {
			return reply{status: 503}
		}
		return reply{status: 201}
	})
	b := NewRetryBudget(12)
	d1 := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock()), WithRetryBudget(b))
	d2 := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock()), WithRetryBudget(b))
	call := func(d *Doer) (*http.Response, error) {
		ctx, _ := Start(context.Background())
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		if resp != nil {
			resp.Body.Close()
		}
		return resp, err
	}

	fail.Store(1)
	resp, err := call(d1) // one retry: 5 taken, given back on success
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, 12, b.Tokens())

	fail.Store(10)
	_, err = call(d2) // 503s: two retries (10 tokens), then the bucket cannot pay
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 3, e.Attempts)
	assert.Equal(t, 503, e.Status)
	assert.Equal(t, 2, b.Tokens())

	fail.Store(0)
	_, err = call(d1) // first-attempt success: one token back
	require.NoError(t, err)
	assert.Equal(t, 3, b.Tokens())
	fail.Store(1)
	_, err = call(d1) // 3 tokens cannot pay for a retry: stopped at the first 503
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	assert.Equal(t, 3, b.Tokens())
}
