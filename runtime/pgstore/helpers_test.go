package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"

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
		pool, poolErr = pgxpool.NewWithConfig(context.Background(), cfg)
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
		_, _ = p.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
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
	if opts.Schema == "" {
		opts.Schema = uniqueSchema(tb, p)
	}
	s, err := New(p, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	require.NoError(tb, s.Migrate(context.Background()))
	return s
}

func fp(b byte) idem.Fingerprint {
	var f idem.Fingerprint
	f[0] = 1
	for i := 1; i < len(f); i++ {
		f[i] = b
	}
	return f
}
