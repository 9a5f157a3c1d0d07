package idem_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// quotaErr is a store's refusal of one caller (idem.ErrQuotaExceeded),
// with a hint when d > 0.
type quotaErr struct{ d time.Duration }

func (e quotaErr) Error() string             { return "over quota" }
func (e quotaErr) Unwrap() error             { return idem.ErrQuotaExceeded }
func (e quotaErr) RetryAfter() time.Duration { return e.d }

// principalStore records the principals of the claims it is asked.
type principalStore struct {
	idem.Store
	mu   sync.Mutex
	seen []string
}

func (s *principalStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	s.mu.Lock()
	s.seen = append(s.seen, r.Principal)
	s.mu.Unlock()
	return s.Store.Begin(ctx, r)
}

// TestQuotaRefusal: a claim the store refuses for its caller's share is
// answered 429 IDEMPOTENCY_QUOTA_EXCEEDED with the store's hint as
// Retry-After (UnavailableRetryAfter without one), reported as
// EventRejected (no EventStoreError), never run, FailOpen or not, and
// logged once for many refusals, not once each.
func TestQuotaRefusal(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		for _, tc := range []struct {
			name string
			err  error
			want string
		}{
			{"hint", quotaErr{20 * time.Second}, "20"},
			{"capped", quotaErr{90 * time.Second}, "30"},
			{"wrapped", fmt.Errorf("begin: %w", quotaErr{1500 * time.Millisecond}), "2"},
			{"no hint", quotaErr{}, "3"},
		} {
			t.Run(fmt.Sprint(tc.name, "/FailOpen=", failOpen), func(t *testing.T) {
				ms := memstore.New(memstore.Options{SweepInterval: -1})
				defer ms.Close()
				var logs bytes.Buffer
				f := newFixtureStore(t, ms, &failingStore{Store: ms, beginErr: tc.err}, idem.Options{
					UnavailableRetryAfter: 3 * time.Second, FailOpen: failOpen,
					Principal: func(*http.Request) (string, error) { return "mallory", nil },
					Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
				})
				h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
				for i := range 5 {
					w := send(h, req{key: fmt.Sprint("k", i), body: `{}`})
					requireProblem(t, w, http.StatusTooManyRequests, idem.CodeQuotaExceeded)
					assert.Equal(t, tc.want, w.Header().Get("Retry-After"))
				}
				assert.Equal(t, int32(0), f.calls.Load(), "nothing ran")
				for _, k := range f.obs.kinds() {
					assert.Equal(t, idem.EventRejected, k)
				}
				e, ok := f.obs.find(idem.EventRejected)
				require.True(t, ok)
				assert.Equal(t, idem.CodeQuotaExceeded, e.Code)
				assert.Equal(t, http.StatusTooManyRequests, e.Status)
				assert.Equal(t, "mallory", e.Principal)
				assert.ErrorIs(t, e.Err, idem.ErrQuotaExceeded)
				assert.Equal(t, 1, strings.Count(logs.String(), "claims refused"), "one log line for five refusals:\n%s", logs.String())
				assert.Contains(t, logs.String(), "level=WARN msg=\"idem: claims refused")
				assert.Contains(t, logs.String(), "principal=mallory")
				assert.NotContains(t, logs.String(), "store failed", "no store error")
			})
		}
	}
}

// TestBeginRequestPrincipal: the engine hands the store the principal of
// the request making the claim: Options.Principal's, under ScopeShared
// too (the keys are shared, the record is still this caller's), and ""
// for Anonymous.
func TestBeginRequestPrincipal(t *testing.T) {
	shared := strictSpec()
	shared.Operation, shared.Scope = "sharedOrder", idem.ScopeShared
	for _, tc := range []struct {
		name      string
		principal func(*http.Request) (string, error)
		spec      idem.Spec
		want      string
	}{
		{"principal", func(*http.Request) (string, error) { return "alice", nil }, strictSpec(), "alice"},
		{"shared", func(*http.Request) (string, error) { return "alice", nil }, shared, "alice"},
		{"anonymous", idem.Anonymous, strictSpec(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			defer ms.Close()
			ps := &principalStore{Store: ms}
			f := newFixtureStore(t, ms, ps, idem.Options{Principal: tc.principal})
			h := f.eng.Handler(mustCompile(t, tc.spec), f.createOrder())
			require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{}`}).Code)
			assert.Equal(t, []string{tc.want}, ps.seen)
		})
	}
}

// quotaOnly is a store (not in-process: no LocalReader) whose Begin
// refuses every claim with idem.ErrQuotaExceeded alone (not marked
// ErrNothingDone, unlike memstore's), and that counts its Finish calls.
type quotaOnly struct {
	idem.Store
	finishes atomic.Int64
}

func (s *quotaOnly) Begin(context.Context, *idem.BeginRequest) (idem.BeginResult, error) {
	return idem.BeginResult{}, quotaErr{time.Minute}
}

func (s *quotaOnly) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	s.finishes.Add(1)
	return s.Store.Finish(ctx, key, token, st, resp)
}

// TestQuotaRefusalReleasesNothing: a Begin refused for its caller's share
// claimed nothing (ErrQuotaExceeded says so by itself): the engine does not
// release a claim in the background after it, even when the store did not
// also mark the error ErrNothingDone (before: one Finish per refusal).
func TestQuotaRefusalReleasesNothing(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	qs := &quotaOnly{Store: ms}
	f := newFixtureStore(t, ms, qs, idem.Options{
		Principal:        func(*http.Request) (string, error) { return "mallory", nil },
		DisableHeartbeat: true,
	})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	for i := range 3 {
		w := send(h, req{key: fmt.Sprint("k", i), body: `{}`})
		requireProblem(t, w, http.StatusTooManyRequests, idem.CodeQuotaExceeded)
	}
	drain(t, f.eng, "no release is pending")
	assert.Zero(t, qs.finishes.Load(), "no claim to release")
	assert.Equal(t, int32(0), f.calls.Load())
}
