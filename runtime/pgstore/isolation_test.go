package pgstore

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// isolationCase is a way of running BeginTx's transactions at an isolation
// level: Options.TxOptions, or the connections' default.
type isolationCase struct {
	name   string
	strict bool // above READ COMMITTED
	pool   func(t *testing.T) *pgxpool.Pool
	opts   Options
}

func isolationCases() []isolationCase {
	shared := func(t *testing.T) *pgxpool.Pool { return testPool(t) }
	defaultRR := func(t *testing.T) *pgxpool.Pool {
		return poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
			c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
		})
	}
	iso := func(l pgx.TxIsoLevel) Options { return Options{TxOptions: pgx.TxOptions{IsoLevel: l}} }
	return []isolationCase{
		{"RepeatableRead", true, shared, iso(pgx.RepeatableRead)},
		{"Serializable", true, shared, iso(pgx.Serializable)},
		{"DefaultRepeatableRead", true, defaultRR, Options{}},
		{"BeginQuery", true, shared, Options{TxOptions: pgx.TxOptions{BeginQuery: "BEGIN ISOLATION LEVEL REPEATABLE READ"}}},
		{"ReadCommitted", false, shared, iso(pgx.ReadCommitted)},
		{"DefaultReadCommitted", false, shared, Options{}},
	}
}

// eachIsolation runs test in a parallel subtest per isolation case (only
// those above READ COMMITTED when strictOnly), named after the case, on a
// fixture of its own.
func eachIsolation(t *testing.T, strictOnly bool, test func(t *testing.T, ic isolationCase, f *txFixture)) {
	t.Helper()
	for _, ic := range isolationCases() {
		if strictOnly && !ic.strict {
			continue
		}
		t.Run(ic.name, func(t *testing.T) {
			t.Parallel()
			test(t, ic, newTxFixtureOn(t, ic.pool(t), ic.opts))
		})
	}
}

// A claim whose holder heartbeats past the window
// (TestTxIsolationHeartbeatPastWindow,
// TestTxIsolationRollbackAfterHeartbeats): its lease, its window (longer,
// so that the claim's own lease ends first and the record lives past the
// window through the heartbeats alone) and the interval of the heartbeats.
// A heartbeat is fenced when it comes after the end of the previous one's
// lease (the first: of the window), so the lease is twenty intervals: on a
// loaded machine (2 cores, packages at once, -race) the test may stall
// close to a second between two heartbeats (with a lease of 300ms and
// heartbeats every 150ms, they were fenced). The heartbeats go on until one
// has started past the window, however long they took.
const (
	pastLease  = 1500 * time.Millisecond
	beatEvery  = pastLease / 20
	pastWindow = pastLease + 2*beatEvery
)

// claimPastWindow claims key for token 7 with pastLease and pastWindow and
// returns this host's clock once the claim has answered: the record's
// window ends by claimed+pastWindow (the server's clock is this host's).
func (f *txFixture) claimPastWindow(t *testing.T, key string) (claimed time.Time) {
	t.Helper()
	r, err := f.s.Begin(f.ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: 7, Lease: pastLease, TTL: pastWindow})
	require.NoError(t, err)
	require.True(t, r.Acquired)
	return time.Now()
}

// heartbeatPastWindow sends token 7's heartbeats on key every beatEvery
// until one has started after the window of the claim claimPastWindow
// answered at claimed, and returns this host's clock, in milliseconds, just
// before that last one. A failed heartbeat reports how long after the
// previous one's answer (or the claim's) it started: a fenced one that
// started well within pastLease of it would be a bug of the store, not a
// stalled test.
func (f *txFixture) heartbeatPastWindow(t *testing.T, key string, claimed time.Time) (lastBeat time.Time) {
	t.Helper()
	prev := claimed
	for {
		time.Sleep(beatEvery)
		lastBeat = time.Now().Truncate(time.Millisecond) // the server's clock is this host's, in microseconds
		err := f.s.ExtendLease(f.ctx, key, 7, pastLease)
		require.NoError(t, err, "a heartbeat %v after the previous heartbeat's answer (lease %v), %v after the claim's (window %v)",
			lastBeat.Sub(prev), pastLease, lastBeat.Sub(claimed), pastWindow)
		prev = time.Now()
		if lastBeat.After(claimed.Add(pastWindow)) {
			return lastBeat
		}
	}
}

