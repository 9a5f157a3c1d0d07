package idem_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A run CancelOnLeaseLost cancelled that returns without writing (the usual
// `if ctx.Err() != nil { return }`): is its implicit empty 200 recorded and
// replayed, though the engine itself ended the run?
func TestLeaseLostNoAnswerFreesTheKey(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	p := mustCompile(t, idem.Spec{Operation: "charge", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: 300 * time.Millisecond}})
	var down atomic.Bool
	down.Store(true)
	e := idem.New(partitioned{ms, &down}, idem.Options{Principal: idem.Anonymous, CancelOnLeaseLost: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var runs, charges atomic.Int32
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
		if r.Context().Err() != nil {
			down.Store(false)
			return // gave up, wrote nothing
		}
		charges.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	do := func() (int, string) {
		r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"amount":100}`))
		r.Header.Set("Idempotency-Key", "k-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Header().Get("Idempotent-Replayed")
	}
	c1, _ := do()
	c2, rep := do()
	t.Logf("first %d, retry %d (replayed %q), runs %d, charges %d", c1, c2, rep, runs.Load(), charges.Load())
	if charges.Load() != 1 {
		t.Fatalf("the retry of a run the engine cancelled got %d (replayed %q); charges %d", c2, rep, charges.Load())
	}
}
