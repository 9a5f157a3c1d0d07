package pgstore

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// claimsAnyway's Begin commits the claim, then fails with the context's
// error: what pgx does when the request's context ends during the claim
// and the cancel request it sends PostgreSQL (asynchronously) comes too
// late to stop the statement. It makes that race happen every time, over
// the real PostgreSQL store; the race itself depends on timing (the soak
// trial saw it on 10 keys of 400).
// claimed counts the claims it made after the context ended (the
// tests require one: otherwise the release they check had nothing to free).
type claimsAnyway struct {
	*Store
	claimed *atomic.Int32
}

func (s claimsAnyway) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	res, err := s.Store.Begin(context.WithoutCancel(ctx), req)
	if err == nil && ctx.Err() != nil {
		if res.Acquired && s.claimed != nil {
			s.claimed.Add(1)
		}
		return idem.BeginResult{}, ctx.Err()
	}
	return res, err
}

// A client that went away while the engine claimed its key left the key
// PENDING for a whole lease, every retry answered 409
// IDEMPOTENCY_KEY_IN_USE: the engine now releases the claim the failed
// Begin made, and the retry runs at once.
func TestUnansweredClaimReleased(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	var claimed atomic.Int32
	eng := idem.New(claimsAnyway{s, &claimed}, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: time.Hour}})
	var runs atomic.Int32
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	serve := func(ctx context.Context) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{}`)).WithContext(ctx)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-unanswered")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	gone, cancel := context.WithCancel(testCtx(t))
	cancel()
	first := serve(gone)
	require.Equal(t, idem.StatusClientClosedRequest, first.Code, first.Body.String())
	assert.Contains(t, first.Body.String(), idem.CodeRequestEnded)
	require.Equal(t, int32(1), claimed.Load(), "the ended request's Begin claimed the key")
	require.NoError(t, eng.Drain(testCtx(t)))
	retry := serve(testCtx(t))
	require.Equal(t, http.StatusCreated, retry.Code, "the claim was released: %s", retry.Body)
	assert.Equal(t, int32(1), runs.Load())
}
