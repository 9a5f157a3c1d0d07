package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{Table: "Records"}) // migrated once
	ctx := testCtx(t)
	type snapshot struct {
		tableOID, indexOID, funcOID uint32
		versions                    []int
		applied                     time.Time
		ddlXmin, funcXmin           string
	}
	snap := func() snapshot {
		var sn snapshot
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT $1::regclass::oid, $2::regclass::oid, (SELECT xmin::text FROM pg_class WHERE oid = $1::regclass),
    p.oid, p.xmin::text FROM pg_proc p WHERE p.oid = $3::regproc`,
			s.n.table, pgx.Identifier{s.n.schema, "Records_expires_at_idx"}.Sanitize(), pgx.Identifier{s.n.schema, "Records_claim"}.Sanitize()).
			Scan(&sn.tableOID, &sn.indexOID, &sn.ddlXmin, &sn.funcOID, &sn.funcXmin))
		rows, err := s.pool.Query(ctx, `SELECT version FROM `+s.n.version+` ORDER BY version`)
		require.NoError(t, err)
		sn.versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT max(applied_at) FROM `+s.n.version).Scan(&sn.applied))
		return sn
	}
	_, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)

	before := snap()
	assert.Equal(t, []int{1}, before.versions)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Migrate(ctx))
	assert.Equal(t, before, snap(), "no object was recreated or altered")
	_, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.True(t, found, "data survives")
}

// TestMigrateFromV1: Migrate adds the claim function to a schema an older
// pgstore made, with records in it, at the same version; a Store
// that fell back to the claim statement on the old schema uses the function
// after its Migrate.
func TestMigrateFromV1(t *testing.T) {
	t.Parallel()
	rec := &sqlRecorder{}
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 2
		c.ConnConfig.Tracer = rec
	})
	s := newV1StoreOn(t, p, Options{})
	rec.s = s
	ctx := testCtx(t)
	versions := func() []int {
		rows, err := p.Query(ctx, `SELECT version FROM `+s.n.version+` ORDER BY version`)
		require.NoError(t, err)
		v, err := pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		return v
	}
	haveFunc := func() bool {
		var ok bool
		require.NoError(t, p.QueryRow(ctx, `SELECT to_regproc($1) IS NOT NULL`, s.n.claim).Scan(&ok))
		return ok
	}
	require.Equal(t, []int{1}, versions())
	require.False(t, haveFunc())

	begin := func(key string, tok idem.Token) idem.BeginResult {
		t.Helper()
		r, err := s.Begin(ctx, beginReq(key, tok))
		require.NoError(t, err)
		return r
	}
	require.True(t, begin("old", 1).Acquired)
	require.Equal(t, []string{"func error", "cte"}, rec.take(), "the first Begin falls back")
	require.NoError(t, s.Finish(ctx, "old", 1, idem.StateCompleted, []byte("old resp")))
	require.True(t, begin("pending", 2).Acquired)
	require.Equal(t, []string{"cte"}, rec.take(), "and stays there")

	require.NoError(t, s.Migrate(ctx))
	require.Equal(t, []int{1}, versions(), "the function is no schema version")
	require.True(t, haveFunc())
	r := begin("old", 3)
	require.False(t, r.Acquired)
	require.Equal(t, []byte("old resp"), r.Record.Response, "records survive")
	r = begin("pending", 4)
	require.False(t, r.Acquired)
	require.Equal(t, idem.Token(2), r.Record.Token)
	require.True(t, begin("new", 5).Acquired)
	require.Equal(t, []string{"func", "func", "func"}, rec.take(), "the Store claims with the function after its Migrate")
}

// TestMigrateConcurrently: concurrent Migrates of one table serialize, also
// on a database whose default isolation is above READ COMMITTED (there the
// snapshot of a Migrate that waited for another's lock predated the other's
// commit: it did not see the versions the other recorded, ran the
// migrations again and failed, 23505 or 40001).
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	for _, level := range append([]string{"read committed"}, strictLevels...) {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			p := poolAtLevel(t, level)
			for range 3 {
				schema := uniqueSchema(t, p)
				var wg sync.WaitGroup
				errs := make([]error, 8)
				for i := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s, err := New(p, Options{Schema: schema})
						if err == nil {
							err = s.Migrate(testCtx(t))
							_ = s.Close()
						}
						errs[i] = err
					}()
				}
				wg.Wait()
				for _, err := range errs {
					require.NoError(t, err)
				}
				var n int
				require.NoError(t, p.QueryRow(testCtx(t),
					`SELECT count(*) FROM `+pgx.Identifier{schema, DefaultTable + "_version"}.Sanitize()).Scan(&n))
				assert.Equal(t, SchemaVersion, n)
			}
		})
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := testCtx(t)
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.n.version+` (version) VALUES ($1)`, SchemaVersion+1)
	require.NoError(t, err)
	err = s.Migrate(ctx)
	assert.ErrorContains(t, err, fmt.Sprintf("database schema version %d is newer than this pgstore (version %d)", SchemaVersion+1, SchemaVersion))
	assert.ErrorIs(t, err, ErrNewerSchema, "a service may tell it from other errors")

	// The Store serves all the same (a rollback's binary).
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)

	// Other errors are not it.
	missing := uniqueSchema(t, testPool(t))
	p, _ := noCreatePool(t, missing)
	err = openStore(t, p, Options{Schema: missing}).Migrate(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNewerSchema)
}

