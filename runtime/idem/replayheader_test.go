package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// A handler that sets Content-Type to nil keeps net/http from sniffing
// one; the replay must not get a sniffed one either.
func TestReplayKeepsNilContentType(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.Header()["Content-Type"] = nil
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("<html>not sniffed</html>"))
	}))
	// A real server: httptest.ResponseRecorder sniffs only for a Write
	// before WriteHeader, net/http for any response.
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func() *http.Response {
		r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k")
		resp, err := srv.Client().Do(r)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, "<html>not sniffed</html>", string(body))
		return resp
	}
	first := post()
	require.Equal(t, http.StatusCreated, first.StatusCode)
	require.Empty(t, first.Header.Values("Content-Type"), "the live response")
	dup := post()
	require.Equal(t, http.StatusCreated, dup.StatusCode)
	assert.Equal(t, "true", dup.Header.Get("Idempotent-Replayed"))
	assert.Empty(t, dup.Header.Values("Content-Type"), "sniffed on replay")
	assert.Equal(t, int32(1), f.calls.Load())
}

// A header set under a non-canonical name is sent by net/http as spelled;
// the replay must carry it too (under its canonical name: names are
// case-insensitive).
func TestReplayKeepsNonCanonicalHeader(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.Header()["content-type"] = []string{"application/json"}
		w.Header()["location"] = []string{"/orders/1"}
		w.Header().Set("X-Request-Id", "r1") // not stored
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	first := send(h, req{key: "k", body: `{}`})
	//lint:ignore SA1008 the name is non-canonical on purpose: it is what the handler set
	require.Equal(t, []string{"/orders/1"}, first.Header()["location"])
	dup := send(h, req{key: "k", body: `{}`})
	require.Equal(t, http.StatusCreated, dup.Code)
	assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "/orders/1", dup.Header().Get("Location"))
	assert.Equal(t, "application/json", dup.Header().Get("Content-Type"))
	assert.Empty(t, dup.Header().Get("X-Request-Id"))
	assert.Equal(t, int32(1), f.calls.Load())
}
