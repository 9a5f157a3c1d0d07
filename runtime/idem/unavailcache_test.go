package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A duplicate of a request whose response could not be stored (too large)
// gets 409 IDEMPOTENCY_RESPONSE_UNAVAILABLE without the original's cache
// headers (a review of dd81881: the problem carried Cache-Control: public,
// max-age=3600 and the original's Expires, so a cache could keep the 409):
// the engine's problems say Cache-Control: no-store.
func TestUnavailableCarriesNoCacheHeadersOfTheOriginal(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "tok", Semantics: idem.Strict, Response: idem.ResponseSpec{MaxBytes: 4}})
	e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Header().Set("Expires", "Wed, 21 Oct 2037 07:28:00 GMT")
		w.Header().Set("Pragma", "x")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("a body longer than 4 bytes"))
	}))
	var w *httptest.ResponseRecorder
	for range 2 {
		r := httptest.NewRequest("POST", "/t", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k")
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
	}
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), idem.CodeResponseUnavailable) {
		t.Fatalf("repeat: %d %s", w.Code, w.Body)
	}
	if got := w.Header().Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" ||
		w.Header().Get("Expires") != "" || w.Header().Get("Pragma") != "" {
		t.Fatalf("repeat's headers: %q", w.Header())
	}
	// Any other problem of the engine's says no-store too.
	r := httptest.NewRequest("POST", "/t", strings.NewReader(`{}`))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("a missing key: %d %q", w.Code, w.Header())
	}
}