// TestSchemaSQL: a team running its own migrations applies SchemaSQL and
// uses the store without Migrate.
func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	p := testPool(t)
	schema := uniqueSchema(t, p)
	ctx := testCtx(t)
	_, err := p.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	ddl, err := SchemaSQL(Options{Schema: schema, Table: "idem"})
	require.NoError(t, err)
	assert.Contains(t, ddl, `CREATE TABLE IF NOT EXISTS "`+schema+`"."idem"`)
	assert.Contains(t, ddl, `CREATE OR REPLACE FUNCTION "`+schema+`"."idem_claim"(`)
	for range 2 { // idempotent
		_, err = p.Exec(ctx, ddl)
		require.NoError(t, err)
	}
	var version int
	require.NoError(t, p.QueryRow(ctx, `SELECT max(version) FROM `+pgx.Identifier{schema, "idem_version"}.Sanitize()).Scan(&version))
	assert.Equal(t, SchemaVersion, version, "SchemaSQL records the versions it applies")
	s, err := New(p, Options{Schema: schema, Table: "idem"})
	require.NoError(t, err)
	defer s.Close()
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.True(t, s.usesClaimFunc(), "SchemaSQL creates the claim function")
}

func TestNames(t *testing.T) {
	ddl, err := SchemaSQL(Options{})
	require.NoError(t, err)
	assert.Contains(t, ddl, `"public"."idem_records"`)
	assert.Contains(t, ddl, `"idem_records_expires_at_idx"`)
	assert.Contains(t, ddl, `FUNCTION "public"."idem_records_claim"(`)
	assert.Equal(t, 63, len(strings.Repeat("t", maxTableLen)+"_expires_at_idx"), "the longest suffix fits in 63 bytes")
	ddl, err = SchemaSQL(Options{Schema: `we"ird`, Table: "T"})
	require.NoError(t, err)
	assert.Contains(t, ddl, `"we""ird"."T"`, "identifiers are quoted")
	_, err = SchemaSQL(Options{Table: strings.Repeat("t", maxTableLen+1)})
	assert.Error(t, err)
	_, err = SchemaSQL(Options{Schema: "a\x00b"})
	assert.Error(t, err)
	_, err = New(nil, Options{})
	assert.Error(t, err)
}

// TestLongTableName: the objects named after a table of maxTableLen bytes
// keep their whole names (PostgreSQL would cut them at 63 bytes), and Begin
// claims with the function.
func TestLongTableName(t *testing.T) {
	t.Parallel()
	table := strings.Repeat("t", maxTableLen)
	s := newTestStore(t, Options{Table: table})
	ctx := testCtx(t)
	var names []string
	rows, err := s.pool.Query(ctx, `SELECT relname::text FROM pg_class WHERE relnamespace = $1::regnamespace
UNION ALL SELECT proname::text FROM pg_proc WHERE pronamespace = $1::regnamespace ORDER BY 1`, pgx.Identifier{s.n.schema}.Sanitize())
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Subset(t, names, []string{table, table + "_claim", table + "_expires_at_idx", table + "_version"})
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.True(t, s.usesClaimFunc())
}

// TestDocShowsSchema keeps the schema in the package documentation equal to
// what SchemaSQL produces.
func TestDocShowsSchema(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	ddl, err := SchemaSQL(Options{})
	require.NoError(t, err)
	var want strings.Builder
	for _, line := range strings.Split(strings.TrimRight(ddl, "\n"), "\n") {
		want.WriteString("//\t" + line + "\n")
	}
	assert.Contains(t, string(doc), want.String(), "update the schema in doc.go")
}

// TestClaimFuncNotExecutable: a role that may use the table but not execute
// the claim function (EXECUTE revoked from PUBLIC, as default privileges
// may do) claims with the statement.
func TestClaimFuncNotExecutable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, rec := storeWithoutExecute(t)
	for i, want := range [][]string{{"func error", "cte"}, {"cte"}} {
		r, err := s.Begin(ctx, beginReq("k", idem.Token(i+1)))
		require.NoError(t, err)
		require.Equal(t, i == 0, r.Acquired)
		require.Equal(t, want, rec.take())
	}
}

