package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// holdFirst serves spec under eng with a handler whose first run blocks
// until released (a holder that crashed, as far as the store can tell: no
// heartbeats), sends first, and returns once its run has started; later
// runs answer 201 with "run<n>:<body>". release lets the first run end
// and returns its response.
func holdFirst(t *testing.T, eng *idem.Engine, spec idem.Spec, first req) (h http.Handler, runs *atomic.Int32, release func() *httptest.ResponseRecorder) {
	runs = &atomic.Int32{}
	started, gate := make(chan struct{}), make(chan struct{})
	h = eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := runs.Add(1)
		b, _ := io.ReadAll(r.Body)
		if i == 1 {
			close(started)
			<-gate
		}
		w.WriteHeader(201)
		_, _ = fmt.Fprintf(w, "run%d:%s", i, b)
	}))
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- send(h, first) }()
	<-started
	return h, runs, func() *httptest.ResponseRecorder {
		close(gate)
		return <-done
	}
}

// Under strict semantics, a request with another body does not take over a
// key whose holder's lease ran out (the holder may have done its side
// effects): it is a conflict, as while the lease held. The original
// request's retry takes the key over and runs, once.
func TestStrictTakeoverNeedsSameBody(t *testing.T) {
	f := newFixture(t, idem.Options{DisableHeartbeat: true})
	spec := strictSpec()
	spec.InFlight.Lease = 50 * time.Millisecond
	h, runs, release := holdFirst(t, f.eng, spec, req{key: "k", body: `{"a":1}`})
	time.Sleep(spec.InFlight.Lease + 60*time.Millisecond)

	requireProblem(t, send(h, req{key: "k", body: `{"a":9}`}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(1), runs.Load(), "the other body did not run")
	_, took := f.obs.find(idem.EventLeaseTakeover)
	assert.False(t, took, "no takeover by another body")

	w := send(h, req{key: "k", body: `{"a":1}`})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, `run2:{"a":1}`, w.Body.String())
	ev, took := f.obs.find(idem.EventLeaseTakeover)
	require.True(t, took)
	assert.Equal(t, idem.StatePending, ev.Prior)

	release()
	w = send(h, req{key: "k", body: `{"a":1}`})
	assert.Equal(t, `run2:{"a":1}`, w.Body.String(), "the retry's response is replayed")
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	requireProblem(t, send(h, req{key: "k", body: `{"a":9}`}), 422, idem.CodeKeyReused)
	assert.Equal(t, int32(2), runs.Load())
}

// Loose and window semantics keep letting any body take over an expired
// lease.
func TestNonStrictTakeoverAnyBody(t *testing.T) {
	for _, sem := range []idem.Semantics{idem.Loose, idem.Window} {
		t.Run(fmt.Sprint(sem), func(t *testing.T) {
			f := newFixture(t, idem.Options{DisableHeartbeat: true})
			spec := strictSpec()
			spec.Semantics = sem
			spec.Window = time.Minute
			spec.InFlight.Lease = 50 * time.Millisecond
			h, runs, release := holdFirst(t, f.eng, spec, req{key: "k", body: `{"a":1}`})
			time.Sleep(spec.InFlight.Lease + 60*time.Millisecond)
			w := send(h, req{key: "k", body: `{"a":9}`})
			require.Equal(t, 201, w.Code, w.Body.String())
			assert.Equal(t, `run2:{"a":9}`, w.Body.String())
			release()
			assert.Equal(t, int32(2), runs.Load())
		})
	}
}

// A strict takeover across fingerprint versions (a rolling switch of
// Options.FingerprintVersion): the holder fingerprinted the request in one
// version and its lease ran out; the same request fingerprinted in the
// other version takes the key over (claiming with the record's
// fingerprint, as a reclaim of a FAILED record does), and another body is
// a conflict.
func TestStrictTakeoverAcrossFingerprintVersions(t *testing.T) {
	for _, dir := range [][2]int{{1, 0}, {0, 1}, {2, 0}, {0, 2}} {
		t.Run(fmt.Sprintf("%d then %d", dir[0], dir[1]), func(t *testing.T) {
			const key, body = "k-takeover", `{"item":"book"}`
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			first := newFixtureStore(t, ms, ms, idem.Options{FingerprintVersion: dir[0], DisableHeartbeat: true})
			second := newFixtureStore(t, ms, ms, idem.Options{FingerprintVersion: dir[1], DisableHeartbeat: true})
			spec := itemsSpec(idem.Strict)
			spec.InFlight.Lease = 50 * time.Millisecond
			_, _, release := holdFirst(t, first.eng, spec, req{target: "/orders/o1/items", key: key, body: body})
			rec, found, err := ms.Get(context.Background(), scopeOf(t, ms, key))
			require.NoError(t, err)
			require.True(t, found)
			v := rec.Fingerprint[0]
			time.Sleep(spec.InFlight.Lease + 60*time.Millisecond)

			h2 := second.eng.Handler(mustCompile(t, spec), second.createOrder())
			requireProblem(t, send(h2, req{target: "/orders/o1/items", key: key, body: `{"item":"pen"}`}), 422, idem.CodeKeyReused)
			w := send(h2, req{target: "/orders/o1/items", key: key, body: body})
			require.Equal(t, 201, w.Code, w.Body.String())
			assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, int32(1), second.calls.Load())
			_, took := second.obs.find(idem.EventLeaseTakeover)
			assert.True(t, took)
			rec, _, err = ms.Get(context.Background(), scopeOf(t, ms, key))
			require.NoError(t, err)
			assert.Equal(t, v, rec.Fingerprint[0], "claimed with the record's fingerprint")
			release()
		})
	}
}

// A strict request of another fingerprint version finding a live lease is
// told the key is in flight (after claiming again with the record's
// fingerprint), not taken over.
func TestStrictLiveLeaseAcrossFingerprintVersions(t *testing.T) {
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			const key, body = "k-live", `{"item":"book"}`
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			first := newFixtureStore(t, ms, ms, idem.Options{FingerprintVersion: v})
			second := newFixtureStore(t, ms, ms, idem.Options{})
			spec := itemsSpec(idem.Strict)
			_, _, release := holdFirst(t, first.eng, spec, req{target: "/orders/o1/items", key: key, body: body})
			h2 := second.eng.Handler(mustCompile(t, spec), second.createOrder())
			requireProblem(t, send(h2, req{target: "/orders/o1/items", key: key, body: body}), 409, idem.CodeKeyInUse)
			assert.Equal(t, int32(0), second.calls.Load())
			release()
		})
	}
}
