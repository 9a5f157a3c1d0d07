package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"go/ast"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pool != nil {
		pool.Close()
	}
	os.Exit(code)
}

// dbTimeout bounds every wait on the database in the tests (testCtx,
// cleanupCtx), and in each run of a benchmark: a hung server, or a
// statement that waits on a lock a failed test left held, fails the test
// instead of hanging the package until go test's timeout.
const dbTimeout = time.Minute

// testCtx returns the context of tb's database calls: done dbTimeout from
// now, or when tb ends.
func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(tb.Context(), dbTimeout)
	tb.Cleanup(cancel)
	return ctx
}

// cleanupCtx returns the context of a cleanup's database calls (tb.Context
// is done by the time cleanups run), done dbTimeout from now.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), dbTimeout)
}

// rollback rolls tx back, for a defer or a cleanup, within dbTimeout.
func rollback(tx pgx.Tx) {
	ctx, cancel := cleanupCtx()
	defer cancel()
	_ = tx.Rollback(ctx)
}

// testPool returns the package's shared pool on the test server.
func testPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	url := testenv.PostgresURL(tb)
	poolOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			poolErr = err
			return
		}
		cfg.MaxConns = 24
		pool, poolErr = pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily: no wait
	})
	require.NoError(tb, poolErr)
	return pool
}

// uniqueSchema gives each test its own schema (dropped afterwards), so tests
// run in parallel and repeatedly against one server.
func uniqueSchema(tb testing.TB, p *pgxpool.Pool) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "idemtest_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		// Bounded: a transaction the test left open would hold the DROP
		// (and the package) until go test's timeout.
		ctx, cancel := cleanupCtx()
		defer cancel()
		if _, err := p.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); ctx.Err() != nil {
			tb.Errorf("drop schema %s: %v (a transaction of the test still open?)", schema, err)
		}
	})
	return schema
}

// newTestStore returns a migrated store on the shared pool, in a schema of its own.
func newTestStore(tb testing.TB, opts Options) *Store {
	tb.Helper()
	return newStoreOn(tb, testPool(tb), opts)
}

// newStoreOn returns a migrated store on p, in a schema of its own unless
// opts names one, closed at the end of the test.
func newStoreOn(tb testing.TB, p *pgxpool.Pool, opts Options) *Store {
	tb.Helper()
	s := openStore(tb, p, opts)
	require.NoError(tb, s.Migrate(testCtx(tb)))
	return s
}

// openStore returns a store on p, not migrated, in a schema of its own
// unless opts names one, closed at the end of the test. Its background
// reaper is off unless opts sets ReapInterval: tests that count rows reap
// themselves.
func openStore(tb testing.TB, p *pgxpool.Pool, opts Options) *Store {
	tb.Helper()
	if opts.Schema == "" {
		opts.Schema = uniqueSchema(tb, p)
	}
	if opts.ReapInterval == 0 {
		opts.ReapInterval = -1
	}
	s, err := New(p, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// beginReq is the claim of key with token tok that most tests make: the
// fingerprint fp(1), a lease of a minute, a TTL of an hour.
func beginReq(key string, tok idem.Token) *idem.BeginRequest {
	return &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: tok, Lease: time.Minute, TTL: time.Hour}
}

// beginReqFP is beginReq with the fingerprint fp(b).
func beginReqFP(key string, tok idem.Token, b byte) *idem.BeginRequest {
	r := beginReq(key, tok)
	r.Fingerprint = fp(b)
	return r
}

// noWaitTimeout is the deadline of a claim that must not wait on a row lock
// the test holds (the lock is kept until the claim has answered): a claim
// that waited would fail on it. noWaitBound, half of it, bounds "at once"
// with room for a loaded machine (2 cores, packages at once with -race),
// where a claim that did not wait may still take over a second.
const (
	noWaitTimeout = 10 * time.Second
	noWaitBound   = noWaitTimeout / 2
)

// beginNoWait claims with a deadline of noWaitTimeout, so that a claim that
// waits on a row lock the test itself holds fails instead of hanging, and
// reports how long it took.
func beginNoWait(t *testing.T, s *Store, r *idem.BeginRequest) (idem.BeginResult, time.Duration) {
	t.Helper()
	res, took, err := tryBeginNoWait(s, r)
	require.NoError(t, err, "after %v", took)
	return res, took
}

// tryBeginNoWait is beginNoWait returning the error, for a caller that must
// not stop the test while it holds a lock (a hook inside the holder's
// commit): stopped there, the holder's transaction stays open and the
// test's cleanup waits on its lock.
func tryBeginNoWait(s *Store, r *idem.BeginRequest) (idem.BeginResult, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), noWaitTimeout)
	defer cancel()
	t0 := time.Now()
	res, err := s.Begin(ctx, r)
	return res, time.Since(t0), err
}

