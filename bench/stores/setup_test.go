package stores

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
)

// counter counts round trips (and statements, for PostgreSQL).
type counter struct{ trips, stmts atomic.Int64 }

func (c *counter) snapshot() (int64, int64) { return c.trips.Load(), c.stmts.Load() }

// redisHook counts commands: each is one round trip, a pipeline one for all.
type redisHook struct{ c *counter }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.trips.Add(1)
		h.c.stmts.Add(1)
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.trips.Add(1)
		h.c.stmts.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// redisClient returns a client of the test server with a counting hook and
// a key prefix of its own (whose keys are deleted afterwards).
func redisClient(tb testing.TB) (*redis.Client, *counter, string) {
	tb.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL(tb))
	require.NoError(tb, err)
	opt.ContextTimeoutEnabled = true // redisstore requires it
	opt.PoolSize = 32
	c := redis.NewClient(opt)
	cnt := &counter{}
	c.AddHook(redisHook{cnt})
	prefix := "idembench:" + randomHex() + ":"
	tb.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 1000 {
				_ = c.Unlink(ctx, keys...).Err()
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			_ = c.Unlink(ctx, keys...).Err()
		}
		_ = c.Close()
	})
	return c, cnt, prefix
}

// pgTracer counts round trips: a query, a batch (however many statements
// it holds), a prepare.
type pgTracer struct{ c *counter }

func (t pgTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.c.trips.Add(1)
	t.c.stmts.Add(1)
	return ctx
}
func (pgTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t pgTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	t.c.trips.Add(1)
	t.c.stmts.Add(int64(d.Batch.Len()))
	return ctx
}
func (pgTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (pgTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (t pgTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.c.trips.Add(1)
	return ctx
}
func (pgTracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// pgPool returns a pool on the test server whose connections use a schema
// of their own (dropped afterwards), with a counting tracer.
func pgPool(tb testing.TB) (*pgxpool.Pool, *counter, string) {
	tb.Helper()
	url := testenv.PostgresURL(tb)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(tb, err)
	cfg.MaxConns = 32
	cnt := &counter{}
	cfg.ConnConfig.Tracer = pgTracer{cnt}
	schema := "idembench_" + randomHex()
	ctx := context.Background()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(tb, err)
	_, err = p.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	require.NoError(tb, err)
	// Open the connections now, not while a scenario measures or races.
	conns := make([]*pgxpool.Conn, cfg.MaxConns)
	for i := range conns {
		conns[i], err = p.Acquire(ctx)
		require.NoError(tb, err)
	}
	for _, c := range conns {
		c.Release()
	}
	tb.Cleanup(func() {
		_, _ = p.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		p.Close()
	})
	return p, cnt, schema
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
