package idem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A body whose reader under the capture ends with an
// *http.MaxBytesError (a bounded capture around the router and another in
// the server's Middlewares, as StrictHandler adds one; or an
// http.MaxBytesReader in front of CaptureBody) is too large: 413, not 400
// IDEMPOTENCY_REQUEST_UNREADABLE, when the engine drains it itself (an
// operation whose body the strict handler does not decode first).
func TestDrainUnderMaxBytesErrorIsTooLarge(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "pay", Semantics: idem.Strict, Request: idem.RequestSpec{MaxBytes: 1000}})
	e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	route := func(*http.Request) *idem.Policy { return p }
	inner := idem.CaptureBodyFor(1<<20, route)(e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	mbr := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 500)
		inner.ServeHTTP(w, r)
	})
	for name, h := range map[string]http.Handler{
		"two captures":            idem.CaptureBodyFor(1<<20, route)(inner),
		"MaxBytesReader in front": mbr,
	} {
		r := httptest.NewRequest("POST", "/pay", &spaces{n: 50 << 20})
		r.ContentLength = -1
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
}

// The engine's own read of a bounded capture (an operation whose body the
// handler does not decode first) reads at most one byte past the bound from
// the client, not up to the spare capacity of the capture's buffer.
func TestDrainReadsOneBytePastTheBound(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "pay", Semantics: idem.Strict, Request: idem.RequestSpec{MaxBytes: 1000}})
	e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	route := func(*http.Request) *idem.Policy { return p }
	for _, bound := range []func(int64) http.Handler{
		func(max int64) http.Handler {
			return idem.CaptureBodyFor(max, route)(e.Handler(p, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		},
		func(max int64) http.Handler { // no policy: the operation's bound
			return idem.CaptureBody(max)(e.Handler(p, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		},
	} {
		body := &spaces{n: 50 << 20}
		r := httptest.NewRequest("POST", "/pay", body)
		r.ContentLength = -1
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		bound(1<<20).ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if body.read > 1001 {
			t.Fatalf("%d bytes read from the client past a bound of 1000", body.read)
		}
	}
}
