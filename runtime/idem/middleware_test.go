package idem_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

const key1 = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70" // a UUIDv7

func TestStrictSemantics(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())

	first := send(h, req{key: key1, body: `{"item":"book"}`})
	require.Equal(t, http.StatusCreated, first.Code)
	assert.Equal(t, "/orders/42", first.Header().Get("Location"))
	assert.Equal(t, "session=secret", first.Header().Get("Set-Cookie"), "the live response is untouched")
	assert.Empty(t, first.Header().Get("Idempotent-Replayed"))

	// Same key, same request (JSON spelled the same): replay.
	again := send(h, req{key: key1, body: `{"item":"book"}`})
	require.Equal(t, http.StatusCreated, again.Code)
	assert.Equal(t, first.Body.String(), again.Body.String())
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "/orders/42", again.Header().Get("Location"))
	assert.Equal(t, "application/json", again.Header().Get("Content-Type"))
	assert.Empty(t, again.Header().Get("Set-Cookie"), "Set-Cookie is never replayed")
	assert.Empty(t, again.Header().Get("X-Not-Allowed"), "headers off the allowlist are not replayed")

	// The key as an RFC 8941 sf-string is the same key.
	quoted := send(h, req{key: `"` + key1 + `"`, body: `{"item":"book"}`})
	require.Equal(t, http.StatusCreated, quoted.Code)
	assert.Equal(t, "true", quoted.Header().Get("Idempotent-Replayed"))

	// Same key, another request: conflict.
	other := send(h, req{key: key1, body: `{"item":"pen"}`})
	requireProblem(t, other, http.StatusUnprocessableEntity, idem.CodeKeyReused)

	assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once")
	assert.Equal(t, []idem.EventKind{idem.EventExecuted, idem.EventReplayed, idem.EventReplayed, idem.EventConflict}, f.obs.kinds())
	ev, _ := f.obs.find(idem.EventExecuted)
	assert.Equal(t, idem.StateCompleted, ev.State)
	assert.Equal(t, http.StatusCreated, ev.Status)
	assert.Equal(t, "createOrder", ev.Operation)
	assert.Equal(t, key1, ev.Key)
}

func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name   string
		spec   func(*idem.Spec)
		req    req
		status int
		code   string
	}{
		{"missing key", nil, req{body: `{}`}, 400, idem.CodeKeyMissing},
		{"empty sf-string", nil, req{key: `""`, body: `{}`}, 400, idem.CodeKeyInvalid},
		{"bad sf-string", nil, req{key: `"ab\c"`, body: `{}`}, 400, idem.CodeKeyInvalid},
		{"space in token", nil, req{key: `"a b"`, body: `{}`}, 400, idem.CodeKeyInvalid},
		{"too long", nil, req{key: strings.Repeat("k", 256), body: `{}`}, 400, idem.CodeKeyInvalid},
		{"custom max length", func(s *idem.Spec) { s.Key.MaxLength = 4 }, req{key: "abcde", body: `{}`}, 400, idem.CodeKeyInvalid},
		{"not a uuid", func(s *idem.Spec) { s.Key.Format = idem.FormatUUID }, req{key: "order-1", body: `{}`}, 400, idem.CodeKeyInvalid},
		{"uuid v4 wanted", func(s *idem.Spec) { s.Key.Format = idem.FormatUUIDv4 }, req{key: key1, body: `{}`}, 400, idem.CodeKeyInvalid},
		{"repeated header", nil, req{body: `{}`, header: http.Header{"Idempotency-Key": {"a", "b"}}}, 400, idem.CodeKeyInvalid},
		{"body too large", func(s *idem.Spec) { s.Request.MaxBytes = 8 }, req{key: "k", body: `{"item":"book"}`}, 413, idem.CodeRequestTooLarge},
		{"query key missing", func(s *idem.Spec) { s.Key = idem.KeySpec{Carrier: idem.CarrierQuery, Name: "request_id"} }, req{body: `{}`}, 400, idem.CodeKeyMissing},
		{"query key repeated", func(s *idem.Spec) { s.Key = idem.KeySpec{Carrier: idem.CarrierQuery, Name: "request_id"} }, req{target: "/orders?request_id=a&request_id=b", body: `{}`}, 400, idem.CodeKeyInvalid},
		{"body key missing", func(s *idem.Spec) { s.Key = idem.KeySpec{Carrier: idem.CarrierBody, Name: "/meta/key"} }, req{body: `{"meta":{}}`}, 400, idem.CodeKeyMissing},
		{"body key not a string", func(s *idem.Spec) { s.Key = idem.KeySpec{Carrier: idem.CarrierBody, Name: "/key"} }, req{body: `{"key":7}`}, 400, idem.CodeKeyInvalid},
		{"body not JSON", func(s *idem.Spec) { s.Key = idem.KeySpec{Carrier: idem.CarrierBody, Name: "/key"} }, req{body: `key=1`}, 400, idem.CodeKeyInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			spec := strictSpec()
			if tt.spec != nil {
				tt.spec(&spec)
			}
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			w := send(h, tt.req)
			requireProblem(t, w, tt.status, tt.code)
			assert.Equal(t, int32(0), f.calls.Load(), "the handler must not run")
			ev, ok := f.obs.find(idem.EventRejected)
			require.True(t, ok)
			assert.Equal(t, tt.code, ev.Code)
		})
	}
}