// requireNotClaimable: token 8 cannot claim key, while the lease of the
// heartbeat sent at lastBeat runs (the failure says how long after
// lastBeat the claim answered).
func (f *txFixture) requireNotClaimable(t *testing.T, key string, lastBeat time.Time, msg string) {
	t.Helper()
	r, err := f.s.Begin(f.ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: 8, Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.False(t, r.Acquired, "%s (%v after the last heartbeat, lease %v)", msg, time.Since(lastBeat), pastLease)
}

// TestTxIsolationHeartbeat: the holder's own heartbeat (ExtendLease) comes
// between the handler's write and the commit. Above READ COMMITTED the
// transaction's snapshot predates it, so an UPDATE of the row by the
// heartbeat made the commit's fenced UPDATE fail with a serialization error
// (40001): there the heartbeat must leave the row alone (the transaction
// locks it), and the commit succeed. Under READ COMMITTED the heartbeat
// extends the lease as before.
func TestTxIsolationHeartbeat(t *testing.T) {
	t.Parallel()
	eachIsolation(t, false, func(t *testing.T, ic isolationCase, f *txFixture) {
		ctx := f.ctx
		f.claim(t, "k", 7, time.Minute)
		before := f.record(t, "k").LeaseExpiresAt
		txctx, commit, _ := f.beginTx(t, "k", 7)
		f.handler(t, txctx, "k")

		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		require.NoError(t, f.s.ExtendLease(hctx, "k", 7, 2*time.Minute), "the heartbeat neither fails nor waits")
		require.NoError(t, f.s.ExtendLease(hctx, "k", 7, 2*time.Minute))
		after := f.record(t, "k").LeaseExpiresAt
		if ic.strict {
			assert.Equal(t, before, after, "the row is left alone while the transaction locks it")
		} else {
			assert.True(t, after.After(before), "the heartbeat extends the lease")
		}

		require.NoError(t, commit(idem.StateCompleted, []byte("resp")))
		assert.True(t, f.sideWritten(t, "k"))
		rec := f.record(t, "k")
		assert.Equal(t, idem.StateCompleted, rec.State)
		assert.Equal(t, []byte("resp"), rec.Response)
		assert.ErrorIs(t, f.s.ExtendLease(ctx, "k", 7, time.Minute), idem.ErrFenced,
			"after the commit the heartbeat meets the row again")
		assert.False(t, f.s.locked.has(holdKey{"k", 7}))
	})
}

// TestTxIsolationEngine: a transactional handler under REPEATABLE READ runs
// past a third of its lease, so the engine's heartbeat extends it while the
// transaction is open; it commits (201), and a retry replays it.
func TestTxIsolationEngine(t *testing.T) {
	t.Parallel()
	f := newTxFixtureOn(t, testPool(t), Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
	eng := idem.New(f.s, idem.Options{Principal: idem.Anonymous, Transactional: true})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: 300 * time.Millisecond}})
	var runs atomic.Int32
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		tx, _ := Tx(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO `+f.side+` VALUES ($1, 'x')`, r.Header.Get("Idempotency-Key")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		time.Sleep(500 * time.Millisecond) // past lease/3: heartbeats run
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("made"))
	}))
	const key = "0193a8f0-0000-7000-8000-000000000001"
	serve := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/x", nil)
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	first := serve()
	require.Equal(t, http.StatusCreated, first.Code, "body: %s", first.Body)
	second := serve()
	assert.Equal(t, http.StatusCreated, second.Code, "body: %s", second.Body)
	assert.Equal(t, "made", second.Body.String())
	assert.Equal(t, int32(1), runs.Load(), "the retry replays")
	assert.True(t, f.sideWritten(t, key))
}

// TestTxStarvedPool: a pool of one connection, which the holder's
// transaction takes, so that every heartbeat fails (no connection within
// the store timeout) past the lease's end. Above READ COMMITTED the
// transaction holds the record's row lock, which keeps every takeover out
// (Store.TxHoldsLock): the engine does not cancel it, the handler commits
// (201) and a retry replays. Under READ COMMITTED nothing keeps a takeover
// out once the lease ran out: the transaction is cancelled
// (idem.ErrLeaseLost) and the request answered 503, nothing committed.
// Before TxLockHolder the first case was answered 503 too.
func TestTxStarvedPool(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		iso  pgx.TxIsoLevel
		code int
	}{
		{"RepeatableRead", pgx.RepeatableRead, http.StatusCreated},
		{"ReadCommitted", pgx.ReadCommitted, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) { c.MaxConns = 1 })
			f := newTxFixtureOn(t, p, Options{TxOptions: pgx.TxOptions{IsoLevel: tc.iso}})
			eng := idem.New(f.s, idem.Options{Principal: idem.Anonymous, Transactional: true,
				StoreTimeout: 100 * time.Millisecond})
			pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
				InFlight: idem.InFlightSpec{Lease: lease}})
			var runs atomic.Int32
			var cause atomic.Value
			h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				tx, _ := Tx(r.Context())
				if _, err := tx.Exec(r.Context(), `INSERT INTO `+f.side+` VALUES ($1, 'x')`, r.Header.Get("Idempotency-Key")); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				select {
				case <-r.Context().Done():
					cause.Store(context.Cause(r.Context()))
					http.Error(w, "cancelled", http.StatusInternalServerError)
					return
				case <-time.After(3 * lease): // the heartbeats fail past the lease's end
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("made"))
			}))
			const key = "0193a8f0-0000-7000-8000-000000000002"
			serve := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "/x", nil)
				req.Header.Set("Idempotency-Key", key)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			first := serve()
			require.Equal(t, tc.code, first.Code, "body: %s", first.Body)
			dctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
			defer cancel()
			require.NoError(t, eng.Drain(dctx)) // the release after a rollback
			if tc.code != http.StatusCreated {
				assert.ErrorIs(t, cause.Load().(error), idem.ErrLeaseLost)
				assert.False(t, f.sideWritten(t, key), "nothing committed")
				return
			}
			assert.Nil(t, cause.Load(), "not cancelled")
			assert.True(t, f.sideWritten(t, key))
			second := serve()
			assert.Equal(t, http.StatusCreated, second.Code, "body: %s", second.Body)
			assert.Equal(t, "made", second.Body.String())
			assert.Equal(t, int32(1), runs.Load(), "the retry replays")
		})
	}
}

// TestTxIsolationTakeover: above READ COMMITTED the holder's transaction
// locks the record's row from its start. A duplicate arriving after the
// lease ran out (no heartbeat touched the row meanwhile) does not take over,
// nor wait for the transaction: it is answered at once with the PENDING
// record (in flight). After a commit a duplicate gets the record, after a
// rollback it takes over. A holder whose claim was lost before BeginTx is
// fenced at once.
func TestTxIsolationTakeover(t *testing.T) {
	t.Parallel()
	for _, ic := range isolationCases() {
		if !ic.strict {
			continue
		}
		for _, path := range claimPaths {
			t.Run(ic.name+"/"+path.name, func(t *testing.T) {
				t.Parallel()
				testTxIsolationTakeover(t, ic, path.way)
			})
		}
	}
}

func testTxIsolationTakeover(t *testing.T, ic isolationCase, way claimWay) {
	f := newTxFixtureOn(t, ic.pool(t), ic.opts)
	useClaimFunc(f.s, way)
	ctx := f.ctx

	// duplicate claims key with token 2 while the holder's transaction is
	// open, past the lease: it must not wait for the row lock, and finds
	// the holder's record in flight.
	duplicate := func(t *testing.T, key string) {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, noWaitTimeout)
		defer cancel()
		t0 := time.Now()
		r, err := f.s.Begin(dctx, &idem.BeginRequest{Key: key, Fingerprint: fp(2), Token: 2, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		assert.Less(t, time.Since(t0), noWaitBound, "no wait for the holder's row lock")
		assert.False(t, r.Acquired)
		assert.Equal(t, idem.StatePending, r.Record.State)
		assert.Equal(t, idem.Token(1), r.Record.Token, "the holder's token")
		assert.Equal(t, fp(2), r.Record.Fingerprint, "in flight as this request (a locked row's fingerprint is no answer)")
	}
	// after claims key with token 3 once the holder's transaction is over.
	after := func(t *testing.T, key string) idem.BeginResult {
		t.Helper()
		r, err := f.s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(2), Token: 3, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		return r
	}

	t.Run("Commit", func(t *testing.T) {
		commit := f.holderPastLease(t, "c")
		require.NoError(t, f.s.ExtendLease(ctx, "c", 1, time.Minute), "the holder's heartbeat")
		duplicate(t, "c")
		require.NoError(t, commit(idem.StateCompleted, []byte("done")))
		got := after(t, "c")
		assert.False(t, got.Acquired)
		assert.Equal(t, idem.StateCompleted, got.Record.State)
		assert.Equal(t, []byte("done"), got.Record.Response)
		assert.True(t, f.sideWritten(t, "c"))
	})

	t.Run("Rollback", func(t *testing.T) {
		f.claim(t, "r", 1, 30*time.Millisecond)
		txctx, _, rollback := f.beginTx(t, "r", 1)
		f.handler(t, txctx, "r")
		time.Sleep(60 * time.Millisecond) // the lease is over
		duplicate(t, "r")
		rollback()
		got := after(t, "r")
		assert.True(t, got.Acquired, "the lease decides once the transaction is gone")
		assert.Equal(t, idem.StatePending, got.Prior)
		assert.False(t, f.sideWritten(t, "r"))
		assert.ErrorIs(t, f.s.ExtendLease(ctx, "r", 1, time.Minute), idem.ErrFenced)
	})

	t.Run("LostBefore", func(t *testing.T) {
		f.claim(t, "l", 1, 30*time.Millisecond)
		time.Sleep(60 * time.Millisecond)
		r, err := f.s.Begin(ctx, &idem.BeginRequest{Key: "l", Fingerprint: fp(2), Token: 2, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, r.Acquired)
		_, _, rollback, err := f.s.BeginTx(ctx, "l", 1)
		if err == nil {
			rollback()
		}
		assert.ErrorIs(t, err, idem.ErrFenced)
		assert.ErrorIs(t, f.s.ExtendLease(ctx, "l", 1, time.Minute), idem.ErrFenced)
		assert.False(t, f.s.locked.has(holdKey{"l", 1}))
	})
}

// TestTxReadCommittedCost: under READ COMMITTED a transaction of BeginTx is
// what it was, "begin" and the handler's statements, with no statement on
// the record; with an empty IsoLevel the connection's default isolation is
// read once, before its first transaction.
func TestTxReadCommittedCost(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]Options{
		"Explicit": {TxOptions: pgx.TxOptions{IsoLevel: pgx.ReadCommitted}},
		"Default":  {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := &sqlRecorder{}
			p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
				c.MaxConns = 1
				c.ConnConfig.Tracer = rec
				// READ COMMITTED whatever the server's default is.
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
			})
			f := newTxFixtureOn(t, p, opts)
			for i, key := range []string{"a", "b"} {
				f.claim(t, key, 1, time.Minute)
				rec.takeStmts()
				txctx, commit, rollback := f.beginTx(t, key, 1)
				f.handler(t, txctx, key)
				require.NoError(t, commit(idem.StateCompleted, nil))
				rollback()
				want := []string{"begin", "INSERT INTO", "UPDATE " + f.s.n.table, "commit"}
				if name == "Default" && i == 0 {
					want = append([]string{"SELECT current_setting('default_transaction_isolation')"}, want...)
				}
				assert.Equal(t, want, rec.takeStmts(), "transaction %d", i)
			}
		})
	}
}

// TestTxLockRetry: above READ COMMITTED, BeginTx's lock of the record's row
// waits for a transaction that updates the row (a heartbeat's UPDATE under
// way) and, once that commits, fails with a serialization error; BeginTx
// locks it in a new transaction, on the connection it already has.
func TestTxLockRetry(t *testing.T) {
	t.Parallel()
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) { c.MaxConns = 2 })
	f := newTxFixtureOn(t, p, Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
	ctx := f.ctx
	f.claim(t, "k", 1, time.Minute)
	other, err := testPool(t).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, f.s.q.extend, "k", int64(1), time.Minute)
	require.NoError(t, err)

	acquired := p.Stat().AcquireCount()
	type opened struct {
		commit   func(idem.State, []byte) error
		rollback func()
		err      error
	}
	done := make(chan opened, 1)
	go func() {
		_, commit, rollback, err := f.s.BeginTx(ctx, "k", 1)
		done <- opened{commit, rollback, err}
	}()
	var o opened
	received := false
	t.Cleanup(func() {
		// A failed require below: other has rolled back (deferred) and
		// ctx has ended, so BeginTx returns; its transaction, if it
		// opened one, must not stay open.
		if !received {
			o = <-done
		}
		if o.err == nil {
			o.rollback()
		}
	})
	require.Eventually(t, func() bool { return f.waitersOnLock(t, "SELECT 1 FROM") == 1 },
		5*time.Second, 10*time.Millisecond, "the lock waits for the update")
	require.NoError(t, other.Commit(ctx))
	o, received = <-done, true
	require.NoError(t, o.err, "the serialization failure is tried again")
	assert.Equal(t, int64(1), p.Stat().AcquireCount()-acquired, "one connection for both transactions")
	assert.True(t, f.s.locked.has(holdKey{"k", 1}))
	require.NoError(t, o.commit(idem.StateCompleted, nil))
	assert.Equal(t, idem.StateCompleted, f.record(t, "k").State)
}

// TestTxHolderTerminated: above READ COMMITTED the holder's heartbeat does
// not write the row its transaction locks; once that transaction's backend
// is terminated (pg_terminate_backend: the lock is gone, and the commit can
// no longer succeed), the heartbeat answers idem.ErrFenced instead of nil.
func TestTxHolderTerminated(t *testing.T) {
	t.Parallel()
	eachIsolation(t, true, func(t *testing.T, _ isolationCase, f *txFixture) {
		ctx := f.ctx
		f.claim(t, "k", 1, time.Minute)
		txctx, commit, _ := f.beginTx(t, "k", 1)
		tx, _ := Tx(txctx)
		var pid int32
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		require.NoError(t, f.s.ExtendLease(ctx, "k", 1, time.Minute), "the holder is alive")

		admin := testPool(t)
		_, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			var n int
			return admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n) == nil && n == 0
		}, 5*time.Second, 10*time.Millisecond, "the backend is gone")
		assert.ErrorIs(t, f.s.ExtendLease(ctx, "k", 1, time.Minute), idem.ErrFenced, "the holder's lock is gone")
		assert.Error(t, commit(idem.StateCompleted, nil))
		assert.False(t, f.s.locked.has(holdKey{"k", 1}))
		assert.False(t, f.sideWritten(t, "k"))
		assert.Equal(t, idem.StatePending, f.record(t, "k").State)
	})
}

// TestTxIsolationHeartbeatPastWindow: a transactional holder heartbeats
// past the record's window. Under every isolation its heartbeats succeed,
// its commit stores the record with its writes, and the record lives on to
// the end of the last heartbeat's lease, as outside a transaction (above
// READ COMMITTED the heartbeats do not write the locked row: the commit
// does). A holder that did not heartbeat is fenced past the window as
// before, and its writes are rolled back.
func TestTxIsolationHeartbeatPastWindow(t *testing.T) {
	t.Parallel()
	eachIsolation(t, false, func(t *testing.T, _ isolationCase, f *txFixture) {
		ctx := f.ctx
		claimed := f.claimPastWindow(t, "beats")
		txctx, commit, _ := f.beginTx(t, "beats", 7)
		f.handler(t, txctx, "beats")
		// The silent holder's window runs out meanwhile.
		silentClaimed := f.claimPastWindow(t, "silent")
		txctx2, commit2, _ := f.beginTx(t, "silent", 7)
		f.handler(t, txctx2, "silent")

		lastBeat := f.heartbeatPastWindow(t, "beats", claimed)
		f.requireNotClaimable(t, "beats", lastBeat, "another token claimed a heartbeating holder's record")
		require.NoError(t, commit(idem.StateCompleted, []byte("resp")))
		assert.True(t, f.sideWritten(t, "beats"))
		rec, found, err := f.s.Get(ctx, "beats")
		require.NoError(t, err)
		require.True(t, found, "the committed record expired at once")
		assert.Equal(t, idem.StateCompleted, rec.State)
		assert.Equal(t, idem.Token(7), rec.Token)
		assert.False(t, rec.ExpiresAt.Before(lastBeat.Add(pastLease)), "the record lives to the end of the last heartbeat's lease")

		time.Sleep(time.Until(silentClaimed.Add(pastWindow + beatEvery))) // past the window and the lease, no heartbeat
		assert.ErrorIs(t, f.s.ExtendLease(ctx, "silent", 7, pastLease), idem.ErrFenced, "a heartbeat after the record expired")
		assert.ErrorIs(t, commit2(idem.StateCompleted, []byte("resp")), idem.ErrFenced, "a commit after the record expired")
		assert.False(t, f.sideWritten(t, "silent"))
	})
}

// TestTxIsolationRollbackAfterHeartbeats: a transactional holder heartbeats
// past the record's window, then rolls back (its handler failed). The lease
// its heartbeats granted outlives the transaction, as outside one: another
// token cannot claim the key at once, and the engine's release (Finish
// FAILED, outside the transaction) is not fenced. Above READ COMMITTED the
// heartbeats could not write the locked row: the rollback writes it.
func TestTxIsolationRollbackAfterHeartbeats(t *testing.T) {
	t.Parallel()
	eachIsolation(t, false, func(t *testing.T, _ isolationCase, f *txFixture) {
		claimed := f.claimPastWindow(t, "rb")
		txctx, _, rollback := f.beginTx(t, "rb", 7)
		f.handler(t, txctx, "rb")
		lastBeat := f.heartbeatPastWindow(t, "rb", claimed)
		rollback()
		assert.False(t, f.sideWritten(t, "rb"), "rolled back")
		f.requireNotClaimable(t, "rb", lastBeat, "another token claimed the key while the last heartbeat's lease ran")
		require.NoError(t, f.s.Finish(f.ctx, "rb", 7, idem.StateFailed, nil), "the release after the rollback")
	})
}
