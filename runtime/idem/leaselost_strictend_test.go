package idem_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// A strict handler that CancelOnLeaseLost cancelled returns its context's
// error and no error handler records an answer: the key is freed with an
// Info line naming the lost claim, not the warnings of a handler that did
// not finish (a panic or an error) and of an unanswered error under
// failures: replay, which advise wiring an error handler.
func TestLeaseLostStrictEndNoWarning(t *testing.T) {
	logs := &lockedBuffer{}
	e, p, down := partitionedEngine(t, idem.FailuresReplay, true, logs)
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := e.Begin(r, p, idem.RequestKey)
		defer c.End()
		if c.Decision() != idem.Execute {
			c.Respond(w)
			return
		}
		c.Writer(w)
		runs.Add(1)
		select {
		case <-time.After(time.Second):
		case <-c.Context().Done():
		}
		if err := c.Context().Err(); err != nil {
			down.Store(false)
			_ = c.HandlerFailed(err)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = c.Finish()
	})
	postCharge(h)
	if code := postCharge(h).Code; code != http.StatusCreated || runs.Load() != 2 {
		t.Fatalf("retry %d, runs %d: want the retry to run the operation (201)", code, runs.Load())
	}
	out := logs.String()
	for _, warning := range []string{"handler did not finish", "is not recorded"} {
		if strings.Contains(out, warning) {
			t.Errorf("warned %q for a run the engine cancelled itself:\n%s", warning, out)
		}
	}
	if !strings.Contains(out, "gave up after its claim was lost") {
		t.Errorf("want an Info line naming the lost claim:\n%s", out)
	}
}
