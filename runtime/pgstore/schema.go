package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Default names of the schema objects.
const (
	DefaultSchema = "public"
	DefaultTable  = "idem_records"
)

// maxTableLen leaves room for the suffixes of the objects named after the
// table (…_version, …_expires_at_idx, …_claim) within PostgreSQL's 63-byte
// names.
const maxTableLen = 48

// names holds the quoted identifiers of one store's schema objects.
type names struct {
	schema  string // the schema, unquoted
	name    string // the table, unquoted
	table   string // "schema"."table"
	version string // "schema"."table_version"
	index   string // "table_expires_at_idx" (an index lives in its table's schema)
	claim   string // "schema"."table_claim": Begin's function (claimFuncSQL)
	lockKey string // schema.table, hashed for the migration advisory lock
}

func newNames(opts Options) (names, error) {
	schema, table := opts.Schema, opts.Table
	if schema == "" {
		schema = DefaultSchema
	}
	if table == "" {
		table = DefaultTable
	}
	for what, v := range map[string]string{"schema": schema, "table": table} {
		if strings.IndexByte(v, 0) >= 0 || len(v) > 63 {
			return names{}, fmt.Errorf("pgstore: invalid %s name %q", what, v)
		}
	}
	if len(table) > maxTableLen {
		return names{}, fmt.Errorf("pgstore: table name %q is longer than %d bytes", table, maxTableLen)
	}
	return names{
		schema:  schema,
		name:    table,
		table:   pgx.Identifier{schema, table}.Sanitize(),
		version: pgx.Identifier{schema, table + "_version"}.Sanitize(),
		index:   pgx.Identifier{table + "_expires_at_idx"}.Sanitize(),
		claim:   pgx.Identifier{schema, table + "_claim"}.Sanitize(),
		lockKey: schema + "." + table,
	}, nil
}

// migrations[i] brings the schema from version i to version i+1. Released
// migrations are never edited; a change of layout appends one.
var migrations = []func(n names) string{
	// 1: the records table.
	func(n names) string {
		return `CREATE TABLE IF NOT EXISTS ` + n.table + ` (
    token            bigint      NOT NULL,  -- fencing token: the uint64 bit pattern as int64
    lease_expires_at timestamptz NOT NULL,  -- a PENDING holder's lease runs out (database clock)
    expires_at       timestamptz NOT NULL,  -- the record is forgotten: claim time + TTL
    state            smallint    NOT NULL CHECK (state IN (1, 2, 3)),  -- 1 PENDING, 2 COMPLETED, 3 FAILED
    prior_state      smallint    NOT NULL DEFAULT 0,  -- the state the last claim replaced (0: none)
    key              text        COLLATE "C" NOT NULL PRIMARY KEY,  -- the engine's encoded scope key
    fingerprint      bytea       NOT NULL,  -- versioned request digest (33 bytes)
    response         bytea                  -- engine-encoded response; NULL while PENDING and for a FAILED record that frees its key
) WITH (fillfactor = 90);
CREATE INDEX IF NOT EXISTS ` + n.index + ` ON ` + n.table + ` (expires_at);`
	},
}

// SchemaVersion is the schema version this package writes and reads.
var SchemaVersion = len(migrations)

// ErrNewerSchema is what Migrate's error is (errors.Is) when the database
// holds a newer schema version than this package knows: a later pgstore
// migrated it, and this binary is an older one (a rollback). Migrate
// changed nothing then, and the Store works as it would without Migrate. A
// service whose schema a migration job keeps (see docs/runtime.md, "Migrate
// in a fleet") may log it as a warning and serve, where the newer version's
// notes say older pgstores work on its schema, and stop on any other error.
var ErrNewerSchema = errors.New("pgstore: the database schema version is newer than this pgstore")

// newerSchemaError is Migrate's error on a newer schema version: it is
// ErrNewerSchema, and says both versions.
type newerSchemaError struct{ database, pkg int }

