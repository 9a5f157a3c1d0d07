package idem_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// prefetchStore is memstore, logging its calls in order.
type prefetchStore struct {
	*memstore.Store
	mu  sync.Mutex
	log []string
}

func (s *prefetchStore) note(call, key string) {
	s.mu.Lock()
	s.log = append(s.log, call+" "+key)
	s.mu.Unlock()
}

func (s *prefetchStore) Prefetch(key string) {
	s.note("Prefetch", key)
	s.Store.Prefetch(key)
}

func (s *prefetchStore) ReadLocal(key string, buf []byte) (idem.Record, bool) {
	s.note("ReadLocal", key)
	return s.Store.ReadLocal(key, buf)
}

func (s *prefetchStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	s.note("Begin", r.Key)
	return s.Store.Begin(ctx, r)
}

func (s *prefetchStore) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.log = nil }()
	return s.log
}

// TestPrefetchBeforeLookup: over an idem.Prefetcher, the engine hints the
// request's key (its scope key, the one the store calls get) before its
// first lookup of it, once per request, whether the fingerprint is in its
// cache (Begin) or not (ReadLocal first); a request without a key is not
// hinted (its scope is made of its fingerprint).
func TestPrefetchBeforeLookup(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	s := &prefetchStore{Store: ms}
	f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())

	// Not in the fingerprint cache: ReadLocal, then Begin.
	w := send(h, req{key: "k1", body: `{"item":"a"}`})
	require.Equal(t, http.StatusCreated, w.Code)
	got := s.calls()
	require.Len(t, got, 3, "%q", got)
	scope := got[0][len("Prefetch "):]
	require.Equal(t, []string{"Prefetch " + scope, "ReadLocal " + scope, "Begin " + scope}, got)
	require.Contains(t, scope, "k1")

	// In the cache (the same bytes, another key): Begin alone.
	w = send(h, req{key: "k2", body: `{"item":"a"}`})
	require.Equal(t, http.StatusCreated, w.Code)
	got = s.calls()
	require.Len(t, got, 2, "%q", got)
	require.Equal(t, "Prefetch", got[0][:len("Prefetch")])
	require.Equal(t, "Begin"+got[0][len("Prefetch"):], got[1])

	// Without a key (window semantics: the scope is the fingerprint's): no hint.
	spec := strictSpec()
	spec.Semantics = idem.Window
	hw := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	w = send(hw, req{body: `{"item":"b"}`})
	require.Equal(t, http.StatusCreated, w.Code)
	for _, c := range s.calls() {
		require.NotContains(t, c, "Prefetch")
	}
}
