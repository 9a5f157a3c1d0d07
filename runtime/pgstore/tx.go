package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/idem"
)

type txKey struct{}

// Tx returns the transaction BeginTx put into ctx, for a handler to make its
// own writes in it, so that they commit together with the COMPLETED record or
// not at all. The handler must not commit or roll it back itself.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// rollbackTimeout bounds a rollback, which runs even when the request's
// context has ended.
const rollbackTimeout = 5 * time.Second

// BeginTx implements idem.Transactor. It opens a transaction (with
// Options.TxOptions) for the holder of key/token and returns a context
// carrying it (see Tx).
//
// Under READ COMMITTED (PostgreSQL's default) it does not touch the record:
// the lease alone guards it while the handler runs, kept alive by the
// holder's heartbeats (ExtendLease), so duplicates are answered at once
// instead of queueing behind the transaction. commit runs Finish's fenced
// UPDATE inside the transaction and commits. The UPDATE locks the record's
// row until the commit, and a takeover (Begin's UPDATE of a row whose lease
// has run out) locks the same row; PostgreSQL serializes the two, and
// whichever comes second re-checks its condition on the row the first left
// (a Begin that loses reads the row again). So a takeover that won makes
// commit's UPDATE match no row (commit rolls back and returns
// idem.ErrFenced), and a commit that won leaves a COMPLETED or FAILED row the
// takeover cannot claim: the holder's writes and a takeover never both
// commit.
//
// Under REPEATABLE READ or SERIALIZABLE that would not do: the transaction's
// snapshot is fixed by its first statement, and commit's UPDATE of a row that
// another transaction changed after it (the holder's own heartbeat) fails
// with a serialization error. So there the first statement of the
// transaction locks the record's row, fenced (SELECT … FOR NO KEY UPDATE of
// the PENDING row key/token holds; none: idem.ErrFenced, the claim is lost),
// and the snapshot follows every earlier change of it. While the transaction
// is open, ExtendLease for key/token does not write the row, it only reads
// that the row is still locked (the lock proves the holder alive; one whose
// backend was terminated, or whose connection was lost, no longer holds it,
// and its heartbeat gets idem.ErrFenced), and a takeover cannot lock the row,
// so it can never win against the open transaction. The expiry a heartbeat
// grants (the record's expires_at moves to the end of its lease when later,
// see idem.LeaseExtender) it keeps with the transaction: the record counts as
// alive until then, and commit's UPDATE writes it with the state, so a
// holder heartbeating past the window commits and its record outlives the
// commit as outside a transaction (after a rollback, a statement after the
// transaction writes it, so the release that follows finds the record
// alive); one that stopped heartbeating is fenced once the record has
// expired, as outside. A duplicate that
// arrives after the lease has run out is answered in flight at once, as for
// a live lease (409 with Retry-After, or it waits per the policy's
// InFlight.Wait): a takeover never waits for a locked row, so it holds no pool
// connection meanwhile (see the package doc; a claim function installed by an
// older pgstore, until Migrate replaces it, does wait). After a commit a
// duplicate finds the finished record, after a rollback the lease decides as
// usual. The row lock lasts as long as the transaction: a process that dies
// ends it with its connection, one that stalls holds it. The isolation is
// Options.TxOptions.IsoLevel; when that is empty, the connection's
// default_transaction_isolation, which BeginTx reads once per connection,
// before the first transaction it opens there (one round trip, outside any
// transaction); with a BeginQuery, which may set anything, BeginTx locks the
// row under every isolation. So READ COMMITTED keeps the behaviour above at no
// cost but that one read per connection. Set the isolation with
// Options.TxOptions (or the database's, role's or connection's default), not
// with SET TRANSACTION in the handler.
//
// Any other commit error means the transaction was rolled back, except a
// failure of the COMMIT itself (a lost connection), whose outcome is unknown.
//
// commit and the handler's statements use ctx: when it ends first, nothing
// commits. rollback abandons the transaction; after commit it does nothing.
// Call rollback in every case (defer it), or the connection stays taken.
func (s *Store) BeginTx(ctx context.Context, key string, token idem.Token) (context.Context, func(idem.State, []byte) error, func(), error) {
	if err := checkKey(ctx, "begin tx", key); err != nil {
		return nil, nil, nil, err
	}
	c, tx, locked, err := s.beginTx(ctx, key, token)
	if err != nil {
		return nil, nil, nil, err
	}
	t := &openTx{s: s, ctx: ctx, c: c, tx: tx, key: key, token: token, locked: locked}
	return context.WithValue(ctx, txKey{}, tx), t.commit, t.rollback, nil
}

