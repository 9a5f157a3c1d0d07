package memstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A Begin run again with its own token after its own lease ran out is the
// same claim, not a takeover: acquired with Prior 0 and its lease renewed
// from the second run's now (the caller counts it from that answer), the
// rest of the record unchanged; another token cannot take it over until
// the renewed lease runs out.
func TestBeginRerunAfterOwnLeaseExpired(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	s := memstore.New(memstore.Options{SweepInterval: -1, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	req := &idem.BeginRequest{Key: "k", Token: 42, Lease: time.Second, TTL: time.Hour}
	req.Fingerprint[0] = 2
	res, err := s.Begin(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Acquired)
	before, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)

	now.Add(int64(2 * time.Second)) // the lease ran out
	res, err = s.Begin(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, idem.BeginResult{Acquired: true}, res, "the same claim, no takeover (Prior 0)")
	after, _, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, time.Unix(0, now.Load()).Add(time.Second), after.LeaseExpiresAt, "the lease, renewed from now")
	want := before
	want.LeaseExpiresAt = after.LeaseExpiresAt
	assert.Equal(t, want, after, "nothing else written")

	// Another token does not take the renewed lease over, until it runs out.
	other := *req
	other.Token = 43
	now.Add(int64(time.Second) - 1)
	res, err = s.Begin(ctx, &other)
	require.NoError(t, err)
	assert.False(t, res.Acquired, "taken over within the renewed lease")
	now.Add(1)
	res, err = s.Begin(ctx, &other)
	require.NoError(t, err)
	assert.Equal(t, idem.BeginResult{Acquired: true, Prior: idem.StatePending}, res)
}
