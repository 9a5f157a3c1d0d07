package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestSteadyLoadDefaults: a service at default bounds and the default
// window (24h), with 10 new keys a second and 256-byte responses, for 36
// hours, has no claim refused: a day's records (864,000, about 400 bytes
// each) do not fit the default bounds, but records older than MinRetention
// (an hour) are evicted for room. (Refusing instead of evicting refused 24%
// of the claims, from the 27th hour on.)
func TestSteadyLoadDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("1.3M claims")
	}
	s, c := newClockStore(t, memstore.Options{})
	ctx := context.Background()
	resp := make([]byte, 256)
	const n = 36 * 3600 * 10
	full := 0
	for i := range n {
		c.Add(100 * time.Millisecond)
		k := fmt.Sprintf("i1p0:5:alice:11:createOrderk36:%036d", i)
		_, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: idem.Token(i + 1), Lease: time.Minute, TTL: 24 * time.Hour})
		if err != nil {
			require.ErrorIs(t, err, memstore.ErrFull)
			full++
			continue
		}
		require.NoError(t, s.Finish(ctx, k, idem.Token(i+1), idem.StateCompleted, resp))
	}
	st := s.Stats()
	assert.Zero(t, full, "stats %+v", st)
	assert.Zero(t, st.Full)
	assert.NotZero(t, st.Evicted, "the oldest records are evicted, past MinRetention (before they expire)")
	// The last hour's records are all there.
	for i := n - 36000; i < n; i += 997 {
		_, ok, _ := s.Get(ctx, fmt.Sprintf("i1p0:5:alice:11:createOrderk36:%036d", i))
		require.True(t, ok, "record %d, %v old", i, time.Duration(n-i)*100*time.Millisecond)
	}
}

// TestReclaimableFailedEvictedFirst: a shard full of reclaimable FAILED
// records (a 5xx, 429 or panic leaves one, without a response, for the
// window) admits a new claim by evicting the oldest of them, whatever
// MinRetention (a retry of one may run again anyway), before any COMPLETED
// record, even an older one; they are counted in EvictedFailed, not
// Evicted. A FAILED record with a response (replayed) is kept as a
// COMPLETED one is.
func TestReclaimableFailedEvictedFirst(t *testing.T) {
	ctx := context.Background()
	for _, minRet := range []time.Duration{0, -1, time.Second} {
		t.Run(fmt.Sprint("MinRetention=", minRet), func(t *testing.T) {
			s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 4, MinRetention: minRet})
			require.NoError(t, claim(t, s, "done", 1, 24*time.Hour))
			require.NoError(t, s.Finish(ctx, "done", 1, idem.StateCompleted, []byte("ok")))
			require.NoError(t, claim(t, s, "failed-kept", 1, 24*time.Hour))
			require.NoError(t, s.Finish(ctx, "failed-kept", 1, idem.StateFailed, []byte("bad request")))
			for i := range 2 {
				k := fmt.Sprint("f", i)
				require.NoError(t, claim(t, s, k, 1, 24*time.Hour))
				require.NoError(t, s.Finish(ctx, k, 1, idem.StateFailed, nil))
			}
			c.Add(time.Millisecond)
			for i := range 2 {
				require.NoError(t, claim(t, s, fmt.Sprint("new", i), 2, 24*time.Hour))
				_, ok, _ := s.Get(ctx, fmt.Sprint("f", i))
				assert.False(t, ok, "the oldest reclaimable FAILED record goes")
			}
			st := s.Stats()
			assert.Equal(t, int64(2), st.EvictedFailed)
			assert.Zero(t, st.Evicted)
			for _, k := range []string{"done", "failed-kept"} {
				_, ok, _ := s.Get(ctx, k)
				assert.True(t, ok, k)
			}
			// Now only replayable and PENDING records: younger than
			// MinRetention, they stay.
			if minRet != time.Second {
				assert.ErrorIs(t, claim(t, s, "more", 3, 24*time.Hour), memstore.ErrFull)
			}
		})
	}
}

