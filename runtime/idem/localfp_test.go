package idem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idem"
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
