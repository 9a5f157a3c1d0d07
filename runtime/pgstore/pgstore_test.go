package pgstore

import (
	"maps"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// TestConformance runs the shared store conformance suite against a real
// PostgreSQL, each subtest in a schema of its own.
func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) idem.Store { return newTestStore(t, Options{}) })
}

// TestConformanceExecModes runs the suite over pools configured for
// connection poolers (PgBouncer in transaction mode cannot keep prepared
// statements): the batch of Begin must stay one implicit transaction in every
// query execution mode.
func TestConformanceExecModes(t *testing.T) {
	for name, mode := range poolerExecModes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := poolInMode(t, mode)
			storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
				return newStoreOn(t, p, Options{})
			})
		})
	}
}

// poolerExecModes are the query execution modes that keep no prepared
// statement on a connection, as behind a connection pooler (the default,
// CacheStatement, is TestConformance's).
var poolerExecModes = map[string]pgx.QueryExecMode{
	"SimpleProtocol": pgx.QueryExecModeSimpleProtocol,
	"Exec":           pgx.QueryExecModeExec,
	"DescribeExec":   pgx.QueryExecModeDescribeExec,
}

// poolInMode returns a pool of 8 connections in the query execution mode.
func poolInMode(t *testing.T, mode pgx.QueryExecMode) *pgxpool.Pool {
	return poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 8
		c.ConnConfig.DefaultQueryExecMode = mode
	})
}

// TestConformanceIsolation runs the suite on a database whose default
// isolation is stricter than READ COMMITTED: a claim that meets a concurrent
// one, or a Finish or ExtendLease that meets another change of the row, then
// fails with a serialization error, which the store retries.
func TestConformanceIsolation(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
				c.MaxConns = 8
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = level
			})
			storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
				return newStoreOn(t, p, Options{})
			})
		})
	}
}

// TestConformanceV1 runs the suite on older pgstores' schemas (no claim
// function), where Begin falls back to the claim statement, in every query
// execution mode (the missing function is reported at a different step in
// each: prepare, describe or execute).
func TestConformanceV1(t *testing.T) {
	modes := maps.Clone(poolerExecModes)
	modes["CacheStatement"] = pgx.QueryExecModeCacheStatement
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := poolInMode(t, mode)
			storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
				s := newV1StoreOn(t, p, Options{})
				t.Cleanup(func() {
					var rows int
					ctx, cancel := cleanupCtx()
					defer cancel()
					require.NoError(t, p.QueryRow(ctx,
						`SELECT count(*) FROM `+s.n.table).Scan(&rows))
					if rows > 0 { // the test claimed: with the statement
						assert.False(t, s.usesClaimFunc(), "Begin fell back to the claim statement")
					}
				})
				return s
			})
		})
	}
}
