package idem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// transactional + DetachHandler. The client went away, the
// detached handler finished (its transaction's context was never
// cancelled), and the commit then failed for want of the store. Finish
// takes the request's ended context for the cause (requestEnded) and
// reports CodeRequestEnded at INFO ("client gone") instead of a store
// failure (EventStoreError), though the transaction did not end with the
// request.
func TestDetachTxCommitFailureReportedAsStoreError(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	ft := &fakeTx{Store: ms, commitErr: errors.New("pg: connection reset by peer")}
	f := newFixtureStore(t, ms, ft, idem.Options{Transactional: true, DetachHandler: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var hctxErr error
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the client goes away mid-run
		time.Sleep(20 * time.Millisecond)
		hctxErr = r.Context().Err()
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "done")
	}))
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if hctxErr != nil {
		t.Fatalf("the handler's context ended: %v", hctxErr)
	}
	var storeErr, ended bool
	f.obs.mu.Lock()
	for _, e := range f.obs.evs {
		t.Logf("event %s code=%s err=%v", e.Kind, e.Code, e.Err)
		storeErr = storeErr || e.Kind == idem.EventStoreError
		ended = ended || e.Code == idem.CodeRequestEnded
	}
	f.obs.mu.Unlock()
	t.Logf("answer %d %s", w.Code, w.Body)
	if ended || !storeErr {
		t.Errorf("a failed commit of a detached run is reported as the request's end (%v), not a store error (%v)", ended, storeErr)
	}
}
