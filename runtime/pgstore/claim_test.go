package pgstore

import (
	"context"
	"fmt"
	"strings"
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

// rowVersion is the row's xmin and xmax: a write changes xmin, a row lock
// (FOR UPDATE, or an ON CONFLICT DO UPDATE that does not update) sets xmax.
func rowVersion(t *testing.T, s *Store, key string) (xmin, xmax string) {
	t.Helper()
	require.NoError(t, s.pool.QueryRow(testCtx(t),
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
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("done")))
	xmin, xmax := rowVersion(t, s, "k")
	require.Equal(t, "0", xmax)

	replay := func() {
		t.Helper()
		r, err := s.Begin(ctx, beginReq("k", 2))
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
	defer rollback(locker)
	_, err = locker.Exec(ctx, `SELECT FROM `+s.n.table+` WHERE key = 'k' FOR UPDATE`)
	require.NoError(t, err)
	replay() // would wait for the locker until ctx ends if it took the row lock
}

// TestBeginLosesRace: a Begin whose claim of a new key meets a concurrent
// claim of the same key, not yet committed, waits for it (ON CONFLICT),
// finds it has lost, and reads the winner's record (a second statement, with
// a snapshot that shows it). The winner and the loser claim with the
// function or the statement, in every combination (a rolling deploy runs
// both on the same rows).
func TestBeginLosesRace(t *testing.T) {
	t.Parallel()
	for _, win := range claimPaths {
		for _, lose := range claimPaths {
			t.Run(win.name+"-"+lose.name, func(t *testing.T) {
				t.Parallel()
				testBeginLosesRace(t, win.way, lose.way)
			})
		}
	}
}

// winnerClaims claims "k" with token 2 and fp(2) in an explicit
// transaction, kept uncommitted, with the statement of way.
func winnerClaims(t *testing.T, s *Store, way claimWay, wantPrior idem.State) pgx.Tx {
	t.Helper()
	ctx := testCtx(t)
	winner, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { rollback(winner) })
	var (
		acquired bool
		prior    int32
	)
	f2 := fp(2)
	require.NoError(t, winner.QueryRow(ctx, claimSQL(s, way), "k", f2[:], int64(2), time.Minute, time.Hour, false).
		Scan(&acquired, &prior, nil, nil, nil, nil, nil, nil))
	require.True(t, acquired)
	require.Equal(t, int32(wantPrior), prior)
	return winner
}

func testBeginLosesRace(t *testing.T, winFn, loseFn claimWay) {
	s := newTestStore(t, Options{})
	useClaimFunc(s, loseFn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	winner := winnerClaims(t, s, winFn, 0)

	type result struct {
		r   idem.BeginResult
		err error
	}
	loser := make(chan result, 1)
	go func() {
		r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(3), Token: 3, Lease: time.Minute, TTL: time.Hour})
		loser <- result{r, err}
	}()
	f := &txFixture{s: s, ctx: testCtx(t)}
	require.Eventually(t, func() bool { return f.waitersOnLock(t, claimPrefix(loseFn)) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the loser waits for the winner")
	require.NoError(t, winner.Commit(ctx))
	got := <-loser
	require.NoError(t, got.err)
	assert.False(t, got.r.Acquired)
	assert.Equal(t, idem.StatePending, got.r.Record.State)
	assert.Equal(t, idem.Token(2), got.r.Record.Token, "the winner's record")
	assert.Equal(t, fp(2), got.r.Record.Fingerprint)
	assert.Equal(t, loseFn != wayCTE, s.usesClaimFunc(), "the loser claimed as told")
}

// TestTakeoverSkipsLockedRow: a takeover whose row another transaction
// holds locked (here a concurrent takeover, kept uncommitted) does not wait
// for it: Begin answers at once, not acquired, with a PENDING record that
// carries the request's own fingerprint (the winner may be its duplicate:
// the row's old fingerprint would make a strict engine answer 422), so the
// engine answers the request in flight. Once the
// winner has committed, Begin reads its record. The winner and the loser
// claim with the function or the statement, in every combination.
func TestTakeoverSkipsLockedRow(t *testing.T) {
	t.Parallel()
	for _, win := range claimPaths {
		for _, lose := range claimPaths {
			t.Run(win.name+"-"+lose.name, func(t *testing.T) {
				t.Parallel()
				s := newTestStore(t, Options{})
				useClaimFunc(s, lose.way)
				ctx := testCtx(t)
				r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: 10 * time.Millisecond, TTL: time.Hour})
				require.NoError(t, err)
				require.True(t, r.Acquired)
				time.Sleep(30 * time.Millisecond) // the lease runs out
				winner := winnerClaims(t, s, win.way, idem.StatePending)

				got, took := beginNoWait(t, s, beginReqFP("k", 3, 3))
				assert.Less(t, took, noWaitBound, "no wait for the winner's row lock")
				assert.False(t, got.Acquired)
				assert.Equal(t, idem.StatePending, got.Record.State, "in flight")
				assert.Equal(t, fp(3), got.Record.Fingerprint, "in flight as this request, not as the row's old holder")

				require.NoError(t, winner.Commit(ctx))
				got, err = s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(3), Token: 4, Lease: time.Minute, TTL: time.Hour})
				require.NoError(t, err)
				assert.False(t, got.Acquired)
				assert.Equal(t, idem.Token(2), got.Record.Token, "the winner's record")
				assert.Equal(t, lose.way != wayCTE, s.usesClaimFunc(), "the loser claimed as told")
			})
		}
	}
}

