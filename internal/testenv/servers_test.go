package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestStartRedis(t *testing.T) {
	t.Parallel()
	r := StartRedis(t)
	require.NoError(t, redisPing(r.Addr))
	r.Stop()
	require.Error(t, redisPing(r.Addr), "stopped")
	require.NoError(t, r.Start())
	require.NoError(t, redisPing(r.Addr), "started again on the same port")
}

func TestStartPostgres(t *testing.T) {
	t.Parallel()
	p := StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	query := func() error {
		c, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, `CREATE TABLE IF NOT EXISTS t (x int); INSERT INTO t VALUES (1)`)
		return err
	}
	require.NoError(t, query())
	require.NoError(t, p.Stop())
	require.Error(t, query(), "stopped")
	require.NoError(t, p.Start())
	require.NoError(t, query(), "started again, after crash recovery")
	c, err := pgx.Connect(ctx, p.URL)
	require.NoError(t, err)
	defer c.Close(ctx)
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n))
	require.Equal(t, 2, n, "committed rows survive an immediate stop")
}
