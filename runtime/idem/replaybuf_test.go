package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestReplayHeadersOutliveTheCall: over memstore, a replay is copied into
// the recycled Call's buffer (BeginRequest.Buf), which the next request
// reuses; the header names and values a replay put in a ResponseWriter's
// header map must not change when that happens (a logging middleware may
// read them after the handler returns).
func TestReplayHeadersOutliveTheCall(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
	p := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict,
		Response: idem.ResponseSpec{Headers: []string{"Location", "X-Trace-Tag"}}})
	h := eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		w.Header().Set("Location", "/things/"+key)
		w.Header().Set("X-Trace-Tag", "tag-"+key)
		w.Header().Set("X-Trace-Tag-"+strings.ToUpper(key[:1]), "name-"+key) // not allowlisted
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("body of " + key))
	}))
	serve := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/", strings.NewReader(`{"k":"`+key+`"}`))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusCreated, w.Code)
		return w
	}
	keys := []string{"aaaa", "bbbb", "cccc", "dddd"}
	for _, k := range keys {
		serve(k)
	}
	type held struct {
		key string
		h   http.Header
	}
	var replays []held
	for round := 0; round < 50; round++ {
		for _, k := range keys {
			w := serve(k)
			require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			require.Equal(t, "body of "+k, w.Body.String())
			replays = append(replays, held{k, w.Header()})
		}
	}
	for _, r := range replays {
		require.Equal(t, "/things/"+r.key, r.h.Get("Location"), "a replayed header changed after its request")
		require.Equal(t, "tag-"+r.key, r.h.Get("X-Trace-Tag"))
		require.Equal(t, []string{"tag-" + r.key}, r.h["X-Trace-Tag"], "a replayed header's name changed")
	}
}

// TestPooledCallBodyBuffer: Engine.Handler's recycled Calls read request
// bodies into a buffer of their own, kept through recycling: each request's
// handler and fingerprint see exactly its body, whatever the sizes of the
// bodies before it (larger ones, one past the kept size, an empty one).
func TestPooledCallBodyBuffer(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
	p := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict})
	h := eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	}))
	serve := func(key, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	bodies := []string{"x", strings.Repeat("a", 3000), strings.Repeat("b", 70<<10), "", "yz", strings.Repeat("c", 100)}
	for round := range 3 {
		for i, body := range bodies {
			key := fmt.Sprintf("k-%d-%d", round, i)
			w := serve(key, body)
			require.Equal(t, http.StatusCreated, w.Code)
			require.Equal(t, body, w.Body.String(), "the handler read another body")
			w = serve(key, body)
			require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			require.Equal(t, body, w.Body.String())
			if body != "" {
				other := strings.Repeat("q", len(body))
				require.Equal(t, http.StatusUnprocessableEntity, serve(key, other).Code, "another body of the same length was not a conflict")
			}
		}
	}
}
