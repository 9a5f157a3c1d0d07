package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// claimsAnyway is a store whose Begin makes the claim although the
// request's context has ended, then fails with the context's error: as
// pgx does when the cancel request it sends PostgreSQL loses the race with
// the claim's commit.
// claimed counts the claims it made after the context ended (the
// tests require one: otherwise the release they check had nothing to free).
type claimsAnyway struct {
	idem.Store
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

// A Begin that failed because the request ended may have claimed the key
// all the same: the engine releases that claim in the background, so the
// retry is not answered IDEMPOTENCY_KEY_IN_USE for a whole lease. The
// ended request's answer does not change.
func TestUnansweredClaimReleased(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		t.Run(map[bool]string{false: "client gone", true: "deadline passed"}[deadline], func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			logs := &logLevels{}
			var claimed atomic.Int32
			f := newFixtureStore(t, ms, claimsAnyway{ms, &claimed}, idem.Options{Logger: slog.New(logs), Principal: idem.Anonymous, DisableHeartbeat: true})
			spec := strictSpec()
			spec.InFlight.Lease = time.Hour
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			w := sendCtx(h, endedCtx(deadline), req{key: "k", body: `{"item":"book"}`})
			requireEnded(t, f, logs, w, deadline)
			assert.Equal(t, int32(0), f.calls.Load())
			require.Equal(t, int32(1), claimed.Load(), "the ended request's Begin claimed the key")

			drain(t, f.eng, "the release is done in the background")
			retry := send(h, req{key: "k", body: `{"item":"book"}`})
			require.Equal(t, http.StatusCreated, retry.Code, "the claim was released: %s", retry.Body)
			assert.Equal(t, int32(1), f.calls.Load())
			rel, ok := f.obs.find(idem.EventClaimReleased)
			require.True(t, ok, "the release is observed, not only logged")
			assert.Equal(t, "k", rel.Key)
			assert.Equal(t, "claim-released", rel.Kind.String())
			assert.Equal(t, 1, f.obs.count(idem.EventClaimReleased))
			lv, msg := logs.highest()
			assert.LessOrEqual(t, lv, slog.LevelInfo, "logged at %v: %s", lv, msg)
		})
	}
}

// When the Begin did not claim the key (the common case), the release is
// fenced and changes nothing: a claim another request made since is kept.
func TestUnansweredNoClaimKeepsOthers(t *testing.T) {
	logs := &logLevels{}
	f := newFixture(t, idem.Options{Logger: slog.New(logs), Principal: idem.Anonymous})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	requireEnded(t, f, logs, sendCtx(h, endedCtx(false), req{key: "k", body: `{"item":"book"}`}), false)
	require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":"book"}`}).Code)
	drain(t, f.eng)
	dup := send(h, req{key: "k", body: `{"item":"book"}`})
	assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
	lv, msg := logs.highest()
	assert.LessOrEqual(t, lv, slog.LevelInfo, "logged at %v: %s", lv, msg)
}

// outageBeginStore is a store in an outage: while hang is set, Begin waits
// until its context ends (as a store that does not answer); while
// failFinish is set, Finish fails at once.
type outageBeginStore struct {
	idem.Store
	hang       atomic.Bool
	failFinish atomic.Bool
	finishes   atomic.Int64
}

func (s *outageBeginStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	if s.hang.Load() {
		<-ctx.Done()
		return idem.BeginResult{}, ctx.Err()
	}
	return s.Store.Begin(ctx, r)
}

func (s *outageBeginStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	s.finishes.Add(1)
	if s.failFinish.Load() {
		return errors.New("store down")
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

// During an outage where Begins hang until their clients give up, the
// releases of the claims they may have made have a budget of their own:
// a response whose Finish failed is still retried (before, the releases
// held every MaxFinishRetries slot for a whole lease, and the completed
// response was abandoned: its retry after the lease would run the handler
// again).
func TestUnansweredReleasesDoNotStarveFinishRetries(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	hs := &outageBeginStore{Store: ms}
	f := newFixtureStore(t, ms, hs, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, StoreTimeout: 10 * time.Second})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder()) // lease 30s

	hs.hang.Store(true)
	hs.failFinish.Store(true)
	var wg sync.WaitGroup
	for i := range idem.MaxFinishRetries + 10 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond) // clients give up
			defer cancel()
			sendCtx(h, ctx, req{key: fmt.Sprintf("gone-%d", i), body: `{"item":1}`})
		})
	}
	wg.Wait()
	hs.hang.Store(false) // Begin answers again, Finish still fails
	require.Equal(t, http.StatusCreated, send(h, req{key: "paid", body: `{"item":1}`}).Code)
	var kinds []idem.EventKind
	f.obs.mu.Lock()
	for _, ev := range f.obs.evs {
		if ev.Key == "paid" {
			kinds = append(kinds, ev.Kind)
		}
	}
	f.obs.mu.Unlock()
	assert.Equal(t, []idem.EventKind{idem.EventStoreError}, kinds, "the completion's Finish is retried, not abandoned")

	hs.failFinish.Store(false)
	drainWithin(t, f.eng, 20*time.Second)
	dup := send(h, req{key: "paid", body: `{"item":1}`})
	assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"), "the late Finish stored the response")
	assert.Equal(t, int32(1), f.calls.Load())
}

// A release whose Finish keeps failing is tried ClaimReleaseAttempts
// times, not for the whole lease: the claim it might free runs out with
// its lease anyway, and the store it would load is struggling.
func TestUnansweredReleaseAttemptsBounded(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	hs := &outageBeginStore{Store: claimsAnyway{Store: ms}}
	hs.failFinish.Store(true)
	var logged lockedBuffer
	f := newFixtureStore(t, ms, hs, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
	spec := strictSpec()
	spec.InFlight.Lease = 2 * time.Second
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	sendCtx(h, endedCtx(false), req{key: "k", body: `{"item":1}`})
	drain(t, f.eng)
	assert.Equal(t, int64(idem.ClaimReleaseAttempts), hs.finishes.Load())
	// The give-up log counts the releases tried, not the Begin before them.
	assert.Contains(t, logged.String(), fmt.Sprintf("releases=%d", idem.ClaimReleaseAttempts))
	assert.Equal(t, 1, f.obs.count(idem.EventReleaseAbandoned), "giving up is observed, not only logged")
	assert.Zero(t, f.obs.count(idem.EventClaimReleased))
}

// claimsLate is a store whose Begin outlives its context (the engine's
// StoreTimeout) and claims all the same, then fails with the context's
// error: as pgx with DeadlineContextWatcherHandler, which closes the
// connection at the deadline while PostgreSQL commits the claim.
type claimsLate struct{ idem.Store }

func (s claimsLate) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	<-ctx.Done()
	_, _ = s.Store.Begin(context.WithoutCancel(ctx), req)
	return idem.BeginResult{}, ctx.Err()
}

// A Begin cut by the engine's own StoreTimeout, the request still alive,
// that claimed the key all the same: its client is told 503, nothing ran,
// and the claim is released, so its retry runs (before: 409
// IDEMPOTENCY_KEY_IN_USE for the whole lease).
func TestStoreTimeoutClaimReleased(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	f := newFixtureStore(t, ms, claimsLate{ms}, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, StoreTimeout: 50 * time.Millisecond})
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
	drain(t, f.eng)

	// The retry, through an engine whose store answers.
	f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	retry := send(f2.eng.Handler(mustCompile(t, spec), f2.createOrder()), req{key: "k", body: `{"item":1}`})
	assert.Equal(t, http.StatusCreated, retry.Code, "the claim the timed-out Begin made was released: %s", retry.Body)
}
