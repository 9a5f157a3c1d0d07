package middleware

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/idemgen/idemgen/bench/internal/fiberwork"
	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// Benchmark names: Benchmark<Stack>/<implementation>/<row>, rows serial and
// parallel for the floor and bare handlers; first, replay, replay-parallel
// (the same request every time), replay-rotating and
// replay-rotating-parallel (workload.Rotation requests replayed in
// rotation) for the middlewares. cmd/report reads them by name.

func idemgenHandler(tb testing.TB, h http.Handler) http.Handler {
	hh, _ := idemgenHandlerStore(tb, h)
	return hh
}

// idemgenHandlerStore is idemgenHandler with its store.
func idemgenHandlerStore(tb testing.TB, h http.Handler) (http.Handler, *memstore.Store) {
	// MinRetention of 1ns: the first-request rows claim new keys past what
	// the default bounds hold within an hour, the oldest finished records
	// evicted (as memstore always did before MinRetention).
	s := memstore.New(memstore.Options{SweepInterval: -1, MinRetention: time.Nanosecond})
	tb.Cleanup(func() { _ = s.Close() })
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
	return eng.Handler(idem.MustCompile(workload.Spec()), h), s
}

// memstoreBytes is what a memstore keeps outside the Go heap, by its own
// accounting (keys, responses and a fixed overhead per entry).
func memstoreBytes(s *memstore.Store) func() int64 {
	return func() int64 { return s.Stats().Bytes }
}

// netHTTPRotating runs the rotating replay rows over the handler that
// newHandler makes (called once per row), checking each with replayed.
func netHTTPRotating(b *testing.B, newHandler func(testing.TB) http.Handler, replayed func(*workload.Client) bool) {
	b.Run("replay-rotating", func(b *testing.B) {
		h := newHandler(b)
		c := workload.NewClient(workload.Payload)
		workload.Rotating(b, c.Set, func() int { return c.Do(h) })
		if !replayed(c) {
			b.Fatal("not a replay")
		}
	})
	b.Run("replay-rotating-parallel", func(b *testing.B) {
		h := newHandler(b)
		workload.RotatingParallel(b, func() (func(string, []byte), func() int) {
			c := workload.NewClient(workload.Payload)
			return c.Set, func() int { return c.Do(h) }
		})
	})
}

// netHTTPPeers are middlewares measured in BenchmarkNetHTTP beside
// idemgen, each under its name, when the files that define them are built
// (a peer whose module cannot be a dependency of bench/go.mod: see
// docs/benchmarks.md, "Peers that could not be measured").
type peer struct {
	name string
	run  func(b *testing.B)
}

var netHTTPPeers []peer

// nopStore claims every key and keeps nothing: the engine's cost alone. It
// is a LeaseExtender, ContextBound and LocalReader as memstore is, so the
// engine does the same work over it (heartbeat registration, a recycled
// Call, a record read before the fingerprint, the process-local
// fingerprint memstore's requests get).
type nopStore struct{}

func (nopStore) ReadLocal(string, []byte) (idem.Record, bool) { return idem.Record{}, false }

func (nopStore) ExtendLease(context.Context, string, idem.Token, time.Duration) error { return nil }
func (nopStore) ContextBound()                                                        {}

func (nopStore) Begin(context.Context, *idem.BeginRequest) (idem.BeginResult, error) {
	return idem.BeginResult{Acquired: true}, nil
}
func (nopStore) Finish(context.Context, string, idem.Token, idem.State, []byte) error { return nil }
func (nopStore) Get(context.Context, string) (idem.Record, bool, error) {
	return idem.Record{}, false, nil
}

