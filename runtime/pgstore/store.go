package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Options configure a Store.
type Options struct {
	// Schema and Table name the records table; empty means DefaultSchema
	// ("public") and DefaultTable ("idem_records"). Table may be at most 48
	// bytes long. Names are quoted, so they are case-sensitive.
	Schema, Table string

	// ReapInterval is how often the background reaper, which New starts
	// and Close stops, deletes expired records, in batches of ReapBatch:
	// zero means DefaultReapInterval, a negative value turns it off (for a
	// store that only reads, or a deployment that calls Reap on its own
	// schedule). Expired records are invisible either way; reaping frees
	// their space, which otherwise grows with every new key. Reapers of
	// several processes on one table are safe together: each statement
	// locks the rows it deletes and skips those another one holds (SKIP
	// LOCKED).
	ReapInterval time.Duration
	// ReapBatch bounds the rows one reaping statement deletes (and locks).
	// Default 1000.
	ReapBatch int
	// ReapTimeout bounds each statement of the background reaper; zero
	// means DefaultReapTimeout. A statement that runs out (a lock it
	// waits for, a connection that went silent) is logged and the reaper
	// tries again at its next tick. An error that will not go away by
	// itself (no DELETE privilege, no table, a read-only server) is
	// logged once, at WARN, and the reaper backs off, doubling its
	// interval up to an hour (or ReapInterval, if longer).
	ReapTimeout time.Duration
	// Logger receives the background reaper's logs and Migrate's
	// warnings; nil means slog.Default().
	Logger *slog.Logger

	// TxOptions are the options of the transactions BeginTx opens. The zero
	// value uses the connection's default isolation level, which decides
	// how a holder whose lease ran out and a duplicate meet: see
	// Store.BeginTx.
	TxOptions pgx.TxOptions
}

// Defaults of the background reaper, for Options left zero.
const (
	// DefaultReapInterval is the reaper's interval when
	// Options.ReapInterval is zero.
	DefaultReapInterval = time.Minute
	// DefaultReapBatch is the reaper's batch size when Options.ReapBatch
	// is zero.
	DefaultReapBatch = 1000
	// DefaultReapTimeout bounds each reaping statement of the background
	// reaper when Options.ReapTimeout is zero.
	DefaultReapTimeout = 30 * time.Second
)

// MaxKeyLen is the longest scope key the store accepts, in bytes; it keeps a
// key well inside a B-tree index entry.
const MaxKeyLen = 2000

// Store is an idem.Store on PostgreSQL. It is safe for concurrent use. It
// implements idem.LeaseExtender, idem.ReadFirst and idem.Transactor.
type Store struct {
	pool *pgxpool.Pool
	n    names
	q    queries
	opts Options
	log  *slog.Logger
	// typed: the pool's connections describe statements, so arguments can be
	// valuers (see typedArgs) where the connection's type map has pgx's
	// codecs for them (see defaultEncodes).
	typed bool
	// claimMode says how Begin claims: with the claim function while it is
	// even, with the claim statement while it is odd (a Begin found the
	// function missing: an older pgstore's schema). A Begin whose call fails
	// moves it from the value it read to the next odd one, and a successful
	// Migrate to the next even one, each with a compare-and-swap: a call
	// that failed before a concurrent Migrate created the function does not
	// undo the Migrate. See Begin.
	claimMode atomic.Uint64
	// probeAt is when a Begin on the claim statement next looks for the
	// claim function (Unix ns; see reprobe), probeEvery the interval
	// (reprobeInterval; tests change it).
	probeAt    atomic.Int64
	probeEvery time.Duration

	// locked are the records whose rows open transactions of BeginTx lock
	// (above READ COMMITTED; see BeginTx): ExtendLease answers for them
	// without touching the row.
	locked lockedRows

	// beforeCommit, set by tests only, runs in a transactional commit between
	// the fenced UPDATE and the COMMIT, while the row lock is held.
	beforeCommit func()

	// reaper is the background reaper, nil when it is off.
	reaper *reaper

	// misAt is when a misconfiguration was last logged (Unix ns; see
	// misconfigured), misEvery how often at most (misconfigLogEvery;
	// tests change it).
	misAt    atomic.Int64
	misEvery time.Duration

	// claims picks the statement that calls the claim function, claimFunc
	// or claimRead, by the recent share of Begins answered from a record
	// (see claimChooser). Every Begin adds to it: it comes last, away from
	// the fields every Begin only reads (claimMode).
	claims claimChooser
}

// misconfigLogEvery is how often at most a Store logs the errors of a
// misconfiguration (see Store.misconfigured).
const misconfigLogEvery = time.Minute

// misconfiguration returns the SQLSTATE of err and the likely fix when err
// will not go away by itself (the setup is wrong: a privilege, a table, a
// database, credentials), "" otherwise. A read-only server (25006) is left
// out: a failover that is under way ends it.
func misconfiguration(err error) (code, fix string) {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return "", ""
	}
	switch {
	case pe.Code == "42501": // insufficient_privilege
		return pe.Code, "grant the store's role the run-time privileges on the records table (Store.Check names the GRANT; docs/runtime.md, \"Privileges\")"
	case pe.Code == "42P01" || pe.Code == "3F000": // undefined_table, invalid_schema_name
		return pe.Code, "create the records table with Migrate or SchemaSQL, or fix Options.Schema/Options.Table"
	case pe.Code == "3D000": // invalid_catalog_name
		return pe.Code, "the database of the connection string does not exist"
	case strings.HasPrefix(pe.Code, "28"): // invalid_authorization_specification
		return pe.Code, "the server refuses the connection's credentials: check the role, its password and pg_hba.conf"
	case strings.HasPrefix(pe.Code, "42"): // syntax_error_or_access_rule_violation
		return pe.Code, "the records table does not have the layout this pgstore expects: run Migrate (as the schema's owner)"
	}
	return "", ""
}

// misconfigured marks err (op's failure) idem.Misconfigured when it will
// not go away by itself (see misconfiguration), and logs it at ERROR,
// naming the SQLSTATE and the likely fix, at most once per
// misconfigLogEvery: the engine answers it 503 as an outage, its event
// carries Event.Misconfigured, and this line says what to change.
func (s *Store) misconfigured(ctx context.Context, op string, err error) error {
	code, fix := misconfiguration(err)
	if code == "" {
		return err
	}
	now := time.Now().UnixNano()
	if at := s.misAt.Load(); (at == 0 || now-at >= int64(s.misEvery)) && s.misAt.CompareAndSwap(at, now) {
		s.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "pgstore: the store is misconfigured, and every request that needs it fails (503) until that is fixed: "+fix+
			" (logged at most once per "+s.misEvery.String()+")",
			slog.String("table", s.n.table), slog.String("op", op), slog.String("sqlstate", code), slog.Any("error", err))
	}
	return idem.Misconfigured(err)
}

