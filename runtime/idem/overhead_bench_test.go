package idem_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// BenchmarkFirstRequestOverhead isolates what the engine and the store add
// to a first request: the handler only writes its answer, and every request
// carries the same body (its fingerprint comes from the engine's cache), so
// what remains is the key, the claim, the recorder and the completion
// (memstore-bodies adds the fingerprint).
func BenchmarkFirstRequestOverhead(b *testing.B) {
	floor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/orders/ord_7d1f9c2a")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(benchResponse)
	})
	spec := idem.Spec{Operation: "createOrder", Semantics: idem.Strict,
		Response: idem.ResponseSpec{Headers: []string{"Location"}}}
	run := func(b *testing.B, h http.Handler, bodies ...[]byte) {
		c := newBenchClient()
		keys := make([]string, 1<<16)
		round := 0
		b.ReportAllocs()
		i := len(keys)
		for b.Loop() {
			if i == len(keys) {
				b.StopTimer()
				round++
				for j := range keys {
					keys[j] = "0190b2a4-6c2e-7d3a-" + strconv.Itoa(1000+round%9000) + "-" + strconv.Itoa(100000000000+j)
				}
				i = 0
				b.StartTimer()
			}
			c.key[0] = keys[i]
			if len(bodies) > 0 {
				c.data = bodies[i%len(bodies)]
			}
			i++
			c.do(b, h, 201)
		}
	}
	b.Run("floor", func(b *testing.B) { run(b, floor) })
	b.Run("nostore", func(b *testing.B) {
		run(b, idem.New(nopStore{}, idem.Options{}).Handler(idem.MustCompile(spec), floor))
	})
	b.Run("memstore", func(b *testing.B) {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		defer s.Close()
		run(b, idem.New(s, idem.Options{}).Handler(idem.MustCompile(spec), floor))
	})
	// Each request another body (4096 in turn): the fingerprint is
	// computed for every request.
	b.Run("memstore-bodies", func(b *testing.B) {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		defer s.Close()
		run(b, idem.New(s, idem.Options{}).Handler(idem.MustCompile(spec), floor), benchPayloads(4096)...)
	})
}

// nopStore claims every key and keeps nothing: the engine's cost alone. It
// is a LeaseExtender and ContextBound as memstore is, so the engine does
// the same work over it (heartbeat registration, a recycled Call).
type nopStore struct{}

func (nopStore) ExtendLease(context.Context, string, idem.Token, time.Duration) error { return nil }
func (nopStore) ContextBound()                                                        {}

func (nopStore) Begin(context.Context, *idem.BeginRequest) (idem.BeginResult, error) {
	return idem.BeginResult{Acquired: true}, nil
}
func (nopStore) Finish(context.Context, string, idem.Token, idem.State, []byte) error { return nil }
func (nopStore) Get(context.Context, string) (idem.Record, bool, error) {
	return idem.Record{}, false, nil
}