// TestTakeoverOfLockedRow: a claimable row that is not a PENDING record
// (an expired one, a FAILED one without a response) is locked by another
// transaction: the reaper deleting it, or a claim taking it over. Begin does
// not wait and answers in flight: a PENDING record with the request's
// fingerprint, never the expired response (a replay) nor a FAILED record,
// whose fingerprint would make the engine claim again at once or answer a
// conflict. Once the lock is gone, Begin claims.
func TestTakeoverOfLockedRow(t *testing.T) {
	t.Parallel()
	for _, path := range claimPaths {
		for name, finish := range map[string]struct {
			ttl   time.Duration
			state idem.State
			resp  []byte
			prior idem.State
		}{
			// 1 s: long enough that the record's own Finish, under load, is
			// not past its expiry (then fenced); the test sleeps it out.
			"Expired":    {time.Second, idem.StateCompleted, []byte("old"), 0},
			"FailedFree": {time.Hour, idem.StateFailed, nil, idem.StateFailed},
		} {
			t.Run(path.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t)
				s := newTestStore(t, Options{})
				useClaimFunc(s, path.way)
				r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: time.Minute, TTL: finish.ttl})
				require.NoError(t, err)
				require.True(t, r.Acquired)
				require.NoError(t, s.Finish(ctx, "k", 1, finish.state, finish.resp))
				if finish.ttl <= time.Second {
					time.Sleep(2 * finish.ttl) // the record expires
				}

				locker, err := s.pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = locker.Rollback(ctx) }()
				_, err = locker.Exec(ctx, `SELECT FROM `+s.n.table+` WHERE key = 'k' FOR UPDATE`)
				require.NoError(t, err)

				got, took := beginNoWait(t, s, beginReqFP("k", 2, 2))
				assert.Less(t, took, noWaitBound, "no wait for the row lock")
				assert.False(t, got.Acquired)
				assert.Equal(t, idem.StatePending, got.Record.State, "in flight")
				assert.Equal(t, fp(2), got.Record.Fingerprint, "the request's own")
				assert.Nil(t, got.Record.Response)

				require.NoError(t, locker.Rollback(ctx))
				got, err = s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(2), Token: 3, Lease: time.Minute, TTL: time.Hour})
				require.NoError(t, err)
				assert.True(t, got.Acquired)
				assert.Equal(t, finish.prior, got.Prior)
			})
		}
	}
}

