package idemclient

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A zero RetryBudget is a default one (a full bucket of
// DefaultRetryBudgetCapacity tokens), not one that refuses every retry.
func TestZeroRetryBudget(t *testing.T) {
	srv := newRecServer(t, unavailableOnce(201))
	b := &RetryBudget{}
	d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock()), WithRetryBudget(b))
	ctx, _ := Start(context.Background())
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, DefaultRetryBudgetCapacity, b.Tokens(), "the retry's cost given back on success")
	assert.Equal(t, DefaultRetryBudgetCapacity, new(RetryBudget).Tokens())
}

// Only a call that ends with a success (a 2xx or 3xx answer) gives its
// last retry's cost back or earns the reward: 10 calls each retried once
// and failing (503, then 400) leave the bucket 50 tokens short, and a 400
// at once earns nothing.
func TestRetryBudgetRefundOnlyOnSuccess(t *testing.T) {
	var n atomic.Int32
	srv := newRecServer(t, func(int, *http.Request) reply {
		if n.Add(1)%2 == 1 {
			return reply{status: 503}
		}
		return reply{status: 400}
	})
	b := NewRetryBudget(100)
	d := NewDoer(http.DefaultClient, fastPolicy(4), WithClock(newFakeClock()), WithRetryBudget(b))
	for range 10 {
		ctx, _ := Start(context.Background())
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 400, resp.StatusCode)
	}
	assert.Equal(t, 100-10*DefaultRetryCost, b.Tokens())

	n.Store(1) // 400 at once
	ctx, _ := Start(context.Background())
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode)
	assert.Equal(t, 100-10*DefaultRetryCost, b.Tokens(), "no reward for a failure")
}
