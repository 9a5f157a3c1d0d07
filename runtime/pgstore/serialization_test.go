package pgstore

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// strictLevels are the default isolations above READ COMMITTED a database
// may have (TestConformanceIsolation).
var strictLevels = []string{"repeatable read", "serializable"}

// poolAtLevel returns a pool whose connections' default isolation is level.
func poolAtLevel(t *testing.T, level string) *pgxpool.Pool {
	return poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 8
		c.ConnConfig.RuntimeParams["default_transaction_isolation"] = level
	})
}

// rowChangeUnderWay starts a transaction, on the shared pool, that runs
// stmt (an UPDATE of a record's row) and stays open: the row is locked
// until the returned commit.
func rowChangeUnderWay(t *testing.T, stmt string, args ...any) (commit func() error) {
	t.Helper()
	ctx := context.Background()
	tx, err := testPool(t).BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	var mu sync.Mutex // commit may run on another goroutine
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		_ = tx.Rollback(ctx)
	})
	tag, err := tx.Exec(ctx, stmt, args...)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		return tx.Commit(ctx)
	}
}

// waitForRowLock waits until a statement on s's table, starting with like,
// waits for a lock.
func waitForRowLock(t *testing.T, s *Store, like string) {
	t.Helper()
	require.True(t, waitsForRowLock(s, like), "%s waits for the row", like)
}

// waitsForRowLock is waitForRowLock for any goroutine: it reports whether a
// statement on s's table, starting with like, waits for a lock within 5 s.
func waitsForRowLock(s *Store, like string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		var n int
		err := s.pool.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
			like+"%"+s.n.schema+"%").Scan(&n)
		if err == nil && n > 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestFinishAfterConcurrentUpdateStrictIsolation: on a database whose
// default isolation is above READ COMMITTED, Finish's UPDATE waits for a
// transaction that changes the row and, once that commits, fails with a
// serialization error (its snapshot predates the change). Finish runs it
// again: after the holder's own heartbeat it finishes the record, after a
// takeover it answers idem.ErrFenced, not the serialization error.
func TestFinishAfterConcurrentUpdateStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			s := newStoreOn(t, poolAtLevel(t, level), Options{})
			ctx := context.Background()

			t.Run("Heartbeat", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("hb", 7))
				require.NoError(t, err)
				commit := rowChangeUnderWay(t, s.q.extend, "hb", int64(7), time.Minute)
				done := make(chan error, 1)
				go func() { done <- s.Finish(ctx, "hb", 7, idem.StateCompleted, []byte("resp")) }()
				waitForRowLock(t, s, "UPDATE")
				require.NoError(t, commit())
				require.NoError(t, <-done, "the holder's Finish after its own heartbeat")
				rec, found, err := s.Get(ctx, "hb")
				require.NoError(t, err)
				require.True(t, found)
				assert.Equal(t, idem.StateCompleted, rec.State)
				assert.Equal(t, []byte("resp"), rec.Response)
			})

			t.Run("Takeover", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("to", 7))
				require.NoError(t, err)
				commit := rowChangeUnderWay(t, `UPDATE `+s.n.table+` SET token = 8 WHERE key = $1`, "to")
				done := make(chan error, 1)
				go func() { done <- s.Finish(ctx, "to", 7, idem.StateCompleted, []byte("resp")) }()
				waitForRowLock(t, s, "UPDATE")
				require.NoError(t, commit())
				require.ErrorIs(t, <-done, idem.ErrFenced, "the holder's Finish after a takeover")
				rec, _, err := s.Get(ctx, "to")
				require.NoError(t, err)
				assert.Equal(t, idem.StatePending, rec.State)
				assert.Equal(t, idem.Token(8), rec.Token)
			})
		})
	}
}

// TestExtendLeaseAfterConcurrentUpdateStrictIsolation: the same for
// ExtendLease's UPDATE: after another heartbeat of the holder it extends the
// lease, after the holder's Finish it answers idem.ErrFenced.
func TestExtendLeaseAfterConcurrentUpdateStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			s := newStoreOn(t, poolAtLevel(t, level), Options{})
			ctx := context.Background()

			t.Run("Heartbeat", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("hb", 7))
				require.NoError(t, err)
				commit := rowChangeUnderWay(t, s.q.extend, "hb", int64(7), time.Minute)
				done := make(chan error, 1)
				go func() { done <- s.ExtendLease(ctx, "hb", 7, time.Hour) }()
				waitForRowLock(t, s, "UPDATE")
				require.NoError(t, commit())
				require.NoError(t, <-done, "a heartbeat after another")
				rec, _, err := s.Get(ctx, "hb")
				require.NoError(t, err)
				assert.Greater(t, time.Until(rec.LeaseExpiresAt), 50*time.Minute, "the later heartbeat's lease")
			})

			t.Run("Finish", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("fin", 7))
				require.NoError(t, err)
				commit := rowChangeUnderWay(t, s.q.finish, "fin", int64(7), int16(idem.StateCompleted), []byte("resp"))
				done := make(chan error, 1)
				go func() { done <- s.ExtendLease(ctx, "fin", 7, time.Hour) }()
				waitForRowLock(t, s, "UPDATE")
				require.NoError(t, commit())
				require.ErrorIs(t, <-done, idem.ErrFenced, "a heartbeat after the holder's Finish")
				rec, _, err := s.Get(ctx, "fin")
				require.NoError(t, err)
				assert.Equal(t, idem.StateCompleted, rec.State)
			})
		})
	}
}

// TestEngineFinishAfterHeartbeatRepeatableRead: the engine, without
// transactions, on a database whose default isolation is REPEATABLE READ.
// The holder's heartbeat is under way when the handler returns (simulated:
// an UPDATE of the lease, committed a little later), so the engine's Finish
// meets it. The record must be COMPLETED all the same: a retry of the key
// after the lease has run out is a replay, and the handler runs once.
func TestEngineFinishAfterHeartbeatRepeatableRead(t *testing.T) {
	t.Parallel()
	s := newStoreOn(t, poolAtLevel(t, "repeatable read"), Options{})
	eng := idem.New(s, idem.Options{})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: 300 * time.Millisecond}})
	var runs atomic.Int32
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			commit := rowChangeUnderWay(t, `UPDATE `+s.n.table+` SET lease_expires_at = clock_timestamp() + interval '300 milliseconds' WHERE state = 1`)
			go func() {
				waitsForRowLock(s, "UPDATE") // the engine's Finish
				_ = commit()
			}()
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("made"))
	}))
	serve := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/x", nil)
		req.Header.Set("Idempotency-Key", "0193a8f0-0000-7000-8000-000000000001")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	first := serve()
	require.Equal(t, http.StatusCreated, first.Code)
	time.Sleep(time.Second) // well past the lease
	retry := serve()
	assert.Equal(t, http.StatusCreated, retry.Code)
	assert.Equal(t, "made", retry.Body.String())
	assert.Equal(t, int32(1), runs.Load(), "the handler ran once")
}
