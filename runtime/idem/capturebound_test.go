package idem_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// spaces is a body of n spaces, counting what was read of it.
type spaces struct{ n, read int64 }

func (s *spaces) Read(p []byte) (int, error) {
	if s.read >= s.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), s.n-s.read)
	for i := range p[:k] {
		p[i] = ' '
	}
	s.read += k
	return int(k), nil
}

// CaptureBodyFor bounds the body of a request of an idempotent operation on
// the wire (a strict server's decoder gets an *http.MaxBytesError, which
// Engine.RefuseTooLarge answers with the 413 problem) and leaves every other
// request's body unbounded (a security trial: a 200 MiB body was read whole
// by the decoder under CaptureBody before the 413).
func TestCaptureBodyForBoundsOnTheWire(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "pay", Semantics: idem.Strict, Request: idem.RequestSpec{MaxBytes: 1000}})
	e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	route := func(r *http.Request) *idem.Policy {
		if r.URL.Path == "/pay" {
			return p
		}
		return nil
	}
	var decodeErr error
	var read int64
	// A strict server: it decodes the body before the engine runs, and
	// answers a decoding error with its error handler.
	h := idem.CaptureBodyFor(1<<20, route)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		if decodeErr = json.NewDecoder(r.Body).Decode(&v); decodeErr != nil {
			if e.RefuseTooLarge(w, r, decodeErr) {
				return
			}
			http.Error(w, decodeErr.Error(), http.StatusBadRequest)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		read = n
		w.WriteHeader(http.StatusOK)
	}))
	body := &spaces{n: 50 << 20}
	r := httptest.NewRequest("POST", "/pay", body)
	r.ContentLength = -1
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var mbe *http.MaxBytesError
	if !errors.As(decodeErr, &mbe) || mbe.Limit != 1000 {
		t.Fatalf("the decoder's error: %v", decodeErr)
	}
	if body.read > 1001 {
		t.Fatalf("%d bytes read from the client past a bound of 1000", body.read)
	}
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), idem.CodeRequestTooLarge) ||
		w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answer: %d %q %s", w.Code, w.Header(), w.Body)
	}
	// Exactly the bound: read whole (a valid JSON document of 1000 bytes).
	r = httptest.NewRequest("POST", "/pay", strings.NewReader(`{"a":"`+strings.Repeat("x", 1000-9)+`"}`))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if decodeErr != nil || w.Code != http.StatusOK {
		t.Fatalf("a body of exactly the bound: %v, %d %s", decodeErr, w.Code, w.Body)
	}
	// Another route: not bounded; a MaxBytesError there is not the engine's
	// to answer.
	body = &spaces{n: 3 << 20}
	r = httptest.NewRequest("POST", "/upload", io.MultiReader(strings.NewReader("{}"), body))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if decodeErr != nil || w.Code != http.StatusOK || read != 3<<20 {
		t.Fatalf("a route without a policy: %v, %d, read %d", decodeErr, w.Code, read)
	}
	if e.RefuseTooLarge(httptest.NewRecorder(), r, &http.MaxBytesError{Limit: 1}) {
		t.Fatal("RefuseTooLarge answered a request CaptureBodyFor does not bound")
	}
}

// Engine.Handler behind CaptureBodyFor reads no more than the bound either.
func TestCaptureBodyForPlainHandler(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "pay", Semantics: idem.Strict, Request: idem.RequestSpec{MaxBytes: 1000}})
	e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	ran := 0
	h := idem.CaptureBodyFor(1<<20, func(*http.Request) *idem.Policy { return p })(e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
	})))
	body := &spaces{n: 50 << 20}
	r := httptest.NewRequest("POST", "/pay", body)
	r.ContentLength = -1
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge || ran != 0 || body.read > 1001+32<<10 {
		t.Fatalf("%d %s, ran %d, read %d", w.Code, w.Body, ran, body.read)
	}
}
