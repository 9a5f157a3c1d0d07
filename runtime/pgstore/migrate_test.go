package pgstore

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{Table: "Records"}) // migrated once
	ctx := context.Background()
	type snapshot struct {
		tableOID, indexOID uint32
		versions           []int
		applied            time.Time
		ddlXmin            string
	}
	snap := func() snapshot {
		var sn snapshot
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT $1::regclass::oid, $2::regclass::oid, (SELECT xmin::text FROM pg_class WHERE oid = $1::regclass)`,
			s.n.table, pgx.Identifier{s.n.schema, "Records_expires_at_idx"}.Sanitize()).Scan(&sn.tableOID, &sn.indexOID, &sn.ddlXmin))
		rows, err := s.pool.Query(ctx, `SELECT version FROM `+s.n.version+` ORDER BY version`)
		require.NoError(t, err)
		sn.versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT max(applied_at) FROM `+s.n.version).Scan(&sn.applied))
		return sn
	}
	_, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: time.Minute, TTL: time.Hour})
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

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	p := testPool(t)
	schema := uniqueSchema(t, p)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := New(p, Options{Schema: schema})
			if err == nil {
				err = s.Migrate(context.Background())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, p.QueryRow(context.Background(),
		`SELECT count(*) FROM `+pgx.Identifier{schema, DefaultTable + "_version"}.Sanitize()).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.n.version+` (version) VALUES ($1)`, SchemaVersion+1)
	require.NoError(t, err)
	err = s.Migrate(ctx)
	assert.ErrorContains(t, err, "newer")
}

// TestSchemaSQL: a team running its own migrations applies SchemaSQL and
// uses the store without Migrate.
func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	p := testPool(t)
	schema := uniqueSchema(t, p)
	ctx := context.Background()
	_, err := p.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	ddl, err := SchemaSQL(Options{Schema: schema, Table: "idem"})
	require.NoError(t, err)
	assert.Contains(t, ddl, `CREATE TABLE IF NOT EXISTS "`+schema+`"."idem"`)
	for range 2 { // idempotent
		_, err = p.Exec(ctx, ddl)
		require.NoError(t, err)
	}
	s, err := New(p, Options{Schema: schema, Table: "idem"})
	require.NoError(t, err)
	r, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	assert.True(t, r.Acquired)
}

func TestNames(t *testing.T) {
	ddl, err := SchemaSQL(Options{})
	require.NoError(t, err)
	assert.Contains(t, ddl, `"public"."idem_records"`)
	assert.Contains(t, ddl, `"idem_records_expires_at_idx"`)
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