// A key given more than once is refused as such, in the query as in a
// header (the same code and detail), whatever its values: one badly
// escaped, or not of the policy's format, does not change what the client
// is told first.
func TestRepeatedKeyDetail(t *testing.T) {
	refuse := func(t *testing.T, key idem.KeySpec, r req) problemBody {
		t.Helper()
		f := newFixture(t, idem.Options{})
		spec := strictSpec()
		spec.Key = key
		w := send(f.eng.Handler(mustCompile(t, spec), f.createOrder()), r)
		assert.Equal(t, int32(0), f.calls.Load(), "the handler must not run")
		return requireProblem(t, w, 400, idem.CodeKeyInvalid)
	}
	want := refuse(t, idem.KeySpec{}, req{body: `{}`, header: http.Header{"Idempotency-Key": {"a", "b"}}}).Detail
	assert.Contains(t, want, "more than once")
	for _, format := range []idem.Format{idem.FormatToken, idem.FormatUUID} {
		for _, q := range []string{
			"request_id=a&request_id=b",
			"request_id=a&x=1&request%5Fid=a",
			"request_id=a&request_id=%zz",
			"request_id=%zz&request_id=b",
			"request_id=%zz&request_id=%zz",
		} {
			t.Run(format.String()+" "+q, func(t *testing.T) {
				p := refuse(t, idem.KeySpec{Carrier: idem.CarrierQuery, Name: "request_id", Format: format}, req{target: "/orders?" + q, body: `{}`})
				assert.Equal(t, want, p.Detail)
			})
		}
	}
}

