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
// same claim, not a takeover: acquired with Prior 0, the record unchanged.
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
	assert.Equal(t, before, after, "nothing written")

	// Another token still takes the expired lease over.
	other := *req
	other.Token = 43
	res, err = s.Begin(ctx, &other)
	require.NoError(t, err)
	assert.Equal(t, idem.BeginResult{Acquired: true, Prior: idem.StatePending}, res)
}
