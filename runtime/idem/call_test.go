package idem_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

type ctxKey struct{}

// A client that goes away while the handler runs (its request context is
// cancelled) still leaves a completed record, and the store sees the
// request context's values.
func TestFinishAfterClientLeft(t *testing.T) {
	f := newFixture(t, idem.Options{})
	p := mustCompile(t, strictSpec())
	var seen []any
	store := &valueStore{Store: f.store, seen: &seen}
	eng := idem.New(store, idem.Options{Principal: idem.Anonymous, Logger: discardLogger})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	h := eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the client is gone
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
	}))
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Idempotency-Key", "k1")
	r.Header.Set("Content-Type", "application/json") // as send sets it
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, []any{"v", "v"}, seen, "Begin and Finish saw the request's values")

	again := send(eng.Handler(p, http.NotFoundHandler()), req{key: "k1", body: `{}`})
	assert.Equal(t, http.StatusCreated, again.Code, "completed despite the cancelled context")
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
}

type valueStore struct {
	idem.Store
	seen *[]any
}

func (s *valueStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	*s.seen = append(*s.seen, ctx.Value(ctxKey{}))
	return s.Store.Begin(ctx, r)
}

func (s *valueStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	*s.seen = append(*s.seen, ctx.Value(ctxKey{}))
	return s.Store.Finish(ctx, key, token, st, resp)
}

// The handler reads the body the engine read, from the same *http.Request
// (no copy); End gives the request its own body back.
func TestRequestBodySwappedInPlace(t *testing.T) {
	f := newFixture(t, idem.Options{})
	p := mustCompile(t, strictSpec())
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"item":"lamp"}`))
	r.Header.Set("Idempotency-Key", "k1")
	orig := r.Body
	c := f.eng.Begin(r, p, idem.RequestKey)
	require.Equal(t, idem.Execute, c.Decision())
	hr := c.Request()
	assert.Same(t, r, hr, "no copy of the request")
	assert.Same(t, hr, c.Request(), "Request is stable")
	b, err := io.ReadAll(hr.Body)
	require.NoError(t, err)
	assert.Equal(t, `{"item":"lamp"}`, string(b))
	w := httptest.NewRecorder()
	c.Writer(w).WriteHeader(http.StatusNoContent)
	require.NoError(t, c.Finish())
	c.End()
	assert.Equal(t, orig, r.Body, "End restored the original body")
	_, err = hr.Body.Read(make([]byte, 1))
	assert.NotEqual(t, nil, err)
}

// Replays and refusals through Handler recycle their Call: what one client
// got must not change when the next request reuses it.
func TestHandlerRecyclesOnlyUnseenCalls(t *testing.T) {
	f := newFixture(t, idem.Options{})
	p := mustCompile(t, strictSpec())
	n := 0
	h := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("Location", "/orders/"+strings.Repeat("x", n))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, strings.Repeat("y", n))
	}))
	require.Equal(t, http.StatusCreated, send(h, req{key: "a", body: `{}`}).Code)
	require.Equal(t, http.StatusCreated, send(h, req{key: "b", body: `{}`}).Code)
	var got []*httptest.ResponseRecorder
	for range 20 {
		got = append(got, send(h, req{key: "a", body: `{}`}), send(h, req{key: "b", body: `{}`}),
			send(h, req{key: "a", body: `{"other":1}`}))
	}
	for i := 0; i < len(got); i += 3 {
		a, b, conflict := got[i], got[i+1], got[i+2]
		assert.Equal(t, "/orders/x", a.Header().Get("Location"))
		assert.Equal(t, "y", a.Body.String())
		assert.Equal(t, "/orders/xx", b.Header().Get("Location"))
		assert.Equal(t, []string{"text/plain"}, b.Header()["Content-Type"])
		assert.Equal(t, "yy", b.Body.String())
		assert.Equal(t, http.StatusUnprocessableEntity, conflict.Code)
	}
	assert.Equal(t, 2, n)
}

// Concurrent replays through Handler (run with -race).
func TestHandlerConcurrentReplays(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":"a"}`}).Code)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 200 {
				w := send(h, req{key: "k", body: `{"item":"a"}`})
				if w.Code != http.StatusCreated || w.Header().Get("Location") != "/orders/42" || w.Header().Get("Idempotent-Replayed") != "true" {
					t.Errorf("replay: %d %v", w.Code, w.Header())
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	assert.EqualValues(t, 1, f.calls.Load())
}

// EmptyBodyKey reads a body member that a decoder gave as "" from the body's
// bytes: "" is an invalid key, an absent member or null no key, and a body
// that is not JSON (decompressed inside CaptureBody) no key either, where
// RequestKey refuses it.
func TestEmptyBodyKey(t *testing.T) {
	tests := []struct {
		name     string
		required bool
		body     string
		code     string // "" = executed
		detail   string
	}{
		{"empty, required", true, `{"key":""}`, idem.CodeKeyInvalid, "the idempotency key is empty"},
		{"empty, optional", false, `{"key":""}`, idem.CodeKeyInvalid, "the idempotency key is empty"},
		{"absent, required", true, `{"item":1}`, idem.CodeKeyMissing, ""},
		{"null, required", true, `{"key":null}`, idem.CodeKeyMissing, ""},
		{"absent, optional", false, `{"item":1}`, "", ""},
		{"not JSON, required", true, "\x1f\x8b\x08", idem.CodeKeyMissing, ""},
		{"not JSON, optional", false, "\x1f\x8b\x08", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			spec := strictSpec()
			spec.Key = idem.KeySpec{Carrier: idem.CarrierBody, Name: "/key", Required: idem.Optional}
			if tt.required {
				spec.Key.Required = idem.Required
			}
			r := httptest.NewRequest("POST", "/orders", strings.NewReader(tt.body))
			c := f.eng.Begin(r, mustCompile(t, spec), idem.EmptyBodyKey)
			defer c.End()
			if tt.code == "" {
				assert.Equal(t, idem.Execute, c.Decision())
				assert.Empty(t, c.Key())
				return
			}
			require.Equal(t, idem.Reject, c.Decision())
			assert.Equal(t, http.StatusBadRequest, c.Problem().Status)
			assert.Equal(t, tt.code, c.Problem().Code)
			if tt.detail != "" {
				assert.Equal(t, tt.detail, c.Problem().Detail)
			}
		})
	}
}
