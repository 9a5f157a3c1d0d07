//go:build gopotency

// This file is package stores' gopotency peer, added to the package by the
// overlay next to it (see middleware_test.go here for why it lives apart).

package stores

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"unsafe"

	idempotency "github.com/fco-gt/gopotency"
	"github.com/fco-gt/gopotency/key"
	httpmw "github.com/fco-gt/gopotency/middleware/http"
	gpgorm "github.com/fco-gt/gopotency/storage/gorm"
	gpredis "github.com/fco-gt/gopotency/storage/redis"
	gpsql "github.com/fco-gt/gopotency/storage/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"

	"github.com/idemgen/idemgen/bench/internal/check"
	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/internal/testenv"
)

func init() {
	redisPeers = append(redisPeers, peer{"gopotency", func(b *testing.B) {
		h := gopotencyRedis(b, workload.Handler())
		rows(b, h.cnt, false, h, h)
	}})
	postgresPeers = append(postgresPeers, peer{"gopotency", func(b *testing.B) {
		h := gopotencySQL(b, workload.Handler())
		rows(b, h.cnt, true, h, h)
	}}, peer{"gopotency-gorm", func(b *testing.B) {
		h := gopotencyGorm(b, workload.Handler())
		rows(b, h.cnt, true, h, h)
	}})
}

// gopotencyOver is gopotency v1.0.0's net/http middleware over a storage,
// configured as in middleware_test.go: the Idempotency-Key header
// (required), the default request hasher (SHA-256 of the raw body), TTL
// 24 h, lock timeout 5 min.
func gopotencyOver(tb testing.TB, s idempotency.Storage, next http.Handler) http.Handler {
	m, err := idempotency.NewManager(idempotency.Config{
		Storage:     s,
		KeyStrategy: key.HeaderBased("Idempotency-Key"),
		RequireKey:  true,
	})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = m.Close() })
	return httpmw.Idempotency(m)(next)
}

// prefixed serves h with prefix put before the Idempotency-Key of each
// request: gopotency's stores keep the key as it comes (in Redis, in
// database 0, next to "lock:"+key), and the benchmarks' keys repeat from
// one process to the next, so each instance gets keys of its own (which
// its cleanup deletes). It costs a string and a slice per request.
type prefixed struct {
	h      http.Handler
	prefix string
	cnt    *counter
}

func (p prefixed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	old := r.Header["Idempotency-Key"]
	if len(old) > 0 {
		r.Header["Idempotency-Key"] = []string{p.prefix + old[0]}
		defer func() { r.Header["Idempotency-Key"] = old }()
	}
	p.h.ServeHTTP(w, r)
}

// gopotencyRedis is gopotency over its Redis storage on the test server.
// NewRedisStorage makes its own client (database 0, the default pool):
// the counting hook is added to that client, reached by reflection, as
// the storage does not expose it.
func gopotencyRedis(tb testing.TB, next http.Handler) prefixed {
	_, cnt, prefix := redisClient(tb) // a prefix whose keys are deleted afterwards
	opt, err := redis.ParseURL(testenv.RedisURL(tb))
	require.NoError(tb, err)
	require.Zero(tb, opt.DB, "gopotency's Redis storage uses database 0")
	s, err := gpredis.NewRedisStorage(context.Background(), opt.Addr, opt.Password)
	require.NoError(tb, err)
	f := reflect.ValueOf(s).Elem().FieldByName("client")
	c := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(*redis.Client)
	c.AddHook(redisHook{cnt})
	tb.Cleanup(func() {
		// Locks left behind (by a failed request) are "lock:"+key.
		ctx := context.Background()
		keys, _ := c.Keys(ctx, "lock:"+prefix+"*").Result()
		if len(keys) > 0 {
			_ = c.Unlink(ctx, keys...).Err()
		}
	})
	return prefixed{h: gopotencyOver(tb, s, next), prefix: prefix, cnt: cnt}
}