var (
	_ idem.Store         = (*Store)(nil)
	_ idem.LeaseExtender = (*Store)(nil)
	_ idem.Transactor    = (*Store)(nil)
	_ idem.TxLockHolder  = (*Store)(nil)
	_ idem.ReadFirst     = (*Store)(nil)
)

type queries struct {
	claim, claimFunc, claimRead, get, finish, finishLocked, extend, keepLease, lock, stillLocked, reap string
}

func newQueries(n names) queries {
	t := n.table
	const cols = `state, fingerprint, token, lease_expires_at, expires_at, response`
	// claimable is Begin's rule, on a row r at the database's now: expired,
	// PENDING with its lease run out, or FAILED without a response (both of
	// these, when $6, with the request's fingerprint $2).
	claimable := func(r string) string {
		return `(` + r + `.expires_at <= clock_timestamp()
        OR (` + r + `.state = 1 AND ` + r + `.lease_expires_at <= clock_timestamp() AND (NOT $6::boolean OR ` + r + `.fingerprint = $2))
        OR (` + r + `.state = 3 AND ` + r + `.response IS NULL AND (NOT $6::boolean OR ` + r + `.fingerprint = $2)))`
	}
	return queries{
		// claim decides Begin in one statement. cur reads the row (if any) in
		// the statement's snapshot, without locking it; it is evaluated once
		// (a CTE referenced several times, or calling a volatile function, is
		// materialized; before PostgreSQL 12 every CTE was). When cur shows a row
		// nobody may claim (a COMPLETED record: a replay; a live lease), the
		// statement returns that row and writes nothing: ins and upd are
		// skipped by their guards. Otherwise ins inserts a new row (when cur
		// saw none) or upd takes over the claimable one. Both are atomic
		// against a racing claim: ON CONFLICT DO NOTHING waits for a
		// concurrent inserter and then inserts nothing; a takeover first
		// locks the row in the CTE locked, without waiting (SKIP LOCKED), and upd, which
		// runs only when the CTE locked got the row, re-checks its WHERE on the row's
		// latest version, so exactly one claim wins. A claim that loses the
		// insert race, or whose locked row is no longer claimable, returns
		// no row at all, and Begin runs the statement again: the winner has
		// committed by then, so the new snapshot shows its row. A claimable
		// row that another transaction holds locked is answered in flight,
		// at once, by the last SELECT: not acquired, a PENDING record with
		// the request's own fingerprint (why: see the package doc). A row
		// the reaper deleted between the read and the lock is answered so
		// too: a retry claims it. RETURNING shows only the new row, so upd
		// carries the state it replaces over in prior_state.
		// A PENDING row that carries the request's own token (cur.own) is
		// this very claim, made by an earlier run of the same Begin: own
		// renews its lease and returns its prior_state (acquired), and
		// neither locked nor upd runs; a row own finds changed (expired,
		// taken over) is a lost race, as for ins and upd.
		//
		// Begin runs it only where the claim function is missing (a schema
		// an older pgstore migrated).
		claim: `WITH cur AS (
    SELECT ` + cols + `, ` + claimable("c") + ` AS claimable,
        (c.state = 1 AND c.token = $3 AND c.expires_at > clock_timestamp()) AS own
    FROM ` + t + ` AS c WHERE c.key = $1
), own AS (
    UPDATE ` + t + ` AS o SET lease_expires_at = clock_timestamp() + $4::interval
    WHERE o.key = $1 AND o.token = $3 AND o.state = 1 AND o.expires_at > clock_timestamp()
        AND EXISTS (SELECT FROM cur WHERE cur.own)
    RETURNING o.prior_state
), locked AS (
    SELECT FROM ` + t + ` AS l WHERE l.key = $1 AND EXISTS (SELECT FROM cur WHERE cur.claimable AND NOT cur.own)
    FOR NO KEY UPDATE SKIP LOCKED
), ins AS (
    INSERT INTO ` + t + ` (key, state, fingerprint, token, lease_expires_at, expires_at, prior_state, response)
    SELECT $1, 1, $2, $3, clock_timestamp() + $4::interval, clock_timestamp() + $5::interval, 0, NULL
    WHERE NOT EXISTS (SELECT FROM cur)
    ON CONFLICT (key) DO NOTHING
    RETURNING prior_state
), upd AS (
    UPDATE ` + t + ` AS r SET
        state = 1,
        fingerprint = $2,
        token = $3,
        lease_expires_at = clock_timestamp() + $4::interval,
        expires_at = clock_timestamp() + $5::interval,
        prior_state = CASE WHEN r.expires_at <= clock_timestamp() THEN 0 ELSE r.state END,
        response = NULL
    WHERE r.key = $1 AND EXISTS (SELECT FROM locked) AND ` + claimable("r") + `
    RETURNING r.prior_state
)
SELECT true, prior_state, NULL::smallint, NULL::bytea, NULL::bigint, NULL::timestamptz, NULL::timestamptz, NULL::bytea FROM ins
UNION ALL
SELECT true, prior_state, NULL, NULL, NULL, NULL, NULL, NULL FROM upd
UNION ALL
SELECT true, prior_state, NULL, NULL, NULL, NULL, NULL, NULL FROM own
UNION ALL
SELECT false, 0, ` + cols + ` FROM cur WHERE NOT cur.claimable AND NOT cur.own
UNION ALL
SELECT false, 0, 1::smallint, $2, token, lease_expires_at, expires_at, NULL::bytea
    FROM cur WHERE cur.claimable AND NOT cur.own AND NOT EXISTS (SELECT FROM locked)`,
		// claimFunc calls the claim function (claimFuncSQL), which does
		// what claim does, statement by statement in one plpgsql function,
		// and costs the server less. It reads the row; a new key is inserted (ON
		// CONFLICT DO NOTHING), a claimable row locked without waiting (a
		// locked one answered in flight, as in claim) and taken over by an
		// UPDATE that re-checks claimable on the row's latest version, and
		// an unclaimable one returned, neither written nor locked. Being
		// VOLATILE, each statement in it takes a fresh snapshot under READ
		// COMMITTED, so an INSERT or UPDATE that lost its race to a claim
		// that committed after the read gives up, as in claim. Its one row
		// has claim's columns and types; a lost race, which claim answers
		// with no row, is a row whose acquired is NULL. The casts pin the
		// argument types for every QueryExecMode (the simple protocol sends
		// untyped literals).
		claimFunc: `SELECT * FROM ` + n.claim + `($1::text, $2::bytea, $3::bigint, $4::interval, $5::interval, $6::boolean)`,
		// claimRead calls the claim function too, after reading the row
		// itself. A call of the function costs the server twice the CPU of a
		// plain SELECT of the row, 37 µs against 18 (the backend's run time,
		// PostgreSQL 15: plpgsql's per-call setup, its SELECT run through SPI
		// with an executor of its own, the result row's descriptor built from
		// pg_proc twice, a FunctionScan's tuplestore). claimRead's first
		// branch returns an unexpired record nobody may claim and that is not
		// this claim's own (a final one, COMPLETED or FAILED with a response;
		// or a PENDING one of another token whose lease runs), which the
		// function would answer just so, acquired false, prior 0 and the row,
		// and LIMIT 1 then never runs the function (an Append runs its
		// children in order, and a Limit that has its row reads no more): a
		// replay costs 24 µs. Any other row, or none, is the function's to
		// decide, exactly as claimFunc does (TestClaimStatementsAnswerAsFunction),
		// and pays for the read that found nothing to answer: a new key some
		// 7 µs of server CPU more than claimFunc (64 µs against 57). Begin
		// therefore picks between the two by the recent share of its
		// answers (see claimChooser). The function is called in a
		// sub-select's target list, not FROM: no FunctionScan to set up for
		// the replay that skips it. OFFSET 0 keeps the sub-select apart, so
		// the function runs once, not once for each of its eight columns.
		claimRead: `SELECT false AS acquired, 0 AS prior, c.` + strings.ReplaceAll(cols, `, `, `, c.`) + ` FROM ` + t + ` AS c
    WHERE c.key = $1::text AND c.expires_at > clock_timestamp()
        AND (c.state = 2 OR (c.state = 3 AND c.response IS NOT NULL)
            OR (c.state = 1 AND c.token <> $3::bigint AND c.lease_expires_at > clock_timestamp()))
UNION ALL
SELECT (f.r).* FROM (SELECT ` + n.claim + `($1::text, $2::bytea, $3::bigint, $4::interval, $5::interval, $6::boolean) AS r OFFSET 0) AS f
LIMIT 1`,
		get: `SELECT ` + cols + ` FROM ` + t + ` WHERE key = $1 AND expires_at > clock_timestamp()`,
		// A final row that already holds state and response under the
		// token (a re-run of the Finish that wrote it) matches too: the
		// idem.Store contract has it succeed.
		finish: `UPDATE ` + t + ` SET state = $3, response = $4 WHERE key = $1 AND token = $2 AND expires_at > clock_timestamp()
    AND (state = 1 OR (state = $3 AND response IS NOT DISTINCT FROM $4))`,
		// finishLocked is finish for commit when BeginTx locked the row:
		// the holder's heartbeats meanwhile wrote nothing (see stillLocked),
		// so $5, the end of the last one's lease (NULL: none), stands for
		// what they would have written. The record is alive, and is kept,
		// as extend would have left it: expires_at moves to $5 when later,
		// the lease to $5. The row lock kept any takeover out, and token $2
		// fences all the same.
		finishLocked: `UPDATE ` + t + ` SET state = $3, response = $4,
        expires_at = GREATEST(expires_at, $5::timestamptz), lease_expires_at = COALESCE($5::timestamptz, lease_expires_at)
    WHERE key = $1 AND token = $2 AND GREATEST(expires_at, $5::timestamptz) > clock_timestamp()
    AND (state = 1 OR (state = $3 AND response IS NOT DISTINCT FROM $4))`,
		// extend also moves expires_at to the lease's end when that is
		// later (GREATEST of the new lease_expires_at, which the SET
		// list's expressions do not see, so computed once in a sub-select):
		// a record whose holder heartbeats never expires under it.
		extend: `UPDATE ` + t + ` AS r SET lease_expires_at = n.lease, expires_at = GREATEST(r.expires_at, n.lease)
    FROM (SELECT clock_timestamp() + $3::interval AS lease) AS n
    WHERE r.key = $1 AND r.token = $2 AND r.state = 1 AND r.expires_at > clock_timestamp()`,
		// keepLease writes what the heartbeats of a transaction that locked
		// the row granted (the end of the last one's lease, $3) once the
		// transaction has ended without a commit: as extend would have,
		// fenced by token and PENDING state (see BeginTx).
		keepLease: `UPDATE ` + t + ` SET lease_expires_at = GREATEST(lease_expires_at, $3::timestamptz),
        expires_at = GREATEST(expires_at, $3::timestamptz)
    WHERE key = $1 AND token = $2 AND state = 1`,
		// lock is BeginTx's first statement above READ COMMITTED: it locks
		// the PENDING row token $2 holds. FOR NO KEY UPDATE is the lock
		// finish's UPDATE takes (it changes no key), and lets foreign keys
		// to the table be checked meanwhile.
		lock: `SELECT 1 FROM ` + t + ` WHERE key = $1 AND token = $2 AND state = 1 AND expires_at > clock_timestamp() FOR NO KEY UPDATE`,
		// stillLocked answers a heartbeat while lock's transaction is open:
		// whether the PENDING row token $2 holds is still locked. It tries
		// the row's lock without waiting: the holder's lock makes it skip
		// the row, and nothing is written; a lock gone with its transaction
		// (the backend terminated, the connection lost) it takes, for this
		// statement only. The row is alive as extend would have kept it:
		// its expires_at, or $3, the end of the lease of the transaction's
		// last heartbeat (NULL: none), when later. Its second column is the
		// end of the lease $4 this heartbeat grants, which commit writes
		// (finishLocked).
		stillLocked: `SELECT count(*) = 1 AND NOT EXISTS (SELECT FROM ` + t + ` AS l WHERE l.key = $1 AND l.token = $2 AND l.state = 1 FOR NO KEY UPDATE SKIP LOCKED),
        clock_timestamp() + $4::interval
    FROM ` + t + ` WHERE key = $1 AND token = $2 AND state = 1 AND GREATEST(expires_at, $3::timestamptz) > clock_timestamp()`,
		// reap bounds its scan with statement_timestamp(), not
		// clock_timestamp(): the planner can use only a stable expression as
		// an index bound, so with clock_timestamp() the index on expires_at
		// only orders the rows and a tick that finds fewer than $1 expired
		// reads every live row (TestReapPlanUsesIndexBound). A row that
		// expires while the statement runs waits for the next one. The lock
		// re-checks the condition on a row's latest version, so a row taken
		// over meanwhile (a later expires_at) is not deleted.
		reap: `WITH doomed AS (
    SELECT key FROM ` + t + ` WHERE expires_at <= statement_timestamp()
    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
DELETE FROM ` + t + ` AS r USING doomed WHERE r.key = doomed.key`,
	}
}

