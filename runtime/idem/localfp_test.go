package idem_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// Over memstore (a LocalReader: its records never leave the process) the
// Engine records the process-local fingerprint of its version, and
// compares by it as by SHA-256: a retry with its members reordered is the
// same request (replayed), another body another (422); and another Engine
// over the same memstore recognizes the records, in both ways.
func TestLocalFingerprintOverMemstore(t *testing.T) {
	const body, reordered, other = `{"item":"book","qty":1,"note":"x"}`, `{"note":"x", "qty":1,"item":"book"}`, `{"item":"pen","qty":1,"note":"x"}`
	a := newFixture(t, idem.Options{})
	b := newFixtureStore(t, a.store, a.store, idem.Options{})
	ha := a.eng.Handler(mustCompile(t, strictSpec()), a.createOrder())
	hb := b.eng.Handler(mustCompile(t, strictSpec()), b.createOrder())
	require.Equal(t, 201, send(ha, req{key: "k1", body: body}).Code)

	rec, found, err := a.store.Get(context.Background(), createOrderScope("k1"))
	require.NoError(t, err)
	require.True(t, found)
	want, ok := mustCompileHasher(t).SumVersion(&fingerprint.Input{Method: "POST", Operation: "createOrder", Path: "/orders",
		ContentType: "application/json", Body: []byte(body)}, fingerprint.Local(fingerprint.Version))
	require.True(t, ok)
	assert.Equal(t, want, rec.Fingerprint, "the record's fingerprint is the process-local one, %v", rec.Fingerprint)

	for _, f := range []*fixture{a, b} {
		h := ha
		if f == b {
			h = hb
		}
		idem.FlushFingerprints(f.eng) // compared by fingerprint, not from the cache
		w := send(h, req{key: "k1", body: reordered})
		require.Equal(t, 201, w.Code, w.Body.String())
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		requireProblem(t, send(h, req{key: "k1", body: other}), 422, idem.CodeKeyReused)
	}
	// The other engine's record, recognized by the first.
	require.Equal(t, 201, send(hb, req{key: "k2", body: reordered}).Code)
	idem.FlushFingerprints(a.eng)
	w := send(ha, req{key: "k2", body: body})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	requireProblem(t, send(ha, req{key: "k2", body: other}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(1), a.calls.Load())
	assert.Equal(t, int32(1), b.calls.Load())
}

// mustCompileHasher is the hasher of strictSpec (no fingerprint options).
func mustCompileHasher(t *testing.T) *fingerprint.Hasher {
	h, err := fingerprint.New(fingerprint.Options{})
	require.NoError(t, err)
	return h
}

// beginFingerprints is a memstore (a LocalReader still) that keeps the
// fingerprint of every claim.
type beginFingerprints struct {
	*memstore.Store
	fps []fingerprint.Fingerprint
}

func (s *beginFingerprints) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	s.fps = append(s.fps, req.Fingerprint)
	return s.Store.Begin(ctx, req)
}

// A request without a key (window semantics) names its record by its
// fingerprint, across the callers of its scope: over memstore too, it is
// the SHA-256 fingerprint of the Engine's version, not the process-local
// one, while a keyed request of the same bytes gets the local one (and
// neither is answered from the fingerprint cache with the other's).
func TestKeylessFingerprintIsSHA256OverMemstore(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	bs := &beginFingerprints{Store: ms}
	for _, v := range []int{0, 2} {
		bs.fps = nil
		f := newFixtureStore(t, ms, bs, idem.Options{FingerprintVersion: v})
		want := map[int]int{0: fingerprint.Version, 2: 2}[v]
		spec := strictSpec()
		spec.Semantics = idem.Window
		spec.Window = time.Minute
		spec.Operation = fmt.Sprint("windowed", v)
		p := mustCompile(t, spec)
		h := f.eng.Handler(p, f.createOrder())
		body := fmt.Sprintf(`{"item":"book","v":%d}`, v)
		// Keyed first, then keyless, then keyed again: a keyed and a
		// keyless request of the same bytes, each answered from the cache
		// the second time.
		require.Equal(t, 201, send(h, req{key: "k", body: body}).Code)
		require.Equal(t, 201, send(h, req{body: body}).Code)
		w := send(h, req{body: body})
		require.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		require.Equal(t, 201, send(h, req{key: "k2", body: body}).Code)
		require.Len(t, bs.fps, 4)
		in := &fingerprint.Input{Method: "POST", Operation: spec.Operation, Path: "/orders", ContentType: "application/json", Body: []byte(body)}
		sha, _ := mustCompileHasher(t).SumVersion(in, want)
		local, _ := mustCompileHasher(t).SumVersion(in, fingerprint.Local(want))
		assert.Equal(t, []fingerprint.Fingerprint{local, sha, sha, local}, bs.fps, "version %d: keyed, keyless, keyless, keyed", v)
		assert.Equal(t, int32(3), f.calls.Load())
	}
}

// Reviewer's reproducer: keyless requests under window semantics, two
// engines of one process over one memstore, one of them through a wrapper
// that hides LocalReader (a setup docs/runtime.md describes): the same
// request sent through each is deduplicated within the window.
func TestKeylessWindowMixedEngines(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	a := newFixtureStore(t, ms, ms, idem.Options{})
	b := newFixtureStore(t, ms, plainStore{ms}, idem.Options{})
	spec := strictSpec()
	spec.Semantics = idem.Window
	spec.Window = time.Minute
	ha := a.eng.Handler(mustCompile(t, spec), a.createOrder())
	hb := b.eng.Handler(mustCompile(t, spec), b.createOrder())
	require.Equal(t, 201, send(ha, req{body: `{"item":"book"}`}).Code)
	w := send(hb, req{body: `{"item":"book"}`})
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "deduplicated across the engines")
	require.Equal(t, 201, send(hb, req{body: `{"item":"pen"}`}).Code)
	w = send(ha, req{body: `{"item":"pen"}`})
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "deduplicated across the engines, the other way")
	assert.Equal(t, int32(2), a.calls.Load()+b.calls.Load(), "the handler ran once per body")
}

