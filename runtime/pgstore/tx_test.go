package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// txFixture is a store plus a side table standing for the handler's own
// data. Its helpers' statements use ctx (see testCtx).
type txFixture struct {
	s    *Store
	side string
	ctx  context.Context
}

func newTxFixture(t *testing.T) *txFixture { return newTxFixtureOn(t, testPool(t), Options{}) }

// newTxFixtureOn is newTxFixture with a store on p with opts.
func newTxFixtureOn(t *testing.T, p *pgxpool.Pool, opts Options) *txFixture {
	s := newStoreOn(t, p, opts)
	f := &txFixture{s: s, side: pgx.Identifier{s.n.schema, "side"}.Sanitize(), ctx: testCtx(t)}
	_, err := s.pool.Exec(f.ctx, `CREATE TABLE `+f.side+` (key text PRIMARY KEY, v text NOT NULL)`)
	require.NoError(t, err)
	return f
}

// beginTx opens the holder's transaction (BeginTx of key/tok, in f.ctx) and
// rolls it back at the end of the test unless committed or rolled back
// before: a test stopped by a failed require (runtime.Goexit) leaves no
// transaction open, whose locks the schema's DROP would wait for.
func (f *txFixture) beginTx(t *testing.T, key string, tok idem.Token) (txctx context.Context, commit func(idem.State, []byte) error, rollback func()) {
	t.Helper()
	txctx, commit, rollback, err := f.s.BeginTx(f.ctx, key, tok)
	require.NoError(t, err)
	t.Cleanup(rollback)
	return txctx, commit, rollback
}

func (f *txFixture) claim(t *testing.T, key string, tok idem.Token, lease time.Duration) {
	t.Helper()
	r, err := f.s.Begin(f.ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: tok, Lease: lease, TTL: time.Hour})
	require.NoError(t, err)
	require.True(t, r.Acquired)
}

// handler writes a side row in the transaction carried by ctx.
func (f *txFixture) handler(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	tx, ok := Tx(ctx)
	require.True(t, ok)
	_, err := tx.Exec(ctx, `INSERT INTO `+f.side+` (key, v) VALUES ($1, 'written')`, key)
	require.NoError(t, err)
}

// holderPastLease claims key with token 1 and a 30 ms lease, opens the
// holder's transaction, writes its side row in it and waits until the lease
// has run out: the holder is about to commit when a takeover may come. The
// transaction is rolled back at the end of the test unless committed.
func (f *txFixture) holderPastLease(t *testing.T, key string) (commit func(idem.State, []byte) error) {
	t.Helper()
	f.claim(t, key, 1, 30*time.Millisecond)
	txctx, commit, _ := f.beginTx(t, key, 1)
	f.handler(t, txctx, key)
	time.Sleep(60 * time.Millisecond) // the lease is over
	return commit
}

func (f *txFixture) sideWritten(t *testing.T, key string) bool {
	t.Helper()
	var n int
	require.NoError(t, f.s.pool.QueryRow(f.ctx, `SELECT count(*) FROM `+f.side+` WHERE key = $1`, key).Scan(&n))
	return n == 1
}

func (f *txFixture) record(t *testing.T, key string) idem.Record {
	t.Helper()
	rec, found, err := f.s.Get(f.ctx, key)
	require.NoError(t, err)
	require.True(t, found)
	return rec
}

// waitersOnLock counts the statements of this test's schema, starting with
// like, that wait for a lock. It asks on the shared pool, not the store's.
func (f *txFixture) waitersOnLock(t *testing.T, like string) int {
	n, err := lockWaiters(f.ctx, testPool(t), f.s.n.schema, like)
	require.NoError(t, err)
	return n
}

