package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// rowVersion is the row's xmin and xmax: a write changes xmin, a row lock
// (FOR UPDATE, or an ON CONFLICT DO UPDATE that does not update) sets xmax.
func rowVersion(t *testing.T, s *Store, key string) (xmin, xmax string) {
	t.Helper()
	require.NoError(t, s.pool.QueryRow(context.Background(),
		`SELECT xmin::text, xmax::text FROM `+s.n.table+` WHERE key = $1`, key).Scan(&xmin, &xmax))
	return xmin, xmax
}

// TestReplayDoesNotLock: a Begin that finds a COMPLETED record (a replay)
// neither writes nor locks its row, so replays of one key never queue
// behind each other or behind anyone holding the row: here a transaction
// keeps the row locked (FOR UPDATE) while replays run and return.
func TestReplayDoesNotLock(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("done")))
	xmin, xmax := rowVersion(t, s, "k")
	require.Equal(t, "0", xmax)

	replay := func() {
		t.Helper()
		r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 2, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		assert.False(t, r.Acquired)
		assert.Equal(t, idem.StateCompleted, r.Record.State)
		assert.Equal(t, []byte("done"), r.Record.Response)
		assert.Equal(t, idem.Token(1), r.Record.Token)
	}
	for range 3 {
		replay()
	}
	x1, x2 := rowVersion(t, s, "k")
	assert.Equal(t, [2]string{xmin, "0"}, [2]string{x1, x2}, "the replays neither wrote nor locked the row")

	locker, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = locker.Rollback(context.Background()) }()
	_, err = locker.Exec(ctx, `SELECT FROM `+s.n.table+` WHERE key = 'k' FOR UPDATE`)
	require.NoError(t, err)
	replay() // would wait for the locker until ctx ends if it took the row lock
}

// TestBeginLosesRace: a Begin whose claim meets a concurrent claim of the
// same key, not yet committed, waits for it (ON CONFLICT for a new key, the
// row lock for a takeover), finds it has lost, and reads the winner's record
// (a second statement, with a snapshot that shows it).
func TestBeginLosesRace(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(t *testing.T, s *Store){
		"NewKey": func(*testing.T, *Store) {},
		"Takeover": func(t *testing.T, s *Store) {
			r, err := s.Begin(context.Background(), &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: 10 * time.Millisecond, TTL: time.Hour})
			require.NoError(t, err)
			require.True(t, r.Acquired)
			time.Sleep(30 * time.Millisecond) // the lease runs out
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newTestStore(t, Options{})
			setup(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			// The winner's claim, kept uncommitted in an explicit transaction.
			winner, err := s.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = winner.Rollback(context.Background()) }()
			var acquired bool
			f2 := fp(2)
			require.NoError(t, winner.QueryRow(ctx, s.q.claim, "k", f2[:], int64(2), time.Minute, time.Hour, false).
				Scan(&acquired, nil, nil, nil, nil, nil, nil, nil))
			require.True(t, acquired)

			type result struct {
				r   idem.BeginResult
				err error
			}
			loser := make(chan result, 1)
			go func() {
				r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(3), Token: 3, Lease: time.Minute, TTL: time.Hour})
				loser <- result{r, err}
			}()
			f := &txFixture{s: s}
			require.Eventually(t, func() bool { return f.waitersOnLock(t, "WITH cur") == 1 }, 10*time.Second, 5*time.Millisecond,
				"the loser waits for the winner")
			require.NoError(t, winner.Commit(ctx))
			got := <-loser
			require.NoError(t, got.err)
			assert.False(t, got.r.Acquired)
			assert.Equal(t, idem.StatePending, got.r.Record.State)
			assert.Equal(t, idem.Token(2), got.r.Record.Token, "the winner's record")
			assert.Equal(t, fp(2), got.r.Record.Fingerprint)
		})
	}
}