// TestMixedClaimRace: processes that claim with the function and processes
// that claim with the statement (a rolling deploy, or a process that fell
// back) race for the same keys, in rounds: new keys, takeovers of run-out
// leases, reclaims of FAILED records without a response, and replays of
// COMPLETED ones. In every round exactly one Begin per key acquires it (none
// in the replay round), a takeover reports the state it replaced, and the
// fencing tokens hold: only the latest winner's Finish succeeds.
func TestMixedClaimRace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fnStore := newTestStore(t, Options{})
	cteStore, err := New(fnStore.pool, Options{Schema: fnStore.n.schema})
	require.NoError(t, err)
	defer cteStore.Close()
	useClaimFunc(cteStore, wayCTE)
	stores := []*Store{fnStore, cteStore}

	const (
		keys    = 30
		racers  = 6 // per store
		perRace = 2 * racers
	)
	key := func(k int) string { return fmt.Sprintf("k%d", k) }
	var tok atomic.Int64
	type win struct {
		tok   idem.Token
		prior idem.State
		fn    bool
	}
	// round runs perRace Begins of every key at once and returns the
	// winners per key.
	round := func(t *testing.T, wantPrior idem.State, wantWinner bool) map[int]win {
		t.Helper()
		var (
			mu   sync.Mutex
			wins = map[int][]win{}
			wg   sync.WaitGroup
		)
		start := make(chan struct{})
		for r := range perRace {
			s := stores[r%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for k := range keys {
					tk := idem.Token(tok.Add(1))
					res, err := s.Begin(ctx, beginReq(key(k), tk))
					if !assert.NoError(t, err) {
						return
					}
					if res.Acquired {
						mu.Lock()
						wins[k] = append(wins[k], win{tk, res.Prior, s == fnStore})
						mu.Unlock()
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		out := map[int]win{}
		for k := range keys {
			w := wins[k]
			if !wantWinner {
				assert.Empty(t, w, key(k))
				continue
			}
			if assert.Len(t, w, 1, "exactly one winner for %s", key(k)) {
				assert.Equal(t, wantPrior, w[0].prior, key(k))
				out[k] = w[0]
			}
		}
		return out
	}
	expireLeases := func() {
		_, err := fnStore.pool.Exec(ctx, `UPDATE `+fnStore.n.table+` SET lease_expires_at = clock_timestamp() - interval '1 second'`)
		require.NoError(t, err)
	}
	byFn := func(ws map[int]win) (n int) {
		for _, w := range ws {
			if w.fn {
				n++
			}
		}
		return n
	}

	first := round(t, 0, true) // new keys: no prior state
	expireLeases()
	second := round(t, idem.StatePending, true) // takeovers
	for k := range keys {
		assert.ErrorIs(t, fnStore.Finish(ctx, key(k), first[k].tok, idem.StateFailed, nil), idem.ErrFenced, "the first holder is fenced off")
		require.NoError(t, cteStore.Finish(ctx, key(k), second[k].tok, idem.StateFailed, nil))
	}
	third := round(t, idem.StateFailed, true) // reclaims
	for k := range keys {
		assert.ErrorIs(t, cteStore.Finish(ctx, key(k), second[k].tok, idem.StateCompleted, nil), idem.ErrFenced)
		require.NoError(t, fnStore.Finish(ctx, key(k), third[k].tok, idem.StateCompleted, []byte(key(k))))
	}
	round(t, 0, false) // replays
	for k := range keys {
		rec, found, err := cteStore.Get(ctx, key(k))
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, third[k].tok, rec.Token)
		assert.Equal(t, []byte(key(k)), rec.Response)
	}
	t.Logf("wins by the function: %d, %d, %d of %d", byFn(first), byFn(second), byFn(third), keys)
}

// TestBeginRerunReportsPrior: a re-run of a Begin (the same token) finds
// its own claim and reports the state the first run replaced, kept in
// prior_state, so a takeover whose reply was lost still reaches the engine
// as one (EventLeaseTakeover); the lease is renewed from the re-run, also
// after it ran out. Both claim paths.
func TestBeginRerunReportsPrior(t *testing.T) {
	t.Parallel()
	for _, path := range claimPaths {
		for name, prior := range map[string]idem.State{"New": 0, "Takeover": idem.StatePending, "Reclaim": idem.StateFailed} {
			t.Run(path.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t)
				s := newTestStore(t, Options{})
				useClaimFunc(s, path.way)
				switch prior {
				case idem.StatePending:
					r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: 10 * time.Millisecond, TTL: time.Hour})
					require.NoError(t, err)
					require.True(t, r.Acquired)
					time.Sleep(30 * time.Millisecond) // the lease runs out
				case idem.StateFailed:
					r, err := s.Begin(ctx, beginReq("k", 1))
					require.NoError(t, err)
					require.True(t, r.Acquired)
					require.NoError(t, s.Finish(ctx, "k", 1, idem.StateFailed, nil))
				}
				req := &idem.BeginRequest{Key: "k", Fingerprint: fp(2), Token: 2, Lease: 10 * time.Millisecond, TTL: time.Hour}
				r, err := s.Begin(ctx, req)
				require.NoError(t, err)
				require.Equal(t, idem.BeginResult{Acquired: true, Prior: prior}, r, "first run")
				time.Sleep(30 * time.Millisecond) // its lease runs out too

				req.Lease = time.Minute
				r, err = s.Begin(ctx, req)
				require.NoError(t, err)
				assert.Equal(t, idem.BeginResult{Acquired: true, Prior: prior}, r, "second run: the first run's prior")
				rec, ok, err := s.Get(ctx, "k")
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, idem.Token(2), rec.Token)
				assert.Greater(t, time.Until(rec.LeaseExpiresAt), 30*time.Second, "the lease, renewed")
				r, err = s.Begin(ctx, beginReq("k", 3))
				require.NoError(t, err)
				assert.False(t, r.Acquired, "another token within the renewed lease")
				assert.Equal(t, path.way != wayCTE, s.usesClaimFunc())
			})
		}
	}
}

