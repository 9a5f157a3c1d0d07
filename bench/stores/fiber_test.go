package stores

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/idempotency"
	fiberredis "github.com/gofiber/storage/redis/v3"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/idemgen/idemgen/bench/internal/check"
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
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(idempotency.New(idempotency.Config{
		KeyHeader:           "Idempotency-Key",
		KeepResponseHeaders: []string{fiber.HeaderContentType, fiber.HeaderLocation},
		Storage:             prefixStorage{s: fiberredis.NewFromConnection(c), prefix: prefix},
	}))
	app.Post(workload.Path, h)
	return app.Handler(), cnt
}

// fiberHandler is workload.Handler in fiber: decode, answer 201.
func fiberHandler(calls *atomic.Int64) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if calls != nil {
			calls.Add(1)
		}
		var in workload.Body
		if err := json.Unmarshal(c.Body(), &in); err != nil {
			return c.Status(fiber.StatusBadRequest).SendString(err.Error())
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		c.Set(fiber.HeaderLocation, workload.Location)
		return c.Status(fiber.StatusCreated).Send(workload.Response)
	}
}

// fastClient serves requests to a fasthttp handler in-process with one
// reused RequestCtx (as bench/middleware's).
type fastClient struct{ ctx fasthttp.RequestCtx }

func newFastClient(key string) *fastClient {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://api.example" + workload.Path)
	req.Header.SetContentType("application/json")
	req.Header.Set("Idempotency-Key", key)
	req.SetBody(workload.Payload)
	c := &fastClient{}
	c.ctx.Init(&req, nil, nil)
	return c
}

// set sets the key and the body (not copied) of the next requests.
func (c *fastClient) set(key string, body []byte) {
	c.ctx.Request.Header.Set("Idempotency-Key", key)
	c.ctx.Request.SetBodyRaw(body)
}

func (c *fastClient) do(h fasthttp.RequestHandler) int {
	c.ctx.Response.Reset()
	h(&c.ctx)
	return c.ctx.Response.StatusCode()
}

// fiberRows runs the three rows of rows (first, replay, replay-parallel)
// for fiber over Redis.
func fiberRows(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		var calls atomic.Int64
		h, c := fiberRedisApp(b, fiberHandler(&calls))
		cl := newFastClient(workload.Key)
		trips(b, c, false, func() { workload.Keyed(b, cl.set, func() int { return cl.do(h) }) })
		if calls.Load() != int64(b.N) {
			b.Fatalf("the handler ran %d times for %d first requests", calls.Load(), b.N)
		}
	})
	replays := uint32(0)
	b.Run("replay", func(b *testing.B) {
		replays++
		var calls atomic.Int64
		h, c := fiberRedisApp(b, fiberHandler(&calls))
		cl := newFastClient(workload.KeyOf(1<<30+replays, 0))
		require.Equal(b, fiber.StatusCreated, cl.do(h))
		trips(b, c, false, func() { workload.Serial(b, func() int { return cl.do(h) }) })
		if calls.Load() != 1 {
			b.Fatalf("the handler ran %d times", calls.Load())
		}
	})
	round := uint32(0)
	b.Run("replay-parallel", func(b *testing.B) {
		round++
		key := workload.KeyOf(1<<31+round, 0)
		var calls atomic.Int64
		h, c := fiberRedisApp(b, fiberHandler(&calls))
		require.Equal(b, fiber.StatusCreated, newFastClient(key).do(h))
		b.SetParallelism(parallelism)
		trips(b, c, false, func() {
			workload.Parallel(b, func() func() int {
				cl := newFastClient(key)
				return func() int { return cl.do(h) }
			})
		})
		if calls.Load() != 1 {
			b.Fatalf("the handler ran %d times", calls.Load())
		}
	})
}

// fiberTarget serves fiber's middleware with a RequestCtx per request.
type fiberTarget struct{ h fasthttp.RequestHandler }

func (f fiberTarget) Do(key string, body []byte) check.Response {
	cl := newFastClient(key)
	cl.ctx.Request.SetBody(body)
	cl.do(f.h)
	r := check.Response{Status: cl.ctx.Response.StatusCode(), Body: append([]byte(nil), cl.ctx.Response.Body()...)}
	check.ParseProblem(&r, string(cl.ctx.Response.Header.ContentType()))
	return r
}

// TestCorrectnessFiberRedis records what fiber's idempotency middleware
// does over Redis; like bench/middleware's TestCorrectnessFiber it asserts
// only what the harness relies on (every request answered). The duplicates
// all reach one process, where fiber's in-memory lock serializes them.
func TestCorrectnessFiberRedis(t *testing.T) {
	r := check.Run(t, "fiber v2 middleware/idempotency (storage/redis/v3)", func(tb testing.TB, ops *check.Ops) check.Target {
		h := fiberHandler(nil)
		app, _ := fiberRedisApp(tb, func(c *fiber.Ctx) error {
			if st := ops.Enter(); st != fiber.StatusCreated {
				return c.Status(st).SendString("failed")
			}
			return h(c)
		})
		return fiberTarget{h: app}
	})
	n := 0
	for _, c := range r.Concurrent.Statuses {
		n += c
	}
	require.Equal(t, check.Duplicates, n)
	require.GreaterOrEqual(t, r.Concurrent.Executions, 1)
}

// TestFiberRedisTarget: the benchmark's fiber app answers and replays what
// it should, through Redis (a benchmark only checks statuses), with the
// round trips the package documentation states.
func TestFiberRedisTarget(t *testing.T) {
	var calls atomic.Int64
	h, cnt := fiberRedisApp(t, fiberHandler(&calls))
	// Warm up: the connection's handshake.
	require.Equal(t, fiber.StatusCreated, newFastClient(workload.KeyOf(7, 6)).do(h))
	cl := newFastClient(workload.KeyOf(7, 7))
	t0, _ := cnt.snapshot()
	require.Equal(t, fiber.StatusCreated, cl.do(h))
	t1, _ := cnt.snapshot()
	require.Equal(t, int64(3), t1-t0, "first request: GET, GET under the lock, SET")
	for range 2 {
		require.Equal(t, fiber.StatusCreated, cl.do(h))
		require.Equal(t, string(workload.Response), string(cl.ctx.Response.Body()))
		require.Equal(t, workload.Location, string(cl.ctx.Response.Header.Peek("Location")))
	}
	t2, _ := cnt.snapshot()
	require.Equal(t, int64(2), t2-t1, "a replay: one GET")
	require.Equal(t, int64(2), calls.Load())
}