// Reviewer's reproducer: one version, engines over one memstore, one
// through a wrapper hiding LocalReader (SHA-256 records) and one over the
// memstore itself (local records). Each replays the other's record (the
// local engine by its readLocal path, its cache flushed) and refuses
// another body; a failed attempt of one is taken over by the other with
// the record's fingerprint.
func TestMixedSameVersionBothWays(t *testing.T) {
	for _, shaFirst := range []bool{true, false} {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = ms.Close() })
		loc := newFixtureStore(t, ms, ms, idem.Options{})
		sha := newFixtureStore(t, ms, plainStore{ms}, idem.Options{})
		first, second := loc, sha
		if shaFirst {
			first, second = sha, loc
		}
		h1 := first.eng.Handler(mustCompile(t, strictSpec()), first.createOrder())
		h2 := second.eng.Handler(mustCompile(t, strictSpec()), second.createOrder())
		require.Equal(t, 201, send(h1, req{key: "k", body: `{"item":"book","n":1}`}).Code)
		rec, found, err := ms.Get(context.Background(), createOrderScope("k"))
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, !shaFirst, fingerprint.IsLocal(int(rec.Fingerprint[0])), "shaFirst %v: record fingerprint %v", shaFirst, rec.Fingerprint)
		idem.FlushFingerprints(second.eng)
		w := send(h2, req{key: "k", body: `{"n":1, "item":"book"}`})
		require.Equal(t, 201, w.Code, w.Body.String())
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		requireProblem(t, send(h2, req{key: "k", body: `{"item":"pen","n":1}`}), 422, idem.CodeKeyReused)
		// Failed attempt by first, reclaimed by second with first's fingerprint.
		fail := first.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}))
		require.Equal(t, 503, send(fail, req{key: "kf", body: `{"item":"book"}`}).Code)
		requireProblem(t, send(h2, req{key: "kf", body: `{"item":"pen"}`}), 422, idem.CodeKeyReused)
		w = send(h2, req{key: "kf", body: `{"item":"book"}`})
		require.Equal(t, 201, w.Code, w.Body.String())
		assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, int32(1), first.calls.Load())
		assert.Equal(t, int32(1), second.calls.Load())
	}
}

// otherProcess is a memstore that a store wrapper wrongly presents as a
// LocalReader while its records reach other processes: the records it
// writes carry the fingerprints of another process (their process tag
// changed), as a shared store's would, written by another instance.
type otherProcess struct{ *memstore.Store }

func (s otherProcess) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	r := *req
	if fingerprint.IsLocal(int(r.Fingerprint[0])) {
		r.Fingerprint[17] ^= 0xFF
	}
	return s.Store.Begin(ctx, &r)
}

// A record whose fingerprint is process-local but another process's
// cannot be compared: the request is answered as for a record this engine
// cannot read (500 IDEMPOTENCY_RECORD_UNREADABLE), not as another request
// (422, or a loose mismatch), whether the record is final, failed
// (reclaimable) or read by readLocal; one ERROR per Engine names the
// store's type and the LocalReader contract.
func TestOtherProcessFingerprintUnreadable(t *testing.T) {
	for _, overLocal := range []bool{true, false} {
		t.Run(fmt.Sprint("LocalReader ", overLocal), func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			other := newFixtureStore(t, ms, otherProcess{ms}, idem.Options{})
			var logs bytes.Buffer
			var store idem.Store = ms
			wantType := "*memstore.Store"
			if !overLocal {
				store, wantType = plainStore{ms}, "idem_test.plainStore"
			}
			f := newFixtureStore(t, ms, store, idem.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			strict, loose := strictSpec(), strictSpec()
			loose.Semantics = idem.Loose
			hOther := other.eng.Handler(mustCompile(t, strict), other.createOrder())
			fail := other.eng.Handler(mustCompile(t, strict), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "down", http.StatusServiceUnavailable)
			}))
			h := f.eng.Handler(mustCompile(t, strict), f.createOrder())
			hLoose := f.eng.Handler(mustCompile(t, loose), f.createOrder())
			require.Equal(t, 201, send(hOther, req{key: "k", body: `{"item":"book"}`}).Code)
			require.Equal(t, 503, send(fail, req{key: "kf", body: `{"item":"book"}`}).Code)
			for _, c := range []struct {
				h   http.Handler
				key string
				b   string
			}{{h, "k", `{"item":"book"}`}, {h, "k", `{"item":"pen"}`}, {hLoose, "k", `{"item":"pen"}`}, {h, "kf", `{"item":"book"}`}, {h, "kf", `{"item":"book"}`}} {
				requireProblem(t, send(c.h, req{key: c.key, body: c.b}), 500, idem.CodeRecordUnreadable)
			}
			assert.Equal(t, int32(0), f.calls.Load())
			assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "%s", logs.String())
			assert.Contains(t, logs.String(), wantType)
			assert.Contains(t, logs.String(), "LocalReader")
		})
	}
}
