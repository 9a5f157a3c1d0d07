package pgstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/storebench"
)

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

// TestRoundTrips counts the writes on the store's only connection: one per
// round trip (statements are prepared once per connection, in the warm-up).
// On an older pgstore's schema (no claim function, "V1"), Begin's first call
// of the missing function (in the warm-up) costs one round trip more, once;
// the claim statement then costs what the function does.
func TestRoundTrips(t *testing.T) {
	for name, tc := range map[string]struct {
		newStore func(testing.TB, *pgxpool.Pool, Options) *Store
		fn       bool // Begin ends up calling the claim function
	}{"Func": {newStoreOn, true}, "V1": {newV1StoreOn, false}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var writes atomic.Int64
			p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
				c.MaxConns = 1
				c.ConnConfig.DialFunc = testenv.CountingDialer(&writes)
			})
			s := tc.newStore(t, p, Options{})
			storebench.RoundTrips(t, s, &writes)
			require.Equal(t, tc.fn, s.usesClaimFunc())
		})
	}
}

func TestKeyValidation(t *testing.T) {
	t.Parallel()
	// No server needed: bad keys are refused before any request.
	p, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	defer p.Close()
	s, err := New(p, Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx := testCtx(t)
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
			_, err := s.Begin(ctx, beginReq("k", 1))
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
	for name, addr := range map[string]string{"ClosedPort": testenv.FreeAddr(t), "HangingServer": testenv.Blackhole(t)} {
		t.Run(name, func(t *testing.T) {
			p := poolWith(t, "postgres://postgres@"+addr+"/postgres?sslmode=disable&connect_timeout=10", nil)
			s, err := New(p, Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() }) // before the pool's
			for op, f := range ops {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				start := time.Now()
				err := f(s, ctx)
				cancel()
				require.Error(t, err, op)
				assert.NotErrorIs(t, err, idem.ErrFenced, op)
				// Bounded by the context, not by connect_timeout (10 s):
				// a wide margin for a loaded machine.
				assert.Less(t, time.Since(start), 5*time.Second, op)
			}
		})
	}
}