// TestClaimFuncFallbackWarns: the switch to the claim statement logs one
// WARN naming the function and what brings it back: for a role whose
// EXECUTE was revoked (from PUBLIC and from itself) the GRANT EXECUTE to
// copy; for a schema an older pgstore made, Migrate. Later Begins on the
// statement, looking for the function again, log nothing more.
func TestClaimFuncFallbackWarns(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	t.Run("revoked", func(t *testing.T) {
		admin := testPool(t)
		owner := newStoreOn(t, admin, Options{})
		fn := owner.n.claim + claimFuncArgs
		var role string
		s, rec := storeAsRole(t, admin, owner.n.schema, func(r string) []string {
			role = r
			return []string{
				`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + owner.n.table + ` TO ` + r,
				`REVOKE EXECUTE ON FUNCTION ` + fn + ` FROM PUBLIC, ` + r,
			}
		})
		logs := &syncBuffer{}
		s.log = slog.New(slog.NewTextHandler(logs, nil))
		s.probeEvery = 0 // every Begin looks for the function again
		for i := range 3 {
			_, err := s.Begin(ctx, beginReq("k", idem.Token(i+1)))
			require.NoError(t, err)
		}
		require.Equal(t, []string{"func error", "cte", "cte", "cte"}, rec.take())
		out := logs.String()
		assert.Equal(t, 1, strings.Count(out, "level=WARN"), out)
		assert.Contains(t, out, "pgstore: cannot call the claim function; Begin runs the claim statement")
		assert.Contains(t, out, inText("GRANT EXECUTE ON FUNCTION "+fn+" TO "+role))
		assert.Contains(t, out, "function="+strconv.Quote(fn))

		// Once granted, the store finds the function again (INFO) and a
		// later revocation warns again.
		_, err := admin.Exec(ctx, `GRANT EXECUTE ON FUNCTION `+fn+` TO `+role)
		require.NoError(t, err)
		_, err = s.Begin(ctx, beginReq("k2", 1))
		require.NoError(t, err)
		require.True(t, s.usesClaimFunc())
		_, err = admin.Exec(ctx, `REVOKE EXECUTE ON FUNCTION `+fn+` FROM `+role)
		require.NoError(t, err)
		_, err = s.Begin(ctx, beginReq("k3", 1))
		require.NoError(t, err)
		assert.Equal(t, 2, strings.Count(logs.String(), "level=WARN"), logs.String())
	})
	t.Run("older schema", func(t *testing.T) {
		s := newV1StoreOn(t, testPool(t), Options{})
		logs := &syncBuffer{}
		s.log = slog.New(slog.NewTextHandler(logs, nil))
		for i := range 2 {
			_, err := s.Begin(ctx, beginReq("k", idem.Token(i+1)))
			require.NoError(t, err)
		}
		out := logs.String()
		assert.Equal(t, 1, strings.Count(out, "level=WARN"), out)
		assert.Contains(t, out, "the function does not exist (a schema an older pgstore made): run Migrate")
	})
}

// TestClaimModeStaleFailure: a Begin whose call of the claim function failed
// before a concurrent Migrate created it does not switch the Store to the
// statement after that Migrate.
func TestClaimModeStaleFailure(t *testing.T) {
	var s Store
	require.True(t, s.usesClaimFunc())
	for _, fellBack := range []bool{false, true} {
		if fellBack {
			s.claimFuncAbsent()
			require.False(t, s.usesClaimFunc())
		}
		mode := s.claimMode.Load() // read by a Begin whose call then fails
		s.claimFuncFound()         // a Migrate succeeds meanwhile
		require.True(t, s.usesClaimFunc())
		s.claimFuncMissing(mode) // the failed Begin
		require.True(t, s.usesClaimFunc(), "fell back before: %v", fellBack)
	}
	s.claimFuncMissing(s.claimMode.Load())
	require.False(t, s.usesClaimFunc(), "a failure without a Migrate falls back")
}

// TestMigrateWithoutCreate: a role that may use the tables an older pgstore
// made but not create objects in their schema (a DBA's migrations serve it)
// migrates without error, and its Store claims with the statement.
func TestMigrateWithoutCreate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	admin := testPool(t)
	old := newV1StoreOn(t, admin, Options{})
	s, rec := storeAsRole(t, admin, old.n.schema, func(role string) []string {
		return []string{
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + old.n.table + ` TO ` + role,
			`GRANT SELECT, INSERT ON ` + old.n.version + ` TO ` + role,
		}
	})
	logs := &syncBuffer{}
	s.log = slog.New(slog.NewTextHandler(logs, nil))
	require.NoError(t, s.Migrate(ctx), "a role without CREATE migrates an up-to-date layout")
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "cannot create or replace the claim function")
	assert.False(t, s.usesClaimFunc())
	var haveFunc bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT to_regproc($1) IS NOT NULL`, s.n.claim).Scan(&haveFunc))
	assert.False(t, haveFunc)
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.Equal(t, []string{"cte"}, rec.take(), "no failed call of the function first")
}

// TestMigrateReplacesStaleFunc: after its schema was renamed, the claim
// function still names the table in the old schema; Migrate finds its body
// is not this package's and replaces it.
func TestMigrateReplacesStaleFunc(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p := testPool(t)
	from, to := uniqueSchema(t, p), uniqueSchema(t, p)
	newStoreOn(t, p, Options{Schema: from})
	_, err := p.Exec(ctx, `ALTER SCHEMA `+pgx.Identifier{from}.Sanitize()+` RENAME TO `+pgx.Identifier{to}.Sanitize())
	require.NoError(t, err)
	s, err := New(p, Options{Schema: to})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Begin(ctx, beginReq("k", 1))
	require.Error(t, err, "the function names the old schema")

	require.NoError(t, s.Migrate(ctx))
	src, err := s.claimFuncSrc(ctx, p)
	require.NoError(t, err)
	require.NotNil(t, src)
	assert.Equal(t, claimFuncBody(s.n), *src)
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.True(t, s.usesClaimFunc())
}

// TestMigrateReplacesOlderClaimFunc: a database whose claim function an
// older pgstore installed (its takeover waits for a locked row) gets this
// package's after Migrate; until then Begin calls the older one.
func TestMigrateReplacesOlderClaimFunc(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newTestStore(t, Options{})
	body := claimFuncBody(s.n)
	a := strings.Index(body, "    -- A takeover locks the row first")
	b := a + strings.Index(body[a:], "    UPDATE ")
	require.True(t, a > 0 && b > a)
	older := body[:a] + body[b:]
	sql := strings.Replace(claimFuncSQL(s.n), body, older, 1)
	require.NotEqual(t, claimFuncSQL(s.n), sql)
	_, err := s.pool.Exec(ctx, sql)
	require.NoError(t, err)

	prosrc := func() string {
		src, err := s.claimFuncSrc(ctx, s.pool)
		require.NoError(t, err)
		require.NotNil(t, src)
		return *src
	}
	require.Equal(t, older, prosrc())
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired, "the older function claims")

	require.NoError(t, s.Migrate(ctx))
	assert.Equal(t, body, prosrc(), "Migrate replaced it")
	assert.True(t, s.usesClaimFunc())
}

// TestClaimFuncErrorInBody: an undefined_function raised within the claim
// function's body (here by a trigger on the table) is Begin's error, and
// does not switch the Store to the statement.
func TestClaimFuncErrorInBody(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newTestStore(t, Options{})
	sc := pgx.Identifier{s.n.schema}.Sanitize()
	for _, q := range []string{
		`CREATE FUNCTION ` + sc + `.trg() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM ` + sc + `.no_such_function(); RETURN NEW; END $$`,
		`CREATE TRIGGER trg BEFORE INSERT ON ` + s.n.table + ` FOR EACH ROW EXECUTE FUNCTION ` + sc + `.trg()`,
	} {
		_, err := s.pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	_, err := s.Begin(ctx, beginReq("k", 1))
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "42883", pe.Code)
	assert.True(t, s.usesClaimFunc(), "the function is there")

	_, err = s.pool.Exec(ctx, `DROP TRIGGER trg ON `+s.n.table)
	require.NoError(t, err)
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
}

// TestClaimFuncReprobe: a Store that fell back to the claim statement finds
// the claim function once another process's Migrate created it, and calls
// it from then on; a role that may not execute it stays on the statement.
func TestClaimFuncReprobe(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	t.Run("created elsewhere", func(t *testing.T) {
		rec := &sqlRecorder{}
		p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
			c.MaxConns = 2
			c.ConnConfig.Tracer = rec
		})
		s := newV1StoreOn(t, p, Options{})
		rec.s = s
		s.probeEvery = time.Hour
		begin := func(key string, tok idem.Token) {
			t.Helper()
			r, err := s.Begin(ctx, beginReq(key, tok))
			require.NoError(t, err)
			require.True(t, r.Acquired)
		}
		begin("a", 1)
		require.Equal(t, []string{"func error", "cte"}, rec.take())
		require.False(t, s.usesClaimFunc())

		// Another process migrates: the function exists now.
		other := openStore(t, testPool(t), Options{Schema: s.opts.Schema})
		require.NoError(t, other.Migrate(ctx))
		begin("b", 2)
		require.False(t, s.usesClaimFunc(), "no look before the interval")

		s.probeAt.Store(0) // the interval is over
		begin("c", 3)
		require.True(t, s.usesClaimFunc(), "found it")
		require.Equal(t, []string{"cte", "func"}, rec.take(), "and called it at once")
		begin("d", 4)
		require.Equal(t, []string{"func"}, rec.take())
	})
	t.Run("not executable", func(t *testing.T) {
		s, rec := storeWithoutExecute(t)
		s.probeEvery = 0
		for i := range 3 {
			_, err := s.Begin(ctx, beginReq("k", idem.Token(i+1)))
			require.NoError(t, err)
			require.False(t, s.usesClaimFunc())
		}
		require.Equal(t, []string{"func error", "cte", "cte", "cte"}, rec.take())
	})
}