// TestReclaimableFailedTakeover: a reclaimable FAILED record taken over
// (PENDING again) leaves the reclaimable list, and one that finishes
// COMPLETED joins the other: evicting for room then finds nothing to evict
// (by default), and the lists stay consistent.
func TestReclaimableFailedTakeover(t *testing.T) {
	ctx := context.Background()
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 2})
	require.NoError(t, claim(t, s, "a", 1, time.Hour))
	require.NoError(t, s.Finish(ctx, "a", 1, idem.StateFailed, nil))
	require.NoError(t, claim(t, s, "a", 2, time.Hour), "a retry takes the FAILED record over")
	require.NoError(t, s.Finish(ctx, "a", 2, idem.StateCompleted, []byte("ok")))
	require.NoError(t, claim(t, s, "b", 1, time.Hour))
	require.NoError(t, s.Finish(ctx, "b", 1, idem.StateFailed, nil))
	c.Add(time.Second)
	require.NoError(t, claim(t, s, "c", 1, time.Hour), "b is evicted")
	require.ErrorIs(t, claim(t, s, "d", 1, time.Hour), memstore.ErrFull, "a (COMPLETED, a second old) and c (PENDING) stay")
	rec, ok, _ := s.Get(ctx, "a")
	require.True(t, ok)
	assert.Equal(t, idem.StateCompleted, rec.State)
	assert.Equal(t, int64(1), s.Stats().EvictedFailed)
}

// TestNegativeMinRetentionNeverEvicts: with a negative MinRetention, a
// replayable record is kept for its whole window, however full the shard.
func TestNegativeMinRetentionNeverEvicts(t *testing.T) {
	ctx := context.Background()
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1, MinRetention: -1})
	require.NoError(t, claim(t, s, "a", 1, 24*time.Hour))
	require.NoError(t, s.Finish(ctx, "a", 1, idem.StateCompleted, nil))
	c.Add(24*time.Hour - time.Second)
	err := claim(t, s, "b", 1, time.Hour)
	require.ErrorIs(t, err, memstore.ErrFull)
	var fe *memstore.FullError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, time.Second, fe.RetryAfter(), "until a expires")
	c.Add(time.Second)
	require.NoError(t, claim(t, s, "b", 1, time.Hour))
	assert.Zero(t, s.Stats().Evicted)
}

// TestFullErrorRetryAfter: a refused claim says when its shard may next
// make room: when its oldest finished record reaches MinRetention or its
// soonest expiry comes, whichever first, at least a second, at most an
// hour.
func TestFullErrorRetryAfter(t *testing.T) {
	ctx := context.Background()
	retryAfter := func(t *testing.T, s *memstore.Store) time.Duration {
		t.Helper()
		err := claim(t, s, "refused", 9, time.Hour)
		require.ErrorIs(t, err, memstore.ErrFull)
		var h interface{ RetryAfter() time.Duration }
		require.True(t, errors.As(err, &h), "%T", err)
		return h.RetryAfter()
	}
	t.Run("retention", func(t *testing.T) {
		s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 2, MinRetention: 10 * time.Minute})
		require.NoError(t, claim(t, s, "a", 1, 24*time.Hour))
		require.NoError(t, claim(t, s, "b", 1, 24*time.Hour))
		c.Add(time.Minute)
		require.NoError(t, s.Finish(ctx, "a", 1, idem.StateCompleted, nil))
		c.Add(3 * time.Minute)
		assert.Equal(t, 7*time.Minute, retryAfter(t, s))
		c.Add(7*time.Minute - time.Millisecond)
		assert.Equal(t, time.Second, retryAfter(t, s), "at least a second")
	})
	t.Run("expiry", func(t *testing.T) {
		s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 2})
		require.NoError(t, claim(t, s, "a", 1, 24*time.Hour))
		require.NoError(t, s.Finish(ctx, "a", 1, idem.StateCompleted, nil))
		require.NoError(t, claim(t, s, "b", 1, 90*time.Second))
		c.Add(30 * time.Second)
		assert.Equal(t, time.Minute, retryAfter(t, s), "b expires before a is an hour old")
	})
	t.Run("cap", func(t *testing.T) {
		s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1})
		require.NoError(t, claim(t, s, "a", 1, 24*time.Hour))
		assert.Equal(t, time.Hour, retryAfter(t, s), "PENDING for a day: capped")
	})
}

// TestFinishedLeaseIsFinishTime: a finished record reports when it finished
// as its LeaseExpiresAt (MinRetention counts from it), its ExpiresAt
// unchanged.
func TestFinishedLeaseIsFinishTime(t *testing.T) {
	ctx := context.Background()
	s, c := newClockStore(t, memstore.Options{})
	require.NoError(t, claim(t, s, "a", 1, time.Hour))
	claimed, _, _ := s.Get(ctx, "a")
	c.Add(5 * time.Minute) // past the lease: finished late, still the holder
	require.NoError(t, s.Finish(ctx, "a", 1, idem.StateCompleted, []byte("ok")))
	rec, ok, _ := s.Get(ctx, "a")
	require.True(t, ok)
	assert.Equal(t, c.Now(), rec.LeaseExpiresAt)
	assert.Equal(t, claimed.ExpiresAt, rec.ExpiresAt)
}
