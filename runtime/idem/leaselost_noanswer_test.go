package idem_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// A run CancelOnLeaseLost cancelled that returns without writing (the usual
// `if ctx.Err() != nil { return }`): is its implicit empty 200 recorded and
// replayed, though the engine itself ended the run?
func TestLeaseLostNoAnswerFreesTheKey(t *testing.T) {
	e, p, down := partitionedEngine(t, idem.FailuresRetry, true, io.Discard)
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
	c1 := postCharge(h).Code
	retry := postCharge(h)
	c2, rep := retry.Code, retry.Header().Get("Idempotent-Replayed")
	t.Logf("first %d, retry %d (replayed %q), runs %d, charges %d", c1, c2, rep, runs.Load(), charges.Load())
	if charges.Load() != 1 {
		t.Fatalf("the retry of a run the engine cancelled got %d (replayed %q); charges %d", c2, rep, charges.Load())
	}
}