// New returns a Store keeping its records in the table opts names. New makes
// no request; create the table with Migrate (or SchemaSQL) first. Unless
// Options.ReapInterval is negative it starts the background reaper, which
// Close stops: call Close when done with the Store (a Store left unclosed
// stops its reaper only when the garbage collector finds it unreachable,
// which it never is while a hook of the pool refers to it; see Close). The
// pool stays the caller's: Close does not close it.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	n, err := newNames(opts)
	if err != nil {
		return nil, err
	}
	if opts.ReapBatch < 0 || opts.ReapTimeout < 0 {
		return nil, errors.New("pgstore: negative ReapBatch or ReapTimeout")
	}
	if opts.ReapInterval == 0 {
		opts.ReapInterval = DefaultReapInterval
	}
	if opts.ReapBatch == 0 {
		opts.ReapBatch = DefaultReapBatch
	}
	if opts.ReapTimeout == 0 {
		opts.ReapTimeout = DefaultReapTimeout
	}
	s := &Store{pool: pool, n: n, q: newQueries(n), opts: opts, log: opts.Logger, probeEvery: reprobeInterval, misEvery: misconfigLogEvery,
		typed: typedArgs(pool.Config().ConnConfig.DefaultQueryExecMode)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.ReapInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.reaper = &reaper{pool: pool, query: s.q.reap, table: n.table, interval: opts.ReapInterval,
			batch: opts.ReapBatch, timeout: opts.ReapTimeout, log: s.log, ctx: ctx, cancel: cancel, done: make(chan struct{})}
		go s.reaper.run()
		// The goroutine holds the reaper, not the Store: a Store that
		// becomes unreachable without Close stops its reaper when the
		// garbage collector finds it.
		runtime.AddCleanup(s, func(r *reaper) { r.cancel() }, s.reaper)
	}
	return s, nil
}