func (e *newerSchemaError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this pgstore (version %d)", e.database, e.pkg)
}

func (e *newerSchemaError) Is(target error) bool { return target == ErrNewerSchema }

// versionTableSQL creates the table that records which migrations ran.
func versionTableSQL(n names) string {
	return `CREATE TABLE IF NOT EXISTS ` + n.version + ` (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);`
}

// layoutColumns are the columns of the records table at SchemaVersion, with
// their types as format_type names them. A migration that changes the
// columns changes them too.
var layoutColumns = [][2]string{
	{"token", "bigint"},
	{"lease_expires_at", "timestamp with time zone"},
	{"expires_at", "timestamp with time zone"},
	{"state", "smallint"},
	{"prior_state", "smallint"},
	{"key", "text"},
	{"fingerprint", "bytea"},
	{"response", "bytea"},
}

// layoutMismatch reports how the records table differs from its layout at
// SchemaVersion, as far as the catalog tells a role that may not own it:
// a missing table, a column missing or of another type (layoutColumns), no
// unique index that Begin's ON CONFLICT (key) can use (the primary key's),
// or no index that serves the reaper's scan by expiry. It returns "" when
// none of these differs, and an error only when the catalog could not be
// read.
//
// An index is taken for what it is, not for its name: a DBA may have made
// an equivalent one under another name, or with INCLUDE columns. Each must
// be valid (not left INVALID by a failed CREATE INDEX CONCURRENTLY) and not
// partial, its first key column a column, not an expression: for the key, a
// unique index checked at once (ON CONFLICT takes no deferrable one) whose
// only key column is key; for the reaper, a btree index whose first key
// column is expires_at (another access method, hash or BRIN, cannot serve
// its ordered range scan). The key columns are the entries of indclass
// (indnkeyatts came with INCLUDE, in PostgreSQL 11).
func (s *Store) layoutMismatch(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, error) {
	rows, err := q.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
    WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped`, s.n.table)
	if err != nil {
		return "", err
	}
	have := map[string]string{}
	var name, typ string
	_, err = pgx.ForEachRow(rows, []any{&name, &typ}, func() error {
		have[name] = typ
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(have) == 0 {
		return "no table " + s.n.table, nil
	}
	var diffs []string
	for _, c := range layoutColumns {
		switch t, ok := have[c[0]]; {
		case !ok:
			diffs = append(diffs, "no column "+c[0])
		case t != c[1]:
			diffs = append(diffs, fmt.Sprintf("column %s is %s, not %s", c[0], t, c[1]))
		}
	}
	// The unique index's access method is not compared: only one whose
	// access method can enforce uniqueness (btree, of the built-in ones) is
	// unique, and ON CONFLICT (key) infers any such index.
	var unique, indexed bool
	var others string // the access methods of the other indexes on expires_at
	if err := q.QueryRow(ctx, `WITH ix AS (
    SELECT a.attname, i.indisunique AND i.indimmediate AND array_length(i.indclass::oid[], 1) = 1 AS unique_only, am.amname
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
    JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
    WHERE i.indrelid = to_regclass($1) AND i.indisvalid AND i.indpred IS NULL)
SELECT EXISTS (SELECT FROM ix WHERE attname = 'key' AND unique_only),
    EXISTS (SELECT FROM ix WHERE attname = 'expires_at' AND amname = 'btree'),
    coalesce((SELECT string_agg(DISTINCT amname::text, ' or ' ORDER BY amname::text) FROM ix WHERE attname = 'expires_at' AND amname <> 'btree'), '')`,
		s.n.table).Scan(&unique, &indexed, &others); err != nil {
		return "", err
	}
	if !unique {
		diffs = append(diffs, "no unique index on key (valid, not partial nor deferrable, key its only key column)")
	}
	if !indexed {
		d := "no btree index on expires_at (valid, not partial, expires_at its first column"
		if others != "" {
			d += "; a " + others + " index cannot serve the reaper's ordered range scan"
		}
		diffs = append(diffs, d+")")
	}
	return strings.Join(diffs, ", "), nil
}

// claimFuncSQL creates Begin's claim function (see queries.claimFunc), with
// exactly the semantics of the claim statement, which stays Begin's fallback
// where the function is missing.
//
// The function is not a migration: it changes no layout, and Migrate creates
// it whenever it is missing, without a new schema version. An older pgstore
// refuses to migrate a schema version it does not know, so a version for the
// function would stop older processes from starting (their Migrate) during a
// rolling deploy; instead they see version 1, migrate nothing and claim with
// the statement, beside newer processes that claim with the function,
// correctly together (TestMixedClaimRace). A later change of its parameters
// or result columns needs a function of another name: a statement prepared on
// the old one would fail ("cached plan must not change result type").
//
// The body names the table schema-qualified instead of setting a search_path:
// a SET clause on a function makes every call save, set and restore the
// setting, a cost on each claim for nothing the qualified name does not give.
// The body's statements are thus independent of the caller's search_path (the
// built-in functions and operators resolve in pg_catalog, which is searched
// first unless a search_path lists it later, as for the claim statement). It
// is VOLATILE (the default; neither STABLE nor IMMUTABLE), so under READ
// COMMITTED each statement in it takes a fresh snapshot and its writes are
// allowed; SECURITY INVOKER (the default), so it runs with the caller's
// privileges on the table. The parameters and result columns have names no
// column has, so no reference in the body is ambiguous. A claimable condition
// that were NULL (it cannot be: the columns it compares are NOT NULL, and
// Begin passes no NULL) would reach the UPDATE, which matches nothing: no
// result, as in the claim statement.
func claimFuncSQL(n names) string {
	return `CREATE OR REPLACE FUNCTION ` + n.claim + `(
    claim_key text, claim_fp bytea, claim_token bigint, claim_lease interval, claim_ttl interval, same_fp boolean,
    OUT acquired boolean, OUT prior integer, OUT rec_state smallint, OUT rec_fingerprint bytea, OUT rec_token bigint,
    OUT rec_lease_expires_at timestamptz, OUT rec_expires_at timestamptz, OUT rec_response bytea)
LANGUAGE plpgsql AS $claim$` + claimFuncBody(n) + `$claim$;`
}

// claimFuncBody is the claim function's body: what PostgreSQL keeps as its
// source (pg_proc.prosrc), which Migrate compares.
func claimFuncBody(n names) string {
	claimable := func(r string) string {
		return `(` + r + `expires_at <= clock_timestamp()
        OR (` + r + `state = 1 AND ` + r + `lease_expires_at <= clock_timestamp() AND (NOT same_fp OR ` + r + `fingerprint = claim_fp))
        OR (` + r + `state = 3 AND ` + r + `response IS NULL AND (NOT same_fp OR ` + r + `fingerprint = claim_fp)))`
	}
	return `
BEGIN
    -- The row, unlocked, into the record's result columns.
    SELECT c.state, c.fingerprint, c.token, c.lease_expires_at, c.expires_at, c.response
    INTO rec_state, rec_fingerprint, rec_token, rec_lease_expires_at, rec_expires_at, rec_response
    FROM ` + n.table + ` AS c WHERE c.key = claim_key;
    IF NOT FOUND THEN  -- a new key
        INSERT INTO ` + n.table + ` (key, state, fingerprint, token, lease_expires_at, expires_at, prior_state, response)
        VALUES (claim_key, 1, claim_fp, claim_token, clock_timestamp() + claim_lease, clock_timestamp() + claim_ttl, 0, NULL)
        ON CONFLICT (key) DO NOTHING;
        IF FOUND THEN
            acquired := true;
            prior := 0;
        END IF;  -- else a concurrent claim inserted the key: acquired is NULL
        RETURN;
    END IF;
    IF rec_state = 1 AND rec_token = claim_token AND rec_expires_at > clock_timestamp() THEN
        -- This very claim, made by an earlier run of the same call: its
        -- lease renewed from now, whether or not it ran out (no takeover:
        -- no other claim came in between), and the state the first run
        -- replaced. Before Begin has answered, only short statements lock
        -- the row (another claim's takeover, after which this one is lost).
        UPDATE ` + n.table + ` AS o SET lease_expires_at = clock_timestamp() + claim_lease
        WHERE o.key = claim_key AND o.token = claim_token AND o.state = 1 AND o.expires_at > clock_timestamp()
        RETURNING o.prior_state INTO prior;
        IF FOUND THEN
            acquired := true;
        END IF;  -- else the row changed meanwhile (expired, taken over): acquired is NULL
        rec_state := NULL; rec_fingerprint := NULL; rec_token := NULL;
        rec_lease_expires_at := NULL; rec_expires_at := NULL; rec_response := NULL;
        RETURN;
    END IF;
    IF NOT ` + claimable("rec_") + ` THEN  -- a replay, a live lease: the record
        acquired := false;
        prior := 0;
        RETURN;
    END IF;
    -- A takeover locks the row first, without waiting: a transaction that
    -- holds it (a BeginTx holder, alive; a Finish, the reaper, another
    -- claim) makes the request in flight.
    PERFORM FROM ` + n.table + ` AS l WHERE l.key = claim_key FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN  -- in flight, as this request: what the row held is no answer while its lock is held
        acquired := false;
        prior := 0;
        rec_state := 1;
        rec_fingerprint := claim_fp;
        rec_response := NULL;
        RETURN;
    END IF;
    UPDATE ` + n.table + ` AS r SET  -- a takeover
        state = 1,
        fingerprint = claim_fp,
        token = claim_token,
        lease_expires_at = clock_timestamp() + claim_lease,
        expires_at = clock_timestamp() + claim_ttl,
        prior_state = CASE WHEN r.expires_at <= clock_timestamp() THEN 0 ELSE r.state END,
        response = NULL
    WHERE r.key = claim_key AND ` + claimable("r.") + `
    RETURNING r.prior_state INTO prior;
    IF FOUND THEN
        acquired := true;
    END IF;  -- else a concurrent claim changed the row first: acquired is NULL
    rec_state := NULL; rec_fingerprint := NULL; rec_token := NULL;
    rec_lease_expires_at := NULL; rec_expires_at := NULL; rec_response := NULL;
END
`
}

// claimFuncArgs is the claim function's argument list, which names it among
// functions of the same name (to_regprocedure, GRANT, DROP).
const claimFuncArgs = `(text, bytea, bigint, interval, interval, boolean)`

// SchemaSQL returns the DDL that creates the store's table for opts (at
// SchemaVersion), the version table with the versions it applied recorded,
// as Migrate records them, and the claim function, for teams that run their
// own migrations instead of (*Store).Migrate. The statements are
// idempotent. Recording the versions keeps such a schema on the upgrade
// path: a later pgstore's Migrate (or SchemaSQL) starts from the version
// it finds there.
func SchemaSQL(opts Options) (string, error) {
	n, err := newNames(opts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range migrations {
		b.WriteString(m(n))
		b.WriteString("\n")
	}
	b.WriteString(versionTableSQL(n))
	b.WriteString("\n")
	for v := range migrations {
		fmt.Fprintf(&b, "INSERT INTO %s (version) VALUES (%d) ON CONFLICT (version) DO NOTHING;\n", n.version, v+1)
	}
	b.WriteString(claimFuncSQL(n))
	b.WriteString("\n")
	return b.String(), nil
}

// Migrate creates or upgrades the store's schema objects: the schema (when
// missing), the records table with its index, a version table
// (<table>_version) that records which migrations ran, and the claim
// function (<table>_claim) when it is missing or its body is not this
// package's (say, after its schema was renamed). Concurrent calls in one
// schema (many instances starting at once, stores of several tables)
// serialize on advisory locks, in a READ COMMITTED transaction whatever the
// database's default isolation; a call on an up-to-date schema changes
// nothing. Last, it checks that its role has the run-time privileges on the
// table (see Check), and fails naming the GRANT it lacks: a role that
// migrates but cannot claim would answer every request 503. It fails when the database holds a newer schema version than this
// package knows ("newer than this pgstore", ErrNewerSchema): after a later pgstore migrated
// the schema to a new version, rolling back to a binary with an older
// pgstore makes that binary's Migrate fail, and a start-up that stops on
// the error stops the rollback. Plan a rollback across a schema version
// before deploying it (skip Migrate in the older binary only if the newer
// version's notes say the older pgstore works on its schema). Only version 1
// exists so far.
//
// Privileges: Migrate needs, besides the run-time ones (USAGE on the schema;
// SELECT, INSERT, UPDATE, DELETE on the table; EXECUTE on the claim
// function), SELECT on the version table, and the CREATE privilege on the
// schema (on the database, if the schema is missing: without it Migrate
// fails, saying the schema is missing and the role may not create it) to
// create anything. To
// upgrade what exists (a migration's DDL on the table, replacing a stale
// claim function) the role must also own it, or be a member of its owner's
// role: PostgreSQL lets only an owner alter or index a table or replace a
// function (a claim function it may not replace is left, with a warning, and
// the Store claims with the statement, as below). An exception: over the
// table of an older SchemaSQL (no version table), which it does not own, a
// role with CREATE records version 1 when the table has the current layout,
// as below. A role that may neither read nor create the version table (its
// schema made by a DBA, with SchemaSQL or another role's Migrate) succeeds,
// with a warning to Options.Logger, when the records table has the current
// layout as the catalog shows it (the columns with their types, a unique
// index on key and a btree index whose first column is expires_at, whatever
// their names; other constraints and defaults are not compared), and fails
// otherwise, saying what differs. Such a role cannot tell a newer schema
// version either: the "newer than this pgstore" check needs SELECT on the
// version table, and a newer version whose records table still has this
// layout goes undetected. The warning (and the error) name the version
// table, the role, the privilege it lacks and the GRANT that gives it:
// grant SELECT on the version table to every role that runs Migrate, so
// that a rollback across a schema version fails as above. Creating the function needs CREATE on the schema too. A
// role without it (since PostgreSQL 15 no role has it on "public" by
// default) cannot create it where an older pgstore left none: Migrate then
// logs a warning, succeeds, and the Store claims with the claim statement
// (see Store.Begin), as older pgstores do. A Store whose Begin fell back to
// the claim statement because the function was missing uses the function
// after a Migrate that finds or creates it, or once it finds it there itself
// (see Store.Begin).
func (s *Store) Migrate(ctx context.Context) error {
	funcOK, err := s.migrate(ctx, true)
	if err != nil {
		return err
	}
	if funcOK {
		s.claimFuncFound()
	} else {
		s.claimFuncAbsent()
	}
	return nil
}

// migrate runs the migrations and, if withFunc (tests leave it out to build
// an older pgstore's schema), makes sure of the claim function, reporting
// whether Begin can call it.
func (s *Store) migrate(ctx context.Context, withFunc bool) (funcOK bool, err error) {
	// READ COMMITTED whatever the database's default: each statement after
	// the locks must see what the migration before this one committed, and
	// a transaction above READ COMMITTED keeps the snapshot of its first
	// statement, which waits for the locks.
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		// Two advisory locks: the table's, which every pgstore's migration
		// takes, and, before it, the schema's, which serializes the
		// migrations of the schema's other tables too. Without it, two of
		// them that both find the schema missing both create it, and the
		// second fails (23505 on pg_namespace); nor, tried under a
		// savepoint, could it go on after that failure: its CREATE TABLE
		// then found no schema (3F000). Taking the locks first, before
		// looking anything up, the transaction sees the schema the one
		// before it created.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1)), pg_advisory_xact_lock(hashtext($2))`,
			"idemgen/pgstore schema:"+s.n.schema, "idemgen/pgstore:"+s.n.lockKey); err != nil {
			return err
		}
		var haveSchema, haveVersion bool
		if err := tx.QueryRow(ctx,
			`SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1), to_regclass($2) IS NOT NULL`,
			s.n.schema, s.n.version).Scan(&haveSchema, &haveVersion); err != nil {
			return err
		}
		if !haveSchema {
			err := savepoint(ctx, tx, func(sp pgx.Tx) error {
				_, err := sp.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.n.schema}.Sanitize())
				return err
			})
			if isInsufficientPrivilege(err) {
				return s.schemaNotCreatable(ctx, tx, err)
			}
			if err != nil {
				return err
			}
		}
		var current int
		verr := savepoint(ctx, tx, func(sp pgx.Tx) error {
			if !haveVersion {
				if _, err := sp.Exec(ctx, versionTableSQL(s.n)); err != nil {
					return err
				}
			}
			return sp.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.n.version).Scan(&current)
		})
		if verr != nil {
			// A role that may neither create the version table nor read it
			// (a DBA's migrations made the schema): it has nothing to do
			// when the records table has the current layout, but it cannot
			// tell a newer schema version (see Migrate).
			if !isInsufficientPrivilege(verr) {
				return verr
			}
			why, err := s.versionUnreadable(ctx, tx, haveVersion)
			if err != nil {
				return err
			}
			diff, err := s.layoutMismatch(ctx, tx)
			if err != nil {
				return err
			}
			if diff != "" {
				return fmt.Errorf("cannot check the schema version: %s; and %s does not have the layout of version %d: %s: %w", why, s.n.table, len(migrations), diff, verr)
			}
			s.log.LogAttrs(ctx, slog.LevelWarn, "pgstore: cannot check the schema version, so a newer one goes undetected: "+why+"; the records table has the current columns, column types, key and expires_at indexes, so there is nothing to migrate",
				slog.String("table", s.n.version), slog.Any("error", verr))
			current = len(migrations)
		}
		if current > len(migrations) {
			return &newerSchemaError{current, len(migrations)}
		}
		for v := current; v < len(migrations); v++ {
			err := savepoint(ctx, tx, func(sp pgx.Tx) error {
				_, err := sp.Exec(ctx, migrations[v](s.n))
				return err
			})
			if err != nil && isInsufficientPrivilege(err) && v+1 == len(migrations) {
				// A role that may create objects in the schema but does not
				// own the table an older SchemaSQL made, without a version
				// table (CREATE INDEX IF NOT EXISTS needs the table's
				// ownership even when the index exists): the migration has
				// nothing to do when the table already has its layout.
				diff, lerr := s.layoutMismatch(ctx, tx)
				if lerr != nil {
					return lerr
				}
				if diff == "" {
					s.log.LogAttrs(ctx, slog.LevelInfo, "pgstore: the records table already has the current layout; recording its version",
						slog.String("table", s.n.table), slog.Int("version", v+1))
					err = nil
				} else {
					err = fmt.Errorf("%w (and %s does not have the layout of version %d: %s)", err, s.n.table, v+1, diff)
				}
			}
			if err != nil {
				return fmt.Errorf("version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+s.n.version+` (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		if withFunc {
			if funcOK, err = s.ensureClaimFunc(ctx, tx); err != nil {
				return err
			}
		}
		return s.checkPrivileges(ctx, tx)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: migrate %s: %w", s.n.table, err)
	}
	return funcOK, nil
}

