package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Default names of the schema objects.
const (
	DefaultSchema = "public"
	DefaultTable  = "idem_records"
)

// maxTableLen leaves room for the suffixes of the objects named after the
// table (…_version, …_expires_at_idx) within PostgreSQL's 63-byte names.
const maxTableLen = 48

// names holds the quoted identifiers of one store's schema objects.
type names struct {
	schema  string // the schema, unquoted
	table   string // "schema"."table"
	version string // "schema"."table_version"
	index   string // "table_expires_at_idx" (an index lives in its table's schema)
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
		table:   pgx.Identifier{schema, table}.Sanitize(),
		version: pgx.Identifier{schema, table + "_version"}.Sanitize(),
		index:   pgx.Identifier{table + "_expires_at_idx"}.Sanitize(),
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

// SchemaSQL returns the DDL that creates the store's table for opts (at
// SchemaVersion), for teams that run their own migrations instead of
// (*Store).Migrate. The statements are idempotent.
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
	return b.String(), nil
}

// Migrate creates or upgrades the store's schema objects: the schema (when
// missing), the records table with its index, and a version table
// (<table>_version) that records which migrations ran. Concurrent calls (many
// instances starting at once) serialize on an advisory lock; a call on an
// up-to-date schema changes nothing. It fails when the database holds a newer
// schema version than this package knows.
func (s *Store) Migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "idemgen/pgstore:"+s.n.lockKey); err != nil {
			return err
		}
		var haveSchema, haveVersion bool
		if err := tx.QueryRow(ctx,
			`SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1), to_regclass($2) IS NOT NULL`,
			s.n.schema, s.n.version).Scan(&haveSchema, &haveVersion); err != nil {
			return err
		}
		if !haveSchema {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.n.schema}.Sanitize()); err != nil {
				return err
			}
		}
		if !haveVersion {
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.n.version+` (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
				return err
			}
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.n.version).Scan(&current); err != nil {
			return err
		}
		if current > len(migrations) {
			return fmt.Errorf("database schema version %d is newer than this pgstore (version %d)", current, len(migrations))
		}
		for v := current; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v](s.n)); err != nil {
				return fmt.Errorf("version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+s.n.version+` (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", s.n.table, err)
	}
	return nil
}

// errLostRace is the claim statement's empty answer: a concurrent claim of
// the key won a race the statement's snapshot could not see.
var errLostRace = errors.New("pgstore: a concurrent claim kept changing the record")
