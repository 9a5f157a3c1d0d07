// Package storebench is what the benchmarks and round-trip tests of the
// network stores (runtime/pgstore, runtime/redisstore) share: a runner that
// reports the client process's CPU time per operation besides wall time, the
// store-level operations each store's benchmarks compare with its raw client
// (a first request, a replay by Get, a replay by Begin), and the check of the
// round trips a request costs.
package storebench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Response is the response the benchmarks store: a small JSON document.
var Response = []byte(`{"id":"cpn_8f14e45f","status":"claimed","amount":1250,"currency":"EUR","created":"2025-01-01T00:00:00Z"}`)

// Key is the scope key of the i-th record of a benchmark.
func Key(i int64) string { return "u1:op:" + strconv.FormatInt(i, 10) }

var fingerprint = func() idem.Fingerprint {
	var f idem.Fingerprint
	f[0] = 1
	for i := 1; i < len(f); i++ {
		f[i] = 1
	}
	return f
}()

// Run runs op (with i = 1, 2, … across all goroutines) serially or, with
// parallel, from 8 × GOMAXPROCS goroutines. Besides wall time it reports
// the client process's CPU time per op (cpu-ns/op, user + system, where the
// system reports it), which shows a store's own cost over its raw client far
// more steadily than latency does on a shared machine.
func Run(b *testing.B, parallel bool, op func(i int64) error) {
	b.ReportAllocs()
	var n atomic.Int64
	var cpu0 time.Duration
	if !parallel {
		for b.Loop() {
			if cpu0 == 0 {
				cpu0 = cpuTime()
			}
			if err := op(n.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
		return
	}
	b.SetParallelism(8) // requests in flight: 8 × GOMAXPROCS
	b.ResetTimer()      // not the setup (b.Loop does this itself)
	cpu0 = cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCPU(b, cpu0)
}

func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu := cpuTime(); cpu > 0 {
		b.ReportMetric(float64(cpu-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// Modes runs f as two sub-benchmarks, serial and parallel.
func Modes(b *testing.B, f func(b *testing.B, parallel bool)) {
	b.Run("serial", func(b *testing.B) { f(b, false) })
	b.Run("parallel", func(b *testing.B) { f(b, true) })
}

// FirstRequest returns the operation of a first request through s: Begin of
// the new key Key(i) (2 round trips with Finish, for a network store), then
// Finish with Response.
func FirstRequest(s idem.Store) func(i int64) error {
	ctx := context.Background()
	return func(i int64) error {
		key := Key(i)
		r, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fingerprint, Token: idem.Token(i), Lease: 30 * time.Second, TTL: time.Hour})
		if err != nil || !r.Acquired {
			return err
		}
		return s.Finish(ctx, key, idem.Token(i), idem.StateCompleted, Response)
	}
}

// Fill stores n COMPLETED records with Response under Key(0) … Key(n-1),
// for the replay benchmarks, and sets the bytes per operation to the
// response's size.
func Fill(b *testing.B, s idem.Store, n int64) {
	b.Helper()
	ctx := context.Background()
	for i := range n {
		key := Key(i)
		if _, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fingerprint, Token: 1, Lease: time.Minute, TTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
		if err := s.Finish(ctx, key, 1, idem.StateCompleted, Response); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(Response)))
}

// ReplayGet returns the operation of a replay by Get of one of the n
// records Fill stored.
func ReplayGet(b *testing.B, s idem.Store, n int64) func(i int64) error {
	ctx := context.Background()
	return func(i int64) error {
		rec, found, err := s.Get(ctx, Key(i%n))
		if err == nil && (!found || len(rec.Response) != len(Response)) {
			b.Error("bad replay")
		}
		return err
	}
}

// ReplayBegin returns the operation of a duplicate that arrives with Begin
// on one of the n records Fill stored.
func ReplayBegin(b *testing.B, s idem.Store, n int64) func(i int64) error {
	ctx := context.Background()
	return func(i int64) error {
		r, err := s.Begin(ctx, &idem.BeginRequest{Key: Key(i % n), Fingerprint: fingerprint, Token: 2, Lease: time.Minute, TTL: time.Hour})
		if err == nil && r.Acquired {
			b.Error("acquired a completed key")
		}
		return err
	}
}

// RunFirstRequest runs the sub-benchmark "store" of a store's
// BenchmarkFirstRequest: FirstRequest through a store from newStore, serial
// and parallel.
func RunFirstRequest(b *testing.B, newStore func(b *testing.B) idem.Store) {
	b.Run("store", func(b *testing.B) {
		Modes(b, func(b *testing.B, parallel bool) {
			Run(b, parallel, FirstRequest(newStore(b)))
		})
	})
}

// RunReplays runs the sub-benchmarks "store-Get" and "store-Begin" of a
// store's BenchmarkReplay: a replay by Get, and a duplicate that arrives
// with Begin, of one of the n records in a store from setup (which calls
// Fill), serial and parallel.
func RunReplays(b *testing.B, n int64, setup func(b *testing.B) idem.Store) {
	b.Run("store-Get", func(b *testing.B) {
		Modes(b, func(b *testing.B, parallel bool) {
			Run(b, parallel, ReplayGet(b, setup(b), n))
		})
	})
	b.Run("store-Begin", func(b *testing.B) {
		Modes(b, func(b *testing.B, parallel bool) {
			Run(b, parallel, ReplayBegin(b, setup(b), n))
		})
	})
}

// RoundTrips checks what a request through s costs in round trips: a first
// request Begin + Finish = 2, a replay by Get or by Begin 1. writes counts
// the writes on the store's only connection (see testenv.CountingDialer):
// a client writes a command, or a whole batch or pipeline, with one Write
// and then waits for the reply, so the count is the round trips.
func RoundTrips(t *testing.T, s idem.Store, writes *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	req := func(key string, tok idem.Token) *idem.BeginRequest {
		return &idem.BeginRequest{Key: key, Fingerprint: fingerprint, Token: tok, Lease: time.Minute, TTL: time.Hour}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Warm up: the connection's handshake, prepared statements, script cache.
	_, err := s.Begin(ctx, req("warm", 1))
	must(err)
	must(s.Finish(ctx, "warm", 1, idem.StateCompleted, []byte("x")))
	_, _, err = s.Get(ctx, "warm")
	must(err)

	writes.Store(0)
	r, err := s.Begin(ctx, req("k", 2))
	must(err)
	if !r.Acquired {
		t.Fatalf("Begin of a new key: %+v, want Acquired", r)
	}
	must(s.Finish(ctx, "k", 2, idem.StateCompleted, []byte("resp")))
	if n := writes.Load(); n != 2 {
		t.Errorf("first request (Begin + Finish): %d round trips, want 2", n)
	}

	writes.Store(0)
	rec, found, err := s.Get(ctx, "k")
	must(err)
	if !found || string(rec.Response) != "resp" {
		t.Errorf("Get = %+v (found %v), want the response", rec, found)
	}
	if n := writes.Load(); n != 1 {
		t.Errorf("replay by Get: %d round trips, want 1", n)
	}

	writes.Store(0)
	r, err = s.Begin(ctx, req("k", 3))
	must(err)
	if r.Acquired || string(r.Record.Response) != "resp" {
		t.Errorf("Begin of a completed key = %+v, want the record with the response", r)
	}
	if n := writes.Load(); n != 1 {
		t.Errorf("replay by Begin: %d round trips, want 1", n)
	}
}
