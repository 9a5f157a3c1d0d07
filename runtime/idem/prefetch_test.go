package idem_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// prefetchStore is memstore noting the keys of its calls, in order.
type prefetchStore struct {
	*memstore.Store
	calls []string
}

func (s *prefetchStore) PrefetchKey(key string) {
	s.calls = append(s.calls, "prefetch "+key)
	s.Store.PrefetchKey(key)
}

func (s *prefetchStore) ReadLocal(key string, buf []byte) (idem.Record, bool) {
	s.calls = append(s.calls, "read "+key)
	return s.Store.ReadLocal(key, buf)
}

func (s *prefetchStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	s.calls = append(s.calls, "begin "+r.Key)
	return s.Store.Begin(ctx, r)
}

// TestPrefetchKey: over a store that prefetches (memstore), the engine
// hands it a keyed request's scope key before its first call with that
// key, and nothing for a request without a key.
func TestPrefetchKey(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	defer ms.Close()
	s := &prefetchStore{Store: ms}
	eng := idem.New(s, idem.Options{Principal: func(*http.Request) (string, error) { return "p", nil }})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })
	h := eng.Handler(idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict}), ok)
	if code := send(h, req{key: "k1", body: `{"a":1}`}).Code; code != 201 {
		t.Fatalf("status %d", code)
	}
	if len(s.calls) < 2 || s.calls[0][:9] != "prefetch " {
		t.Fatalf("calls %q: want a prefetch first", s.calls)
	}
	scope := s.calls[0][len("prefetch "):]
	if want := idem.ScopeKey("p", "op", "k1"); scope != want {
		t.Fatalf("prefetched %q, want the scope %q", scope, want)
	}
	for _, c := range s.calls[1:] {
		if c != "read "+scope && c != "begin "+scope {
			t.Fatalf("calls %q: a call with another key", s.calls)
		}
	}
	s.calls = nil
	w := eng.Handler(idem.MustCompile(idem.Spec{Operation: "w", Semantics: idem.Window}), ok)
	if code := send(w, req{body: `{"a":1}`}).Code; code != 201 {
		t.Fatalf("status %d", code)
	}
	for _, c := range s.calls {
		if c[:9] == "prefetch " {
			t.Fatalf("calls %q: a prefetch for a request without a key", s.calls)
		}
	}
}