// Close stops the background reaper, waiting for a running batch to end. It
// does not close the pool. The reaper also stops by itself once the pool is
// closed, or once the Store is unreachable and the garbage collector finds
// it, but only Close stops it at once. Whatever the pool holds keeps the
// Store reachable as long as the pool is: a tracer (ConnConfig.Tracer), an
// AfterConnect or another hook of the pool's config that refers to the Store
// means the garbage collector never finds it, and its reaper runs until
// Close or the pool's Close.
func (s *Store) Close() error {
	if s.reaper != nil {
		s.reaper.cancel()
		<-s.reaper.done
	}
	return nil
}

// checkKey refuses a call before any request: an ended context (so the call
// changes nothing) or a key PostgreSQL's text type cannot hold.
func checkKey(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	switch {
	case key == "":
		return fmt.Errorf("pgstore: %s: empty key", op)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("pgstore: %s: key of %d bytes is longer than %d", op, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("pgstore: %s: key is not valid UTF-8", op)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("pgstore: %s: key contains a NUL byte", op)
	}
	return nil
}

func fillRecord(rec *idem.Record, state int16, fp []byte, tok int64) error {
	if len(fp) != len(rec.Fingerprint) {
		return fmt.Errorf("pgstore: stored fingerprint has %d bytes, want %d", len(fp), len(rec.Fingerprint))
	}
	copy(rec.Fingerprint[:], fp)
	rec.State = idem.State(state)
	rec.Token = idem.Token(uint64(tok))
	return nil
}

// maxStatementAttempts bounds the runs of the statement of one Store call
// (Begin's claim, and the statements of Finish, ExtendLease and Reap). One
// is run again only after losing to other writes: a claim after losing a
// race to a claim that has committed since, so that a second attempt
// nearly always decides; any of them after a serialization failure
// (SQLSTATE 40001, above READ COMMITTED: a row it writes or locks changed
// after the statement's snapshot was taken), so only while other
// transactions keep changing those rows. (Begin also claims again, with the
// claim statement, when the claim function turns out unusable.)
const maxStatementAttempts = 10

// Begin implements idem.Store with one round trip, a call of the claim
// function (see queries.claimFunc), or a read of the row that calls the
// function only when the row is not an answer by itself (queries.claimRead),
// whichever costs the server less for the recent mix of new keys and
// replays (see claimChooser); a Begin that loses a race to a concurrent
// claim of the same key calls it again to read the winner's record.
//
// On a schema migrated by an older pgstore, or from an older SchemaSQL, the
// function does not exist: the call fails with SQLSTATE 42883
// (or 42501, a role that may not execute it), and the Store switches to the
// claim statement (queries.claim, same semantics, a little slower) and runs
// it at once, logging one warning to Options.Logger that names the function
// and what brings it back (the GRANT EXECUTE the role lacks, or a Migrate);
// it logs again only after it has found the function and lost it again. It keeps the statement until a Migrate of its own finds or
// creates the function, or until it finds the function there when it looks
// again: one Begin a minute first runs one catalog query (another process's
// Migrate, or a DBA's migration, may have created it). Both ways
// of claiming take the same row locks and
// re-check the same conditions, so processes of either kind (a rolling
// deploy) claim the same keys correctly together.
//
// An error after which the claim certainly was not made is marked
// idem.ErrNothingDone (see nothingDone), so that the engine does not
// release a claim that cannot exist.
func (s *Store) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if err := checkKey(ctx, "begin", req.Key); err != nil {
		return idem.BeginResult{}, idem.NothingDone(err)
	}
	if req.Lease <= 0 || req.TTL <= 0 {
		return idem.BeginResult{}, idem.NothingDone(fmt.Errorf("pgstore: begin: lease (%v) and TTL (%v) must be positive", req.Lease, req.TTL))
	}
	var last error // why the last attempt was run again
	for range maxStatementAttempts {
		if !s.usesClaimFunc() {
			s.reprobe(ctx)
		}
		mode := s.claimMode.Load()
		fn := claimFuncMode(mode)
		q := s.q.claim
		if fn {
			q = s.q.claimFunc
			if s.claims.read() {
				q = s.q.claimRead
			}
		}
		res, err := s.begin(ctx, req, q)
		if errors.Is(err, errLostRace) || isSerializationFailure(err) {
			last = err
			continue
		}
		if fn && claimFuncUnusable(err) {
			last = err
			if s.claimFuncMissing(mode) {
				s.warnClaimFuncMissing(ctx, err)
			}
			continue
		}
		if err != nil {
			err = s.misconfigured(ctx, "begin", fmt.Errorf("pgstore: begin: %w", err))
			if nothingDone(err) {
				err = idem.NothingDone(err)
			}
			return idem.BeginResult{}, err
		}
		if fn { // the chooser picks between the function's statements only
			s.claims.count(!res.Acquired)
		}
		return res, nil
	}
	// Every attempt was answered, and claimed nothing.
	return idem.BeginResult{}, idem.NothingDone(fmt.Errorf("pgstore: begin: %d attempts: %w", maxStatementAttempts, last))
}