// openTx is a transaction BeginTx opened: its commit and rollback are the
// functions BeginTx returns (one allocation for the state they share, and
// one for each).
type openTx struct {
	s      *Store
	ctx    context.Context
	c      *pgxpool.Conn
	tx     pgx.Tx
	key    string
	token  idem.Token
	locked bool // the transaction locked the record's row (see BeginTx)

	mu        sync.Mutex
	done      bool
	committed bool // the record is finished: nothing left to keep
}

// end ends the transaction (it is rolled back unless committed) and,
// if it locked the record's row, lets ExtendLease touch the row again.
// After a commit there is nothing to roll back: pgx's Rollback of a
// committed transaction sends nothing, but rollbackTx would make its
// timeout context first.
func (t *openTx) end() {
	s := t.s
	if !t.committed {
		_ = rollbackTx(t.ctx, t.tx)
	}
	t.c.Release()
	if t.locked {
		// Out of the set before keepLease's round trip (leave): the
		// transaction has ended, and TxHoldsLock must not say it still
		// holds the lock meanwhile (up to rollbackTimeout). A heartbeat
		// that runs meanwhile writes the row itself (ExtendLease outside
		// a transaction), fenced as keepLease is.
		k := holdKey{t.key, t.token}
		if last, keep := s.locked.leave(k); keep && !t.committed {
			// The heartbeats of the transaction wrote nothing (the row
			// was locked): a rollback leaves the row as BeginTx found it,
			// which may have expired meanwhile, so the release that
			// follows (the engine's Finish) would be fenced and another
			// token could claim a key whose holder was told its lease
			// still ran. Write what they granted, fenced by token and
			// PENDING state (after a commit it matches no row). Not
			// after a heartbeat found the server unreachable (leave):
			// the write would meet it too and hold the request for
			// rollbackTimeout, and a holder cancelled for it
			// (idem.ErrLeaseLost) has seen its lease run out already.
			s.keepLease(t.ctx, t.key, t.token, last)
		}
	}
}

func (t *openTx) rollback() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	t.end()
}

func (t *openTx) commit(state idem.State, response []byte) error {
	if err := checkFinish(t.ctx, t.key, state); err != nil {
		t.rollback()
		return err
	}
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return errors.New("pgstore: commit: the transaction has already ended")
	}
	t.done = true
	t.mu.Unlock()
	err := t.s.finishTx(t.ctx, t.tx, t.key, t.token, state, response, t.locked)
	t.committed = err == nil
	t.end() // after a commit, the rollback does nothing
	return err
}

