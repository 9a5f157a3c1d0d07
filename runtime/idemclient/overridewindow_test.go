package idemclient

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A policy that carries its operation's window (generated policies do)
// refuses a retry schedule whose longest span × WindowRetryFactor exceeds
// it: a retry after the window would find the key forgotten and run the
// operation again. An override that stretches the schedule so fails the
// call with ErrInvalidPolicy, nothing sent; one within the window is
// used; an override cannot lift the check by editing Window.
func TestPolicyOverrideWindow(t *testing.T) {
	srv := newRecServer(t, unavailableOnce(201))
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()))
	gen := fastPolicy(3) // span 100ms + 200ms = 300ms
	gen.Window = time.Second
	require.NoError(t, gen.Validate())
	do := func(fn func(*Policy)) error {
		ctx, _ := gen.Start(context.Background(), WithPolicyOverride(fn))
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	err := do(func(p *Policy) { p.MaxAttempts = 10 }) // span 100+200+400+800+1s×5 ms
	require.ErrorIs(t, err, ErrInvalidPolicy)
	assert.ErrorContains(t, err, "window 1s")
	assert.Empty(t, srv.Seen(), "nothing sent")

	err = do(func(p *Policy) { p.Backoff.Initial, p.Backoff.Max = 2*time.Second, 5*time.Second })
	require.ErrorIs(t, err, ErrInvalidPolicy)

	err = do(func(p *Policy) { p.MaxAttempts, p.Window = 10, 0 })
	require.ErrorIs(t, err, ErrInvalidPolicy, "the window is the contract's: an override cannot lift it")
	assert.Empty(t, srv.Seen())

	require.NoError(t, do(func(p *Policy) { p.Backoff.Initial = 200 * time.Millisecond }), "span 600ms × 1.5 within 1s")
	assert.Len(t, srv.Seen(), 2)

	// A policy without a window (0, a hand-written one) is not checked.
	hand := fastPolicy(10)
	assert.NoError(t, hand.Validate())
	hand.Window = time.Second
	assert.ErrorIs(t, hand.Validate(), ErrInvalidPolicy)
}

// The window check accepts exactly the windows the generator's
// window-shorter-than-retry accepts: at least span × 1.5 truncated to the
// nanosecond (here 1.5 × 3ns = 4.5ns: a window of 4ns passes, 3ns not).
func TestPolicyWindowBoundary(t *testing.T) {
	p := Policy{MaxAttempts: 3, Backoff: Backoff{Initial: 1, Max: 2, Multiplier: 2}}
	require.Equal(t, 3*time.Nanosecond, p.LongestSpan())
	p.Window = 4
	assert.NoError(t, p.Validate())
	p.Window = 3
	assert.ErrorIs(t, p.Validate(), ErrInvalidPolicy)
}

// A caller's WithPolicy replaces the operation's policy but not its
// window: generated helpers start the call with the operation's policy
// (p.Start(ctx, opts...), WithPolicy first) and the caller's options
// after it, so a hand-written policy (Window 0) given to a helper would
// otherwise lift the window check that WithPolicyOverride never lifts. The
// smaller non-zero window of the two is kept.
func TestWithPolicyKeepsWindow(t *testing.T) {
	srv := newRecServer(t, unavailableOnce(201))
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()))
	gen := fastPolicy(3)
	gen.Window = time.Second
	do := func(opts ...CallOption) (*Call, error) {
		ctx, call := gen.Start(context.Background(), opts...) // as a generated helper does
		resp, err := d.Do(post(t, ctx, srv.URL, payload))
		if err == nil {
			resp.Body.Close()
		}
		return call, err
	}

	_, err := do(WithPolicy(fastPolicy(10)))
	require.ErrorIs(t, err, ErrInvalidPolicy, "the hand-written policy's retries outlast the operation's window")
	assert.ErrorContains(t, err, "window 1s")
	assert.Empty(t, srv.Seen(), "nothing sent")

	long := fastPolicy(10)
	long.Window = time.Hour
	_, err = do(WithPolicy(long))
	require.ErrorIs(t, err, ErrInvalidPolicy, "a longer window does not lengthen the operation's")

	short := fastPolicy(3)
	short.Window = 400 * time.Millisecond // < 300ms × 1.5
	_, err = do(WithPolicy(short))
	require.ErrorIs(t, err, ErrInvalidPolicy, "a shorter one is kept")

	call, err := do(WithPolicy(fastPolicy(2)))
	require.NoError(t, err, "a schedule within the window")
	assert.Equal(t, 2, call.Attempts())
	assert.Equal(t, time.Second, call.effectivePolicy(Policy{}).Window)

	// Without a window before it, WithPolicy is taken as given.
	ctx, call := Start(context.Background(), WithPolicy(fastPolicy(10)))
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Zero(t, call.effectivePolicy(Policy{}).Window)
}
