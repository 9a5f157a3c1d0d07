package idem_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// Over a LocalReader store (memstore), a request whose fingerprint is not in
// the engine's cache (a retry after many other requests) reads its key's
// record first: a record the engine made for a request of the same bytes
// is replayed without computing the fingerprint; anything else is
// compared by fingerprint as before.

// countFingerprints counts the fingerprints f's engine computes.
func countFingerprints(f *fixture) *atomic.Int32 {
	var n atomic.Int32
	idem.OnFingerprint(f.t, f.eng, func() { n.Add(1) })
	return &n
}

func createOrderScope(key string) string {
	return "i1p0:11:createOrderk" + strconv.Itoa(len(key)) + ":" + key
}

const (
	rlBody     = `{"item":"book","qty":2}`
	rlReorder  = `{"qty":2, "item":"book"}` // other bytes, the same fingerprint
	rlOther    = `{"item":"pen","qty":2}`
	rlKey      = "k-readlocal"
	rlReplayed = "Idempotent-Replayed"
)

func TestReadLocalReplaysSameBytesWithoutFingerprint(t *testing.T) {
	f := newFixture(t, idem.Options{})
	n := countFingerprints(f)
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	first := send(h, req{key: rlKey, body: rlBody})
	require.Equal(t, 201, first.Code)
	require.Equal(t, int32(1), n.Load(), "a first request computes its fingerprint")

	// The record is tagged with the engine's domain.
	rec, found, err := f.store.Get(context.Background(), createOrderScope(rlKey))
	require.NoError(t, err)
	require.True(t, found)
	domain, own, tagged := idem.RecordTag(f.eng, rec.Response)
	require.True(t, tagged)
	assert.Equal(t, own, domain)

	for range 2 {
		idem.FlushFingerprints(f.eng)
		w := send(h, req{key: rlKey, body: rlBody})
		require.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get(rlReplayed))
		assert.Equal(t, first.Body.String(), w.Body.String())
		assert.Equal(t, "/orders/42", w.Header().Get("Location"))
	}
	assert.Equal(t, int32(1), n.Load(), "a replay of the same bytes computes no fingerprint")
	assert.Equal(t, int32(1), f.calls.Load())
	ev, ok := f.obs.find(idem.EventReplayed)
	require.True(t, ok)
	assert.Equal(t, idem.StateCompleted, ev.State)
}

func TestReadLocalOtherBytesComparedByFingerprint(t *testing.T) {
	f := newFixture(t, idem.Options{})
	n := countFingerprints(f)
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: rlKey, body: rlBody}).Code)

	// Another request under the key: a conflict (strict), fingerprinted.
	idem.FlushFingerprints(f.eng)
	requireProblem(t, send(h, req{key: rlKey, body: rlOther}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(2), n.Load())

	// Other bytes of the same fingerprint: a replay, fingerprinted.
	idem.FlushFingerprints(f.eng)
	w := send(h, req{key: rlKey, body: rlReorder})
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(rlReplayed))
	assert.Equal(t, int32(3), n.Load())

	// Another header the fingerprint reads (the path): another request.
	idem.FlushFingerprints(f.eng)
	requireProblem(t, send(h, req{key: rlKey, body: rlBody, target: "/orders?x=1"}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(1), f.calls.Load())
}

// A record another Engine made (another domain: another seed of the
// digest) is never matched by its tag, whatever its digest.
func TestReadLocalOtherEngineComparedByFingerprint(t *testing.T) {
	a := newFixture(t, idem.Options{})
	b := newFixtureStore(t, a.store, a.store, idem.Options{})
	nb := countFingerprints(b)
	ha := a.eng.Handler(mustCompile(t, strictSpec()), a.createOrder())
	hb := b.eng.Handler(mustCompile(t, strictSpec()), b.createOrder())
	require.Equal(t, 201, send(ha, req{key: rlKey, body: rlBody}).Code)

	w := send(hb, req{key: rlKey, body: rlBody})
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(rlReplayed))
	assert.Equal(t, int32(1), nb.Load(), "the other engine computes the fingerprint")
	requireProblem(t, send(hb, req{key: rlKey, body: rlOther}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(0), b.calls.Load())
}

