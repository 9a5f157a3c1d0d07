package stores

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	fiberredis "github.com/gofiber/storage/redis/v3"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/idemgen/idemgen/bench/internal/check"
	"github.com/idemgen/idemgen/bench/internal/fiberwork"
	"github.com/idemgen/idemgen/bench/internal/workload"
)

// The peer on Redis: fiber v2's idempotency middleware with the Redis
// storage of gofiber/storage (redis/v3, on go-redis v9), on fiber's own
// stack (fasthttp, served in-process as bench/middleware does). Its lock
// stays fiber's default, in process memory: the middleware has no
// distributed lock, so Redis only shares the responses between instances.
// fiber's storage has no key prefix; prefixStorage adds the benchmark's own
// (one string concatenation per call), so runs never see each other's keys.
// What the middleware sends: a replay is one GET, a first request a GET, a
// second GET under the lock and a SET.

// prefixStorage is a fiber.Storage that prefixes the keys of another.
type prefixStorage struct {
	s      *fiberredis.Storage
	prefix string
}

func (p prefixStorage) Get(key string) ([]byte, error) { return p.s.Get(p.prefix + key) }
func (p prefixStorage) Set(key string, val []byte, exp time.Duration) error {
	return p.s.Set(p.prefix+key, val, exp)
}
func (p prefixStorage) Delete(key string) error { return p.s.Delete(p.prefix + key) }
func (p prefixStorage) Reset() error            { return nil } // never the whole shared database
func (p prefixStorage) Close() error            { return nil } // the client is redisClient's

// fiberRedisApp is a fiber app serving createOrder behind the idempotency
// middleware on the test Redis (the Idempotency-Key header; Location and
// Content-Type kept, as bench/middleware configures it), with a counter of
// the round trips.
func fiberRedisApp(tb testing.TB, h fiber.Handler) (fasthttp.RequestHandler, *counter) {
	c, cnt, prefix := redisClient(tb)
	storage := prefixStorage{s: fiberredis.NewFromConnection(c), prefix: prefix}
	return fiberwork.App(true, storage, h).Handler(), cnt
}

// fiberRows runs the three rows of rows (first, replay, replay-parallel)
// for fiber over Redis.
func fiberRows(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		var calls atomic.Int64
		h, c := fiberRedisApp(b, fiberwork.Handler(&calls))
		cl := fiberwork.NewClient(workload.Key, workload.Payload)
		trips(b, c, false, func() { workload.Keyed(b, cl.Set, func() int { return cl.Do(h) }) })
		if calls.Load() != int64(b.N) {
			b.Fatalf("the handler ran %d times for %d first requests", calls.Load(), b.N)
		}
	})
	replays := uint32(0)
	b.Run("replay", func(b *testing.B) {
		replays++
		var calls atomic.Int64
		h, c := fiberRedisApp(b, fiberwork.Handler(&calls))
		cl := fiberwork.NewClient(workload.KeyOf(1<<30+replays, 0), workload.Payload)
		require.Equal(b, fiber.StatusCreated, cl.Do(h))
		trips(b, c, false, func() { workload.Serial(b, func() int { return cl.Do(h) }) })
		if calls.Load() != 1 {
			b.Fatalf("the handler ran %d times", calls.Load())
		}
	})
	round := uint32(0)
	b.Run("replay-parallel", func(b *testing.B) {
		round++
		key := workload.KeyOf(1<<31+round, 0)
		var calls atomic.Int64
		h, c := fiberRedisApp(b, fiberwork.Handler(&calls))
		require.Equal(b, fiber.StatusCreated, fiberwork.NewClient(key, workload.Payload).Do(h))
		b.SetParallelism(parallelism)
		trips(b, c, false, func() {
			workload.Parallel(b, func() func() int {
				cl := fiberwork.NewClient(key, workload.Payload)
				return func() int { return cl.Do(h) }
			})
		})
		if calls.Load() != 1 {
			b.Fatalf("the handler ran %d times", calls.Load())
		}
	})
}

// TestCorrectnessFiberRedis records what fiber's idempotency middleware
// does over Redis; like bench/middleware's TestCorrectnessFiber it asserts
// only what the harness relies on (every request answered). The duplicates
// all reach one process, where fiber's in-memory lock serializes them.
func TestCorrectnessFiberRedis(t *testing.T) {
	r := check.Run(t, "fiber v2 middleware/idempotency (storage/redis/v3)", func(tb testing.TB, ops *check.Ops) check.Target {
		app, _ := fiberRedisApp(tb, fiberwork.OpsHandler(ops))
		return fiberwork.Target{H: app}
	})
	r.Concurrent.AssertAnswered(t)
}

// TestFiberRedisTarget: the benchmark's fiber app answers and replays what
// it should, through Redis (a benchmark only checks statuses), with the
// round trips the package documentation states.
func TestFiberRedisTarget(t *testing.T) {
	var calls atomic.Int64
	h, cnt := fiberRedisApp(t, fiberwork.Handler(&calls))
	// Warm up: the connection's handshake.
	require.Equal(t, fiber.StatusCreated, fiberwork.NewClient(workload.KeyOf(7, 6), workload.Payload).Do(h))
	cl := fiberwork.NewClient(workload.KeyOf(7, 7), workload.Payload)
	t0, _ := cnt.snapshot()
	require.Equal(t, fiber.StatusCreated, cl.Do(h))
	t1, _ := cnt.snapshot()
	require.Equal(t, int64(3), t1-t0, "first request: GET, GET under the lock, SET")
	for range 2 {
		require.Equal(t, fiber.StatusCreated, cl.Do(h))
		require.Equal(t, string(workload.Response), string(cl.Response().Body()))
		require.Equal(t, workload.Location, string(cl.Response().Header.Peek("Location")))
	}
	t2, _ := cnt.snapshot()
	require.Equal(t, int64(2), t2-t1, "a replay: one GET")
	require.Equal(t, int64(2), calls.Load())
}