func TestTx(t *testing.T) {
	ctx := testCtx(t)

	t.Run("Commit", func(t *testing.T) {
		t.Parallel()
		f := newTxFixture(t)
		f.claim(t, "k", 1, time.Minute)
		_, ok := Tx(ctx)
		assert.False(t, ok, "no transaction in a plain context")
		txctx, commit, rollback, err := f.s.BeginTx(ctx, "k", 1)
		require.NoError(t, err)
		defer rollback()
		f.handler(t, txctx, "k")
		assert.False(t, f.sideWritten(t, "k"), "not visible before the commit")
		require.NoError(t, commit(idem.StateCompleted, []byte("resp")))
		assert.True(t, f.sideWritten(t, "k"))
		rec := f.record(t, "k")
		assert.Equal(t, idem.StateCompleted, rec.State)
		assert.Equal(t, []byte("resp"), rec.Response)
		rollback() // no-op after commit
		assert.True(t, f.sideWritten(t, "k"))
		assert.Error(t, commit(idem.StateCompleted, nil), "commit twice")
	})

	t.Run("Rollback", func(t *testing.T) {
		t.Parallel()
		f := newTxFixture(t)
		f.claim(t, "k", 1, time.Minute)
		txctx, commit, rollback, err := f.s.BeginTx(ctx, "k", 1)
		require.NoError(t, err)
		f.handler(t, txctx, "k")
		rollback()
		rollback()
		assert.False(t, f.sideWritten(t, "k"))
		assert.Equal(t, idem.StatePending, f.record(t, "k").State)
		assert.Error(t, commit(idem.StateCompleted, nil), "commit after rollback")
		assert.Equal(t, idem.StatePending, f.record(t, "k").State)
		require.NoError(t, f.s.Finish(ctx, "k", 1, idem.StateFailed, nil), "the holder may still finish outside")
	})

	t.Run("Fenced", func(t *testing.T) {
		t.Parallel()
		f := newTxFixture(t)
		f.claim(t, "k", 1, 30*time.Millisecond)
		txctx, commit, rollback, err := f.s.BeginTx(ctx, "k", 1)
		require.NoError(t, err)
		defer rollback()
		f.handler(t, txctx, "k")
		time.Sleep(60 * time.Millisecond)
		f.claim(t, "k", 2, time.Minute) // the takeover
		assert.ErrorIs(t, commit(idem.StateCompleted, []byte("late")), idem.ErrFenced)
		assert.False(t, f.sideWritten(t, "k"), "the fenced holder's writes are rolled back")
		rec := f.record(t, "k")
		assert.Equal(t, idem.StatePending, rec.State)
		assert.Equal(t, idem.Token(2), rec.Token)
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		f := newTxFixture(t)
		_, _, _, err := f.s.BeginTx(ctx, "bad\x00key", 1)
		assert.Error(t, err)
		f.claim(t, "k", 1, time.Minute)
		txctx, commit, rollback, err := f.s.BeginTx(ctx, "k", 1)
		require.NoError(t, err)
		defer rollback()
		f.handler(t, txctx, "k")
		assert.Error(t, commit(idem.StatePending, nil))
		assert.False(t, f.sideWritten(t, "k"), "a rejected commit rolls back")
	})

	t.Run("ContextEnded", func(t *testing.T) {
		t.Parallel()
		f := newTxFixture(t)
		f.claim(t, "k", 1, time.Minute)
		cctx, cancel := context.WithCancel(ctx)
		txctx, commit, rollback, err := f.s.BeginTx(cctx, "k", 1)
		require.NoError(t, err)
		defer rollback()
		f.handler(t, txctx, "k")
		cancel()
		assert.Error(t, commit(idem.StateCompleted, nil))
		assert.False(t, f.sideWritten(t, "k"))
		assert.Equal(t, idem.StatePending, f.record(t, "k").State)
	})
}

// TestTxRaceHolderFirst: the holder's fenced UPDATE holds the row lock when
// a takeover arrives (its lease has run out). The takeover's claim does not
// wait for the lock: it answers the holder's record, PENDING (in flight),
// and does not claim; after the commit the record is the holder's.
func TestTxRaceHolderFirst(t *testing.T) {
	t.Parallel()
	for _, path := range claimPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			testTxRaceHolderFirst(t, path.way)
		})
	}
}

func testTxRaceHolderFirst(t *testing.T, way claimWay) {
	f := newTxFixture(t)
	useClaimFunc(f.s, way)
	commit := f.holderPastLease(t, "k")

	var (
		got  idem.BeginResult
		took time.Duration
		err  error
	)
	f.s.beforeCommit = func() { got, took, err = tryBeginNoWait(f.s, beginReqFP("k", 2, 2)) }
	require.NoError(t, commit(idem.StateCompleted, []byte("done")))
	require.NoError(t, err, "the takeover's claim, after %v", took)
	assert.Less(t, took, noWaitBound, "no wait for the holder's row lock")
	assert.False(t, got.Acquired, "the takeover did not claim")
	assert.Equal(t, idem.StatePending, got.Record.State, "in flight")
	assert.Equal(t, idem.Token(1), got.Record.Token)
	rec := f.record(t, "k")
	assert.Equal(t, idem.StateCompleted, rec.State)
	assert.Equal(t, []byte("done"), rec.Response)
	assert.True(t, f.sideWritten(t, "k"))
}

// TestTxRaceTakeoverFirst: a takeover's claim holds the row lock (its
// statement is kept open here in an explicit transaction) when the holder
// commits. The holder's fenced UPDATE waits, then finds another token: it
// rolls back with ErrFenced, and none of its writes survive.
func TestTxRaceTakeoverFirst(t *testing.T) {
	t.Parallel()
	for _, path := range claimPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			testTxRaceTakeoverFirst(t, path.way)
		})
	}
}