func fp(b byte) idem.Fingerprint {
	var f idem.Fingerprint
	f[0] = 1
	for i := 1; i < len(f); i++ {
		f[i] = b
	}
	return f
}

// newV1StoreOn returns a store on p whose schema an older pgstore made (the
// table at version 1, no claim function), in a schema of its own unless opts names one: the
// schema an older pgstore left, on which Begin falls back to the claim
// statement.
func newV1StoreOn(tb testing.TB, p *pgxpool.Pool, opts Options) *Store {
	tb.Helper()
	s := openStore(tb, p, opts)
	_, err := s.migrate(testCtx(tb), false)
	require.NoError(tb, err)
	return s
}

// storeWithoutExecute returns a store on the tables of a freshly migrated
// schema, for a role that may use the table but not execute the claim
// function (EXECUTE revoked from PUBLIC, as default privileges may do), and
// the recorder of its claims.
func storeWithoutExecute(t *testing.T) (*Store, *sqlRecorder) {
	t.Helper()
	admin := testPool(t)
	owner := newStoreOn(t, admin, Options{})
	return storeAsRole(t, admin, owner.n.schema, func(role string) []string {
		return []string{
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + owner.n.table + ` TO ` + role,
			`REVOKE EXECUTE ON FUNCTION ` + owner.n.claim + claimFuncArgs + ` FROM PUBLIC`,
		}
	})
}

// createRole creates the NOLOGIN role (a sanitized identifier) and, as soon
// as it exists, registers the cleanup that drops it and what it owns or was
// granted, so that a later failing GRANT does not leave a server-wide role
// behind. The cleanup runs after those of anything registered later, such as
// a pool connecting as the role (cleanups run last first).
func createRole(t *testing.T, admin *pgxpool.Pool, role string) {
	t.Helper()
	q := `CREATE ROLE ` + role + ` NOLOGIN`
	_, err := admin.Exec(testCtx(t), q)
	require.NoError(t, err, q)
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = admin.Exec(ctx, `DROP OWNED BY `+role)
		_, _ = admin.Exec(ctx, `DROP ROLE IF EXISTS `+role)
	})
}

// storeAsRole returns a store on the tables in schema, for a new role
// (dropped at the end of the test) that has only USAGE on the schema and
// what the statements grants(role) give it, on a pool of one connection whose claims rec
// records.
func storeAsRole(t *testing.T, admin *pgxpool.Pool, schema string, grants func(role string) []string) (*Store, *sqlRecorder) {
	t.Helper()
	ctx := testCtx(t)
	roleID := pgx.Identifier{schema + "_app"}.Sanitize()
	createRole(t, admin, roleID)
	for _, q := range append([]string{
		`GRANT USAGE ON SCHEMA ` + pgx.Identifier{schema}.Sanitize() + ` TO ` + roleID,
	}, grants(roleID)...) {
		_, err := admin.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	rec := &sqlRecorder{}
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ConnConfig.Tracer = rec
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `SET ROLE `+roleID)
			return err
		}
	})
	s, err := New(p, Options{Schema: schema, ReapInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() }) // before the pool's
	rec.s = s
	return s, rec
}

// claimWay is one of Begin's claim statements: the claim function's call
// (claimFunc), the read of the row that calls the function only when the
// row is not an answer by itself (claimRead), and the claim statement, the
// fallback where the function is missing (claim).
type claimWay int

const (
	wayFunc claimWay = iota
	wayRead
	wayCTE
)

// claimPaths are Begin's ways of claiming.
var claimPaths = []struct {
	name string
	way  claimWay
}{{"Func", wayFunc}, {"Read", wayRead}, {"CTE", wayCTE}}

