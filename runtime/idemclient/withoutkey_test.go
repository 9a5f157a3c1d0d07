package idemclient

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithoutKey: refused unless the policy's key is optional; sent with no
// key; retried only when the server dedupes keyless requests
// (KeylessDedupe), else sent once.
func TestWithoutKey(t *testing.T) {
	var fail atomic.Int32 // the next answers that are 503s
	srv := newRecServer(t, func(int, *http.Request) reply {
		if fail.Add(-1) >= 0 {
			return reply{status: 503}
		}
		return reply{status: 201}
	})
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()))
	do := func(p Policy, opts ...CallOption) (*http.Response, *Call, error) {
		ctx, call := p.Start(context.Background(), opts...)
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		return resp, call, err
	}

	_, call, err := do(fastPolicy(3), WithoutKey())
	require.ErrorIs(t, err, ErrInvalidKey)
	assert.ErrorContains(t, err, "idemclient.WithoutKey: the operation requires a key, in the header Idempotency-Key")
	assert.Zero(t, call.Attempts())
	assert.Empty(t, srv.Seen())

	p := fastPolicy(3)
	p.KeyOptional = true
	fail.Store(1)
	resp, call, err := do(p, WithoutKey())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode, "sent once: a retry without a key might run it again")
	assert.Equal(t, 1, call.Attempts())
	assert.Empty(t, call.Key())
	require.Len(t, srv.Seen(), 1)
	assert.Empty(t, srv.Seen()[0].Key)

	p.KeylessDedupe = true
	observed := false
	fail.Store(1)
	resp, call, err = do(p, WithoutKey(), WithKeyObserver(func(string) { observed = true }))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, 2, call.Attempts())
	assert.False(t, observed, "no key to observe")
	for _, s := range srv.Seen()[1:] {
		assert.Empty(t, s.Key)
		assert.Equal(t, payload, s.Body)
	}

	// WithKey after WithoutKey wins.
	resp, call, err = do(p, WithoutKey(), WithKey("k-1"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "k-1", call.Key())
}