func testTxRaceTakeoverFirst(t *testing.T, way claimWay) {
	f := newTxFixture(t)
	ctx := testCtx(t)
	commit := f.holderPastLease(t, "k")

	other, err := f.s.pool.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(ctx)
	var (
		acquired bool
		prior    int16
	)
	f2 := fp(2)
	require.NoError(t, other.QueryRow(ctx, claimSQL(f.s, way), "k", f2[:], int64(2), time.Minute, time.Hour, false).
		Scan(&acquired, &prior, nil, nil, nil, nil, nil, nil))
	assert.True(t, acquired)
	assert.Equal(t, int16(idem.StatePending), prior)

	done := make(chan error, 1)
	go func() { done <- commit(idem.StateCompleted, []byte("late")) }()
	require.Eventually(t, func() bool { return f.waitersOnLock(t, "UPDATE") == 1 }, 5*time.Second, 5*time.Millisecond,
		"the holder's fenced UPDATE waits for the takeover's row lock")
	require.NoError(t, other.Commit(ctx))
	assert.ErrorIs(t, <-done, idem.ErrFenced)
	assert.False(t, f.sideWritten(t, "k"))
	rec := f.record(t, "k")
	assert.Equal(t, idem.Token(2), rec.Token)
	assert.Equal(t, idem.StatePending, rec.State)
}

// TestTxRaceStress races commits against takeovers with no choreography:
// in every round exactly one side wins, and the holder's write exists
// exactly when its commit succeeded.
func TestTxRaceStress(t *testing.T) {
	t.Parallel()
	for _, path := range claimPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			testTxRaceStress(t, path.way)
		})
	}
}

func testTxRaceStress(t *testing.T, way claimWay) {
	f := newTxFixture(t)
	useClaimFunc(f.s, way)
	ctx := testCtx(t)
	var commits, takeovers int
	for i := range 40 {
		key := fmt.Sprintf("k%d", i)
		f.claim(t, key, 1, 15*time.Millisecond)
		txctx, commit, rollback, err := f.s.BeginTx(ctx, key, 1)
		require.NoError(t, err)
		f.handler(t, txctx, key)
		time.Sleep(20 * time.Millisecond)

		var (
			wg        sync.WaitGroup
			commitErr error
			tr        idem.BeginResult
			trErr     error
		)
		wg.Add(2)
		go func() { defer wg.Done(); commitErr = commit(idem.StateCompleted, []byte("r")) }()
		go func() {
			defer wg.Done()
			tr, trErr = f.s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(2), Token: 2, Lease: time.Minute, TTL: time.Hour})
		}()
		wg.Wait()
		rollback()
		require.NoError(t, trErr)
		if commitErr != nil {
			require.ErrorIs(t, commitErr, idem.ErrFenced)
		}
		committed := commitErr == nil
		require.NotEqual(t, committed, tr.Acquired, "round %d: exactly one of commit and takeover wins", i)
		require.Equal(t, committed, f.sideWritten(t, key), "round %d: the write exists iff the commit won", i)
		rec := f.record(t, key)
		if committed {
			commits++
			require.Equal(t, idem.StateCompleted, rec.State)
			require.Equal(t, idem.Token(1), rec.Token)
		} else {
			takeovers++
			require.Equal(t, idem.StatePending, rec.State)
			require.Equal(t, idem.Token(2), rec.Token)
		}
	}
	t.Logf("commits won %d rounds, takeovers %d", commits, takeovers)
}

// TestLockedRowsAllocs: a transaction that locks a record's row enters the
// held set, meets heartbeats and leaves, without an allocation once the set
// has its map (a BeginTx above READ COMMITTED, in the common case).
func TestLockedRowsAllocs(t *testing.T) {
	var l lockedRows
	k := holdKey{"u1:op:1", 7}
	end := time.Now()
	n := testing.AllocsPerRun(100, func() {
		l.add(k, 1)
		if !l.has(k) {
			t.Fatal("not held")
		}
		l.extend(k, end)
		if _, ok := l.leaseEnd(k); !ok {
			t.Fatal("no lease end")
		}
		if _, ok, held := l.lookup(k); !ok || !held {
			t.Fatal("not held, or no lease end")
		}
		l.add(k, -1)
	})
	require.Zero(t, n)
	require.False(t, l.has(k))
}