func TestKeyCarriers(t *testing.T) {
	tests := []struct {
		name string
		key  idem.KeySpec
		a, b req // same key
		c    req // another key, same body
	}{
		{"header custom name", idem.KeySpec{Name: "x-request-id"},
			req{body: `{"item":1}`, header: http.Header{"X-Request-Id": {"k1"}}},
			req{body: `{"item":1}`, header: http.Header{"X-Request-Id": {`"k1"`}}},
			req{body: `{"item":1}`, header: http.Header{"X-Request-Id": {"k2"}}}},
		{"query", idem.KeySpec{Carrier: idem.CarrierQuery, Name: "request_id"},
			req{target: "/orders?request_id=k%2F1&x=1", body: `{"item":1}`},
			req{target: "/orders?request_id=k%2F1&x=1", body: `{"item":1}`},
			req{target: "/orders?request_id=k2&x=1", body: `{"item":1}`}},
		{"body pointer", idem.KeySpec{Carrier: idem.CarrierBody, Name: "/meta/idempotency~1key"},
			req{body: `{"item":1,"meta":{"idempotency/key":"k1"}}`},
			req{body: `{"item":1,"meta":{"idempotency/key":"k1"}}`},
			req{body: `{"item":1,"meta":{"idempotency/key":"k2"}}`}},
		{"uuid case-insensitive", idem.KeySpec{Format: idem.FormatUUID},
			req{key: key1, body: `{"item":1}`},
			req{key: strings.ToUpper(key1), body: `{"item":1}`},
			req{key: "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f71", body: `{"item":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			spec := strictSpec()
			spec.Key = tt.key
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			require.Equal(t, 201, send(h, tt.a).Code)
			wb := send(h, tt.b)
			require.Equal(t, 201, wb.Code)
			assert.Equal(t, "true", wb.Header().Get("Idempotent-Replayed"))
			wc := send(h, tt.c)
			require.Equal(t, 201, wc.Code)
			assert.Empty(t, wc.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, int32(2), f.calls.Load())
		})
	}
}

func TestConflictStatus409(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.ConflictStatus = 409
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	send(h, req{key: "k", body: `{"item":1}`})
	requireProblem(t, send(h, req{key: "k", body: `{"item":2}`}), 409, idem.CodeKeyReused)
}

func TestLooseSemantics(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.Semantics = idem.Loose
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	first := send(h, req{key: "k", body: `{"item":"book"}`})
	other := send(h, req{key: "k", body: `{"item":"pen"}`})
	require.Equal(t, 201, other.Code)
	assert.Equal(t, first.Body.String(), other.Body.String(), "loose replays the first result")
	assert.Equal(t, "true", other.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
	_, ok := f.obs.find(idem.EventLooseMismatch)
	assert.True(t, ok, "the mismatch is reported")
	requireProblem(t, send(h, req{body: `{}`}), 400, idem.CodeKeyMissing)
}

func TestWindowSemantics(t *testing.T) {
	// The store and the engine run on the test's clock: the duplicates come
	// just inside the window, the last request just past it, however slowly
	// the machine runs the test (on the wall clock, a duplicate later than
	// the window would be new).
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	ms := memstore.New(memstore.Options{SweepInterval: -1, Now: clock})
	t.Cleanup(func() { _ = ms.Close() })
	f := newFixtureStore(t, ms, ms, idem.Options{Now: clock})
	spec := strictSpec()
	spec.Semantics = idem.Window
	spec.Window = 300 * time.Millisecond
	spec.InFlight.Lease = 100 * time.Millisecond
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())

	// Without a key, principal + operation + fingerprint act as the key.
	a := send(h, req{body: `{"item":"book"}`})
	require.Equal(t, 201, a.Code)
	advance(spec.Window - time.Millisecond) // the end of a's window
	b := send(h, req{body: `{"item":"book"}`})
	assert.Equal(t, "true", b.Header().Get("Idempotent-Replayed"))
	c := send(h, req{body: `{"item":"pen"}`})
	assert.Empty(t, c.Header().Get("Idempotent-Replayed"), "another request is new")
	// With a key, any duplicate replays.
	send(h, req{key: "w", body: `{"item":"cup"}`})
	d := send(h, req{key: "w", body: `{"item":"mug"}`})
	assert.Equal(t, "true", d.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(3), f.calls.Load())
	// After the window: a new request.
	advance(2 * time.Millisecond)
	e := send(h, req{body: `{"item":"book"}`})
	require.Equal(t, 201, e.Code)
	assert.Empty(t, e.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(4), f.calls.Load())
}

func TestOptionalKeyRunsUnprotected(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.Key.Required = idem.Optional
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	send(h, req{body: `{"item":1}`})
	w := send(h, req{body: `{"item":1}`})
	require.Equal(t, 201, w.Code)
	assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(2), f.calls.Load())
	ev, _ := f.obs.find(idem.EventExecuted)
	assert.False(t, ev.Protected)
}

func TestPrincipalScopes(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: func(r *http.Request) (string, error) {
		u := r.Header.Get("X-User")
		if u == "" {
			return "", &idem.Problem{Status: 401, Code: "UNAUTHENTICATED", Detail: "who are you"}
		}
		if u == "broken" {
			return "", errBoom
		}
		return u, nil
	}})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	alice := send(h, req{key: "k", body: `{"item":1}`, header: http.Header{"X-User": {"alice"}}})
	bob := send(h, req{key: "k", body: `{"item":1}`, header: http.Header{"X-User": {"bob"}}})
	require.Equal(t, 201, alice.Code)
	require.Equal(t, 201, bob.Code)
	assert.Empty(t, bob.Header().Get("Idempotent-Replayed"), "bob never gets alice's response")
	assert.Equal(t, int32(2), f.calls.Load())

	w := send(h, req{key: "k", body: `{}`})
	require.Equal(t, 401, w.Code)
	var p problemBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	assert.Equal(t, "UNAUTHENTICATED", p.Code)
	requireProblem(t, send(h, req{key: "k", body: `{}`, header: http.Header{"X-User": {"broken"}}}), 500, idem.CodePrincipalUnavailable)
}

// Under ScopeShared the principal is left out of the scope: alice and bob
// sending one key share one record (bob gets alice's response), and under
// Window two keyless requests with one fingerprint do too.
func TestSharedScope(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }})
	spec := strictSpec()
	spec.Scope = idem.ScopeShared
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	alice := send(h, req{key: "k", body: `{"item":1}`, header: http.Header{"X-User": {"alice"}}})
	bob := send(h, req{key: "k", body: `{"item":1}`, header: http.Header{"X-User": {"bob"}}})
	carol := send(h, req{key: "k", body: `{"item":1}`, header: http.Header{"X-User": {"carol"}}})
	require.Equal(t, 201, alice.Code)
	assert.Empty(t, alice.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "true", bob.Header().Get("Idempotent-Replayed"), "bob gets alice's response")
	assert.Equal(t, "true", carol.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, alice.Body.String(), bob.Body.String())
	assert.Equal(t, int32(1), f.calls.Load())
	ev, _ := f.obs.find(idem.EventReplayed)
	assert.Equal(t, "bob", ev.Principal, "events still carry the principal")

	spec.Operation, spec.Semantics = "windowed", idem.Window
	h = f.eng.Handler(mustCompile(t, spec), f.createOrder())
	send(h, req{body: `{"item":2}`, header: http.Header{"X-User": {"alice"}}})
	w := send(h, req{body: `{"item":2}`, header: http.Header{"X-User": {"bob"}}})
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(2), f.calls.Load())

	assert.Equal(t, "shared", idem.ScopeShared.String())
	assert.Equal(t, "principal", idem.ScopePrincipal.String())
}

func TestInFlight(t *testing.T) {
	f := newFixture(t, idem.Options{})
	release := make(chan struct{})
	started := make(chan struct{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		w.WriteHeader(201)
	}))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- send(h, req{key: "k", body: `{}`}) }()
	<-started
	w := send(h, req{key: "k", body: `{}`})
	requireProblem(t, w, 409, idem.CodeKeyInUse)
	assert.Equal(t, "2", w.Header().Get("Retry-After"))
	// Strict: another fingerprint while in flight is a conflict, not "in use".
	requireProblem(t, send(h, req{key: "k", body: `{"other":1}`}), 422, idem.CodeKeyReused)
	close(release)
	require.Equal(t, 201, (<-done).Code)
	assert.Equal(t, "true", send(h, req{key: "k", body: `{}`}).Header().Get("Idempotent-Replayed"))
}

func TestInFlightWait(t *testing.T) {
	for _, watcher := range []bool{true, false} {
		name := map[bool]string{true: "watcher", false: "polling"}[watcher]
		t.Run(name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			defer ms.Close()
			var s idem.Store = ms
			if !watcher {
				s = plainStore{ms}
			}
			f := newFixtureStore(t, ms, s, idem.Options{})
			spec := strictSpec()
			spec.InFlight.Wait = 5 * time.Second
			started := make(chan struct{})
			release := make(chan struct{})
			h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if f.calls.Add(1) == 1 {
					close(started)
				}
				<-release
				w.Header().Set("Location", "/x")
				w.WriteHeader(201)
				_, _ = io.WriteString(w, "made")
			}))
			go send(h, req{key: "k", body: `{}`})
			<-started
			got := make(chan *httptest.ResponseRecorder)
			go func() { got <- send(h, req{key: "k", body: `{}`}) }()
			time.Sleep(30 * time.Millisecond)
			close(release)
			w := <-got
			require.Equal(t, 201, w.Code)
			assert.Equal(t, "made", w.Body.String())
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, int32(1), f.calls.Load())
		})
	}
	t.Run("deadline", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		spec := strictSpec()
		spec.InFlight.Wait = 50 * time.Millisecond
		release := make(chan struct{})
		defer close(release)
		started := make(chan struct{})
		h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
		}))
		go send(h, req{key: "k", body: `{}`})
		<-started
		t0 := time.Now()
		requireProblem(t, send(h, req{key: "k", body: `{}`}), 409, idem.CodeKeyInUse)
		assert.GreaterOrEqual(t, time.Since(t0), 50*time.Millisecond)
		ev, _ := f.obs.find(idem.EventInFlight)
		assert.GreaterOrEqual(t, ev.Duration, 50*time.Millisecond)
	})
}

func TestFailures(t *testing.T) {
	status := atomic.Int32{}
	handler := func(f *fixture) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			w.WriteHeader(int(status.Load()))
			_, _ = io.WriteString(w, "answer")
		})
	}
	t.Run("retry frees the key", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := f.eng.Handler(mustCompile(t, strictSpec()), handler(f))
		status.Store(503)
		require.Equal(t, 503, send(h, req{key: "k", body: `{"a":1}`}).Code)
		// A corrected request with the same key but another body: still a conflict under strict.
		requireProblem(t, send(h, req{key: "k", body: `{"a":2}`}), 422, idem.CodeKeyReused)
		status.Store(201)
		w := send(h, req{key: "k", body: `{"a":1}`})
		require.Equal(t, 201, w.Code)
		assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, int32(2), f.calls.Load())
		ev := f.obs.evs[len(f.obs.evs)-1]
		assert.Equal(t, idem.StateFailed, ev.Prior, "the retry reclaimed a FAILED record")
	})
	t.Run("retry frees the key for loose too", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		spec := strictSpec()
		spec.Semantics = idem.Loose
		h := f.eng.Handler(mustCompile(t, spec), handler(f))
		status.Store(500)
		send(h, req{key: "k", body: `{"a":1}`})
		status.Store(201)
		require.Equal(t, 201, send(h, req{key: "k", body: `{"a":2}`}).Code)
		assert.Equal(t, int32(2), f.calls.Load())
	})
	t.Run("replay stores the 5xx", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		spec := strictSpec()
		spec.Failures = idem.FailuresReplay
		h := f.eng.Handler(mustCompile(t, spec), handler(f))
		status.Store(502)
		send(h, req{key: "k", body: `{}`})
		status.Store(201)
		w := send(h, req{key: "k", body: `{}`})
		require.Equal(t, 502, w.Code)
		assert.Equal(t, "answer", w.Body.String())
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, int32(1), f.calls.Load())
	})
	for _, st := range []int{408, 425, 429} {
		t.Run("not processed "+http.StatusText(st), func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			h := f.eng.Handler(mustCompile(t, strictSpec()), handler(f))
			status.Store(int32(st))
			send(h, req{key: "k", body: `{}`})
			status.Store(200)
			require.Equal(t, 200, send(h, req{key: "k", body: `{}`}).Code)
			assert.Equal(t, int32(2), f.calls.Load())
		})
	}
	t.Run("4xx is an answer", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := f.eng.Handler(mustCompile(t, strictSpec()), handler(f))
		status.Store(400)
		send(h, req{key: "k", body: `{}`})
		w := send(h, req{key: "k", body: `{}`})
		require.Equal(t, 400, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	})
}

func TestPanicReleasesKey(t *testing.T) {
	for _, val := range []any{"kaboom", http.ErrAbortHandler} {
		f := newFixture(t, idem.Options{})
		var panicking atomic.Bool
		panicking.Store(true)
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			if panicking.Load() {
				w.WriteHeader(201) // even after a partial response
				panic(val)
			}
			w.WriteHeader(201)
		}))
		func() {
			defer func() { assert.Equal(t, val, recover(), "the panic goes on") }()
			send(h, req{key: "k", body: `{}`})
		}()
		panicking.Store(false)
		w := send(h, req{key: "k", body: `{}`})
		require.Equal(t, 201, w.Code)
		assert.Empty(t, w.Header().Get("Idempotent-Replayed"), "the retry executes")
		assert.Equal(t, int32(2), f.calls.Load())
	}
}

func TestResponseTooLarge(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.Response.MaxBytes = 16
	big := strings.Repeat("x", 100)
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.Header().Set("Location", "/orders/7")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, big[:50])
		_, _ = io.WriteString(w, big[50:])
	}))
	first := send(h, req{key: "k", body: `{}`})
	require.Equal(t, 201, first.Code)
	assert.Equal(t, big, first.Body.String(), "the client gets the whole response")
	dup := send(h, req{key: "k", body: `{}`})
	p := requireProblem(t, dup, 409, idem.CodeResponseUnavailable)
	assert.Equal(t, 201, p.OriginalStatus)
	assert.Equal(t, "/orders/7", dup.Header().Get("Location"))
	assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
	assert.Empty(t, dup.Header().Get("Retry-After"))
	assert.Equal(t, int32(1), f.calls.Load(), "the work is never executed twice")
	_, ok := f.obs.find(idem.EventNotReplayable)
	assert.True(t, ok)
}

// Under FailuresReplay a 5xx is stored too: one larger than
// Response.MaxBytes is stored as not replayable, and reported as a
// COMPLETED one is (EventNotReplayable); under FailuresRetry nothing is
// stored, so nothing is reported and a retry runs again.
func TestFailureTooLargeReportsNotReplayable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures idem.FailurePolicy
		reported bool
	}{{"failures replay", idem.FailuresReplay, true}, {"failures retry", idem.FailuresRetry, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			spec := strictSpec()
			spec.Failures = tc.failures
			spec.Response.MaxBytes = 16
			h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, strings.Repeat("x", 100))
			}))
			require.Equal(t, 502, send(h, req{key: "k", body: `{}`}).Code)
			ev, ok := f.obs.find(idem.EventNotReplayable)
			require.Equal(t, tc.reported, ok, "events: %v", f.obs.kinds())
			dup := send(h, req{key: "k", body: `{}`})
			if !tc.reported {
				require.Equal(t, 502, dup.Code)
				assert.Equal(t, int32(2), f.calls.Load(), "nothing stored: the retry runs again")
				return
			}
			assert.Equal(t, idem.Event{Kind: idem.EventNotReplayable, Operation: spec.Operation, Key: "k",
				Protected: true, State: idem.StateFailed, Status: 502}, ev)
			p := requireProblem(t, dup, 409, idem.CodeResponseUnavailable)
			assert.Equal(t, 502, p.OriginalStatus)
			assert.Equal(t, int32(1), f.calls.Load())
		})
	}
}

func TestResponseDefaults(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1) // writes nothing: 200, empty
	}))
	require.Equal(t, 200, send(h, req{key: "k", body: `{}`}).Code)
	w := send(h, req{key: "k", body: `{}`})
	require.Equal(t, 200, w.Code)
	assert.Empty(t, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
}

func TestMultiValueHeadersReplay(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.Response.Headers = []string{"link", "Location", "etag"}
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Link", "</a>; rel=a")
		w.Header().Add("Link", "</b>; rel=b")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(202)
		w.Header().Set("Location", "/too-late") // after WriteHeader: not sent, not recorded
	}))
	send(h, req{key: "k", body: `{}`})
	w := send(h, req{key: "k", body: `{}`})
	require.Equal(t, 202, w.Code)
	assert.Equal(t, []string{"</a>; rel=a", "</b>; rel=b"}, w.Header()["Link"])
	assert.Equal(t, `"v1"`, w.Header().Get("ETag"))
	assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
	assert.Empty(t, w.Header().Get("Location"))
}

// Content-Encoding is stored with Content-Type whatever Response.Headers
// lists: a response compressed inside the engine (by the handler, or a
// compressing middleware between the engine and the handler) is recorded
// compressed, and its replay must say so. A replay that sends a problem
// instead (the response was too large to store) leaves both out.
func TestReplayKeepsContentEncoding(t *testing.T) {
	compressed := gzipped(t, gzip.DefaultCompression, 1, `{"id":"o1"}`)
	for _, tc := range []struct {
		name     string
		maxBytes int
	}{{"replayable", 0}, {"too large to store", 8}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			spec := strictSpec()
			spec.Response.MaxBytes = tc.maxBytes
			p := mustCompile(t, spec)
			assert.Equal(t, []string{"Location"}, p.Spec().Response.Headers, "the ones always stored are not listed")
			h := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("Location", "/orders/o1")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write(compressed)
			}))
			first := send(h, req{key: "k", body: `{}`})
			require.Equal(t, "gzip", first.Header().Get("Content-Encoding"))
			dup := send(h, req{key: "k", body: `{}`})
			assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, "/orders/o1", dup.Header().Get("Location"))
			assert.Equal(t, int32(1), f.calls.Load())
			if tc.maxBytes != 0 {
				requireProblem(t, dup, http.StatusConflict, idem.CodeResponseUnavailable)
				assert.Empty(t, dup.Header().Values("Content-Encoding"), "the problem is not compressed")
				return
			}
			require.Equal(t, http.StatusCreated, dup.Code)
			assert.Equal(t, []string{"gzip"}, dup.Header().Values("Content-Encoding"))
			assert.Equal(t, "application/json", dup.Header().Get("Content-Type"))
			assert.Equal(t, compressed, dup.Body.Bytes())
		})
	}
}

func TestStoreErrors(t *testing.T) {
	t.Run("fail closed", func(t *testing.T) {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		defer ms.Close()
		var logs strings.Builder
		f := newFixtureStore(t, ms, &failingStore{Store: ms, beginErr: errBoom}, idem.Options{UnavailableRetryAfter: 3 * time.Second,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		w := send(h, req{key: "k-refused", body: `{}`})
		requireProblem(t, w, 503, idem.CodeStoreUnavailable)
		assert.Equal(t, "3", w.Header().Get("Retry-After"))
		assert.Equal(t, int32(0), f.calls.Load())
		ev, _ := f.obs.find(idem.EventStoreError)
		assert.ErrorIs(t, ev.Err, errBoom)
		// The log names the refused key, as the later store errors' do.
		assert.Contains(t, logs.String(), `msg="idem: store failed at begin" operation=createOrder key=k-refused`)
	})
	t.Run("fail open", func(t *testing.T) {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		defer ms.Close()
		f := newFixtureStore(t, ms, &failingStore{Store: ms, beginErr: errBoom}, idem.Options{FailOpen: true})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
		assert.Equal(t, int32(1), f.calls.Load())
		assert.Equal(t, []idem.EventKind{idem.EventStoreError, idem.EventFailOpen, idem.EventExecuted}, f.obs.kinds())
	})
	t.Run("finish fails", func(t *testing.T) {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		defer ms.Close()
		f := newFixtureStore(t, ms, &failingStore{Store: ms, finishErr: errBoom}, idem.Options{})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code, "the response already went out")
		ev, ok := f.obs.find(idem.EventStoreError)
		require.True(t, ok)
		assert.ErrorIs(t, ev.Err, errBoom)
	})
	t.Run("corrupt record", func(t *testing.T) {
		f := newFixtureStore(t, nil, corruptStore{}, idem.Options{})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		requireProblem(t, send(h, req{key: "k", body: `{}`}), 500, idem.CodeRecordUnreadable)
		assert.Equal(t, int32(0), f.calls.Load())
	})
}

// corruptStore reports a COMPLETED record whose response cannot be decoded.
type corruptStore struct{ plainStore }

func (corruptStore) Begin(_ context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	return idem.BeginResult{Record: idem.Record{State: idem.StateCompleted, Fingerprint: r.Fingerprint, Response: []byte{1, 0, 0xff}}}, nil
}

func TestConcurrentDuplicates(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "created")
	}))
	const n = 100
	var wg sync.WaitGroup
	codes := make([]int, n)
	bodies := make([]string, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			w := send(h, req{key: "same", body: `{"x":1}`})
			codes[i], bodies[i] = w.Code, w.Body.String()
		}(i)
	}
	close(start)
	wg.Wait()
	assert.Equal(t, int32(1), f.calls.Load(), "the handler runs exactly once")
	created := 0
	for i, c := range codes {
		switch c {
		case 201:
			created++
			assert.Equal(t, "created", bodies[i])
		case 409:
			assert.Contains(t, bodies[i], idem.CodeKeyInUse)
		default:
			t.Errorf("unexpected status %d: %s", c, bodies[i])
		}
	}
	assert.GreaterOrEqual(t, created, 1)
}

func TestLeaseTakeoverAndFencing(t *testing.T) {
	f := newFixture(t, idem.Options{DisableHeartbeat: true})
	spec := strictSpec()
	spec.InFlight.Lease = 50 * time.Millisecond
	var n atomic.Int32
	slowRelease := make(chan struct{})
	slowStarted := make(chan struct{})
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			close(slowStarted)
			<-slowRelease // a stuck holder
			w.WriteHeader(201)
			_, _ = io.WriteString(w, "late")
			return
		}
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "fresh")
	}))
	slow := make(chan *httptest.ResponseRecorder)
	go func() { slow <- send(h, req{key: "k", body: `{}`}) }()
	<-slowStarted
	time.Sleep(spec.InFlight.Lease + 50*time.Millisecond)
	second := send(h, req{key: "k", body: `{}`})
	require.Equal(t, 201, second.Code)
	assert.Equal(t, "fresh", second.Body.String())
	ev, ok := f.obs.find(idem.EventLeaseTakeover)
	require.True(t, ok)
	assert.Equal(t, idem.StatePending, ev.Prior)

	close(slowRelease)
	assert.Equal(t, "late", (<-slow).Body.String(), "the stuck holder's client still gets its answer")
	_, ok = f.obs.find(idem.EventFenced)
	assert.True(t, ok, "the late completion is reported as fenced")
	w := send(h, req{key: "k", body: `{}`})
	assert.Equal(t, "fresh", w.Body.String(), "the late completion never overwrote the record")
}

// TestHeartbeatKeepsLease: a holder whose handler runs past its lease keeps
// the key, its heartbeats extending the lease. The store's clock is the
// test's: after each extension the store grants, it moves on by less than
// the lease, past three leases in all, however late the machine runs the
// heartbeats. (On the wall clock a heartbeat late by 40ms lost the 60ms
// lease: under load, 2 runs in 300 saw the duplicate take the key over.)
//
// "past the window": the handler also runs past the window, and keeps its
// record (each extension moves the record's expiry with the lease): the
// duplicate after the window is answered in flight, not run again, the
// completion is recorded (not fenced), and a later retry replays it. Before
// ExtendLease moved the expiry, the record expired at claim + window under
// the running handler: the duplicate ran the operation again, the first
// run's Finish was fenced, and every later retry ran it once more.
func TestHeartbeatKeepsLease(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration // 0: strictSpec's
	}{{"within the window", 0}, {"past the window", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			now := time.Now()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			ms := memstore.New(memstore.Options{SweepInterval: -1, Now: clock})
			defer ms.Close()
			ext := &extendCounter{Store: ms}
			f := newFixtureStore(t, ms, ext, idem.Options{})
			spec := strictSpec()
			if tc.window != 0 {
				spec.Window = tc.window
			}
			spec.InFlight.Lease = 60 * time.Millisecond
			started, release := make(chan struct{}), make(chan struct{})
			released := sync.OnceFunc(func() { close(release) })
			defer released()
			h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if f.calls.Add(1) == 1 {
					close(started)
					<-release
				}
				w.WriteHeader(201)
			}))
			done := make(chan int)
			go func() { done <- send(h, req{key: "k", body: `{}`}).Code }()
			<-started
			for range 5 { // 5 x 40ms: three leases and more (twice the short window)
				n := ext.granted.Load()
				require.Eventually(t, func() bool { return ext.granted.Load() > n }, 10*time.Second, time.Millisecond,
					"the heartbeat extends the lease")
				mu.Lock()
				now = now.Add(40 * time.Millisecond)
				mu.Unlock()
			}
			requireProblem(t, send(h, req{key: "k", body: `{}`}), 409, idem.CodeKeyInUse)
			released()
			assert.Equal(t, 201, <-done)
			_, fenced := f.obs.find(idem.EventFenced)
			assert.False(t, fenced, "the completion is recorded")
			w := send(h, req{key: "k", body: `{}`})
			assert.Equal(t, 201, w.Code)
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "a retry after the completion replays it")
			assert.Equal(t, int32(1), f.calls.Load(), "the handler runs once")
		})
	}
}

// TestHeartbeatCadence: on the wall clock, a holder's heartbeats come
// every third of its lease (TestHeartbeatKeepsLease, on the store's clock,
// cannot tell how often). Each heartbeat arms the next, when its extension
// returned, for a third of the lease after that extension's start, so the
// gap between two extensions' starts is never shorter than the period, and
// a machine that runs timers late only makes it longer: the shortest of
// several gaps is the period plus the least delay. The store stamps each
// extension with its context's deadline, set (a timeout later) right
// where the heartbeat takes the start it counts from: a time taken in
// ExtendLease comes later by a delay that varies (under -race, on a
// loaded machine), and made a gap 95µs short of the period. The few
// instructions between the two points may still be descheduled, hence a
// tolerance of a millisecond, half a percent of the 66.7ms period (a
// heartbeat a quarter of the lease apart, 50ms, is far below it). It must
// be at least Lease/3 (not a heartbeat that hammers the store) and under
// 2*Lease/3, which a heartbeat at the lease's own period or slower (that
// loses the lease to the first late tick) never reaches. The store's clock
// stands still, so that a tick late by more than the lease, on a loaded
// machine, does not lose the lease and end the heartbeats; the handler
// holds the key until it saw enough extensions, however long they take.
func TestHeartbeatCadence(t *testing.T) {
	start := time.Now()
	ms := memstore.New(memstore.Options{SweepInterval: -1, Now: func() time.Time { return start }})
	defer ms.Close()
	ext := &extendCounter{Store: ms, at: make(chan time.Time, 64)}
	f := newFixtureStore(t, ms, ext, idem.Options{})
	spec := strictSpec()
	const lease = 200 * time.Millisecond
	spec.InFlight.Lease = lease
	const gaps = 8
	var at []time.Time
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout := time.After(60 * time.Second)
		for len(at) <= gaps {
			select {
			case tm := <-ext.at:
				at = append(at, tm)
			case <-timeout:
				w.WriteHeader(500)
				return
			}
		}
		w.WriteHeader(201)
	}))
	require.Equal(t, 201, send(h, req{key: "k", body: `{}`}).Code, "%d extensions in a minute", len(at))
	shortest := time.Duration(1<<63 - 1)
	for i := 1; i < len(at); i++ {
		shortest = min(shortest, at[i].Sub(at[i-1]))
	}
	const tolerance = time.Millisecond
	assert.GreaterOrEqual(t, shortest, lease/3-tolerance, "the shortest of %d gaps between extensions", gaps)
	assert.Less(t, shortest, 2*lease/3, "the shortest of %d gaps between extensions: the heartbeat comes every third of the lease", gaps)
	_, fenced := f.obs.find(idem.EventFenced)
	assert.False(t, fenced)
}

// TestHeartbeatFailureLogs: a heartbeat's failed extension is logged with
// the key, and both its warnings (extension failed, lease lost) and its
// EventHeartbeatFailed carry the request's context values (a trace id),
// without the request's cancellation.
func TestHeartbeatFailureLogs(t *testing.T) {
	for _, tc := range []struct {
		err error
		msg string
	}{
		{errBoom, "idem: lease extension failed"},
		{idem.ErrFenced, "idem: lease lost while the handler runs (taken over or expired)"},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			defer ms.Close()
			logs := &ctxLogs{}
			var obsTrace atomic.Value
			var obsDone atomic.Bool
			f := newFixtureStore(t, ms, newExtendFailing(ms, tc.err), idem.Options{
				Logger: slog.New(logs),
				Observer: idem.ObserverFunc(func(ctx context.Context, e idem.Event) {
					if e.Kind == idem.EventHeartbeatFailed {
						obsTrace.Store(fmt.Sprint(ctx.Value(traceKey{})))
						obsDone.Store(ctx.Err() != nil)
					}
				}),
			})
			spec := strictSpec()
			spec.InFlight.Lease = 30 * time.Millisecond
			h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				waitExtendFailed(r)
				w.WriteHeader(201)
			}))
			// The request's context is cancelled (its client went away) at
			// the failed extension, before the failure is logged: the log
			// and the Observer get its values, not its cancellation.
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), traceKey{}, "trace-1"))
			defer cancel()
			sendExtendFailingCancel(ctx, h, func() bool { _, ok := logs.find(tc.msg); return ok && obsTrace.Load() != nil }, cancel)
			rec, ok := logs.find(tc.msg)
			require.True(t, ok, "no %q in %v", tc.msg, logs.msgs())
			assert.Equal(t, "k", rec.attrs["key"])
			assert.Equal(t, "trace-1", rec.trace, "the request's context values")
			assert.False(t, rec.done, "not the request's cancellation")
			if tc.err == errBoom {
				assert.Contains(t, rec.attrs["error"], errBoom.Error())
			}
			assert.Equal(t, "trace-1", obsTrace.Load(), "the Observer gets the request's context values")
			assert.False(t, obsDone.Load(), "the Observer's context is not the request's cancellation")
		})
	}
}

type traceKey struct{}

// ctxLogs is a slog.Handler that keeps each record's message, attributes,
// the traceKey value of its context and whether that context was done.
type ctxLogs struct {
	mu   sync.Mutex
	recs []ctxLog
}

type ctxLog struct {
	msg   string
	attrs map[string]string
	trace any
	done  bool
}

func (l *ctxLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *ctxLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *ctxLogs) WithGroup(string) slog.Handler            { return l }
func (l *ctxLogs) Handle(ctx context.Context, r slog.Record) error {
	rec := ctxLog{msg: r.Message, attrs: map[string]string{}, trace: ctx.Value(traceKey{}), done: ctx.Err() != nil}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.String(); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, rec)
	return nil
}

func (l *ctxLogs) find(msg string) (ctxLog, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.msg == msg {
			return r, true
		}
	}
	return ctxLog{}, false
}

func (l *ctxLogs) msgs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m []string
	for _, r := range l.recs {
		m = append(m, r.msg)
	}
	return m
}

// extendCounter counts the lease extensions its store granted, and sends
// on at (when not nil) the deadline of each one's context (the time it
// was asked for, when its context has none).
type extendCounter struct {
	*memstore.Store
	granted atomic.Int32
	at      chan time.Time
}

func (s *extendCounter) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	asked, ok := ctx.Deadline()
	if !ok {
		asked = time.Now()
	}
	err := s.Store.ExtendLease(ctx, key, token, lease)
	if err == nil {
		s.granted.Add(1)
		if s.at != nil {
			select {
			case s.at <- asked:
			default:
			}
		}
	}
	return err
}

func TestFlushPassesThrough(t *testing.T) {
	f := newFixture(t, idem.Options{})
	var flushErr error
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "part1 ")
		flushErr = http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, "part2")
		w.(http.Flusher).Flush()
	}))
	w := send(h, req{key: "k", body: `{}`})
	require.NoError(t, flushErr)
	assert.True(t, w.Flushed)
	assert.Equal(t, "part1 part2", w.Body.String())
	r := send(h, req{key: "k", body: `{}`})
	assert.Equal(t, "part1 part2", r.Body.String())
}

func TestHandlerReadsBody(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	w := send(h, req{key: "k", body: `{"item":"lamp"}`})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `"item":"lamp"`)
}

func TestCompile(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "op", Semantics: idem.Strict})
	s := p.Spec()
	assert.Equal(t, 24*time.Hour, s.Window)
	assert.Equal(t, "Idempotency-Key", s.Key.Name)
	assert.Equal(t, idem.Required, s.Key.Required)
	assert.Equal(t, idem.FormatToken, s.Key.Format)
	assert.Equal(t, 255, s.Key.MaxLength)
	assert.Equal(t, 422, s.ConflictStatus)
	assert.Equal(t, idem.InFlightSpec{Status: 409, RetryAfter: 2 * time.Second, Lease: 30 * time.Second}, s.InFlight)
	assert.Equal(t, idem.FailuresRetry, s.Failures)
	assert.Equal(t, 1<<20, s.Response.MaxBytes)
	assert.Equal(t, int64(1<<20), s.Request.MaxBytes)
	assert.Equal(t, idem.Optional, mustCompile(t, idem.Spec{Operation: "op", Semantics: idem.Window}).Spec().Key.Required)

	bad := []idem.Spec{
		{Semantics: idem.Strict},
		{Operation: "op"},
		{Operation: "op", Semantics: 9},
		{Operation: "op", Semantics: idem.Strict, ConflictStatus: 400},
		{Operation: "op", Semantics: idem.Strict, Key: idem.KeySpec{Name: "bad header"}},
		{Operation: "op", Semantics: idem.Strict, Key: idem.KeySpec{Carrier: idem.CarrierBody, Name: "no-slash"}},
		{Operation: "op", Semantics: idem.Strict, Key: idem.KeySpec{Carrier: idem.CarrierBody, Name: "/a~2"}},
		{Operation: "op", Semantics: idem.Strict, Key: idem.KeySpec{Carrier: idem.CarrierQuery}},
		{Operation: "op", Semantics: idem.Strict, Key: idem.KeySpec{MaxLength: 256}},
		{Operation: "op", Semantics: idem.Strict, Key: idem.KeySpec{Format: idem.FormatUUID, MaxLength: 20}},
		{Operation: "op", Semantics: idem.Strict, Window: time.Second, InFlight: idem.InFlightSpec{Lease: time.Minute}},
		{Operation: "op", Semantics: idem.Strict, InFlight: idem.InFlightSpec{Status: 200}},
		{Operation: "op", Semantics: idem.Strict, InFlight: idem.InFlightSpec{Status: 400}},
		{Operation: "op", Semantics: idem.Strict, InFlight: idem.InFlightSpec{Status: 422}},
		{Operation: "op", Semantics: idem.Strict, Response: idem.ResponseSpec{Headers: []string{"Set-Cookie"}}},
		{Operation: "op", Semantics: idem.Strict, Response: idem.ResponseSpec{Headers: []string{"connection"}}},
		{Operation: "op", Semantics: idem.Strict, Response: idem.ResponseSpec{Headers: []string{"Trailer"}}}, // trailers are never stored
		{Operation: "op", Semantics: idem.Strict, Request: idem.RequestSpec{MaxBytes: -1}},
		{Operation: strings.Repeat("o", 129), Semantics: idem.Strict},
		{Operation: "op", Semantics: idem.Strict, Scope: 2},
	}
	for i, s := range bad {
		_, err := idem.Compile(s)
		assert.Error(t, err, "spec %d: %+v", i, s)
	}
	assert.Panics(t, func() { idem.MustCompile(bad[0]) })
	assert.True(t, idem.NeverStoredHeader(" set-cookie "))
	assert.False(t, idem.NeverStoredHeader("Location"))

	// The in-flight status the contract refuses (in-flight-status-final)
	// is refused with the reason; the ones it allows compile.
	_, err := idem.Compile(idem.Spec{Operation: "op", Semantics: idem.Strict, InFlight: idem.InFlightSpec{Status: 422}})
	require.ErrorContains(t, err, "in-flight status 422 is an answer clients never retry")
	for _, st := range []int{409, 423, 429, 503} {
		assert.Equal(t, st, mustCompile(t, idem.Spec{Operation: "op", Semantics: idem.Strict, InFlight: idem.InFlightSpec{Status: st}}).Spec().InFlight.Status)
	}
}

func TestNewPanicsOnTransactionalWithoutTransactor(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	defer ms.Close()
	assert.Panics(t, func() { idem.New(ms, idem.Options{Transactional: true}) })
}

var _ = errors.Is
var _ = context.Background

func TestConcurrentDuplicatesWait(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.InFlight.Wait = 5 * time.Second
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		time.Sleep(30 * time.Millisecond)
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "created")
	}))
	const n = 50
	var wg sync.WaitGroup
	var replayed atomic.Int32
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := send(h, req{key: "same", body: `{"x":1}`})
			assert.Equal(t, 201, w.Code)
			assert.Equal(t, "created", w.Body.String())
			if w.Header().Get("Idempotent-Replayed") == "true" {
				replayed.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Equal(t, int32(n-1), replayed.Load(), "every duplicate waited for the replay")
}

// The header values of each replay and problem are the response's own: a
// middleware that changes one in place does not change later responses.
func TestHeaderValuesNotShared(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.InFlight.RetryAfter = 7 * time.Second
	release := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "slow" {
			once.Do(func() { close(entered) })
			<-release
		}
		w.Header().Set("Location", "/orders/1")
		w.WriteHeader(201)
	}))
	scribble := func(w *httptest.ResponseRecorder) {
		for _, vs := range w.Header() {
			vs[0] = "scribbled"
		}
	}
	send(h, req{key: "k", body: `{}`})
	scribble(send(h, req{key: "k", body: `{}`}))
	w := send(h, req{key: "k", body: `{}`})
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "/orders/1", w.Header().Get("Location"))

	done := make(chan struct{})
	go func() { defer close(done); send(h, req{key: "slow", body: `{}`}) }()
	<-entered
	scribble(send(h, req{key: "slow", body: `{}`}))
	w = send(h, req{key: "slow", body: `{}`})
	requireProblem(t, w, 409, idem.CodeKeyInUse)
	assert.Equal(t, "7", w.Header().Get("Retry-After"))
	assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	close(release)
	<-done
}
