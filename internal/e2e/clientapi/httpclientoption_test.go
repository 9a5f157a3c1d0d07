package clientapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// WithIdempotentHTTPClient gives NewIdempotentClient the Doer's options
// (here a clock, an attempt hook and WithErrorOnExhausted) without the SDK
// building the Doer: the helpers' calls and the client's plain methods go
// through one Doer with those options and the exact matcher; a Doer given
// to it fails the option; and, as with WithHTTPClient, the last given wins.
func TestWithIdempotentHTTPClient(t *testing.T) {
	e := newEnv(t)
	var (
		mu       sync.Mutex
		attempts []idemclient.Attempt
	)
	hook := idemclient.WithAttemptHook(func(_ context.Context, a idemclient.Attempt) {
		mu.Lock()
		attempts = append(attempts, a)
		mu.Unlock()
	})
	lossy := &http.Client{Transport: faultnet.NewTransport(e.srv.Client().Transport, faultnet.Script(faultnet.DropFault, faultnet.PassFault, faultnet.DropFault))}
	c, err := api.NewIdempotentClient(e.srv.URL, api.WithIdempotentHTTPClient(lossy, idemclient.WithClock(newVClock()), hook))
	require.NoError(t, err)
	inner := c.ClientInterface.(*api.Client).Client
	_, bare := inner.(*idemclient.Doer)
	assert.True(t, bare, "NewIdempotentClient built the Doer again with the exact matcher, got %T", inner)

	resp, key, err := c.ClaimCoupon(context.Background(), "c1", nil, claim("u1"))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode())
	// A plain method's request, matched by its whole path: retried too.
	resp2, err := c.ClaimCouponWithResponse(context.Background(), "c2", &api.ClaimCouponParams{}, claim("u2"))
	require.NoError(t, err)
	assert.Equal(t, 201, resp2.StatusCode())
	mu.Lock()
	require.Len(t, attempts, 4, "each call retried once after its lost response, seen by the option's hook")
	assert.Equal(t, key, attempts[0].Key)
	assert.Equal(t, "claimCoupon", attempts[3].Operation)
	assert.True(t, attempts[2].Retry)
	mu.Unlock()
	assert.Equal(t, 2, e.shop.Total())

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(down.Close)
	c, err = api.NewIdempotentClient(down.URL, api.WithIdempotentHTTPClient(nil, idemclient.WithClock(newVClock()), idemclient.WithErrorOnExhausted()))
	require.NoError(t, err)
	resp, _, err = c.ClaimCoupon(context.Background(), "c1", nil, claim("u1"))
	assert.Nil(t, resp)
	require.ErrorIs(t, err, idemclient.ErrAttemptsExhausted)
	var ie *idemclient.Error
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, 503, ie.Status)
	assert.Equal(t, 4, ie.Attempts)

	_, err = api.NewIdempotentClient(e.srv.URL, api.WithIdempotentHTTPClient(api.NewIdempotentDoer(nil)))
	assert.ErrorContains(t, err, "WithIdempotentHTTPClient: the HTTP client is an idemclient.Doer already")

	c, err = api.NewIdempotentClient(e.srv.URL, api.WithIdempotentHTTPClient(e.srv.Client(), hook), api.WithHTTPClient(e.srv.Client()))
	require.NoError(t, err)
	_, _, err = c.ClaimCoupon(context.Background(), "c3", nil, claim("u3"))
	require.NoError(t, err)
	mu.Lock()
	assert.Len(t, attempts, 4, "WithHTTPClient given last wins: a default Doer, without the hook")
	mu.Unlock()
}