// TestMigrateTablesOfOneNewSchema: stores of different tables in one schema
// that does not exist yet, migrated at once (services starting together).
// Their tables' advisory locks do not exclude each other, and two CREATE
// SCHEMA IF NOT EXISTS that both find the schema missing collide (23505 on
// pg_namespace): the schema's own lock serializes them.
func TestMigrateTablesOfOneNewSchema(t *testing.T) {
	t.Parallel()
	p := testPool(t)
	ctx := testCtx(t)
	for range 5 {
		schema := uniqueSchema(t, p)
		stores := make([]*Store, 6)
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i := range stores {
			stores[i] = openStore(t, p, Options{Schema: schema, Table: fmt.Sprintf("t%d", i)})
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = stores[i].Migrate(ctx) }()
		}
		wg.Wait()
		for i, s := range stores {
			require.NoError(t, errs[i], "table t%d", i)
			r, err := s.Begin(ctx, beginReq("k", 1))
			require.NoError(t, err)
			assert.True(t, r.Acquired)
			assert.True(t, s.usesClaimFunc())
		}
	}
}

// TestMigrateAsAppRole: an application role with only the run-time
// privileges (USAGE on the schema, DML on the table; no CREATE) whose
// schema a DBA made, with SchemaSQL (this one or an older one that made no
// version table) or by running Migrate as another role: its Migrate
// succeeds, with a warning where it may not read the version table, and
// its Begin calls the claim function.
func TestMigrateAsAppRole(t *testing.T) {
	t.Parallel()
	admin := testPool(t)
	cases := []struct {
		name        string
		ddl         func(n names) string // what the DBA ran; "" runs Migrate
		readVersion bool                 // the role may SELECT the version table
		warn        bool
	}{
		{"SchemaSQL", schemaSQLOf, true, false},
		{"SchemaSQLNoVersionGrant", schemaSQLOf, false, true},
		{"OlderSchemaSQL", olderSchemaSQLOf, false, true},
		{"MigrateByDBA", nil, false, true},
		{"MigrateByDBAVersionGrant", nil, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			var schema string
			if c.ddl == nil {
				schema = uniqueSchema(t, admin)
				newStoreOn(t, admin, Options{Schema: schema})
			} else {
				schema = dbaSchema(t, admin, c.ddl).schema
			}
			s, rec := storeAsRole(t, admin, schema, func(role string) []string {
				g := []string{`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + pgx.Identifier{schema, DefaultTable}.Sanitize() + ` TO ` + role}
				if c.readVersion {
					g = append(g, `GRANT SELECT ON `+pgx.Identifier{schema, DefaultTable + "_version"}.Sanitize()+` TO `+role)
				}
				return g
			})
			logs := &syncBuffer{}
			s.log = slog.New(slog.NewTextHandler(logs, nil))
			require.NoError(t, s.Migrate(ctx))
			if c.warn {
				assert.Contains(t, logs.String(), "cannot check the schema version, so a newer one goes undetected")
				role := pgx.Identifier{schema + "_app"}.Sanitize()
				version := pgx.Identifier{schema, DefaultTable + "_version"}.Sanitize()
				if c.ddl == nil || c.name == "SchemaSQLNoVersionGrant" {
					assert.Contains(t, logs.String(), inText("the role "+role+" lacks the SELECT privilege on "+version+" (GRANT SELECT ON "+version+" TO "+role+")"))
				} else {
					assert.Contains(t, logs.String(), inText(version+" does not exist and the role "+role+" lacks the CREATE privilege on the schema "+pgx.Identifier{schema}.Sanitize()))
				}
			} else {
				assert.Empty(t, logs.String())
			}
			assert.True(t, s.usesClaimFunc())
			r, err := s.Begin(ctx, beginReq("k", 1))
			require.NoError(t, err)
			assert.True(t, r.Acquired)
			assert.Equal(t, []string{"func"}, rec.take())
		})
	}
}

// inText returns s as slog's TextHandler writes it inside a quoted value.
func inText(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// TestMigrateNewerVersionUnreadable: a role without SELECT on the version
// table cannot tell that a later pgstore recorded a newer schema version
// there: its Migrate succeeds while the records table has this layout, with
// a warning that names the version table, the role, the privilege it lacks
// and the GRANT that gives it; once granted, Migrate refuses the newer
// version.
func TestMigrateNewerVersionUnreadable(t *testing.T) {
	t.Parallel()
	admin := testPool(t)
	ctx := testCtx(t)
	owner := newStoreOn(t, admin, Options{})
	_, err := admin.Exec(ctx, `INSERT INTO `+owner.n.version+` (version) VALUES ($1)`, SchemaVersion+1)
	require.NoError(t, err)
	s, _ := storeAsRole(t, admin, owner.n.schema, func(role string) []string {
		return []string{`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + owner.n.table + ` TO ` + role}
	})
	logs := &syncBuffer{}
	s.log = slog.New(slog.NewTextHandler(logs, nil))
	require.NoError(t, s.Migrate(ctx), "the newer version goes undetected")
	role := pgx.Identifier{owner.n.schema + "_app"}.Sanitize()
	grant := `GRANT SELECT ON ` + owner.n.version + ` TO ` + role
	assert.Contains(t, logs.String(), inText("cannot check the schema version, so a newer one goes undetected: the role "+role+" lacks the SELECT privilege on "+owner.n.version+" ("+grant+")"))

	_, err = admin.Exec(ctx, grant)
	require.NoError(t, err)
	err = s.Migrate(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("database schema version %d is newer than this pgstore", SchemaVersion+1))
}

// TestMigrateAsAppRoleWithoutTable: a role without CREATE whose schema
// holds no records table cannot migrate it: Migrate fails.
func TestMigrateAsAppRoleWithoutTable(t *testing.T) {
	t.Parallel()
	admin := testPool(t)
	ctx := testCtx(t)
	schema := uniqueSchema(t, admin)
	_, err := admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	s, _ := storeAsRole(t, admin, schema, func(string) []string { return nil })
	err = s.Migrate(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "42501")
}

// TestMigrateMissingSchemaWithoutCreate: Migrate by a role that may not
// create the missing schema (no CREATE on the database) fails saying that
// the schema is missing, which role may not create it, and what to do.
func TestMigrateMissingSchemaWithoutCreate(t *testing.T) {
	t.Parallel()
	schema := uniqueSchema(t, testPool(t)) // not created
	p, role := noCreatePool(t, schema)
	s := openStore(t, p, Options{Schema: schema})
	err := s.Migrate(testCtx(t))
	require.Error(t, err)
	sch := pgx.Identifier{schema}.Sanitize()
	assert.Contains(t, err.Error(), "the schema "+sch+" does not exist and the role "+role+" may not create it")
	assert.Contains(t, err.Error(), "CREATE SCHEMA "+sch)
	assert.Contains(t, err.Error(), "42501", "the server's error stays")
	assert.True(t, isInsufficientPrivilege(err))
}

// noCreatePool returns a pool of one connection as a new role (its name
// derived from schema; dropped at the end of the test) with no privilege
// but the defaults: no CREATE on the database.
func noCreatePool(t *testing.T, schema string) (*pgxpool.Pool, string) {
	t.Helper()
	role := pgx.Identifier{schema + "_app"}.Sanitize()
	createRole(t, testPool(t), role)
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `SET ROLE `+role)
			return err
		}
	})
	return p, role
}