// errNotSent marks the error of a Begin attempt that sent nothing: the
// pool's Acquire failed (a connect error, no connection free before the
// context ended, a closed pool).
type errNotSent struct{ error }

func (e errNotSent) Unwrap() error { return e.error }

// nothingDone reports whether err, the error of the last attempt of a
// Begin (the attempts before it were answered, and claimed nothing),
// certainly claimed nothing: the attempt sent nothing (errNotSent, or an
// error pgx reports as occurring before anything was sent:
// pgconn.SafeToRetry; a context done before the query was sent is one),
// or the server answered it with an error of severity ERROR (the claim
// is one statement, in a transaction of its own, which rolled back).
// A connection lost, or a read that timed out or was cancelled, after the
// statement was sent is not (the server may have committed the claim),
// nor is a FATAL or PANIC (reported, in the extended protocol, possibly
// after the statement's result), nor an ERROR of SQLSTATE class 08
// (connection exception): a pooler in front of PostgreSQL answers one when
// its server connection failed, possibly after it forwarded the statement
// (PgBouncer's "server conn crashed?", 08P01).
func nothingDone(err error) bool {
	if errors.As(err, new(errNotSent)) || pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return sev == "ERROR" && !strings.HasPrefix(pe.Code, "08")
}

// begin runs q, a claim statement (claimFunc, claimRead or claim), once.
func (s *Store) begin(ctx context.Context, req *idem.BeginRequest, q string) (idem.BeginResult, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return idem.BeginResult{}, errNotSent{err}
	}
	defer c.Release()
	a := newClaimArgs(req, s.typedOn(c.Conn()))
	rows, _ := c.Conn().Query(ctx, q, a.args[:]...)
	var res idem.BeginResult
	found := rows.Next()
	if found {
		// The function's lost race: acquired is NULL (in any format).
		if v := rows.RawValues(); len(v) > 0 && v[0] == nil {
			found = false
		} else {
			res, err = readClaim(rows)
		}
	}
	rows.Close()
	if rerr := rows.Err(); rerr != nil {
		return idem.BeginResult{}, rerr
	}
	if err != nil {
		return idem.BeginResult{}, err
	}
	if !found {
		return idem.BeginResult{}, errLostRace
	}
	return res, nil
}

// readClaim reads the claim statement's row.
func readClaim(rows pgx.Rows) (idem.BeginResult, error) {
	loc, ok := fastRow(rows, claimOIDs)
	if !ok {
		return scanClaim(rows)
	}
	v := rows.RawValues()
	if len(v) != len(claimOIDs) || len(v[0]) != 1 || len(v[1]) != 4 {
		return idem.BeginResult{}, errRecordColumns
	}
	if v[0][0] != 0 {
		return idem.BeginResult{Acquired: true, Prior: idem.State(int32(binary.BigEndian.Uint32(v[1])))}, nil
	}
	if v[2] == nil || v[3] == nil || v[4] == nil || v[5] == nil || v[6] == nil {
		return idem.BeginResult{}, errors.New("pgstore: claim returned an incomplete record")
	}
	var res idem.BeginResult
	err := readRecord(&res.Record, v[2:], loc)
	return res, err
}

// scanClaim reads the claim statement's row with Scan: the fallback of
// readClaim.
func scanClaim(rows pgx.Rows) (idem.BeginResult, error) {
	var (
		res   idem.BeginResult
		prior int16
		state *int16
		fp    []byte
		tok   *int64
		lease *time.Time
		exp   *time.Time
	)
	if err := rows.Scan(&res.Acquired, &prior, &state, &fp, &tok, &lease, &exp, &res.Record.Response); err != nil {
		return idem.BeginResult{}, err
	}
	if res.Acquired {
		return idem.BeginResult{Acquired: true, Prior: idem.State(prior)}, nil
	}
	if state == nil || tok == nil || lease == nil || exp == nil {
		return idem.BeginResult{}, errors.New("pgstore: claim returned an incomplete record")
	}
	res.Record.LeaseExpiresAt, res.Record.ExpiresAt = *lease, *exp
	return res, fillRecord(&res.Record, *state, fp, *tok)
}

// usesClaimFunc reports whether Begin calls the claim function (rather
// than running the claim statement).
func (s *Store) usesClaimFunc() bool { return claimFuncMode(s.claimMode.Load()) }

// claimFuncMode reports whether Begin calls the claim function in claimMode
// mode (see Store.claimMode).
func claimFuncMode(mode uint64) bool { return mode%2 == 0 }

// claimChooser picks, for each Begin that calls the claim function, one of
// the two statements that do: claimRead, which answers a record nobody may
// claim (a replay, a duplicate of a request in flight) from its own read of
// the row, for about a third less server CPU than claimFunc, but costs a
// claim the function decides (a new key, a takeover) a read more than
// claimFunc does. Which is cheaper depends on the share of Begins answered
// from a record (not acquired): claimChooser estimates it, over epochs of
// claimEpoch Begins, and picks claimRead while it is above the break-even.
//
// It is one word, lock-free: bits 0-30 count the answered Begins of the
// current epoch, bits 32-62 all its Begins, and bit 63 says Begin runs
// claimRead. A Begin reads the word to pick (read: an atomic load, a plain
// load on amd64 and arm64) and adds itself to it once it has its answer
// (count: one atomic add; a Begin that fails adds nothing). The one Begin
// whose add completes the epoch decides for the next epoch and stores the
// word anew with its counts zeroed; the adds of Begins that finish between
// that add and that store are lost to the estimate, nothing else.
//
// The break-even comes from the backend's CPU per Begin (schedstat,
// PostgreSQL 15, one connection over pgx, the two statements alternated in
// one process, medians of 20 to 30 rounds; the machine's load was about 20
// on 2 cores, which inflates every number). With a share x of replays,
// claimRead is cheaper when x·R1 + (1-x)·N1 < x·R0 + (1-x)·N0 (R a replay,
// N a new key; 0 claimFunc, 1 claimRead), that is above
// x = (N1-N0) / ((N1-N0) + (R0-R1)):
//
//	replay R0 → R1 (µs)      new key N0 → N1 (µs)     break-even
//	34.8 → 23.6 (p=0.002)    62.4 → 69.9 (p=0.006)    7.5 / 18.7 = 0.40
//	58.5 → 37.9 (p=0.000)    72.4 → 79.9 (p=0.002)    7.4 / 28.0 = 0.26
//	37   → 24                57   → 64                7 / 20 = 0.35 (an earlier run)
//
// (each row's replays and new keys are runs a minute or two apart). In
// relative terms the runs agree better: a replay some 35% cheaper, a new
// key 10-12% dearer, a new key 1.2 to 1.8 times a replay under claimFunc:
// 0.27 to 0.36, about a third. A duplicate in flight costs as a
// replay does, a takeover as a new key does. The hysteresis around it
// (claimRead from 45% of an epoch, claimFunc again from 25%) brackets the
// runs' break-evens and keeps a workload near them from switching at every
// epoch on the sampling noise of 256 Begins (a standard deviation of 0.03);
// between the two thresholds the statements cost the same to within a few
// µs a Begin (2 µs by the earlier run's numbers).
type claimChooser struct{ w atomic.Uint64 }