func BenchmarkNetHTTP(b *testing.B) {
	do := func(h http.Handler) func() int {
		c := workload.NewClient(workload.Payload)
		return func() int { return c.Do(h) }
	}
	serialParallel := func(b *testing.B, h http.Handler) {
		b.Run("serial", func(b *testing.B) { workload.Serial(b, do(h)) })
		b.Run("parallel", func(b *testing.B) { workload.Parallel(b, func() func() int { return do(h) }) })
	}
	b.Run("floor", func(b *testing.B) { serialParallel(b, workload.FloorHandler()) })
	b.Run("bare", func(b *testing.B) { serialParallel(b, workload.Handler()) })
	b.Run("idemgen", func(b *testing.B) {
		b.Run("first", func(b *testing.B) {
			calls := 0
			bare := workload.Handler()
			h, s := idemgenHandlerStore(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				bare.ServeHTTP(w, r)
			}))
			c := workload.NewClient(workload.Payload)
			workload.Kept(b, memstoreBytes(s), func() {
				workload.Keyed(b, c.Set, func() int { return c.Do(h) })
			})
			if calls != b.N {
				b.Fatalf("the handler ran %d times for %d first requests", calls, b.N)
			}
		})
		// The breakdown of a first request: the engine over a store that
		// claims every key and keeps nothing, with a fingerprint computed
		// for every request (first) or found in the engine's cache (the same
		// body every time: first-cached).
		b.Run("nostore-first", func(b *testing.B) {
			h := idem.New(nopStore{}, idem.Options{Principal: idem.Anonymous}).Handler(idem.MustCompile(workload.Spec()), workload.Handler())
			c := workload.NewClient(workload.Payload)
			workload.Keyed(b, c.Set, func() int { return c.Do(h) })
		})
		b.Run("nostore-first-cached", func(b *testing.B) {
			h := idem.New(nopStore{}, idem.Options{Principal: idem.Anonymous}).Handler(idem.MustCompile(workload.Spec()), workload.Handler())
			c := workload.NewClient(workload.Payload)
			workload.Keyed(b, func(k string, _ []byte) { c.SetKey(k) }, func() int { return c.Do(h) })
		})
		b.Run("replay", func(b *testing.B) {
			h := idemgenHandler(b, workload.Handler())
			c := workload.NewClient(workload.Payload)
			c.Do(h)
			workload.Serial(b, func() int { return c.Do(h) })
			if c.W.H.Get("Idempotent-Replayed") != "true" {
				b.Fatal("not a replay")
			}
		})
		b.Run("replay-parallel", func(b *testing.B) {
			h := idemgenHandler(b, workload.Handler())
			workload.NewClient(workload.Payload).Do(h)
			workload.Parallel(b, func() func() int { return do(h) })
		})
		netHTTPRotating(b, func(tb testing.TB) http.Handler { return idemgenHandler(tb, workload.Handler()) },
			func(c *workload.Client) bool { return c.W.H.Get("Idempotent-Replayed") == "true" })
	})
	for _, p := range netHTTPPeers {
		b.Run(p.name, p.run)
	}
}

func BenchmarkFastHTTP(b *testing.B) {
	do := func(h fasthttp.RequestHandler) func() int {
		c := fiberwork.NewClient(workload.Key, workload.Payload)
		return func() int { return c.Do(h) }
	}
	serialParallel := func(b *testing.B, h fasthttp.RequestHandler) {
		b.Run("serial", func(b *testing.B) { workload.Serial(b, do(h)) })
		b.Run("parallel", func(b *testing.B) { workload.Parallel(b, func() func() int { return do(h) }) })
	}
	b.Run("floor", func(b *testing.B) { serialParallel(b, fiberwork.Floor) })
	b.Run("fiber", func(b *testing.B) { serialParallel(b, fiberwork.App(false, nil, fiberwork.Handler(nil)).Handler()) })
	b.Run("fiber-idempotency", func(b *testing.B) {
		b.Run("first", func(b *testing.B) {
			var calls atomic.Int64
			h := fiberwork.App(true, nil, fiberwork.Handler(&calls)).Handler()
			c := fiberwork.NewClient(workload.Key, workload.Payload)
			workload.Kept(b, nil, func() {
				workload.Keyed(b, c.Set, func() int { return c.Do(h) })
			})
			if calls.Load() != int64(b.N) {
				b.Fatalf("handler ran %d times for %d first requests", calls.Load(), b.N)
			}
		})
		b.Run("replay", func(b *testing.B) {
			var calls atomic.Int64
			h := fiberwork.App(true, nil, fiberwork.Handler(&calls)).Handler()
			c := fiberwork.NewClient(workload.Key, workload.Payload)
			c.Do(h)
			workload.Serial(b, func() int { return c.Do(h) })
			if calls.Load() != 1 {
				b.Fatalf("handler ran %d times", calls.Load())
			}
		})
		b.Run("replay-parallel", func(b *testing.B) {
			h := fiberwork.App(true, nil, fiberwork.Handler(nil)).Handler()
			fiberwork.NewClient(workload.Key, workload.Payload).Do(h)
			workload.Parallel(b, func() func() int { return do(h) })
		})
		b.Run("replay-rotating", func(b *testing.B) {
			var calls atomic.Int64
			h := fiberwork.App(true, nil, fiberwork.Handler(&calls)).Handler()
			c := fiberwork.NewClient(workload.Key, workload.Payload)
			workload.Rotating(b, c.Set, func() int { return c.Do(h) })
			if calls.Load() != workload.Rotation {
				b.Fatalf("handler ran %d times for %d records", calls.Load(), workload.Rotation)
			}
		})
		b.Run("replay-rotating-parallel", func(b *testing.B) {
			h := fiberwork.App(true, nil, fiberwork.Handler(nil)).Handler()
			workload.RotatingParallel(b, func() (func(string, []byte), func() int) {
				c := fiberwork.NewClient(workload.Key, workload.Payload)
				return c.Set, func() int { return c.Do(h) }
			})
		})
	})
}