// gopotencySQL is gopotency over its database/sql storage on the test
// PostgreSQL, through pgx's database/sql driver on the counting pool. The
// storage creates no tables: they are those of its sql-basic example, in
// PostgreSQL types.
func gopotencySQL(tb testing.TB, next http.Handler) prefixed {
	pool, cnt, schema := pgPool(tb)
	table := pgx.Identifier{schema}.Sanitize() + ".gopotency"
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`
CREATE TABLE %[1]s (key text PRIMARY KEY, data bytea NOT NULL, expires_at timestamptz NOT NULL);
CREATE TABLE %[1]s_locks (key text PRIMARY KEY, expires_at timestamptz NOT NULL)`, table))
	require.NoError(tb, err)
	db := stdlib.OpenDBFromPool(pool)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	tb.Cleanup(func() { _ = db.Close() })
	return prefixed{h: gopotencyOver(tb, gpsql.NewSQLStorage(db, table), next), cnt: cnt}
}

// gopotencyGorm is gopotency over its GORM storage on the test PostgreSQL
// (GORM's PostgreSQL driver over pgx's database/sql driver on the counting
// pool), with GORM's defaults but its logger silenced (it would print every
// "record not found" of a first request and every refused lock). The
// tables are created here: the storage's model declares its data column
// `type:blob`, which PostgreSQL does not have, so the AutoMigrate of its
// example fails there; they are the model's in PostgreSQL types.
func gopotencyGorm(tb testing.TB, next http.Handler) prefixed {
	pool, cnt, sch := pgPool(tb)
	prefix := pgx.Identifier{sch}.Sanitize() + "."
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`
CREATE TABLE %[1]sidempotency_records (key varchar(255) PRIMARY KEY, data bytea NOT NULL, expires_at timestamptz NOT NULL);
CREATE INDEX ON %[1]sidempotency_records (expires_at);
CREATE TABLE %[1]sidempotency_locks (key varchar(255) PRIMARY KEY, expires_at timestamptz NOT NULL)`, prefix))
	require.NoError(tb, err)
	sqlDB := stdlib.OpenDBFromPool(pool)
	sqlDB.SetMaxOpenConns(32)
	sqlDB.SetMaxIdleConns(32)
	tb.Cleanup(func() { _ = sqlDB.Close() })
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		Logger:         logger.Discard,
		NamingStrategy: schema.NamingStrategy{TablePrefix: sch + "."},
	})
	require.NoError(tb, err)
	return prefixed{h: gopotencyOver(tb, gpgorm.NewGormStorage(db), next), cnt: cnt}
}

// TestCorrectnessGopotency* record what gopotency does over each server;
// they assert only what the harness relies on (every request answered).
func TestCorrectnessGopotencyRedis(t *testing.T) {
	r := check.Run(t, "gopotency v1.0.0 net/http (Redis storage)", func(tb testing.TB, ops *check.Ops) check.Target {
		return check.NetHTTP{H: gopotencyRedis(tb, check.Handler(ops))}
	})
	requireAnswered(t, r)
}

func TestCorrectnessGopotencyPostgres(t *testing.T) {
	r := check.Run(t, "gopotency v1.0.0 net/http (SQL storage, PostgreSQL)", func(tb testing.TB, ops *check.Ops) check.Target {
		return check.NetHTTP{H: gopotencySQL(tb, check.Handler(ops))}
	})
	requireAnswered(t, r)
}

func TestCorrectnessGopotencyGorm(t *testing.T) {
	r := check.Run(t, "gopotency v1.0.0 net/http (GORM storage, PostgreSQL)", func(tb testing.TB, ops *check.Ops) check.Target {
		return check.NetHTTP{H: gopotencyGorm(tb, check.Handler(ops))}
	})
	requireAnswered(t, r)
}

func requireAnswered(t *testing.T, r check.Result) {
	r.Concurrent.AssertAnswered(t)
}
