package idem_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// BenchmarkFirstRequestOverhead isolates what the engine and the store add
// to a first request: the handler only writes its answer, and every request
// carries the same body (its fingerprint comes from the engine's cache), so
// what remains is the key, the claim, the recorder and the completion
// (nostore-bodies and memstore-bodies add the fingerprint).
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
	b.Run("floor", func(b *testing.B) { benchFirstRequests(b, floor) })
	b.Run("nostore", func(b *testing.B) {
		benchFirstRequests(b, idem.New(nopStore{}, idem.Options{Principal: idem.Anonymous}).Handler(idem.MustCompile(spec), floor))
	})
	// Each request another body (4096 in turn), over nopStore: the engine
	// and the fingerprint, without a store.
	b.Run("nostore-bodies", func(b *testing.B) {
		benchFirstRequests(b, idem.New(nopStore{}, idem.Options{Principal: idem.Anonymous}).Handler(idem.MustCompile(spec), floor), benchPayloads(4096)...)
	})
	// MinRetention of 1ns: new keys past what the default bounds hold, the
	// oldest finished records evicted.
	b.Run("memstore", func(b *testing.B) {
		s := memstore.New(memstore.Options{SweepInterval: -1, MinRetention: time.Nanosecond})
		defer s.Close()
		benchFirstRequests(b, idem.New(s, idem.Options{Principal: idem.Anonymous}).Handler(idem.MustCompile(spec), floor))
	})
	// Each request another body (4096 in turn): the fingerprint is
	// computed for every request.
	b.Run("memstore-bodies", func(b *testing.B) {
		s := memstore.New(memstore.Options{SweepInterval: -1, MinRetention: time.Nanosecond})
		defer s.Close()
		benchFirstRequests(b, idem.New(s, idem.Options{Principal: idem.Anonymous}).Handler(idem.MustCompile(spec), floor), benchPayloads(4096)...)
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
