package clientapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

// The generated policies carry their operation's window: an override
// whose retries could outlast it (recordEvent's window is 1m, claimCoupon's
// 10m) fails the call with ErrInvalidPolicy before anything is sent, the
// key the helper made returned; one that fits is used.
func TestPolicyOverrideOutlastsWindow(t *testing.T) {
	e := newEnv(t)
	c := newClient(t, e.srv.URL, e.srv.Client())
	ctx := context.Background()
	long := idemclient.WithPolicyOverride(func(p *idemclient.Policy) {
		p.MaxAttempts, p.Backoff.Max = 20, time.Minute
	})
	_, _, err := c.RecordEvent(ctx, api.Event{Name: "e"}, long)
	require.ErrorIs(t, err, idemclient.ErrInvalidPolicy)
	assert.ErrorContains(t, err, "window 1m0s")
	_, key, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"), long)
	require.ErrorIs(t, err, idemclient.ErrInvalidPolicy)
	assert.NotEmpty(t, key)
	assert.Zero(t, c.AttemptCount(), "nothing sent")
	assert.Zero(t, e.shop.Total())

	resp, _, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithPolicyOverride(func(p *idemclient.Policy) { p.MaxAttempts = 6 }))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode())
}

// A caller's idemclient.WithPolicy comes after the helper's own (the
// generated helpers start the call with the operation's policy, then the
// client's and the call's options): a hand-written policy, which carries
// no window, is still checked against the operation's, as an override is.
func TestWithPolicyKeepsOperationWindow(t *testing.T) {
	e := newEnv(t)
	c := newClient(t, e.srv.URL, e.srv.Client())
	ctx := context.Background()
	hand := idemclient.WithPolicy(idemclient.Policy{MaxAttempts: 20, Backoff: idemclient.Backoff{Max: time.Minute}})
	_, _, err := c.RecordEvent(ctx, api.Event{Name: "e"}, hand)
	require.ErrorIs(t, err, idemclient.ErrInvalidPolicy)
	assert.ErrorContains(t, err, "window 1m0s")
	_, _, err = c.WithCallOptions(hand).ClaimCoupon(ctx, "c1", nil, claim("u1"))
	require.ErrorIs(t, err, idemclient.ErrInvalidPolicy, "client-wide too")
	assert.Zero(t, c.AttemptCount(), "nothing sent")

	resp, _, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithPolicy(idemclient.Policy{MaxAttempts: 2}))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode())
}
