package idem_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// The scenarios of a rolling deploy over each store are in
// runtime/internal/rollouttest; these are the engine's details.

func TestCompatibleCompile(t *testing.T) {
	sp := idem.Spec{Operation: "op", Semantics: idem.Strict, CompatibleFingerprints: []idem.FingerprintSpec{
		{Volatile: []string{"/a"}},
		{Unordered: []string{"items"}}, // not a pointer
		{Volatile: []string{"/b/~2"}},  // a bad escape
	}}
	_, err := idem.Compile(sp)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "compatible fingerprint 1:")
	assert.Contains(t, err.Error(), "compatible fingerprint 2: ")
	assert.Contains(t, err.Error(), "compatible fingerprint 3: ")

	sp.CompatibleFingerprints = sp.CompatibleFingerprints[:1]
	p := mustCompile(t, sp)
	assert.Equal(t, sp.CompatibleFingerprints, p.Spec().CompatibleFingerprints)
}

// A record made at another fingerprint version under a compatible setting:
// the request's fingerprint under that setting is computed in the record's
// version.
func TestCompatibleInRecordVersion(t *testing.T) {
	const body = `{"a":"t-1","b":"n-1","item":"book"}`
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	old := newFixtureStore(t, ms, plainStore{ms}, idem.Options{FingerprintVersion: 2}) // SHA-256: not a LocalReader
	cur := newFixtureStore(t, ms, ms, idem.Options{})
	v1 := itemsSpec(idem.Strict)
	v1.Volatile = []string{"/a"}
	v2 := itemsSpec(idem.Strict)
	v2.Volatile = []string{"/a", "/b"}
	v2.CompatibleFingerprints = []idem.FingerprintSpec{{Volatile: []string{"/a"}}}
	require.Equal(t, 201, send(old.eng.Handler(mustCompile(t, v1), old.createOrder()), req{target: "/orders/o1/items", key: "k", body: body}).Code)
	rec, found, err := ms.Get(context.Background(), scopeOf(t, ms, "k"))
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, byte(2), rec.Fingerprint[0])
	h := cur.eng.Handler(mustCompile(t, v2), cur.createOrder())
	w := send(h, req{target: "/orders/o1/items", key: "k", body: body})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	requireProblem(t, send(h, req{target: "/orders/o1/items", key: "k", body: `{"a":"t-1","b":"n-1","item":"pen"}`}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(0), cur.calls.Load())
}

// A record claimed with the request's fingerprint under a compatible setting
// (re-claimed after a failed attempt) is not tagged for ReadLocal: that
// fingerprint reads a header the cache's digest does not cover, so a
// request that differs in it only would find the tag and be replayed
// (where a request whose fingerprint is cached is refused). Both are
// refused.
func TestCompatibleClaimNotTagged(t *testing.T) {
	const body = `{"item":"book"}`
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	old := newFixtureStore(t, ms, ms, idem.Options{})
	cur := newFixtureStore(t, ms, ms, idem.Options{})
	h1 := itemsSpec(idem.Strict)
	h1.FingerprintHeaders = []string{"X-Tenant"}
	h2 := itemsSpec(idem.Strict)
	h2.CompatibleFingerprints = []idem.FingerprintSpec{{FingerprintHeaders: []string{"X-Tenant"}}}
	failing := old.eng.Handler(mustCompile(t, h1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	tenant := func(key, name string) req {
		return req{target: "/orders/o1/items", key: key, body: body, header: http.Header{"X-Tenant": {name}}}
	}
	require.Equal(t, 503, send(failing, tenant("k", "a")).Code)
	h := cur.eng.Handler(mustCompile(t, h2), cur.createOrder())
	w := send(h, tenant("k", "a"))
	require.Equal(t, 201, w.Code, w.Body.String())
	require.Empty(t, w.Header().Get("Idempotent-Replayed"))

	rec, found, err := ms.Get(context.Background(), scopeOf(t, ms, "k"))
	require.NoError(t, err)
	require.True(t, found)
	_, _, tagged := idem.RecordTag(cur.eng, rec.Response)
	assert.False(t, tagged, "claimed with a compatible setting's fingerprint")

	requireProblem(t, send(h, tenant("k", "b")), 422, idem.CodeKeyReused)
	idem.FlushFingerprints(cur.eng)
	requireProblem(t, send(h, tenant("k", "b")), 422, idem.CodeKeyReused)
	idem.FlushFingerprints(cur.eng)
	w = send(h, tenant("k", "a"))
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), cur.calls.Load())

	// A record claimed with the current fingerprint is tagged, as before.
	require.Equal(t, 201, send(h, tenant("k2", "a")).Code)
	rec, found, err = ms.Get(context.Background(), scopeOf(t, ms, "k2"))
	require.NoError(t, err)
	require.True(t, found)
	_, _, tagged = idem.RecordTag(cur.eng, rec.Response)
	assert.True(t, tagged)
}

// Window semantics without a key: the record is named by the request's
// fingerprint, so one made under a compatible setting is not found, and
// the request runs again (Spec.CompatibleFingerprints covers keyed requests only).
func TestCompatibleKeylessWindow(t *testing.T) {
	const body = `{"a":"t-1","b":"n-1","item":"book"}`
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	old := newFixtureStore(t, ms, ms, idem.Options{})
	cur := newFixtureStore(t, ms, ms, idem.Options{})
	v1 := itemsSpec(idem.Window)
	v1.Volatile = []string{"/a"}
	v2 := itemsSpec(idem.Window)
	v2.Volatile = []string{"/a", "/b"}
	v2.CompatibleFingerprints = []idem.FingerprintSpec{{Volatile: []string{"/a"}}}
	require.Equal(t, 201, send(old.eng.Handler(mustCompile(t, v1), old.createOrder()), req{target: "/orders/o1/items", body: body}).Code)
	h := cur.eng.Handler(mustCompile(t, v2), cur.createOrder())
	w := send(h, req{target: "/orders/o1/items", body: body})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), cur.calls.Load())
	// With a key, the same change is bridged.
	require.Equal(t, 201, send(old.eng.Handler(mustCompile(t, v1), old.createOrder()), req{target: "/orders/o1/items", key: "k", body: body}).Code)
	w = send(h, req{target: "/orders/o1/items", key: "k", body: body})
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	_, mismatch := cur.obs.find(idem.EventLooseMismatch)
	assert.False(t, mismatch)
}