// useClaimFunc makes s claim with the statement of way: until the end of
// the chooser's epoch (claimEpoch Begins) for claimFunc and claimRead.
func useClaimFunc(s *Store, way claimWay) {
	switch way {
	case wayCTE:
		s.claimFuncAbsent()
	case wayRead:
		s.claimFuncFound()
		s.claims.w.Store(chooseRead)
	default:
		s.claimFuncFound()
		s.claims.w.Store(0)
	}
}

// claimSQL is the statement of way.
func claimSQL(s *Store, way claimWay) string {
	switch way {
	case wayCTE:
		return s.q.claim
	case wayRead:
		return s.q.claimRead
	}
	return s.q.claimFunc
}

// currentWay is the statement s's Begin runs now.
func currentWay(s *Store) claimWay {
	switch {
	case !s.usesClaimFunc():
		return wayCTE
	case s.claims.read():
		return wayRead
	}
	return wayFunc
}

// claimPrefix is how the text of claimSQL(s, way) starts, for
// pg_stat_activity.
func claimPrefix(way claimWay) string {
	switch way {
	case wayCTE:
		return "WITH cur"
	case wayRead:
		return "SELECT false AS acquired"
	}
	return "SELECT * FROM"
}

// sqlRecorder is a pgx tracer that records every statement it sees and
// whether it failed; take and takeStmts read them.
type sqlRecorder struct {
	mu    sync.Mutex
	s     *Store // whose claims take names
	stmts []tracedStmt
}

type tracedStmt struct {
	sql    string
	failed bool
}

type sqlKey struct{}

func (r *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlKey{}, d.SQL)
}

func (r *sqlRecorder) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(sqlKey{}).(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmts = append(r.stmts, tracedStmt{sql, d.Err != nil})
}

// drain returns the statements recorded so far and forgets them.
func (r *sqlRecorder) drain() []tracedStmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stmts
	r.stmts = nil
	return st
}

// take returns the claims (claimFunc, claimRead or claim of r.s) recorded
// so far, as "func", "read" or "cte", with " error" after a failed one, and forgets every
// statement recorded.
func (r *sqlRecorder) take() []string {
	var calls []string
	for _, st := range r.drain() {
		var call string
		switch st.sql {
		case r.s.q.claimFunc:
			call = "func"
		case r.s.q.claimRead:
			call = "read"
		case r.s.q.claim:
			call = "cte"
		default:
			continue
		}
		if st.failed {
			call += " error"
		}
		calls = append(calls, call)
	}
	return calls
}

// takeStmts returns the statements recorded so far, each by its first two
// words (enough to tell them apart; a "begin" without its options), and
// forgets them.
func (r *sqlRecorder) takeStmts() []string {
	var stmts []string
	for _, st := range r.drain() {
		w := strings.Fields(st.sql)
		if w[0] == "begin" {
			w = w[:1]
		}
		stmts = append(stmts, strings.Join(w[:min(2, len(w))], " "))
	}
	return stmts
}

// TestDatabaseCallsBounded: the tests' database calls are bounded (testCtx,
// cleanupCtx, or a timeout of their own): no test file but the examples
// passes context.Background() itself, except to context.WithTimeout, to
// pgxpool's constructors (which connect lazily) or as the context of a
// reaper literal that runs no statement.
func TestDatabaseCallsBounded(t *testing.T) {
	testenv.CheckBounded(t, testenv.Unbounded{
		Files: "*_test.go",
		Skip:  []string{"example_test.go"},
		Calls: []string{"context.Background"},
		// pgxpool's constructors connect lazily: their context bounds nothing.
		Bounding: []string{"context.WithTimeout", "pgxpool.New", "pgxpool.NewWithConfig"},
		// A reaper literal's fields are its own, and touch no database.
		Allowed: func(n ast.Node) []ast.Expr {
			var out []ast.Expr
			if l, ok := n.(*ast.CompositeLit); ok {
				if id, ok := l.Type.(*ast.Ident); ok && id.Name == "reaper" {
					for _, e := range l.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							out = append(out, kv.Value)
						}
					}
				}
			}
			return out
		},
		Hint: "give the call testCtx(t), or cleanupCtx() in a cleanup",
	})
}
