package pgstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
)

// TestTxHoldsLockConnClosed: TxHoldsLock on a real transaction: true while
// open; after the backend is terminated, still true until the handler's
// next statement on the transaction makes pgx notice the closed connection
// (a stale true, argued safe: that transaction can no longer commit);
// false once pgx has closed the connection (pgconn's CleanupDone, which
// BeginTx hands to the set of locked rows), before any rollback; false
// after the rollback. Ported from the review's
// TestReviewTxHoldsLockConnClosed: with BeginTx entering the row without
// the connection's CleanupDone it stayed true until the rollback.
func TestTxHoldsLockConnClosed(t *testing.T) {
	t.Parallel()
	f := newTxFixtureOn(t, testPool(t), Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
	ctx := f.ctx
	f.claim(t, "k", 1, time.Minute)
	txctx, _, rollback := f.beginTx(t, "k", 1)
	require.True(t, f.s.TxHoldsLock("k", 1))
	require.False(t, f.s.TxHoldsLock("k", 2))
	tx, _ := Tx(txctx)
	var pid int32
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	_, err := testPool(t).Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	t.Logf("after pg_terminate_backend, before any statement: TxHoldsLock=%v (stale)", f.s.TxHoldsLock("k", 1))
	_, err = tx.Exec(ctx, `SELECT 1`)
	require.Error(t, err)
	require.Eventually(t, func() bool { return !f.s.TxHoldsLock("k", 1) }, 5*time.Second, 5*time.Millisecond,
		"the connection is closed: TxHoldsLock must turn false before the rollback")
	rollback()
	assert.False(t, f.s.TxHoldsLock("k", 1))
	f.s.locked.mu.Lock()
	assert.Empty(t, f.s.locked.n)
	f.s.locked.mu.Unlock()
}

// TestTxHoldsLockFalseDuringKeepLease: once a transaction that locked the
// row has rolled back, TxHoldsLock says false while keepLease writes the
// lease its heartbeats granted (seen from the pool's PrepareConn as
// keepLease acquires its connection). It said true there before: the row
// left the set only after keepLease's round trip.
func TestTxHoldsLockFalseDuringKeepLease(t *testing.T) {
	t.Parallel()
	var s atomic.Pointer[Store]
	var armed atomic.Bool
	var seen, asked atomic.Int32
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
			if armed.Load() {
				asked.Add(1)
				if s.Load().TxHoldsLock("k", 1) {
					seen.Add(1)
				}
			}
			return true, nil
		}
	})
	f := newTxFixtureOn(t, p, Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
	s.Store(f.s)
	f.claim(t, "k", 1, time.Minute)
	_, _, rollback := f.beginTx(t, "k", 1)
	require.NoError(t, f.s.ExtendLease(f.ctx, "k", 1, time.Minute)) // a lease for keepLease to write
	armed.Store(true)
	rollback()
	armed.Store(false)
	require.Equal(t, int32(1), asked.Load(), "keepLease acquired a connection")
	assert.Zero(t, seen.Load(), "TxHoldsLock said true after the rollback, during keepLease")
}
