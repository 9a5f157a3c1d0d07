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
	ctx := testCtx(t)
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
		if n, err := lockWaiters(ctx, s.pool, s.n.schema, like); err == nil && n > 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// afterRowChange runs op while a transaction that changes a row (stmt,
// args: see rowChangeUnderWay) is under way, waits until op's UPDATE waits
// for that row, commits the change and returns op's error.
func afterRowChange(t *testing.T, s *Store, op func() error, stmt string, args ...any) error {
	t.Helper()
	commit := rowChangeUnderWay(t, stmt, args...)
	done := make(chan error, 1)
	go func() { done <- op() }()
	waitForRowLock(t, s, "UPDATE")
	require.NoError(t, commit())
	return <-done
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
			ctx := testCtx(t)

			t.Run("Heartbeat", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("hb", 7))
				require.NoError(t, err)
				err = afterRowChange(t, s, func() error { return s.Finish(ctx, "hb", 7, idem.StateCompleted, []byte("resp")) }, s.q.extend, "hb", int64(7), time.Minute)
				require.NoError(t, err, "the holder's Finish after its own heartbeat")
				rec, found, err := s.Get(ctx, "hb")
				require.NoError(t, err)
				require.True(t, found)
				assert.Equal(t, idem.StateCompleted, rec.State)
				assert.Equal(t, []byte("resp"), rec.Response)
			})

			t.Run("Takeover", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("to", 7))
				require.NoError(t, err)
				err = afterRowChange(t, s, func() error { return s.Finish(ctx, "to", 7, idem.StateCompleted, []byte("resp")) }, `UPDATE `+s.n.table+` SET token = 8 WHERE key = $1`, "to")
				require.ErrorIs(t, err, idem.ErrFenced, "the holder's Finish after a takeover")
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
			ctx := testCtx(t)

			t.Run("Heartbeat", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("hb", 7))
				require.NoError(t, err)
				err = afterRowChange(t, s, func() error { return s.ExtendLease(ctx, "hb", 7, time.Hour) }, s.q.extend, "hb", int64(7), time.Minute)
				require.NoError(t, err, "a heartbeat after another")
				rec, _, err := s.Get(ctx, "hb")
				require.NoError(t, err)
				assert.Greater(t, time.Until(rec.LeaseExpiresAt), 50*time.Minute, "the later heartbeat's lease")
			})

			t.Run("Finish", func(t *testing.T) {
				_, err := s.Begin(ctx, beginReq("fin", 7))
				require.NoError(t, err)
				err = afterRowChange(t, s, func() error { return s.ExtendLease(ctx, "fin", 7, time.Hour) }, s.q.finish, "fin", int64(7), int16(idem.StateCompleted), []byte("resp"))
				require.ErrorIs(t, err, idem.ErrFenced, "a heartbeat after the holder's Finish")
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
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: 300 * time.Millisecond}})
	var runs atomic.Int32
	var met atomic.Bool // the engine's Finish waited for the heartbeat's row lock
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			commit := rowChangeUnderWay(t, `UPDATE `+s.n.table+` SET lease_expires_at = clock_timestamp() + interval '300 milliseconds' WHERE state = 1`)
			go func() {
				met.Store(waitsForRowLock(s, "UPDATE")) // the engine's Finish
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
	require.True(t, met.Load(), "the engine's Finish met the heartbeat under way (it waited for its row lock)")
	time.Sleep(time.Second) // well past the lease
	retry := serve()
	assert.Equal(t, http.StatusCreated, retry.Code)
	assert.Equal(t, "made", retry.Body.String())
	assert.Equal(t, int32(1), runs.Load(), "the handler ran once")
}

// gate pauses statements of a gated store in the middle, after their
// snapshot was taken: a row security policy on the records table calls a
// function that, on the gated store's connections, waits when it meets the
// record gateKey while hold holds an advisory lock (it takes the lock,
// shared, and lets go of it at once).
type gate struct {
	owner *Store // the table's store, as a superuser: not gated
	gated *Store // a store on the same table for a role under the policy
	admin *pgxpool.Pool
	lock  string // names the advisory lock: the schema, unique
}

const gateKey = "gated"