const (
	// claimEpoch is how many Begins an estimate counts.
	claimEpoch = 256
	// claimReadOn and claimReadOff are the answered Begins of an epoch from
	// which Begin switches to claimRead, and up to which it switches back
	// to claimFunc (see claimChooser).
	claimReadOn  = claimEpoch * 45 / 100
	claimReadOff = claimEpoch * 25 / 100

	chooseAnswered = 1       // one answered Begin
	chooseBegin    = 1 << 32 // one Begin
	chooseCount    = 1<<31 - 1
	chooseRead     = 1 << 63 // Begin runs claimRead
)

// read reports whether Begin runs claimRead (rather than claimFunc).
func (c *claimChooser) read() bool { return c.w.Load()&chooseRead != 0 }

// count adds a Begin to the estimate, answered from a record (not acquired)
// or not, and at the end of an epoch picks the statement for the next one.
func (c *claimChooser) count(answered bool) {
	d := uint64(chooseBegin)
	if answered {
		d |= chooseAnswered
	}
	w := c.w.Add(d)
	if w>>32&chooseCount != claimEpoch {
		return
	}
	read := w & chooseRead
	switch n := w & chooseCount; {
	case n >= claimReadOn:
		read = chooseRead
	case n <= claimReadOff:
		read = 0
	}
	c.w.Store(read)
}

// claimFuncMissing makes Begin run the claim statement after a call of the
// claim function failed in claimMode mode (even): unless a Migrate has moved
// claimMode on since. It reports whether it switched (one caller of
// concurrent ones failing in mode does): that one warns.
func (s *Store) claimFuncMissing(mode uint64) bool {
	if s.claimMode.CompareAndSwap(mode, mode+1) {
		s.probeLater()
		return true
	}
	return false
}

// warnClaimFuncMissing logs the switch to the claim statement that err, a
// call of the claim function that claimFuncUnusable accepts, caused: once
// per switch (the recovery is logged at INFO by reprobe, and a Store that
// fell back switches again only after that), naming the function and what
// brings it back: the GRANT EXECUTE a role that may not execute it lacks
// (42501), or a Migrate (42883: a schema an older pgstore made).
func (s *Store) warnClaimFuncMissing(ctx context.Context, err error) {
	fn := s.n.claim + claimFuncArgs
	fix := "the function does not exist (a schema an older pgstore made): run Migrate as the schema's owner, or SchemaSQL"
	if isInsufficientPrivilege(err) {
		role := "<role>"
		if r, rerr := currentRole(ctx, s.pool); rerr == nil {
			role = r
		}
		fix = "the role may not execute it: GRANT EXECUTE ON FUNCTION " + fn + " TO " + role
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "pgstore: cannot call the claim function; Begin runs the claim statement, which costs the server more, and looks for the function again once a minute ("+fix+")",
		slog.String("function", fn), slog.Any("error", err))
}

// reprobeInterval is how often a Store that claims with the statement looks
// for the claim function (see reprobe).
const reprobeInterval = time.Minute

// probeLater puts the next look for the claim function an interval away.
func (s *Store) probeLater() { s.probeAt.Store(time.Now().UnixNano() + int64(s.probeEvery)) }

