package middleware

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// Benchmark names: Benchmark<Stack>/<implementation>/<row>, rows serial and
// parallel for the floor and bare handlers, first, replay and
// replay-parallel for the middlewares. cmd/report reads them by name.

func idemgenHandler(tb testing.TB, h http.Handler) http.Handler {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	tb.Cleanup(func() { _ = s.Close() })
	eng := idem.New(s, idem.Options{})
	return eng.Handler(idem.MustCompile(workload.Spec()), h)
}

const keysPerRound = 1 << 14

// nextKeys returns a fresh set of keys for round r without counting the work.
func nextKeys(b *testing.B, r int) []string {
	b.StopTimer()
	defer b.StartTimer()
	return workload.Keys(r, keysPerRound)
}

func BenchmarkNetHTTP(b *testing.B) {
	serialParallel := func(b *testing.B, h http.Handler) {
		b.Run("serial", func(b *testing.B) {
			c := workload.NewClient(workload.Payload)
			b.ReportAllocs()
			b.SetBytes(workload.PayloadSize)
			for b.Loop() {
				if st := c.Do(h); st != http.StatusCreated {
					b.Fatalf("status %d", st)
				}
			}
		})
		b.Run("parallel", func(b *testing.B) { nethttpParallel(b, h) })
	}
	b.Run("floor", func(b *testing.B) { serialParallel(b, workload.FloorHandler()) })
	b.Run("bare", func(b *testing.B) { serialParallel(b, workload.Handler()) })
	b.Run("idemgen", func(b *testing.B) {
		b.Run("first", func(b *testing.B) {
			h := idemgenHandler(b, workload.Handler())
			c := workload.NewClient(workload.Payload)
			b.ReportAllocs()
			b.SetBytes(workload.PayloadSize)
			var keys []string
			i, round := 0, 0
			for b.Loop() {
				if i == len(keys) {
					keys, i = nextKeys(b, round), 0
					round++
				}
				c.SetKey(keys[i])
				i++
				if st := c.Do(h); st != http.StatusCreated {
					b.Fatalf("status %d", st)
				}
			}
			if c.W.H.Get("Idempotent-Replayed") != "" {
				b.Fatal("a first request was replayed")
			}
		})
		b.Run("replay", func(b *testing.B) {
			h := idemgenHandler(b, workload.Handler())
			c := workload.NewClient(workload.Payload)
			c.Do(h)
			b.ReportAllocs()
			b.SetBytes(workload.PayloadSize)
			for b.Loop() {
				if st := c.Do(h); st != http.StatusCreated {
					b.Fatalf("status %d", st)
				}
			}
			if c.W.H.Get("Idempotent-Replayed") != "true" {
				b.Fatal("not a replay")
			}
		})
		b.Run("replay-parallel", func(b *testing.B) {
			h := idemgenHandler(b, workload.Handler())
			workload.NewClient(workload.Payload).Do(h)
			nethttpParallel(b, h)
		})
	})
}

func nethttpParallel(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	b.SetBytes(workload.PayloadSize)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := workload.NewClient(workload.Payload)
		for pb.Next() {
			if st := c.Do(h); st != http.StatusCreated {
				b.Errorf("status %d", st)
				return
			}
		}
	})
}

func BenchmarkFastHTTP(b *testing.B) {
	serialParallel := func(b *testing.B, h fasthttp.RequestHandler) {
		b.Run("serial", func(b *testing.B) {
			c := newFastClient(workload.Payload)
			b.ReportAllocs()
			b.SetBytes(workload.PayloadSize)
			for b.Loop() {
				if st := c.do(h); st != http.StatusCreated {
					b.Fatalf("status %d", st)
				}
			}
		})
		b.Run("parallel", func(b *testing.B) { fastParallel(b, h) })
	}
	b.Run("floor", func(b *testing.B) { serialParallel(b, fastFloor) })
	b.Run("fiber", func(b *testing.B) { serialParallel(b, fiberApp(false, fiberHandler(nil)).Handler()) })
	b.Run("fiber-idempotency", func(b *testing.B) {
		b.Run("first", func(b *testing.B) {
			h := fiberApp(true, fiberHandler(nil)).Handler()
			c := newFastClient(workload.Payload)
			b.ReportAllocs()
			b.SetBytes(workload.PayloadSize)
			var keys []string
			i, round := 0, 0
			for b.Loop() {
				if i == len(keys) {
					keys, i = nextKeys(b, round), 0
					round++
				}
				c.setKey(keys[i])
				i++
				if st := c.do(h); st != http.StatusCreated {
					b.Fatalf("status %d", st)
				}
			}
		})
		b.Run("replay", func(b *testing.B) {
			var calls atomic.Int64
			h := fiberApp(true, fiberHandler(&calls)).Handler()
			c := newFastClient(workload.Payload)
			c.do(h)
			b.ReportAllocs()
			b.SetBytes(workload.PayloadSize)
			for b.Loop() {
				if st := c.do(h); st != http.StatusCreated {
					b.Fatalf("status %d", st)
				}
			}
			if calls.Load() != 1 {
				b.Fatalf("handler ran %d times", calls.Load())
			}
		})
		b.Run("replay-parallel", func(b *testing.B) {
			h := fiberApp(true, fiberHandler(nil)).Handler()
			newFastClient(workload.Payload).do(h)
			fastParallel(b, h)
		})
	})
}

func fastParallel(b *testing.B, h fasthttp.RequestHandler) {
	b.ReportAllocs()
	b.SetBytes(workload.PayloadSize)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := newFastClient(workload.Payload)
		for pb.Next() {
			if st := c.do(h); st != http.StatusCreated {
				b.Errorf("status %d", st)
				return
			}
		}
	})
}
