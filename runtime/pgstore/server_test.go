package pgstore

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// writeCounter counts writes to a connection: pgx sends a query, or a whole
// batch, with one Write and then waits, so the count is the round trips.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

func poolWith(t testing.TB, url string, tweak func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	if tweak != nil {
		tweak(cfg)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	var writes atomic.Int64
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return writeCounter{Conn: conn, n: &writes}, nil
		}
	})
	s, err := New(p, Options{Schema: uniqueSchema(t, p)})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Migrate(ctx))
	req := func(key string, tok idem.Token) *idem.BeginRequest {
		return &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: tok, Lease: time.Minute, TTL: time.Hour}
	}
	// Warm up: statements are prepared once per connection.
	_, err = s.Begin(ctx, req("warm", 1))
	require.NoError(t, err)
	require.NoError(t, s.Finish(ctx, "warm", 1, idem.StateCompleted, []byte("x")))
	_, _, err = s.Get(ctx, "warm")
	require.NoError(t, err)

	writes.Store(0)
	r, err := s.Begin(ctx, req("k", 2))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 2, idem.StateCompleted, []byte("resp")))
	assert.Equal(t, int64(2), writes.Load(), "first request: Begin + Finish")

	writes.Store(0)
	rec, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, []byte("resp"), rec.Response)
	assert.Equal(t, int64(1), writes.Load(), "replay by Get")

	writes.Store(0)
	r, err = s.Begin(ctx, req("k", 3))
	require.NoError(t, err)
	assert.False(t, r.Acquired)
	assert.Equal(t, []byte("resp"), r.Record.Response)
	assert.Equal(t, int64(1), writes.Load(), "replay by Begin")
}

func TestKeyValidation(t *testing.T) {
	t.Parallel()
	// No server needed: bad keys are refused before any request.
	p, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	defer p.Close()
	s, err := New(p, Options{})
	require.NoError(t, err)
	ctx := context.Background()
	for name, key := range map[string]string{
		"empty": "", "NUL": "a\x00b", "invalid UTF-8": "a\xffb", "too long": string(make([]byte, MaxKeyLen+1)),
	} {
		_, _, err := s.Get(ctx, key)
		assert.ErrorContains(t, err, "key", name)
		assert.NotContains(t, err.Error(), "dial", name)
	}
}

func TestOutage(t *testing.T) {
	t.Parallel()
	ops := map[string]func(s *Store, ctx context.Context) error{
		"Begin": func(s *Store, ctx context.Context) error {
			_, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: 1, Lease: time.Minute, TTL: time.Hour})
			return err
		},
		"Finish": func(s *Store, ctx context.Context) error { return s.Finish(ctx, "k", 1, idem.StateCompleted, nil) },
		"Get": func(s *Store, ctx context.Context) error {
			_, _, err := s.Get(ctx, "k")
			return err
		},
		"BeginTx": func(s *Store, ctx context.Context) error {
			_, _, rb, err := s.BeginTx(ctx, "k", 1)
			if err == nil {
				rb()
			}
			return err
		},
	}
	for name, addr := range map[string]string{"ClosedPort": closedAddr(t), "HangingServer": blackhole(t)} {
		t.Run(name, func(t *testing.T) {
			p := poolWith(t, "postgres://postgres@"+addr+"/postgres?sslmode=disable&connect_timeout=10", nil)
			s, err := New(p, Options{})
			require.NoError(t, err)
			for op, f := range ops {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				start := time.Now()
				err := f(s, ctx)
				cancel()
				require.Error(t, err, op)
				assert.NotErrorIs(t, err, idem.ErrFenced, op)
				assert.Less(t, time.Since(start), time.Second, op)
			}
		})
	}
}

func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func blackhole(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return l.Addr().String()
}