// finishTx runs commit's fenced UPDATE in tx and commits. When tx locks the
// record's row (locked), the UPDATE also writes what the heartbeats of the
// transaction did not: the end of the last one's lease (see
// queries.finishLocked).
func (s *Store) finishTx(ctx context.Context, tx pgx.Tx, key string, token idem.Token, state idem.State, response []byte, locked bool) error {
	a := newFinishArgs(key, token, state, response, s.typedOn(tx.Conn()))
	var tag pgconn.CommandTag
	var err error
	if locked {
		var last *time.Time
		if end, ok := s.locked.leaseEnd(holdKey{key, token}); ok {
			last = &end
		}
		tag, err = tx.Exec(ctx, s.q.finishLocked, a.args[0], a.args[1], a.args[2], a.args[3], last)
	} else {
		tag, err = tx.Exec(ctx, s.q.finish, a.args[:]...)
	}
	if err != nil {
		return s.misconfigured(ctx, "commit", fmt.Errorf("pgstore: commit: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return idem.ErrFenced
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if err := tx.Commit(ctx); err != nil {
		return s.misconfigured(ctx, "commit", fmt.Errorf("pgstore: commit: %w", err))
	}
	return nil
}

// TxHoldsLock implements idem.TxLockHolder: it reports whether a
// transaction BeginTx opened for key/token locked the record's row (above
// READ COMMITTED, see BeginTx) and is still open, on a connection not
// known to be closed, and no heartbeat of it (ExtendLease) found the server
// unreachable since the last one that got through. It does no I/O. The
// engine then does not cancel the transaction when the holder's heartbeats
// failed until its lease ran out (idem.ErrLeaseLost): a heartbeat that
// cannot get a connection from a starved pool (its Acquire ran out of time
// with every one of the pool's MaxConns connections established and in
// use) no longer rolls back a handler whose work can commit. Any other
// failed heartbeat (a dial that failed or went unanswered, a statement
// that failed or timed out on a connection it got) turns it false: the
// server is unreachable, a handler's statement on the transaction's own
// connection likely hangs too, and the engine cancels the transaction at
// the lease's end as under READ COMMITTED, instead of leaving the handler
// to its request's end or TCP's timeout. A starved pool after that leaves
// it false (it says nothing about the server); a heartbeat that gets
// through makes it true again.
//
// Why no takeover can happen while it reports true. BeginTx's lock
// statement (queries.lock) takes FOR NO KEY UPDATE on the row that is
// PENDING under token, unexpired: from then on the row is this
// transaction's until it ends, and the lock statement found it with the
// holder's token, so no takeover came before. Every way another token
// could get the key writes or locks that row first: a takeover (the claim
// function and queries.claim) locks it with FOR NO KEY UPDATE SKIP LOCKED
// before its UPDATE, and a row it cannot lock is answered in flight, not
// taken; a new key's INSERT … ON CONFLICT DO NOTHING finds the row there
// (never inserted; the reaper cannot have deleted it: its DELETE takes FOR
// UPDATE SKIP LOCKED and skips the row); an older pgstore's claim function
// whose takeover UPDATE waits for the lock re-checks the row once the
// transaction has ended, and finds it final after a commit. The lease and
// the record's expiry do not matter to any of these while the lock is held.
//
// Why a stale true is safe. The lock lasts as long as the transaction on
// the server: a backend terminated, or a connection lost, ends it (rolled
// back) and frees the row, possibly before the client sees its connection
// closed, so a takeover may then win while this still reports true. But
// that transaction can no longer commit (its commit fails: 503, nothing
// kept), so the holder's writes and a takeover's never both commit; the
// holder's heartbeats meanwhile, which read that the lock is still held
// (queries.stillLocked), are fenced once the store is reached, and the
// engine cancels the transaction then (idem.ErrFenced). Under READ
// COMMITTED the row is not locked while the handler runs, a takeover can
// win once the lease ran out, and this reports false: the lease decides,
// as before. False is always safe: the engine then cancels the
// transaction (nothing commits) as the lease ends.
func (s *Store) TxHoldsLock(key string, token idem.Token) bool {
	return s.locked.holds(holdKey{key, token})
}

// txIsolationKey is the key, in a connection's CustomData, of its
// default_transaction_isolation ("read committed", …), which BeginTx reads
// before the first transaction it opens there with an empty IsoLevel.
const txIsolationKey = "github.com/idemgen/idemgen/runtime/pgstore.default_transaction_isolation"

// maxLockAttempts bounds the transactions BeginTx opens to lock the record's
// row: the locking statement fails with a serialization error when the row
// changes (an ExtendLease already under way, a takeover) while it runs.
const maxLockAttempts = 3

// beginTx acquires a connection, opens the transaction of BeginTx on it
// and, when its isolation is above READ COMMITTED, locks the record's row in
// its first statement, reporting whether it did (the pair key/token is then
// in s.locked: see BeginTx). A serialization failure of the lock is tried
// again in a new transaction on the same connection. The caller releases
// the connection after the transaction.
func (s *Store) beginTx(ctx context.Context, key string, token idem.Token) (_ *pgxpool.Conn, _ pgx.Tx, locked bool, err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, false, s.misconfigured(ctx, "begin tx", fmt.Errorf("pgstore: begin tx: %w", err))
	}
	defer func() {
		if err != nil {
			c.Release()
		}
	}()
	locks, err := s.txLocks(ctx, c.Conn())
	if err != nil {
		return nil, nil, false, s.misconfigured(ctx, "begin tx", fmt.Errorf("pgstore: begin tx: %w", err))
	}
	k := holdKey{key, token}
	for attempt := 1; ; attempt++ {
		tx, err := c.BeginTx(ctx, s.opts.TxOptions)
		if err != nil {
			return nil, nil, false, s.misconfigured(ctx, "begin tx", fmt.Errorf("pgstore: begin tx: %w", err))
		}
		if !locks {
			return c, tx, false, nil
		}
		err = s.lockRecord(ctx, tx, key, token)
		if err == nil {
			s.locked.enter(k, c.Conn().PgConn().CleanupDone())
			return c, tx, true, nil
		}
		rerr := rollbackTx(ctx, tx)
		if errors.Is(err, idem.ErrFenced) {
			return nil, nil, false, err
		}
		// After a failed rollback the connection is gone: no retry on it.
		if !isSerializationFailure(err) || attempt == maxLockAttempts || rerr != nil {
			return nil, nil, false, s.misconfigured(ctx, "begin tx", fmt.Errorf("pgstore: begin tx: %w", err))
		}
	}
}

// rollbackTx rolls tx back, also when ctx has ended (within rollbackTimeout).
// keepLease writes, after a transaction that locked the row has ended,
// the end of the lease its heartbeats granted (last, on the database clock)
// into the PENDING row token holds, as extend would have: best effort,
// within rollbackTimeout, outside ctx's cancellation.
func (s *Store) keepLease(ctx context.Context, key string, token idem.Token, last time.Time) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_, _ = retried(func() (struct{}, error) {
		_, err := s.pool.Exec(rctx, s.q.keepLease, key, int64(token), last)
		return struct{}{}, err
	})
}

func rollbackTx(ctx context.Context, tx pgx.Tx) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	return tx.Rollback(rctx)
}

