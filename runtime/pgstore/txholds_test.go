package pgstore

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