// newGate makes a fresh schema, its row security policy, and a store for a
// role under it whose connections' default isolation is level.
func newGate(t *testing.T, level string) *gate {
	t.Helper()
	ctx := testCtx(t)
	admin := testPool(t)
	owner := newStoreOn(t, admin, Options{})
	schema := pgx.Identifier{owner.n.schema}.Sanitize()
	lock := owner.n.schema
	role := pgx.Identifier{owner.n.schema + "_gated"}.Sanitize()
	for _, q := range []string{
		`CREATE FUNCTION ` + schema + `.gate(k text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF k = '` + gateKey + `' AND current_setting('idemtest.gate', true) = 'on' THEN
        PERFORM pg_advisory_lock_shared(hashtext('` + lock + `'));
        PERFORM pg_advisory_unlock_shared(hashtext('` + lock + `'));
    END IF;
    RETURN true;
END $$`,
		`ALTER TABLE ` + owner.n.table + ` ENABLE ROW LEVEL SECURITY`,
		`CREATE POLICY gate ON ` + owner.n.table + ` USING (` + schema + `.gate(key))`,
	} {
		_, err := admin.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	createRole(t, admin, role)
	for _, q := range []string{
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + owner.n.table + ` TO ` + role,
	} {
		_, err := admin.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 4
		c.ConnConfig.RuntimeParams["default_transaction_isolation"] = level
		c.ConnConfig.RuntimeParams["idemtest.gate"] = "on"
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `SET ROLE `+role)
			return err
		}
	})
	gated, err := New(p, Options{Schema: owner.n.schema, ReapInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = gated.Close() })
	return &gate{owner: owner, gated: gated, admin: admin, lock: lock}
}

// hold closes the gate until release.
func (g *gate) hold(t *testing.T) (release func()) {
	t.Helper()
	ctx := testCtx(t)
	tx, err := g.admin.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, g.lock)
	require.NoError(t, err)
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, tx.Commit(ctx)) }) }
	t.Cleanup(release)
	return release
}

// waitAtGate waits until a statement starting with like waits at the gate.
func (g *gate) waitAtGate(t *testing.T, like string) {
	t.Helper()
	ctx := testCtx(t)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, g.admin.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE $1`,
			like+"%"+g.owner.n.schema+"%").Scan(&n))
		return n == 1
	}, 5*time.Second, 5*time.Millisecond, "%s waits at the gate", like)
}

// TestReapAfterConcurrentTakeoverStrictIsolation: on a database whose
// default isolation is above READ COMMITTED, the reaper's statement reads
// the expired rows in its snapshot and locks them one by one; a row taken
// over (Begin on an expired key) after the snapshot, before its lock, made
// the lock, and the whole batch, fail with a serialization error (the
// background reaper logged it and reaped nothing until its next interval).
// Reap runs the statement again: the row taken over is live now, the others
// are reaped.
func TestReapAfterConcurrentTakeoverStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			g := newGate(t, level)
			ctx := testCtx(t)
			for _, k := range []string{gateKey, "taken"} { // expiring in this order
				r := beginReq(k, 1)
				r.TTL = 50 * time.Millisecond
				_, err := g.owner.Begin(ctx, r)
				require.NoError(t, err)
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)

			release := g.hold(t)
			reaped := make(chan error, 1)
			var n int
			go func() {
				var err error
				n, err = g.gated.Reap(ctx, 10)
				reaped <- err
			}()
			g.waitAtGate(t, "WITH doomed")
			res, err := g.owner.Begin(ctx, beginReq("taken", 2))
			require.NoError(t, err)
			require.True(t, res.Acquired, "the takeover of an expired record")
			release()
			require.NoError(t, <-reaped)
			assert.Equal(t, 1, n, "the record not taken over is reaped")
			_, found, err := g.owner.Get(ctx, "taken")
			require.NoError(t, err)
			assert.True(t, found)
		})
	}
}

// TestTxHeartbeatAfterCommitStrictIsolation: above READ COMMITTED, while
// BeginTx's transaction locks the row, ExtendLease only reads that it is
// still locked, trying the lock without waiting. A commit of that
// transaction after the statement's snapshot, before its lock, made the
// heartbeat fail with a serialization error; ExtendLease runs the statement
// again and answers, as for any finished record, idem.ErrFenced.
func TestTxHeartbeatAfterCommitStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			g := newGate(t, level)
			ctx := testCtx(t)
			_, err := g.owner.Begin(ctx, beginReq(gateKey, 1))
			require.NoError(t, err)
			txctx, commit, rollback, err := g.gated.BeginTx(ctx, gateKey, 1)
			require.NoError(t, err)
			defer rollback()
			require.True(t, g.gated.locked.has(holdKey{gateKey, 1}))
			tx, _ := Tx(txctx)
			_, err = tx.Exec(txctx, `SET LOCAL idemtest.gate = 'off'`) // the commit passes the gate
			require.NoError(t, err)

			release := g.hold(t)
			extended := make(chan error, 1)
			go func() { extended <- g.gated.ExtendLease(ctx, gateKey, 1, time.Minute) }()
			g.waitAtGate(t, "SELECT count(*)")
			require.NoError(t, commit(idem.StateCompleted, []byte("resp")))
			release()
			require.ErrorIs(t, <-extended, idem.ErrFenced, "a heartbeat after the commit")
		})
	}
}

// lockWaiters counts the statements on schema's tables, starting with like,
// that wait for a lock (pg_stat_activity), asked on pool.
func lockWaiters(ctx context.Context, pool *pgxpool.Pool, schema, like string) (int, error) {
	var n int
	err := pool.QueryRow(ctx,
		`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
		like+"%"+schema+"%").Scan(&n)
	return n, err
}
