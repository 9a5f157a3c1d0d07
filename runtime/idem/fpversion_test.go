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

// A rolling switch of Options.FingerprintVersion: engines at two versions
// (1 and 3, the default; 2 and 3; 1 and 2) share a store, and a retry may
// reach either. Each recognizes the other's records as the same request
// (and another body as another), in both directions. The store is shared
// (memstore behind plainStore: no LocalReader, as Redis or PostgreSQL), so
// the records have SHA-256 fingerprints; or it is the memstore itself, a
// LocalReader, whose records have process-local fingerprints
// (fingerprint.Local); or the first engine is over the memstore and the
// second over plainStore, one with local fingerprints and one without.
func TestFingerprintVersionsShareAStore(t *testing.T) {
	for _, mode := range []string{"shared", "in process", "mixed"} {
		t.Run(mode, func(t *testing.T) { testFingerprintVersionsShareAStore(t, mode) })
	}
}

func testFingerprintVersionsShareAStore(t *testing.T, mode string) {
	const body = `{"item":"book"}`
	type pair struct{ first, second *fixture }
	setup := func(t *testing.T, firstV, secondV int) (pair, *memstore.Store) {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = s.Close() })
		var first, second idem.Store = s, s
		switch mode {
		case "shared":
			first, second = plainStore{s}, plainStore{s}
		case "mixed":
			second = plainStore{s}
		}
		return pair{
			first:  newFixtureStore(t, s, first, idem.Options{FingerprintVersion: firstV}),
			second: newFixtureStore(t, s, second, idem.Options{FingerprintVersion: secondV}),
		}, s
	}
	// local: the first engine's records have local fingerprints.
	local := mode != "shared"
	recVersion := func(t *testing.T, s *memstore.Store, key string) byte {
		t.Helper()
		rec, found, err := s.Get(context.Background(), scopeOf(t, s, key))
		require.NoError(t, err)
		require.True(t, found)
		return rec.Fingerprint[0]
	}
	for _, dir := range [][2]int{{1, 0}, {0, 1}, {2, 0}, {0, 2}, {1, 2}, {2, 1}} {
		firstV, secondV := dir[0], dir[1]
		wantV := map[int]byte{0: fingerprint.Version, 1: 1, 2: 2}
		name := fmt.Sprintf("v%d then v%d", wantV[firstV], wantV[secondV])
		if local {
			wantV[firstV] = byte(fingerprint.Local(int(wantV[firstV])))
		}
		t.Run(name, func(t *testing.T) {
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
			t.Run("multipart boundary", func(t *testing.T) {
				e, s := setup(t, firstV, secondV)
				const key = "k-boundary"
				created := func(f *fixture) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.calls.Add(1); w.WriteHeader(201) })
				}
				h1 := e.first.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), created(e.first))
				h2 := e.second.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), created(e.second))
				r := req{target: "/orders/o1/items", key: key, body: boundaryBody, header: http.Header{"Content-Type": {"multipart/form-data; boundary=A"}}}
				require.Equal(t, 201, send(h1, r).Code)
				w := send(h2, r)
				require.Equal(t, 201, w.Code, w.Body.String())
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
				// The same bytes with another boundary: another request,
				// which a record of version 3 tells apart. A record of an
				// older version cannot: it is taken for the same request
				// (replayed) until it expires.
				r.header = http.Header{"Content-Type": {"multipart/form-data; boundary=B"}}
				w = send(h2, r)
				if recVersion(t, s, key)&^0x80 >= 3 {
					requireProblem(t, w, 422, idem.CodeKeyReused)
				} else {
					require.Equal(t, 201, w.Code, w.Body.String())
					assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
				}
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

// Options.FingerprintVersion is the version of the records' fingerprints:
// SHA-256 over a store that is not a LocalReader, its process-local
// variant (fingerprint.Local) over one (memstore).
func TestFingerprintVersionOption(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	assert.Panics(t, func() { idem.New(s, idem.Options{FingerprintVersion: fingerprint.Version + 1}) })
	assert.Panics(t, func() { idem.New(s, idem.Options{FingerprintVersion: -1}) })
	assert.Panics(t, func() { idem.New(s, idem.Options{FingerprintVersion: fingerprint.Local(fingerprint.Version)}) })
	for _, local := range []bool{false, true} {
		for v, want := range map[int]byte{0: 3, 1: 1, 2: 2, 3: 3} {
			var store idem.Store = plainStore{s}
			if local {
				store, want = s, byte(fingerprint.Local(int(want)))
			}
			f := newFixtureStore(t, s, store, idem.Options{FingerprintVersion: v})
			key := fmt.Sprintf("k-version-%d-%v", v, local)
			h := f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), f.createOrder())
			require.Equal(t, 201, send(h, req{target: "/orders/o1/items", key: key, body: `{}`}).Code)
			rec, found, err := s.Get(context.Background(), scopeOf(t, s, key))
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, want, rec.Fingerprint[0], "FingerprintVersion %d, LocalReader %v", v, local)
		}
	}
}

