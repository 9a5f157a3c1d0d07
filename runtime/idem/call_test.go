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
	eng := idem.New(store, idem.Options{Logger: discardLogger})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	h := eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the client is gone
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
	}))
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Idempotency-Key", "k1")
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
