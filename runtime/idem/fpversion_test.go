package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A rolling switch of Options.FingerprintVersion: an engine at version 1 and
// one at version 2 share a store, and a retry may reach either. Each
// recognizes the other's records as the same request (and another body as
// another), in both directions.
func TestFingerprintVersionsShareAStore(t *testing.T) {
	const body = `{"item":"book"}`
	type pair struct{ first, second *fixture }
	setup := func(t *testing.T, firstV, secondV int) (pair, *memstore.Store) {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = s.Close() })
		return pair{
			first:  newFixtureStore(t, s, s, idem.Options{FingerprintVersion: firstV}),
			second: newFixtureStore(t, s, s, idem.Options{FingerprintVersion: secondV}),
		}, s
	}
	recVersion := func(t *testing.T, s *memstore.Store, key string) byte {
		t.Helper()
		rec, found, err := s.Get(context.Background(), scopeOf(t, s, key))
		require.NoError(t, err)
		require.True(t, found)
		return rec.Fingerprint[0]
	}
	for _, dir := range [][2]int{{1, 0}, {0, 1}} {
		firstV, secondV := dir[0], dir[1]
		wantV := map[int]byte{0: 2, 1: 1}
		t.Run(fmt.Sprintf("v%d then v%d", wantV[firstV], wantV[secondV]), func(t *testing.T) {
			t.Run("strict replay", func(t *testing.T) {
				e, s := setup(t, firstV, secondV)
				const key = "k-replay"
				h1 := e.first.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), e.first.createOrder())
				h2 := e.second.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), e.second.createOrder())
				require.Equal(t, 201, send(h1, req{target: "/orders/o1/items", key: key, body: body}).Code)
				require.Equal(t, wantV[firstV], recVersion(t, s, key), "the record is in the first engine's version")
				w := send(h2, req{target: "/orders/o1/items", key: key, body: body})
				require.Equal(t, 201, w.Code, w.Body.String())
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
				requireProblem(t, send(h2, req{target: "/orders/o1/items", key: key, body: `{"item":"pen"}`}), 422, idem.CodeKeyReused)
				assert.Equal(t, int32(0), e.second.calls.Load())
			})
			t.Run("pending strict", func(t *testing.T) {
				e, _ := setup(t, firstV, secondV)
				const key = "k-pending"
				started, release := make(chan struct{}), make(chan struct{})
				slow := e.first.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					close(started)
					<-release
					w.WriteHeader(201)
					_, _ = w.Write([]byte("made by the first"))
				}))
				done := make(chan struct{})
				go func() { send(slow, req{target: "/orders/o1/items", key: key, body: body}); close(done) }()
				<-started
				spec := itemsSpec(idem.Strict)
				h2 := e.second.eng.Handler(mustCompile(t, spec), e.second.createOrder())
				// In flight: the same request is told so, another is a conflict.
				requireProblem(t, send(h2, req{target: "/orders/o1/items", key: key, body: body}), 409, idem.CodeKeyInUse)
				requireProblem(t, send(h2, req{target: "/orders/o1/items", key: key, body: `{"item":"pen"}`}), 422, idem.CodeKeyReused)
				// A duplicate that waits gets the first's response.
				spec.InFlight.Wait = 5 * time.Second
				hw := e.second.eng.Handler(mustCompile(t, spec), e.second.createOrder())
				go func() { time.Sleep(50 * time.Millisecond); close(release) }()
				w := send(hw, req{target: "/orders/o1/items", key: key, body: body})
				<-done
				require.Equal(t, 201, w.Code, w.Body.String())
				assert.Equal(t, "made by the first", w.Body.String())
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
				assert.Equal(t, int32(0), e.second.calls.Load())
			})
			t.Run("failed reclaim", func(t *testing.T) {
				e, s := setup(t, firstV, secondV)
				const key = "k-failed"
				failing := e.first.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "down", http.StatusServiceUnavailable)
				}))
				require.Equal(t, 503, send(failing, req{target: "/orders/o1/items", key: key, body: body}).Code)
				h2 := e.second.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), e.second.createOrder())
				// Another body may not take the freed key over.
				requireProblem(t, send(h2, req{target: "/orders/o1/items", key: key, body: `{"item":"pen"}`}), 422, idem.CodeKeyReused)
				w := send(h2, req{target: "/orders/o1/items", key: key, body: body})
				require.Equal(t, 201, w.Code, w.Body.String())
				assert.Empty(t, w.Header().Get("Idempotent-Replayed"), "the failed attempt is retried")
				assert.Equal(t, int32(1), e.second.calls.Load())
				assert.Equal(t, wantV[firstV], recVersion(t, s, key), "claimed with the record's fingerprint")
				// And the first engine replays the retry's response.
				h1 := e.first.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), e.first.createOrder())
				w = send(h1, req{target: "/orders/o1/items", key: key, body: body})
				require.Equal(t, 201, w.Code)
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			})
		})
	}
}