// A tag is the request's, not the engine's: a request with the bytes of
// one record's request, under the key of another of the engine's records,
// is compared by fingerprint.
func TestReadLocalTagIsTheRequests(t *testing.T) {
	f := newFixture(t, idem.Options{})
	n := countFingerprints(f)
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k1", body: rlBody}).Code)
	require.Equal(t, 201, send(h, req{key: "k2", body: rlOther}).Code)
	idem.FlushFingerprints(f.eng)
	n.Store(0)
	// k1's body under k2 (whose record is rlOther's): compared, conflict.
	requireProblem(t, send(h, req{key: "k2", body: rlBody}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(1), n.Load())
}

// A store that is not a LocalReader (Redis, PostgreSQL: shared by other
// processes and releases) gets untagged records, as before.
func TestNoTagWithoutLocalReader(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	f := newFixtureStore(t, s, plainStore{s}, idem.Options{})
	n := countFingerprints(f)
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: rlKey, body: rlBody}).Code)
	rec, found, err := s.Get(context.Background(), createOrderScope(rlKey))
	require.NoError(t, err)
	require.True(t, found)
	_, _, tagged := idem.RecordTag(f.eng, rec.Response)
	assert.False(t, tagged)
	assert.Equal(t, []byte{1, 0}, rec.Response[:2], "version 1, no flags")
	idem.FlushFingerprints(f.eng)
	w := send(h, req{key: rlKey, body: rlBody})
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(rlReplayed))
	assert.Equal(t, int32(2), n.Load())
}

// A key whose record is in flight or free again goes on to Begin.
func TestReadLocalPendingAndFreed(t *testing.T) {
	t.Run("pending", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		started, release := make(chan struct{}), make(chan struct{})
		slow := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			w.WriteHeader(201)
		}))
		done := make(chan struct{})
		go func() { send(slow, req{key: rlKey, body: rlBody}); close(done) }()
		<-started
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		idem.FlushFingerprints(f.eng)
		requireProblem(t, send(h, req{key: rlKey, body: rlBody}), 409, idem.CodeKeyInUse)
		idem.FlushFingerprints(f.eng)
		requireProblem(t, send(h, req{key: rlKey, body: rlOther}), 422, idem.CodeKeyReused)
		close(release)
		<-done
	})
	t.Run("freed", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		var fail atomic.Bool
		fail.Store(true)
		ok := f.createOrder()
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fail.Load() {
				w.WriteHeader(503)
				return
			}
			ok.ServeHTTP(w, r)
		}))
		require.Equal(t, 503, send(h, req{key: rlKey, body: rlBody}).Code)
		fail.Store(false)
		idem.FlushFingerprints(f.eng)
		w := send(h, req{key: rlKey, body: rlBody})
		require.Equal(t, 201, w.Code)
		assert.Empty(t, w.Header().Get(rlReplayed))
		assert.Equal(t, int32(1), f.calls.Load(), "the retry ran the handler")
	})
}

// A loose policy replays a record to another request under its key
// (EventLooseMismatch), also when read first.
func TestReadLocalLooseMismatch(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.Semantics = idem.Loose
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: rlKey, body: rlBody}).Code)
	idem.FlushFingerprints(f.eng)
	w := send(h, req{key: rlKey, body: rlOther})
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(rlReplayed))
	mismatches := func() (n int) {
		for _, k := range f.obs.kinds() {
			if k == idem.EventLooseMismatch {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 1, mismatches())
	idem.FlushFingerprints(f.eng)
	w = send(h, req{key: rlKey, body: rlBody})
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(rlReplayed))
	assert.Equal(t, 1, mismatches(), "the same request is no mismatch")
}