// TestClaimStatementsAnswerAsFunction: each of Begin's claim statements,
// the function's call (queries.claimFunc), the read that answers an
// unclaimable record of another claim itself and leaves every other row to
// the function (queries.claimRead), and the fallback claim statement
// (queries.claim), answers exactly as a bare call of the function does,
// for every kind of row: none; PENDING, COMPLETED or FAILED; with a
// response or without; expired or not; its lease run out or not; this
// claim's token or another; the request's fingerprint or another;
// SameFingerprintToReclaim or not. Each call runs in a transaction of its
// own, rolled back, on the same row. The rows claimRead answers itself (an
// unexpired COMPLETED record, a FAILED one with a response, a PENDING one
// of another token whose lease runs) must not run the function at all:
// EXPLAIN ANALYZE shows its sub-select never executed; for every other row
// it runs.
func TestClaimStatementsAnswerAsFunction(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := testCtx(t)
	bare := `SELECT * FROM ` + s.n.claim + `($1::text, $2::bytea, $3::bigint, $4::interval, $5::interval, $6::boolean)`
	reqFP := fp(1)
	const reqTok = 7
	now := time.Now().Truncate(time.Microsecond)
	type row struct {
		state                                  int16 // 0: no row
		response, expired, leaseOut, own, same bool
	}
	// inTx runs f in a transaction that holds r under the key "k", and
	// rolls it back.
	inTx := func(t *testing.T, r row, f func(tx pgx.Tx)) {
		t.Helper()
		tx, err := s.pool.Begin(ctx)
		require.NoError(t, err)
		defer rollback(tx)
		if r.state != 0 {
			rowFP, tok, resp := fp(2), int64(5), []byte(nil)
			if r.same {
				rowFP = reqFP
			}
			if r.own {
				tok = reqTok
			}
			if r.response {
				resp = []byte("resp")
			}
			exp, lease := now.Add(time.Hour), now.Add(time.Minute)
			if r.expired {
				exp = now.Add(-time.Hour)
			}
			if r.leaseOut {
				lease = now.Add(-time.Minute)
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+s.n.table+` (key, state, fingerprint, token, lease_expires_at, expires_at, prior_state, response)
VALUES ('k', $1, $2, $3, $4, $5, 3, $6)`, r.state, rowFP[:], tok, lease, exp, resp)
			require.NoError(t, err)
		}
		f(tx)
	}
	args := func(sameFP bool) []any { return []any{"k", reqFP[:], int64(reqTok), time.Minute, time.Hour, sameFP} }
	answer := func(t *testing.T, q string, r row, sameFP bool) (v []any) {
		t.Helper()
		inTx(t, r, func(tx pgx.Tx) {
			rows, err := tx.Query(ctx, q, args(sameFP)...)
			require.NoError(t, err)
			require.True(t, rows.Next(), "a row")
			v, err = rows.Values()
			require.NoError(t, err)
			require.False(t, rows.Next(), "one row")
			rows.Close()
			require.NoError(t, rows.Err())
		})
		return v
	}
	// functionRuns reports whether claimRead, run on r, called the
	// function: whether EXPLAIN ANALYZE shows the sub-select that calls it
	// executed.
	functionRuns := func(t *testing.T, r row, sameFP bool) bool {
		t.Helper()
		var plan []string
		inTx(t, r, func(tx pgx.Tx) {
			rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) `+s.q.claimRead, args(sameFP)...)
			require.NoError(t, err)
			plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
		})
		for _, l := range plan {
			if strings.Contains(l, "Subquery Scan on f") {
				return !strings.Contains(l, "never executed")
			}
		}
		t.Fatalf("no sub-select in the plan:\n%s", strings.Join(plan, "\n"))
		return false
	}
	n, answered := 0, 0
	for state := range int16(4) {
		for bits := range 1 << 6 {
			r := row{state: state, response: bits&1 != 0, expired: bits&2 != 0, leaseOut: bits&4 != 0, own: bits&8 != 0, same: bits&16 != 0}
			sameFP := bits&32 != 0
			if state == 0 && bits&31 != 0 {
				continue // no row: the other bits do not matter
			}
			name := fmt.Sprintf("%+v/sameFP=%v", r, sameFP)
			want := answer(t, bare, r, sameFP)
			for _, path := range claimPaths {
				require.Equal(t, want, answer(t, claimSQL(s, path.way), r, sameFP), "%s: %s", path.name, name)
			}
			itself := !r.expired && (r.state == 2 || r.state == 3 && r.response || r.state == 1 && !r.own && !r.leaseOut)
			assert.Equal(t, !itself, functionRuns(t, r, sameFP), "%s: the function runs", name)
			n++
			if itself {
				answered++
			}
		}
	}
	require.Equal(t, 2+3*64, n)
	require.Equal(t, 32+16+8, answered) // COMPLETED, FAILED with a response, PENDING of another token
}

// TestClaimChooser: the chooser switches to claimRead at the end of an
// epoch in which at least claimReadOn Begins were answered from a record,
// back to claimFunc at the end of one with at most claimReadOff, and stays
// where it is in between (the hysteresis); Begins counted concurrently are
// all counted but for those that finish while an epoch ends.
func TestClaimChooser(t *testing.T) {
	t.Parallel()
	var c claimChooser
	epoch := func(answered int) {
		for i := range claimEpoch {
			c.count(i < answered)
		}
	}
	require.False(t, c.read(), "claimFunc first")
	epoch(claimReadOn - 1)
	assert.False(t, c.read(), "below claimReadOn")
	epoch(claimReadOn)
	assert.True(t, c.read(), "from claimReadOn")
	epoch(claimReadOff + 1)
	assert.True(t, c.read(), "above claimReadOff")
	epoch(claimReadOff)
	assert.False(t, c.read(), "up to claimReadOff")
	epoch((claimReadOn + claimReadOff) / 2)
	assert.False(t, c.read(), "in between: stays")

	// Mid-epoch, nothing switches.
	for range claimEpoch - 1 {
		c.count(true)
	}
	assert.False(t, c.read())
	assert.Equal(t, uint64(claimEpoch-1)*(chooseBegin+chooseAnswered), c.w.Load())
	c.count(true)
	assert.True(t, c.read())
	assert.Equal(t, uint64(chooseRead), c.w.Load(), "counts zeroed")

	// Concurrent Begins, all new keys: back to claimFunc.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range claimEpoch {
				c.count(false)
			}
		})
	}
	wg.Wait()
	assert.False(t, c.read())
	assert.Less(t, c.w.Load()>>32, uint64(claimEpoch), "an epoch's Begins at most")
	assert.Zero(t, c.w.Load()&chooseCount, "none answered")
}

// TestBeginPicksClaimStatement: Begin runs claimFunc for a stream of new
// keys and claimRead for a stream of replays, switching at the end of the
// first epoch of the other kind, and keeps its statement for a mix near the
// break-even (a third replays) whichever it is. The statements Begin runs
// are those the pool's tracer sees.
func TestBeginPicksClaimStatement(t *testing.T) {
	t.Parallel()
	rec := &sqlRecorder{}
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ConnConfig.Tracer = rec
	})
	s := newStoreOn(t, p, Options{})
	rec.s = s
	ctx := testCtx(t)
	tok := idem.Token(0)
	begin := func(key string, wantAcquired bool) {
		t.Helper()
		tok++
		r, err := s.Begin(ctx, beginReq(key, tok))
		require.NoError(t, err)
		require.Equal(t, wantAcquired, r.Acquired, key)
	}
	fresh := 0
	newKey := func() {
		t.Helper()
		fresh++
		begin(fmt.Sprint("new", fresh), true)
	}
	replay := func() { t.Helper(); begin("done", false) }
	repeat := func(s string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	begin("done", true)
	require.NoError(t, s.Finish(ctx, "done", tok, idem.StateCompleted, []byte("resp")))
	require.Equal(t, []string{"func"}, rec.take(), "a new Store runs claimFunc")

	// The first epoch: the claim above and claimEpoch-1 replays.
	for range 2*claimEpoch - 1 {
		replay()
	}
	require.Equal(t, append(repeat("func", claimEpoch-1), repeat("read", claimEpoch)...), rec.take(),
		"replays: claimRead from the second epoch on")

	for range 2 * claimEpoch {
		newKey()
	}
	require.Equal(t, append(repeat("read", claimEpoch), repeat("func", claimEpoch)...), rec.take(),
		"new keys: claimFunc from the second epoch on")

	mix := func() {
		t.Helper()
		for i := range 2 * claimEpoch {
			if i%3 == 0 {
				replay()
			} else {
				newKey()
			}
		}
	}
	mix()
	require.Equal(t, repeat("func", 2*claimEpoch), rec.take(), "a third replays: claimFunc stays")
	for range claimEpoch {
		replay()
	}
	require.Equal(t, repeat("func", claimEpoch), rec.take())
	mix()
	require.Equal(t, repeat("read", 2*claimEpoch), rec.take(), "a third replays: claimRead stays")
}

// BenchmarkClaimChooser: what the chooser costs a Begin (a read to pick,
// a count once answered), alone and from every P at once.
func BenchmarkClaimChooser(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		var c claimChooser
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = c.read()
			c.count(i%3 == 0)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var c claimChooser
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				_ = c.read()
				c.count(i%3 == 0)
			}
		})
	})
}