func TestFingerprintVersionOption(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	assert.Panics(t, func() { idem.New(s, idem.Options{FingerprintVersion: 3}) })
	assert.Panics(t, func() { idem.New(s, idem.Options{FingerprintVersion: -1}) })
	for v, want := range map[int]byte{0: 2, 1: 1, 2: 2} {
		f := newFixtureStore(t, s, s, idem.Options{FingerprintVersion: v})
		key := fmt.Sprintf("k-version-%d", v)
		h := f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), f.createOrder())
		require.Equal(t, 201, send(h, req{target: "/orders/o1/items", key: key, body: `{}`}).Code)
		rec, found, err := s.Get(context.Background(), scopeOf(t, s, key))
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, want, rec.Fingerprint[0], "FingerprintVersion %d", v)
	}
}

// interleave runs hook once, before the first Begin whose fingerprint is of
// version v: another instance acting between a claim and its retry.
type interleave struct {
	*memstore.Store
	v    byte
	hook func()
}

func (s *interleave) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if s.hook != nil && req.Fingerprint[0] == s.v {
		h := s.hook
		s.hook = nil
		h()
	}
	return s.Store.Begin(ctx, req)
}

// The re-claim with a record's fingerprint finds the record rewritten in the
// engine's own version (another instance failed again meanwhile): it claims
// again with its own fingerprint instead of answering a conflict.
func TestFingerprintVersionReclaimAfterRewrite(t *testing.T) {
	const key, body = "k-rewrite", `{"item":"book"}`
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	fail := func(v int) {
		f := newFixtureStore(t, ms, ms, idem.Options{FingerprintVersion: v})
		h := f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}))
		require.Equal(t, 503, send(h, req{target: "/orders/o1/items", key: key, body: body}).Code)
	}
	fail(1) // a FAILED record of version 1
	s := &interleave{Store: ms, v: 1}
	// The v2 engine claims with version 2 (refused: another fingerprint),
	// then re-claims with the record's version 1 fingerprint; just before
	// that:
	s.hook = func() {
		// Before the v2 engine's re-claim with the v1 fingerprint, a v2
		// instance claims the key afresh and fails: the record is FAILED,
		// version 2.
		hs, err := fingerprint.New(fingerprint.Options{})
		require.NoError(t, err)
		v2 := hs.Sum(&fingerprint.Input{Method: "POST", Operation: "addItem", Path: "/orders/o1/items",
			ContentType: "application/json", Body: []byte(body)})
		ctx, scope := context.Background(), scopeOf(t, ms, key)
		res, err := ms.Begin(ctx, &idem.BeginRequest{Key: scope, Fingerprint: v2, Token: 77, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, res.Acquired)
		require.NoError(t, ms.Finish(ctx, scope, 77, idem.StateFailed, nil))
	}
	f := newFixtureStore(t, ms, s, idem.Options{})
	w := send(f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), f.createOrder()), req{target: "/orders/o1/items", key: key, body: body})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, int32(1), f.calls.Load())
}
