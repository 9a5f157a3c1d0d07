package stores

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
)

// Benchmark names: Benchmark<Server>/<implementation>/<row>, rows first,
// replay and replay-parallel; each reports roundtrips/op (and, for
// PostgreSQL, statements/op: a batch is one round trip for several).
// Parallel rows run 4 goroutines per GOMAXPROCS, so that round trips
// overlap as they do in a server.

const parallelism = 4

// peer is a middleware over its own store measured beside idemgen, when
// the file that defines it is built (a peer whose module cannot be a
// dependency of bench/go.mod: see docs/benchmarks.md, "Peers that could not
// be measured").
type peer struct {
	name string
	run  func(b *testing.B)
}

var redisPeers, postgresPeers []peer

// trips reports the round trips (and statements) per request of a benchmark.
func trips(b *testing.B, c *counter, stmts bool, run func()) {
	t0, s0 := c.snapshot()
	run()
	t1, s1 := c.snapshot()
	if b.N > 0 {
		b.ReportMetric(float64(t1-t0)/float64(b.N), "roundtrips/op")
		if stmts {
			b.ReportMetric(float64(s1-s0)/float64(b.N), "statements/op")
		}
	}
}

// rows runs the three rows for one implementation: first requests through
// first, replays through replay after one request through first.
func rows(b *testing.B, c *counter, stmts bool, first, replay http.Handler) {
	b.Run("first", func(b *testing.B) {
		cl := workload.NewClient(workload.Payload)
		t0, _ := c.snapshot()
		trips(b, c, stmts, func() { workload.Keyed(b, cl.Set, func() int { return cl.Do(first) }) })
		if t1, _ := c.snapshot(); t1-t0 < 2*int64(b.N) {
			b.Fatalf("%d round trips for %d first requests: some were not first", t1-t0, b.N)
		}
	})
	replayRows(b, c, stmts, first, replay)
}

// replayRows runs the replay rows: replays through replay of a record made
// through first.
func replayRows(b *testing.B, c *counter, stmts bool, first, replay http.Handler) {
	// With -count, each row's function runs again in this call: a key of
	// its own each time (the raw first handler refuses a key it has seen).
	replays := uint32(0)
	b.Run("replay", func(b *testing.B) {
		replays++
		cl := workload.NewClient(workload.Payload)
		cl.SetKey(workload.KeyOf(1<<30+replays, 0))
		require.Equal(b, http.StatusCreated, cl.Do(first))
		trips(b, c, stmts, func() { workload.Serial(b, func() int { return cl.Do(replay) }) })
	})
	round := uint32(0)
	b.Run("replay-parallel", func(b *testing.B) {
		round++
		key := workload.KeyOf(1<<31+round, 0)
		cl := workload.NewClient(workload.Payload)
		cl.SetKey(key)
		require.Equal(b, http.StatusCreated, cl.Do(first))
		b.SetParallelism(parallelism)
		trips(b, c, stmts, func() {
			workload.Parallel(b, func() func() int {
				cl := workload.NewClient(workload.Payload)
				cl.SetKey(key)
				return func() int { return cl.Do(replay) }
			})
		})
	})
}

func idemgenOver(s idem.Store) http.Handler {
	_, hidden := s.(claimOnly)
	// claimOnly hides the store's LeaseExtender, about which idem.New would
	// warn (a log line in the middle of the benchmark's output); replays do
	// not heartbeat.
	return idem.New(s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: hidden}).Handler(idem.MustCompile(workload.Spec()), workload.Handler())
}

// idemgenRows runs the rows of implementation idemgen over the store that
// store makes, or, for idemgen-claim, the replay rows of a record another
// instance made: the record is made through one Engine and replayed through
// a second one, which does not know the key, so it claims with Begin
// instead of reading first (idem.ReadFirst).
func idemgenRows(b *testing.B, store func(*testing.B) (*counter, idem.Store), stmts bool) {
	b.Run("idemgen", func(b *testing.B) {
		c, s := store(b)
		h := idemgenOver(s)
		rows(b, c, stmts, h, h)
	})
	b.Run("idemgen-claim", func(b *testing.B) {
		c, s := store(b)
		replayRows(b, c, stmts, idemgenOver(s), idemgenOver(claimOnly{s}))
	})
}

// claimOnly is a store without idem.ReadFirst: its Engine claims every
// request with Begin, as an Engine does for a key it never saw final, and
// never calls Get. It hides the store's other optional interfaces too
// (LeaseExtender, Watcher, Transactor), which replays do not use:
// heartbeats and watches are for requests that execute or wait.
type claimOnly struct{ idem.Store }

func redisStore(tb testing.TB, c *redis.Client, prefix string) *redisstore.Store {
	s, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
	require.NoError(tb, err)
	require.NoError(tb, s.LoadScripts(context.Background()))
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func BenchmarkRedis(b *testing.B) {
	idemgenRows(b, func(b *testing.B) (*counter, idem.Store) {
		c, cnt, prefix := redisClient(b)
		return cnt, redisStore(b, c, prefix)
	}, false)
	b.Run("raw", func(b *testing.B) {
		c, cnt, prefix := redisClient(b)
		ctx := context.Background()
		require.NoError(b, rawFinish.Load(ctx, c).Err())
		rows(b, cnt, false, rawRedisFirst(c, prefix, workload.Handler()), rawRedisReplay(c, prefix))
	})
	b.Run("fiber", fiberRows)
	for _, p := range redisPeers {
		b.Run(p.name, p.run)
	}
}

func pgStore(tb testing.TB, pool *pgxpool.Pool, schema string) *pgstore.Store {
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(tb, err)
	require.NoError(tb, s.Migrate(context.Background()))
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func BenchmarkPostgres(b *testing.B) {
	idemgenRows(b, func(b *testing.B) (*counter, idem.Store) {
		pool, cnt, schema := pgPool(b)
		return cnt, pgStore(b, pool, schema)
	}, true)
	b.Run("raw", func(b *testing.B) {
		pool, cnt, schema := pgPool(b)
		_, err := pool.Exec(context.Background(), rawPGSchema(schema))
		require.NoError(b, err)
		raw := newRawPG(pool, schema)
		rows(b, cnt, true, raw.first(workload.Handler()), raw.replayHandler())
	})
	for _, p := range postgresPeers {
		b.Run(p.name, p.run)
	}
}