// boundaryBody is one multipart body valid under two boundaries, with
// another "amount" under each (the security review's reproducer).
const boundaryBody = "--A\r\nContent-Disposition: form-data; name=\"amount\"\r\n\r\n1\r\n--A--\r\n" +
	"--B\r\nContent-Disposition: form-data; name=\"amount\"\r\n\r\n1000\r\n--B--\r\n"

// Under strict semantics the same key with the same multipart bytes and
// another boundary (another amount for the handler) is refused, at the
// default version; version 2 (which ignores the boundary) replayed the
// first response.
func TestStrictMultipartBoundary(t *testing.T) {
	for v, conflict := range map[int]bool{0: true, 3: true, 2: false, 1: false} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			f := newFixture(t, idem.Options{FingerprintVersion: v})
			var amounts []string
			h := f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				require.NoError(t, r.ParseMultipartForm(1<<20))
				amounts = append(amounts, r.FormValue("amount"))
				w.WriteHeader(201)
			}))
			r := req{target: "/orders/o1/items", key: "k", body: boundaryBody, header: http.Header{"Content-Type": {"multipart/form-data; boundary=A"}}}
			require.Equal(t, 201, send(h, r).Code)
			// The same request, the boundary spelled otherwise: replayed.
			r.header = http.Header{"Content-Type": {`multipart/form-data; Boundary="A"`}}
			w := send(h, r)
			require.Equal(t, 201, w.Code, w.Body.String())
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			r.header = http.Header{"Content-Type": {"multipart/form-data; boundary=B"}}
			w = send(h, r)
			if conflict {
				requireProblem(t, w, 422, idem.CodeKeyReused)
			} else {
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "version %d ignores the boundary", v)
			}
			assert.Equal(t, []string{"1"}, amounts)
		})
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
	// The v3 engine claims with version 3 (refused: another fingerprint),
	// then re-claims with the record's version 1 fingerprint; just before
	// that:
	s.hook = func() {
		// Before the v3 engine's re-claim with the v1 fingerprint, a v3
		// instance claims the key afresh and fails: the record is FAILED,
		// version 3.
		hs, err := fingerprint.New(fingerprint.Options{})
		require.NoError(t, err)
		v3 := hs.Sum(&fingerprint.Input{Method: "POST", Operation: "addItem", Path: "/orders/o1/items",
			ContentType: "application/json", Body: []byte(body)})
		ctx, scope := context.Background(), scopeOf(t, ms, key)
		res, err := ms.Begin(ctx, &idem.BeginRequest{Key: scope, Fingerprint: v3, Token: 77, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, res.Acquired)
		require.NoError(t, ms.Finish(ctx, scope, 77, idem.StateFailed, nil))
	}
	f := newFixtureStore(t, ms, s, idem.Options{})
	w := send(f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), f.createOrder()), req{target: "/orders/o1/items", key: key, body: body})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, int32(1), f.calls.Load())
}

// Records rewritten in every version while a request re-claims: a FAILED
// record of version 1; the v3 engine re-claims with its fingerprint, but
// meanwhile another instance rewrote the record in version 2; it re-claims
// with that, but meanwhile the record was rewritten in version 3, its own.
// It claims once per version (three times) and runs the request, instead
// of answering a conflict to the same request.
func TestFingerprintVersionReclaimAcrossThreeVersions(t *testing.T) {
	const key, body = "k-three", `{"item":"book"}`
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	hs, err := fingerprint.New(fingerprint.Options{})
	require.NoError(t, err)
	ctx, scope := context.Background(), scopeOf(t, ms, key)
	failIn := func(v int, token idem.Token) {
		fp, ok := hs.SumVersion(&fingerprint.Input{Method: "POST", Operation: "addItem", Path: "/orders/o1/items",
			ContentType: "application/json", Body: []byte(body)}, v)
		require.True(t, ok)
		res, err := ms.Begin(ctx, &idem.BeginRequest{Key: scope, Fingerprint: fp, Token: token, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, res.Acquired)
		require.NoError(t, ms.Finish(ctx, scope, token, idem.StateFailed, nil))
	}
	failIn(1, 71)
	s := &interleave{Store: ms, v: 1}
	s.hook = func() {
		// Before the re-claim with version 1, then before the one with
		// version 2.
		failIn(2, 72)
		s.v, s.hook = 2, func() { failIn(3, 73) }
	}
	f := newFixtureStore(t, ms, s, idem.Options{})
	w := send(f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), f.createOrder()), req{target: "/orders/o1/items", key: key, body: body})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Nil(t, s.hook, "both rewrites happened")
}