// Check reports whether the Store's role (the pool's connections'
// current_user) has the privileges requests need, without writing
// anything: USAGE on the schema; SELECT, INSERT, UPDATE on the records
// table, and DELETE unless Options.ReapInterval is negative (the
// reaper's). Its error names what is missing and the GRANT that gives it
// (a missing schema or table: Migrate, or SchemaSQL), so that a role
// without grants fails at start (or its readiness probe) instead of
// answering every request 503 IDEMPOTENCY_STORE_UNAVAILABLE. Migrate runs
// the same check after migrating. A role that may not execute the claim
// function gets a warning naming the GRANT EXECUTE, not an error: Begin
// then falls back to the claim statement, which works and costs the
// server more. It costs two catalog queries; a readiness probe may call
// it, though once at start is enough for grants that do not change.
func (s *Store) Check(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return s.checkPrivileges(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("pgstore: check %s: %w", s.n.table, err)
	}
	return nil
}

// checkPrivileges is Check's, and Migrate's last step, on q (the role of
// its statements).
func (s *Store) checkPrivileges(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	var (
		role               string
		haveSchema, usage  bool
		haveTable          *bool
		sel, ins, upd, del *bool
	)
	// By OID: a lookup by name would fail without USAGE on the schema.
	err := q.QueryRow(ctx, `SELECT current_user, n.oid IS NOT NULL, coalesce(has_schema_privilege(n.oid, 'USAGE'), false),
    c.oid IS NOT NULL, has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'),
    has_table_privilege(c.oid, 'UPDATE'), has_table_privilege(c.oid, 'DELETE')
FROM (SELECT 1) AS one
LEFT JOIN pg_namespace n ON n.nspname = $1
LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
		s.n.schema, s.n.name).Scan(&role, &haveSchema, &usage, &haveTable, &sel, &ins, &upd, &del)
	if err != nil {
		return err
	}
	r := pgx.Identifier{role}.Sanitize()
	schema := pgx.Identifier{s.n.schema}.Sanitize()
	switch {
	case !haveSchema:
		return fmt.Errorf("the schema %s does not exist: run Migrate (as the schema's owner) or SchemaSQL", schema)
	case !usage:
		return fmt.Errorf("the role %s lacks USAGE on the schema %s: GRANT USAGE ON SCHEMA %s TO %s (and the run-time privileges on %s)", r, schema, schema, r, s.n.table)
	case haveTable == nil || !*haveTable:
		return fmt.Errorf("the table %s does not exist: run Migrate (as the schema's owner) or SchemaSQL", s.n.table)
	}
	var missing []string
	for _, p := range []struct {
		name string
		ok   *bool
		need bool
	}{{"SELECT", sel, true}, {"INSERT", ins, true}, {"UPDATE", upd, true}, {"DELETE", del, s.opts.ReapInterval >= 0}} {
		if p.need && (p.ok == nil || !*p.ok) {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		privs := strings.Join(missing, ", ")
		why := ""
		if slices.Contains(missing, "DELETE") {
			why = " (DELETE for the background reaper; set Options.ReapInterval negative where another process reaps)"
		}
		return fmt.Errorf("the role %s lacks %s on %s, so every request would be answered 503: GRANT %s ON %s TO %s%s",
			r, privs, s.n.table, privs, s.n.table, r, why)
	}
	var exec *bool
	if err := q.QueryRow(ctx, `SELECT has_function_privilege(to_regprocedure($1), 'EXECUTE')`, s.n.claim+claimFuncArgs).Scan(&exec); err != nil {
		return err
	}
	if exec != nil && !*exec {
		s.log.LogAttrs(ctx, slog.LevelWarn, "pgstore: the role may not execute the claim function, so Begin runs the claim statement, which costs the server more: GRANT EXECUTE ON FUNCTION "+
			s.n.claim+claimFuncArgs+" TO "+r, slog.String("function", s.n.claim), slog.String("role", role))
	}
	return nil
}

// versionUnreadable says why Migrate, for the role of tx, could neither
// read nor create the version table (exists: whether the table exists),
// naming the table, the role, the privilege it lacks and the grant that
// gives it.
func (s *Store) versionUnreadable(ctx context.Context, tx pgx.Tx, exists bool) (string, error) {
	r, err := currentRole(ctx, tx)
	if err != nil {
		return "", err
	}
	if exists {
		return fmt.Sprintf("the role %s lacks the SELECT privilege on %s (GRANT SELECT ON %s TO %s)", r, s.n.version, s.n.version, r), nil
	}
	schema := pgx.Identifier{s.n.schema}.Sanitize()
	return fmt.Sprintf("%s does not exist and the role %s lacks the CREATE privilege on the schema %s to create it (create it with SchemaSQL, and GRANT SELECT ON %s TO %s)", s.n.version, r, schema, s.n.version, r), nil
}

// schemaNotCreatable is Migrate's error when the schema does not exist and
// the role of tx may not create it (err: the refused CREATE SCHEMA), naming
// the schema, the role and the ways out.
func (s *Store) schemaNotCreatable(ctx context.Context, tx pgx.Tx, err error) error {
	role := "the role"
	if r, rerr := currentRole(ctx, tx); rerr == nil {
		role += " " + r
	}
	schema := pgx.Identifier{s.n.schema}.Sanitize()
	return fmt.Errorf("the schema %s does not exist and %s may not create it (it lacks CREATE on the database): have the schema's owner create it (CREATE SCHEMA %s) and its tables (Migrate as that owner, or SchemaSQL), then grant this role the run-time privileges: %w", schema, role, schema, err)
}

// currentRole is the role q's statements run as (current_user), quoted as
// an SQL identifier for the GRANT a message suggests.
func currentRole(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, error) {
	var role string
	if err := q.QueryRow(ctx, `SELECT current_user`).Scan(&role); err != nil {
		return "", err
	}
	return pgx.Identifier{role}.Sanitize(), nil
}

// savepoint runs f in a savepoint of tx, rolled back when f fails, so that
// tx can go on after the failure.
func savepoint(ctx context.Context, tx pgx.Tx, f func(sp pgx.Tx) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := f(sp); err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return rerr
		}
		return err
	}
	return sp.Commit(ctx)
}

// isInsufficientPrivilege reports a refusal for want of a privilege
// (SQLSTATE 42501).
func isInsufficientPrivilege(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == "42501"
}

// claimFuncSrc is the body (pg_proc.prosrc) of the claim function installed
// for this Store's table, or nil when there is none.
func (s *Store) claimFuncSrc(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (*string, error) {
	var src *string
	err := q.QueryRow(ctx, `SELECT (SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($1))`,
		s.n.claim+claimFuncArgs).Scan(&src)
	return src, err
}

// ensureClaimFunc creates or replaces the claim function unless it exists
// with this package's body. Where the role may not create it (SQLSTATE
// 42501), it logs a warning, leaves the schema as it was (the attempt runs
// under a savepoint) and reports false.
func (s *Store) ensureClaimFunc(ctx context.Context, tx pgx.Tx) (bool, error) {
	src, err := s.claimFuncSrc(ctx, tx)
	if err != nil {
		return false, err
	}
	if src != nil && *src == claimFuncBody(s.n) {
		return true, nil
	}
	err = savepoint(ctx, tx, func(sp pgx.Tx) error {
		_, err := sp.Exec(ctx, claimFuncSQL(s.n))
		return err
	})
	if isInsufficientPrivilege(err) {
		s.log.LogAttrs(ctx, slog.LevelWarn, "pgstore: cannot create or replace the claim function; Begin runs the claim statement, which costs the server more",
			slog.String("function", s.n.claim), slog.Any("error", err))
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim function: %w", err)
	}
	return true, nil
}

// errLostRace is the claim statement's empty answer: a concurrent claim of
// the key won a race the statement's snapshot could not see.
var errLostRace = errors.New("pgstore: a concurrent claim kept changing the record")