// reprobe, called by a Begin that runs the claim statement, looks for the
// claim function, once an interval: the first Begin past probeAt runs one
// catalog query before it claims (a compare-and-swap of probeAt elects it).
// Another process's Migrate, or a DBA's migration, may have created the
// function since this Store fell back. When the function is there with this
// package's body and the role may execute it, Begin calls it from then on
// (this one too), unless claimMode moved meanwhile (a Migrate of this Store
// decided already). A failed look changes nothing: the statement works all
// the same.
func (s *Store) reprobe(ctx context.Context) {
	at := s.probeAt.Load()
	now := time.Now().UnixNano()
	if now < at || !s.probeAt.CompareAndSwap(at, now+int64(s.probeEvery)) {
		return
	}
	mode := s.claimMode.Load()
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT prosrc = $2 AND has_function_privilege(oid, 'EXECUTE')
    FROM pg_proc WHERE oid = to_regprocedure($1)), false)`, s.n.claim+claimFuncArgs, claimFuncBody(s.n)).Scan(&ok)
	if err == nil && ok && !claimFuncMode(mode) && s.claimMode.CompareAndSwap(mode, mode+1) {
		s.log.LogAttrs(ctx, slog.LevelInfo, "pgstore: found the claim function; Begin calls it again",
			slog.String("function", s.n.claim))
	}
}

// claimFuncAbsent makes Begin run the claim statement (Migrate could not
// create the function): claimMode moves to the next odd value, also from an
// odd one, so that no concurrent Begin's failure moves it back.
func (s *Store) claimFuncAbsent() {
	for {
		m := s.claimMode.Load()
		if s.claimMode.CompareAndSwap(m, m+1+m%2) {
			s.probeLater()
			return
		}
	}
}

// claimFuncFound makes Begin call the claim function (Migrate has created
// it): claimMode moves to the next even value, also from an even one, so
// that a call that failed before cannot move it to the statement.
func (s *Store) claimFuncFound() {
	for {
		m := s.claimMode.Load()
		if s.claimMode.CompareAndSwap(m, m+2-m%2) {
			return
		}
	}
}

// claimFuncUnusable reports an error of a call of the claim function that
// the claim statement may not meet: the function does not exist
// (undefined_function, 42883: an older pgstore's schema), or the role may not
// execute it (insufficient_privilege, 42501: e.g. EXECUTE revoked from
// PUBLIC by default privileges, while the table's privileges were granted).
// Only an error of the call itself counts, not one raised within the
// function's body (a trigger calling a missing function, a privilege on the
// table), which carries the body's context in Where and which the statement
// would meet as well: that one is Begin's error, and the Store keeps the
// function.
func claimFuncUnusable(err error) bool {
	if err == nil { // before pe, which escapes: no allocation on success
		return false
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42883" || pe.Code == "42501") && pe.Where == "" && pe.InternalQuery == ""
}

// isSerializationFailure reports a serialization failure (SQLSTATE 40001),
// which READ COMMITTED never raises but a database whose default isolation is
// REPEATABLE READ or SERIALIZABLE does when a claim meets a concurrent one.
func isSerializationFailure(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40001"
}

// Finish implements idem.Store: one fenced UPDATE. On a database whose
// default isolation is REPEATABLE READ or SERIALIZABLE the UPDATE fails with
// a serialization error when the row changed after its snapshot (the
// holder's own heartbeat, a takeover); the failed statement wrote nothing,
// and Finish runs it again, with a fresh snapshot, which decides as under
// READ COMMITTED: finished, or idem.ErrFenced.
func (s *Store) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	if err := checkFinish(ctx, key, state); err != nil {
		return err
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.misconfigured(ctx, "finish", fmt.Errorf("pgstore: finish: %w", err))
	}
	defer c.Release()
	a := newFinishArgs(key, token, state, response, s.typedOn(c.Conn()))
	tag, err := retried(func() (pgconn.CommandTag, error) {
		return c.Conn().Exec(ctx, s.q.finish, a.args[:]...)
	})
	if err != nil {
		return s.misconfigured(ctx, "finish", fmt.Errorf("pgstore: finish: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return idem.ErrFenced
	}
	return nil
}

// retried runs run, a statement in a transaction of its own, until it
// succeeds, fails otherwise than with a serialization failure, or has run
// maxStatementAttempts times.
func retried[T any](run func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := run()
		if !isSerializationFailure(err) || attempt == maxStatementAttempts {
			return v, err
		}
	}
}

func checkFinish(ctx context.Context, key string, state idem.State) error {
	if err := checkKey(ctx, "finish", key); err != nil {
		return err
	}
	if state != idem.StateCompleted && state != idem.StateFailed {
		return fmt.Errorf("pgstore: finish: state %v is not COMPLETED or FAILED", state)
	}
	return nil
}

// Get implements idem.Store: one SELECT that ignores expired rows.
func (s *Store) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := checkKey(ctx, "get", key); err != nil {
		return idem.Record{}, false, err
	}
	rec, found, err := s.get(ctx, key)
	if err != nil {
		return idem.Record{}, false, s.misconfigured(ctx, "get", fmt.Errorf("pgstore: get: %w", err))
	}
	return rec, found, nil
}

// ReadFirst implements idem.ReadFirst: Get is a plain SELECT by primary
// key, which costs the server less than the claim function Begin calls.
func (*Store) ReadFirst() {}

func (s *Store) get(ctx context.Context, key string) (idem.Record, bool, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return idem.Record{}, false, err
	}
	defer c.Release()
	a := &getArgs{key: key}
	a.args[0] = a.key
	if s.typedOn(c.Conn()) {
		a.args[0] = keyArg{&a.key}
	}
	rows, _ := c.Conn().Query(ctx, s.q.get, a.args[:]...)
	var rec idem.Record
	found := rows.Next()
	if found {
		if loc, ok := fastRow(rows, recordOIDs); ok {
			err = readRecord(&rec, rows.RawValues(), loc)
		} else {
			rec, err = scanRecordRow(rows)
		}
	}
	rows.Close()
	if rerr := rows.Err(); rerr != nil {
		return idem.Record{}, false, rerr
	}
	if err != nil {
		return idem.Record{}, false, err
	}
	return rec, found, nil
}

// ExtendLease implements idem.LeaseExtender: the lease of the PENDING record
// held by token now runs out lease from now on the database clock, and the
// record's expires_at moves to the lease's end when that is later. It returns
// idem.ErrFenced when token no longer holds the record. While a transaction
// of BeginTx above READ COMMITTED is open for key/token, it does not write
// the row: the transaction locks it, which keeps any takeover out until it
// ends (see BeginTx). It only reads that the row is still locked; a lock
// gone with the transaction's backend (terminated, its connection lost),
// which the commit cannot outlive, is idem.ErrFenced; a failure tells
// TxHoldsLock whether the server was unreachable (see extendLocked). Above
// READ COMMITTED,
// a statement that fails with a serialization error (the row changed after
// its snapshot: the holder's Finish or commit, a takeover) is run again, as
// in Finish.
func (s *Store) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if err := checkKey(ctx, "extend lease", key); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("pgstore: extend lease: lease (%v) must be positive", lease)
	}
	k := holdKey{key, token}
	if end, ok, held := s.locked.lookup(k); held {
		return s.extendLocked(ctx, k, lease, end, ok)
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.misconfigured(ctx, "extend lease", fmt.Errorf("pgstore: extend lease: %w", err))
	}
	defer c.Release()
	a := newExtendArgs(key, token, lease, s.typedOn(c.Conn()))
	tag, err := retried(func() (pgconn.CommandTag, error) {
		return c.Conn().Exec(ctx, s.q.extend, a.args[:]...)
	})
	if err != nil {
		return s.misconfigured(ctx, "extend lease", fmt.Errorf("pgstore: extend lease: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return idem.ErrFenced
	}
	return nil
}

// extendLocked is ExtendLease for a record whose row a transaction of
// BeginTx locks. It keeps the end of the lease it grants (on the database
// clock) with the transaction, for commit to write (see
// queries.finishLocked), and counts the record alive until the end of the
// last such lease, as if it had been written: lastEnd, when hasLast (none
// before the first heartbeat), which ExtendLease read in the same look at
// s.locked that found the row locked. The lock of s.locked is not held over
// the round trip: the lease end it grants is recorded after it.
//
// A heartbeat that fails tells TxHoldsLock whether the transaction may
// still be counted on (see Store.TxHoldsLock). One that got no connection
// because the pool was starved (its Acquire ran out of time with every one
// of the pool's MaxConns connections in use, none being dialled) says
// nothing about the server: the row's lock still holds, and TxHoldsLock
// answers as before it. Any other failure (a dial that failed or was never
// answered, a query that failed or timed out on a connection it got) means
// the server did not answer, and the transaction's own connection is no
// better off: TxHoldsLock reports false until a heartbeat gets through.
func (s *Store) extendLocked(ctx context.Context, k holdKey, lease time.Duration, lastEnd time.Time, hasLast bool) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		if !s.starved(ctx) {
			s.locked.unreach(k)
		}
		return s.misconfigured(ctx, "extend lease", fmt.Errorf("pgstore: extend lease: %w", err))
	}
	defer c.Release()
	m := c.Conn().TypeMap()
	a := newStillLockedArgs(k, lastEnd, hasLast, lease, s.typedOn(c.Conn()) && codecIs[*pgtype.TimestamptzCodec](m, pgtype.TimestamptzOID))
	ans, err := retried(func() (stillLockedAnswer, error) {
		rows, _ := c.Conn().Query(ctx, s.q.stillLocked, a.args[:]...)
		return readStillLocked(rows)
	})
	if err != nil {
		s.locked.unreach(k)
		return s.misconfigured(ctx, "extend lease", fmt.Errorf("pgstore: extend lease: %w", err))
	}
	if !ans.locked {
		return idem.ErrFenced
	}
	s.locked.extend(k, ans.end)
	return nil
}

// starved reports whether an Acquire on ctx failed for want of a free
// connection in a full pool: ctx ended, and every one of the pool's
// MaxConns connections is established and in use (none idle, none being
// dialled, which a server that does not answer would hold up).
func (s *Store) starved(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false // the Acquire failed otherwise: a dial refused, the pool closed
	}
	st := s.pool.Stat()
	return st.ConstructingConns() == 0 && st.AcquiredConns() >= st.MaxConns()
}

// Reap deletes up to batch expired records (oldest first) in one statement
// and reports how many it deleted. Rows locked by someone else are skipped,
// so several reapers can run at once. Call it until it returns less than
// batch to empty the backlog. Above READ COMMITTED, the statement fails with
// a serialization error when a row it read expired is taken over before it
// locks it; Reap then runs it again (the failed run deleted nothing).
// Give ctx a deadline: a connection that goes silent holds the call until
// ctx ends (the background reaper gives each call Options.ReapTimeout).
func (s *Store) Reap(ctx context.Context, batch int) (int, error) {
	if batch <= 0 {
		return 0, fmt.Errorf("pgstore: reap: batch %d must be positive", batch)
	}
	return reap(ctx, s.pool, s.q.reap, batch)
}

// reap runs the reaping statement q on pool: Reap, for the Store and for its
// background reaper.
func reap(ctx context.Context, pool *pgxpool.Pool, q string, batch int) (int, error) {
	tag, err := retried(func() (pgconn.CommandTag, error) {
		return pool.Exec(ctx, q, batch)
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// reaper is the background reaper of a Store: what its goroutine needs, and
// not the Store itself (see New).
type reaper struct {
	pool              *pgxpool.Pool
	query, table      string
	interval, timeout time.Duration
	batch             int
	log               *slog.Logger
	ctx               context.Context // ends with Close (or the Store's cleanup)
	cancel            context.CancelFunc
	done              chan struct{} // closed when run returns
}

// maxReapBackoff bounds the interval of a reaper whose statements keep
// failing for want of a privilege, a table, or a writable server (see
// persistentReapError); an Options.ReapInterval above it is kept.
const maxReapBackoff = time.Hour

// run reaps every interval until ctx ends or the pool is closed; next says
// what each tick's outcome logs and how long the reaper waits after it.
func (r *reaper) run() {
	defer close(r.done)
	wait := r.interval
	t := time.NewTimer(wait)
	defer t.Stop()
	var warned string // the SQLSTATE of the persistent error last logged, if any
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		err := r.tick()
		switch {
		case r.ctx.Err() != nil:
			return
		case errors.Is(err, puddle.ErrClosedPool):
			// The pool is closed for good: a Store nobody closed.
			r.log.LogAttrs(r.ctx, slog.LevelDebug, "pgstore: pool closed; the background reaper stops",
				slog.String("table", r.table))
			return
		}
		wait, warned = r.next(err, wait, warned)
		t.Reset(wait)
	}
}

// next logs the outcome err of a tick that came after a wait, warned being
// the SQLSTATE of the persistent error last logged ("" if none), and returns
// the wait before the next tick and the new warned. An error that will not
// go away by itself (persistentReapError: a role without DELETE, a missing
// table, a read-only standby) is logged once, at WARN, and doubles the
// wait, up to maxReapBackoff; it is logged again when another one follows,
// and the recovery at INFO. Any other error (a statement timeout, a lost
// connection) is logged at ERROR each time and changes nothing else: the
// reaper tries again after the same wait, and the tick after it decides
// (a persistent error still warned of is not warned of again, nor does its
// backoff start over; a success after it logs the recovery).
func (r *reaper) next(err error, wait time.Duration, warned string) (time.Duration, string) {
	if err == nil {
		if warned != "" {
			r.log.LogAttrs(r.ctx, slog.LevelInfo, "pgstore: background reap works again",
				slog.String("table", r.table))
		}
		return r.interval, ""
	}
	code, hint := persistentReapError(err)
	if code == "" {
		r.log.LogAttrs(r.ctx, slog.LevelError, "pgstore: background reap failed",
			slog.String("table", r.table), slog.Any("error", err))
		return wait, warned
	}
	limit := max(maxReapBackoff, r.interval)
	if code != warned {
		r.log.LogAttrs(r.ctx, slog.LevelWarn, "pgstore: background reap cannot work in this setup; it tries again less often and logs again only when the error changes ("+
			hint+"; or set Options.ReapInterval negative to turn the reaper off and reap elsewhere)",
			slog.String("table", r.table), slog.Any("error", err), slog.Duration("backoff_max", limit))
	}
	return reapBackoff(wait, limit), code
}

// reapBackoff is the wait after wait when a persistent error backs the
// reaper off: twice as long, up to limit. It compares before doubling: 2*wait
// overflows for a wait above math.MaxInt64/2 (an Options.ReapInterval that
// large is the limit), and a negative wait would fire the timer at once.
func reapBackoff(wait, limit time.Duration) time.Duration {
	if wait > limit/2 {
		return limit
	}
	return 2 * wait
}

// tick reaps until a statement deletes less than a batch, or fails. Each
// statement has its own deadline: ctx ends only with Close, and a statement
// on a connection that went silent (a network partition) would otherwise
// stop the reaper for good.
func (r *reaper) tick() error {
	for {
		sctx, scancel := context.WithTimeout(r.ctx, r.timeout)
		n, err := reap(sctx, r.pool, r.query, r.batch)
		scancel()
		if err != nil || n < r.batch {
			return err
		}
	}
}

// persistentReapError reports the SQLSTATE of a reaping error that the
// next tick will meet again unless the setup changes, with a hint of what
// to change, or "" for any other error.
func persistentReapError(err error) (code, hint string) {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return "", ""
	}
	switch pe.Code {
	case "42501": // insufficient_privilege
		return pe.Code, "grant the role DELETE on the table"
	case "42P01", "3F000": // undefined_table, invalid_schema_name
		return pe.Code, "create the table with Migrate or SchemaSQL"
	case "25006": // read_only_sql_transaction
		return pe.Code, "a read-only server (a standby) cannot reap; connect to the primary"
	}
	return "", ""
}
