package idem_test

import (
	"encoding/json"

	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A strict-like handler (the review of e731e10) decodes the JSON value first (json.Decoder stops once
// the value is complete, even though the read that brought it also returned
// an *http.MaxBytesError from the bound under the capture), then calls Begin.
func TestDrainAfterDecoderMetBoundIsTooLarge(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "pay", Semantics: idem.Strict, Request: idem.RequestSpec{MaxBytes: 1000}})
	e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	strictLike := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			if !e.RefuseTooLarge(w, r, err) {
				http.Error(w, err.Error(), 400)
			}
			return
		}
		c := e.Begin(r, p, idem.RequestKey)
		if c.Decision() != idem.Execute {
			c.Respond(w)
			return
		}
		w.WriteHeader(200)
		c.Finish()
	})
	for name, h := range map[string]http.Handler{
		"MaxBytesReader in front": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, 500)
			idem.CaptureBody(1<<20)(strictLike).ServeHTTP(w, r)
		}),
	} {
		r := httptest.NewRequest("POST", "/pay", strings.NewReader(`{}`+strings.Repeat(" ", 900)))
		r.ContentLength = -1
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
}
