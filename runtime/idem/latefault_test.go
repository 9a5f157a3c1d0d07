package idem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idem"
)

// a commit that took effect (reply lost) while the request ended is
// reported executed twice: at once (FAILED, CodeRequestEnded) by
// reportFinish, then again from the background by committedAfterAll.
func TestEndedCommitTookEffectCountedOnce(t *testing.T) {
	f, s, _ := newTxFlaky(t)
	s.commitLies = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(201)
		cancel() // the client goes away as the commit runs
	}))
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(httptest.NewRecorder(), r)
	drain(t, f.eng)
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted), "one run: one executed (runs = executed + fenced + finish-abandoned)")
}