// TestMigrateLayoutColumns: a role that may neither read nor create the
// version table succeeds only when the records table has the current
// layout: the column names are not enough; a column of another type or a
// missing column fail Migrate, which says what differs (the indexes:
// TestMigrateLayoutIndexes).
func TestMigrateLayoutColumns(t *testing.T) {
	t.Parallel()
	admin := testPool(t)
	for _, c := range []struct {
		name, alter, want string
	}{
		{"TokenInteger", `ALTER TABLE %s.idem_records ALTER COLUMN token TYPE integer`, `column token is integer, not bigint`},
		{"NoPriorState", `ALTER TABLE %s.idem_records DROP COLUMN prior_state`, `no column prior_state`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			n := dbaSchema(t, admin, func(n names) string {
				return schemaSQLOf(n) + "\n" + fmt.Sprintf(c.alter, pgx.Identifier{n.schema}.Sanitize())
			})
			s, _ := storeAsRole(t, admin, n.schema, func(role string) []string {
				return []string{`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + n.table + ` TO ` + role}
			})
			logs := &syncBuffer{}
			s.log = slog.New(slog.NewTextHandler(logs, nil))
			err := s.Migrate(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "does not have the layout of version 1")
			assert.Contains(t, err.Error(), "cannot check the schema version: the role "+pgx.Identifier{n.schema + "_app"}.Sanitize()+" lacks the SELECT privilege on "+n.version)
			assert.NotContains(t, logs.String(), "nothing to migrate")
		})
	}
}

// TestOlderSchemaSQLAppRoleWithCreate: a DBA ran an older SchemaSQL (no
// version table); the application role may create objects in the schema
// but does not own the table. Its Migrate creates the version table, finds
// version 0, and finds the table, index and function already there: it
// records version 1 instead of failing on the index (42501, "must be owner
// of table"). Where the table lacks its index, it still fails
// (TestMigrateLayoutIndexes).
func TestOlderSchemaSQLAppRoleWithCreate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	admin := testPool(t)
	n := dbaSchema(t, admin, olderSchemaSQLOf)
	s, rec := storeAsRole(t, admin, n.schema, func(role string) []string {
		return []string{
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + n.table + ` TO ` + role,
			`GRANT CREATE ON SCHEMA ` + pgx.Identifier{n.schema}.Sanitize() + ` TO ` + role,
		}
	})
	require.NoError(t, s.Migrate(ctx))
	var version int
	require.NoError(t, admin.QueryRow(ctx, `SELECT max(version) FROM `+n.version).Scan(&version))
	assert.Equal(t, SchemaVersion, version)
	require.NoError(t, s.Migrate(ctx), "a second Migrate finds the version")
	rec.take()
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.Equal(t, []string{"func"}, rec.take())
}

// TestMigrateLayoutIndexes: where Migrate checks the records table's layout
// for a role that does not own it (one that may neither read nor create the
// version table over a DBA's SchemaSQL; one with CREATE over an older
// SchemaSQL's table), it takes an index for what it is, not for its name:
// any valid, non-partial btree index whose first key column is expires_at
// (ascending or descending) serves the reaper, and any valid, non-partial,
// non-deferrable unique index whose only key column is key serves Begin's ON
// CONFLICT (key). A missing index, or one that does not (invalid, partial,
// leading with or including another key column, deferrable, not unique, a
// hash or BRIN index on expires_at, which cannot serve the reaper's ordered
// range scan), fails Migrate, which says what is missing, instead of a Begin
// that fails later.
func TestMigrateLayoutIndexes(t *testing.T) {
	t.Parallel()
	admin := testPool(t)
	var super bool
	require.NoError(t, admin.QueryRow(testCtx(t), `SELECT current_setting('is_superuser') = 'on'`).Scan(&super))
	// Each alter is formatted with the table (%[1]s) and its index (%[2]s),
	// schema-qualified, and the index's own name (%[3]s); want is what the
	// error says, "" for success.
	for _, c := range []struct {
		name, alter, want string
		super             bool // the alter writes the catalog
	}{
		{"ExpiresIndexMissing", `DROP INDEX %[2]s`, `no btree index on expires_at`, false},
		{"ExpiresIndexRenamed", `ALTER INDEX %[2]s RENAME TO dba_expires_idx`, ``, false},
		{"ExpiresIndexInclude", `DROP INDEX %[2]s; CREATE INDEX dba_expires_idx ON %[1]s (expires_at) INCLUDE (state)`, ``, false},
		{"ExpiresIndexTwoColumns", `DROP INDEX %[2]s; CREATE INDEX dba_expires_idx ON %[1]s (expires_at, state)`, ``, false},
		{"ExpiresIndexExpressionColumn", `DROP INDEX %[2]s; CREATE INDEX dba_expires_idx ON %[1]s (expires_at, (state + 0))`, ``, false},
		{"ExpiresIndexSecondColumn", `DROP INDEX %[2]s; CREATE INDEX %[3]s ON %[1]s (state, expires_at)`, `no btree index on expires_at`, false},
		{"ExpiresIndexPartial", `DROP INDEX %[2]s; CREATE INDEX %[3]s ON %[1]s (expires_at) WHERE state = 1`, `no btree index on expires_at`, false},
		{"ExpiresIndexInvalid", `UPDATE pg_index SET indisvalid = false WHERE indexrelid = '%[2]s'::regclass`, `no btree index on expires_at`, true},
		{"ExpiresIndexDesc", `DROP INDEX %[2]s; CREATE INDEX %[3]s ON %[1]s (expires_at DESC)`, ``, false},
		{"ExpiresIndexHash", `DROP INDEX %[2]s; CREATE INDEX %[3]s ON %[1]s USING hash (expires_at)`, `no btree index on expires_at (valid, not partial, expires_at its first column; a hash index cannot serve`, false},
		{"ExpiresIndexBRIN", `DROP INDEX %[2]s; CREATE INDEX %[3]s ON %[1]s USING brin (expires_at)`, `no btree index on expires_at (valid, not partial, expires_at its first column; a brin index cannot serve`, false},
		{"KeyUniqueIndex", `ALTER TABLE %[1]s DROP CONSTRAINT idem_records_pkey; CREATE UNIQUE INDEX dba_key_idx ON %[1]s (key)`, ``, false},
		{"KeyUniqueInclude", `ALTER TABLE %[1]s DROP CONSTRAINT idem_records_pkey; CREATE UNIQUE INDEX dba_key_idx ON %[1]s (key) INCLUDE (token)`, ``, false},
		{"KeyNoPrimaryKey", `ALTER TABLE %[1]s DROP CONSTRAINT idem_records_pkey`, `no unique index on key`, false},
		{"KeyNotUnique", `ALTER TABLE %[1]s DROP CONSTRAINT idem_records_pkey; CREATE INDEX dba_key_idx ON %[1]s (key)`, `no unique index on key`, false},
		{"KeyUniqueTwoColumns", `ALTER TABLE %[1]s DROP CONSTRAINT idem_records_pkey; CREATE UNIQUE INDEX dba_key_idx ON %[1]s (key, token)`, `no unique index on key`, false},
		{"KeyUniquePartial", `ALTER TABLE %[1]s DROP CONSTRAINT idem_records_pkey; CREATE UNIQUE INDEX dba_key_idx ON %[1]s (key) WHERE state = 1`, `no unique index on key`, false},
		{"KeyPrimaryKeyDeferrable", `ALTER TABLE %[1]s DROP CONSTRAINT idem_records_pkey; ALTER TABLE %[1]s ADD PRIMARY KEY (key) DEFERRABLE`, `no unique index on key`, false},
		{"KeyPrimaryKeyInvalid", `UPDATE pg_index SET indisvalid = false WHERE indrelid = '%[1]s'::regclass AND indisprimary`, `no unique index on key`, true},
	} {
		for _, m := range []struct {
			name   string
			create bool // the role has CREATE on the schema, the DBA ran an older SchemaSQL (no version table)
		}{{"NoVersionRead", false}, {"OlderSchemaSQLWithCreate", true}} {
			t.Run(c.name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				if c.super && !super {
					if testenv.Required() {
						t.Fatal("the test role may not write the catalog (IDEMGEN_REQUIRE_SERVICES=1: connect as a superuser)")
					}
					t.Skip("the test role may not write the catalog")
				}
				ctx := testCtx(t)
				n := dbaSchema(t, admin, func(n names) string {
					ddl := schemaSQLOf(n)
					if m.create {
						ddl = olderSchemaSQLOf(n)
					}
					return ddl + "\n" + fmt.Sprintf(c.alter, n.table, pgx.Identifier{n.schema, DefaultTable + "_expires_at_idx"}.Sanitize(), n.index)
				})
				s, rec := storeAsRole(t, admin, n.schema, func(role string) []string {
					g := []string{`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + n.table + ` TO ` + role}
					if m.create {
						g = append(g, `GRANT CREATE ON SCHEMA `+pgx.Identifier{n.schema}.Sanitize()+` TO `+role)
					}
					return g
				})
				err := s.Migrate(ctx)
				if c.want != "" {
					require.Error(t, err)
					assert.Contains(t, err.Error(), "42501")
					assert.Contains(t, err.Error(), c.want)
					assert.Contains(t, err.Error(), "does not have the layout of version 1")
					return
				}
				require.NoError(t, err)
				rec.take()
				r, err := s.Begin(ctx, beginReq("k", 1))
				require.NoError(t, err)
				assert.True(t, r.Acquired)
				assert.Equal(t, []string{"func"}, rec.take())
			})
		}
	}
}

// dbaSchema creates a new schema holding what a DBA ran, ddl(n) for the
// names n of the default table in it, and returns n.
func dbaSchema(t *testing.T, admin *pgxpool.Pool, ddl func(n names) string) names {
	t.Helper()
	n, err := newNames(Options{Schema: uniqueSchema(t, admin)})
	require.NoError(t, err)
	q := `CREATE SCHEMA ` + pgx.Identifier{n.schema}.Sanitize() + `; ` + ddl(n)
	_, err = admin.Exec(testCtx(t), q)
	require.NoError(t, err, q)
	return n
}

// olderSchemaSQLOf is what an older SchemaSQL made for the store whose
// names are n: version 1's table and the claim function, no version table.
func olderSchemaSQLOf(n names) string {
	return migrations[0](n) + "\n" + claimFuncSQL(n)
}

// schemaSQLOf is SchemaSQL for the store whose names are n.
func schemaSQLOf(n names) string {
	ddl, err := SchemaSQL(Options{Schema: n.schema})
	if err != nil {
		panic(err)
	}
	return ddl
}
