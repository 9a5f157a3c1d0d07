package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

func fill(t *testing.T, s *Store, prefix string, n int, ttl time.Duration) {
	t.Helper()
	for i := range n {
		_, err := s.Begin(context.Background(), &idem.BeginRequest{
			Key: fmt.Sprintf("%s%d", prefix, i), Fingerprint: fp(1), Token: idem.Token(i + 1), Lease: time.Minute, TTL: ttl})
		require.NoError(t, err)
	}
}

func count(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+s.n.table).Scan(&n))
	return n
}

func TestReapBoundedBatches(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := context.Background()
	fill(t, s, "old", 10, 20*time.Millisecond)
	fill(t, s, "live", 5, time.Hour)
	time.Sleep(50 * time.Millisecond)

	var got []int
	for {
		n, err := s.Reap(ctx, 4)
		require.NoError(t, err)
		got = append(got, n)
		if n < 4 {
			break
		}
	}
	assert.Equal(t, []int{4, 4, 2}, got, "at most one batch per call")
	assert.Equal(t, 5, count(t, s), "live records stay")
	n, err := s.Reap(ctx, 100)
	require.NoError(t, err)
	assert.Zero(t, n)

	_, err = s.Reap(ctx, 0)
	assert.Error(t, err)
}

func TestReapSkipsLockedRows(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := context.Background()
	fill(t, s, "old", 3, 20*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT 1 FROM `+s.n.table+` WHERE key = 'old0' FOR UPDATE`)
	require.NoError(t, err)

	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n, err := s.Reap(rctx, 10)
	require.NoError(t, err, "a locked row does not block the reaper")
	assert.Equal(t, 2, n)
	require.NoError(t, tx.Rollback(ctx))
	n, err = s.Reap(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestBackgroundReaper(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{ReapInterval: 20 * time.Millisecond, ReapBatch: 3})
	fill(t, s, "old", 10, 10*time.Millisecond)
	fill(t, s, "live", 2, time.Hour)
	assert.Eventually(t, func() bool { return count(t, s) == 2 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	fill(t, s, "after", 3, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 5, count(t, s), "a closed store's reaper is stopped")
}
