package idem_test

import (
	"io"
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

// RefuseTooLarge answers only a request CaptureBodyFor bounds: for a route
// without a contract behind the same capture, whose handler bounds its body
// itself (an http.MaxBytesReader), it writes nothing and returns false, so
// the handler's own answer stands.
func TestRefuseTooLargeLeavesUncontractedRoutes(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "pay", Semantics: idem.Strict, Request: idem.RequestSpec{MaxBytes: 1000}})
	e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	route := func(r *http.Request) *idem.Policy {
		if r.URL.Path == "/pay" {
			return p
		}
		return nil
	}
	var refused bool
	h := idem.CaptureBodyFor(1<<20, route)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 100)
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			if refused = e.RefuseTooLarge(w, r, err); refused {
				return
			}
			http.Error(w, "upload too large", http.StatusRequestEntityTooLarge)
		}
	}))
	r := httptest.NewRequest("POST", "/upload", &spaces{n: 1000})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if refused || w.Code != http.StatusRequestEntityTooLarge || w.Body.String() != "upload too large\n" {
		t.Fatalf("refused %v: %d %q %s", refused, w.Code, w.Header(), w.Body)
	}
}