// txLocks reports whether BeginTx locks the record's row in a transaction
// on conn: when its isolation is above READ COMMITTED, or unknown (a
// BeginQuery). With an empty IsoLevel, the isolation is conn's default, read
// (one round trip, outside a transaction) the first time only.
func (s *Store) txLocks(ctx context.Context, conn *pgx.Conn) (bool, error) {
	o := s.opts.TxOptions
	if o.BeginQuery != "" {
		return true, nil // whatever it sets
	}
	if o.IsoLevel != "" {
		return isolationLocks(strings.ToLower(string(o.IsoLevel))), nil
	}
	data := conn.PgConn().CustomData()
	iso, ok := data[txIsolationKey].(string)
	if !ok {
		if err := conn.QueryRow(ctx, `SELECT current_setting('default_transaction_isolation')`).Scan(&iso); err != nil {
			return false, err
		}
		data[txIsolationKey] = iso
	}
	return isolationLocks(iso), nil
}

// isolationLocks reports whether an isolation level (as PostgreSQL spells
// it, in lower case) is above READ COMMITTED; PostgreSQL's READ UNCOMMITTED
// is READ COMMITTED.
func isolationLocks(iso string) bool {
	return iso != "read committed" && iso != "read uncommitted"
}

// lockRecord locks the row of the PENDING record key/token holds, in the
// first statement of tx. No such record: idem.ErrFenced.
func (s *Store) lockRecord(ctx context.Context, tx pgx.Tx, key string, token idem.Token) error {
	var one int32
	err := tx.QueryRow(ctx, s.q.lock, key, int64(token)).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return idem.ErrFenced
	}
	return err
}

// holdKey names a record whose row an open transaction of BeginTx locks.
type holdKey struct {
	key   string
	token idem.Token
}