// TestLockedRows: the held set counts the transactions of a key/token, keeps
// the latest lease end of its heartbeats across overlapping ones, and
// forgets the record with the last.
func TestLockedRows(t *testing.T) {
	var l lockedRows
	k, other := holdKey{"k", 1}, holdKey{"k", 2}
	t0 := time.Now()
	l.extend(k, t0) // not held: nothing kept
	_, ok := l.leaseEnd(k)
	require.False(t, ok)
	l.add(k, 1)
	require.True(t, l.has(k))
	require.False(t, l.has(other))
	_, ok = l.leaseEnd(k)
	require.False(t, ok, "no heartbeat yet")
	_, ok, held := l.lookup(k)
	require.True(t, held)
	require.False(t, ok, "no heartbeat yet")
	l.extend(k, t0.Add(time.Second))
	l.extend(k, t0) // earlier: ignored
	end, ok := l.leaseEnd(k)
	require.True(t, ok)
	require.True(t, end.Equal(t0.Add(time.Second)))
	end, ok, held = l.lookup(k)
	require.True(t, held)
	require.True(t, ok)
	require.True(t, end.Equal(t0.Add(time.Second)))
	_, ok, held = l.lookup(other)
	require.False(t, held)
	require.False(t, ok)
	l.add(k, 1) // an overlapping transaction
	l.add(k, -1)
	require.True(t, l.has(k))
	end, ok = l.leaseEnd(k)
	require.True(t, ok)
	require.True(t, end.Equal(t0.Add(time.Second)))
	l.add(k, -1)
	require.False(t, l.has(k))
	_, ok = l.leaseEnd(k)
	require.False(t, ok)
	l.add(k, 1) // a new transaction starts without the old lease end
	_, ok = l.leaseEnd(k)
	require.False(t, ok)
	l.add(k, -1)
	require.Empty(t, l.n)
}

// has reports whether an open transaction locks k's row (the tests' view
// of lookup's held).
// add (tests) counts one more transaction (d = 1) or one fewer (d = -1) locking
// k's row.
func (l *lockedRows) add(k holdKey, d int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.n[k]
	if r.n += d; r.n <= 0 {
		delete(l.n, k)
		return
	}
	if l.n == nil {
		l.n = make(map[holdKey]lockedRow)
	}
	l.n[k] = r
}

func (l *lockedRows) has(k holdKey) bool {
	_, _, held := l.lookup(k)
	return held
}

// TestExtendLockedAllocs: a heartbeat of a record whose row a transaction
// locks (extendLocked) allocates its arguments once, in one struct, and
// reads its answer from the row's raw values: 8 allocations with pgx's own
// (a query on a cancellable context: 4 for its context watch, 3 for the
// rows and their result), where Scan, boxed arguments and the variadic
// slice made 20.
func TestExtendLockedAllocs(t *testing.T) {
	ctx := testCtx(t)
	s := newTestStore(t, Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, ReapInterval: -1}) // no reaper ticks counted
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	_, _, rollback, err := s.BeginTx(ctx, "k", 1)
	require.NoError(t, err)
	defer rollback()
	require.True(t, s.locked.has(holdKey{"k", 1}))
	require.NoError(t, s.ExtendLease(ctx, "k", 1, time.Minute)) // the lease end recorded: $3 is not NULL
	n := testing.AllocsPerRun(20, func() {
		if err := s.ExtendLease(ctx, "k", 1, time.Minute); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, n, 8.0)
}

// TestLockedRowsHolds: TxHoldsLock's view of the held set: held while a
// transaction is counted, its connection is not closed, and no heartbeat
// found the server unreachable since one got through.
func TestLockedRowsHolds(t *testing.T) {
	var l lockedRows
	k := holdKey{"k", 1}
	require.False(t, l.holds(k))
	gone := make(chan struct{})
	l.enter(k, gone)
	require.True(t, l.holds(k))
	require.False(t, l.holds(holdKey{"k", 2}), "another token")
	l.unreach(k) // a heartbeat found the server unreachable
	require.False(t, l.holds(k))
	l.extend(k, time.Now()) // one got through
	require.True(t, l.holds(k))
	l.enter(k, gone) // an overlapping transaction
	_, keep := l.leave(k)
	require.True(t, keep, "the lease the heartbeat granted, for keepLease")
	require.True(t, l.holds(k), "one transaction left")
	l.unreach(k)
	l.enter(k, gone) // a later transaction locked the row: the server answered
	require.True(t, l.holds(k))
	l.unreach(k)
	_, keep = l.leave(k)
	require.False(t, keep, "nothing for keepLease to write on a server just found unreachable")
	close(gone) // the connection closed: the lock went with its backend
	require.False(t, l.holds(k))
	l.add(k, -1)
	require.False(t, l.holds(k))
	require.Empty(t, l.n)
}
