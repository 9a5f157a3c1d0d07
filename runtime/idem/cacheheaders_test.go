package idem_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A replay carries the Cache-Control, Expires and Pragma the handler set,
// whether or not response.headers lists them: a security trial found a
// replay of a card token answered with Cache-Control: no-store without it,
// cacheable by an intermediary that would not keep the first response.
func TestReplayKeepsCacheHeaders(t *testing.T) {
	for _, listed := range [][]string{nil, {"Location"}, {"cache-control", "Location"}} {
		p := mustCompile(t, idem.Spec{Operation: "tok", Semantics: idem.Strict, Response: idem.ResponseSpec{Headers: listed}})
		if got, want := p.Spec().Response.Headers, canonical(listed); !slices.Equal(got, want) {
			t.Fatalf("listed %q: Spec().Response.Headers = %q, want %q", listed, got, want)
		}
		e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
		ran := 0
		h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran++
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Pragma", "no-cache")
			w.Header().Set("Expires", "0")
			w.Header().Set("X-Other", "not listed")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"card_token":"tok_secret"}`))
		}))
		var got []http.Header
		for range 2 {
			r := httptest.NewRequest("POST", "/tokens", strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Idempotency-Key", "k")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got = append(got, w.Header())
		}
		replay := got[1]
		if ran != 1 || replay.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("listed %q: ran %d, replay %q", listed, ran, replay)
		}
		for _, name := range []string{"Cache-Control", "Pragma", "Expires"} {
			if replay.Get(name) != got[0].Get(name) {
				t.Errorf("listed %q: replay's %s = %q, first response's %q", listed, name, replay.Get(name), got[0].Get(name))
			}
		}
		if replay.Get("X-Other") != "" {
			t.Errorf("listed %q: a header not listed was replayed: %q", listed, replay)
		}
	}
	for _, name := range []string{"Cache-Control", "cache-control", " Expires", "PRAGMA", "Content-Type"} {
		if !idem.AlwaysStoredHeader(name) {
			t.Errorf("AlwaysStoredHeader(%q) = false", name)
		}
	}
	if idem.AlwaysStoredHeader("Location") || idem.AlwaysStoredHeader("Vary") {
		t.Error("AlwaysStoredHeader of a header that is stored only when listed")
	}
}

func canonical(names []string) []string {
	out := []string{}
	for _, n := range names {
		out = append(out, http.CanonicalHeaderKey(n))
	}
	return out
}