// lockedRows is a set of records whose rows open transactions of BeginTx
// lock. It counts the transactions of each: two of them for one key/token
// may overlap (a second BeginTx of the holder locks the row once the
// first's transaction has rolled back, before the first has left the set),
// and the end of one must not take the record out of the set. With each it
// keeps the latest end of a lease the holder's heartbeats granted while the
// row was locked (which the heartbeat could not write).
type lockedRows struct {
	mu sync.Mutex
	// n holds the rows by value: a transaction entering the set costs no
	// allocation once the map has room (a pointer per entry did).
	n map[holdKey]lockedRow
}

type lockedRow struct {
	n        int
	leaseEnd time.Time // zero: no heartbeat yet
	// gone is pgconn's CleanupDone of the latest transaction's
	// connection: closed late, only once pgx has noticed the connection
	// dead (a statement on it failed: the backend terminated, the socket
	// reset or timed out) and finished closing it, never merely because
	// the server ended the transaction. A handler that sees that error
	// usually returns, and its rollback takes the row out of the set
	// anyway: this only helps while a handler that saw an error carries on.
	gone <-chan struct{}
	// unreached: a heartbeat failed otherwise than for want of a
	// connection in a starved pool, and none got through since (see
	// Store.extendLocked).
	unreached bool
}

// enter counts one more transaction locking k's row, on the connection
// whose close closes gone (the latest transaction's: an earlier one that
// overlaps it has rolled back).
func (l *lockedRows) enter(k holdKey, gone <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = make(map[holdKey]lockedRow)
	}
	r := l.n[k]
	r.n++
	r.gone = gone
	r.unreached = false // the server answered the lock
	l.n[k] = r
}

// holds reports whether an open transaction locks k's row on a connection
// not known to be closed, whose server answered k's last heartbeat or
// whose last heartbeat failed for want of a connection in a starved pool.
func (l *lockedRows) holds(k holdKey) bool {
	l.mu.Lock()
	r, held := l.n[k]
	l.mu.Unlock()
	if !held || r.unreached {
		return false
	}
	select {
	case <-r.gone: // nil: never
		return false
	default:
		return true
	}
}

// extend records end as the end of the lease of k's last heartbeat, while
// a transaction locks k's row; it never moves it earlier (heartbeats may
// overlap, and the record's expiry never moves earlier). The server
// answered it: k is no longer unreached.
func (l *lockedRows) extend(k holdKey, end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.n[k]; ok {
		if end.After(r.leaseEnd) {
			r.leaseEnd = end
		}
		r.unreached = false
		l.n[k] = r
	}
}

// unreach records that a heartbeat of k failed otherwise than for want of
// a connection in a starved pool (see Store.extendLocked), while a
// transaction locks k's row: k does not hold until a heartbeat gets
// through (extend) or a new transaction locks the row (enter).
func (l *lockedRows) unreach(k holdKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.n[k]; ok && !r.unreached {
		r.unreached = true
		l.n[k] = r
	}
}

// leaseEnd returns the end of the lease of k's last heartbeat while a
// transaction locks k's row; ok is false before the first.
func (l *lockedRows) leaseEnd(k holdKey) (end time.Time, ok bool) {
	end, ok, _ = l.lookup(k)
	return end, ok
}

// leave counts one transaction fewer locking k's row (add(k, -1)) and
// returns, read under the same lock, the end of the lease of k's last
// heartbeat, for keepLease to write after a rollback; keep is false before
// the first, and when a heartbeat failed since for want of the server (see
// lockedRows.unreach).
func (l *lockedRows) leave(k holdKey) (end time.Time, keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.n[k]
	if !ok {
		return time.Time{}, false
	}
	end, keep = r.leaseEnd, !r.leaseEnd.IsZero() && !r.unreached
	if r.n--; r.n <= 0 {
		delete(l.n, k)
	} else {
		l.n[k] = r
	}
	return end, keep
}

// lookup reports, under one lock, whether an open transaction locks k's
// row (held) and, if so, the end of the lease of k's last heartbeat
// meanwhile (ok is false before the first).
func (l *lockedRows) lookup(k holdKey) (end time.Time, ok, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, held := l.n[k]
	return r.leaseEnd, !r.leaseEnd.IsZero(), held
}
