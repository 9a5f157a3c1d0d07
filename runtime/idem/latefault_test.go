package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestEndedCommitTookEffectCountedOnce: a commit that took effect (its
// reply lost) while the request ended is reported executed once: the
// request reports it (FAILED, CodeRequestEnded), and the fenced
// background release that finds the record final under its token does
// not report it again (it did: two executed events for one run).
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

// TestLateBackoffHoldsWhileOtherKeysSucceed: a Finish that keeps failing
// (its key's shard down, a READONLY replica, OOM) keeps its backoff (100ms
// doubling to 2s) while other store calls succeed; the wake on a store's
// answer did undo it (tried every 100ms: 41 attempts in 4s).
func TestLateBackoffHoldsWhileOtherKeysSucceed(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	ps := &prefixDown{Store: ms, down: true}
	f := newFixtureStore(t, ms, ps, idem.Options{FinishRetryFor: time.Hour})
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour // the lease cap plays no part
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "down-k", body: `{"item":1}`}).Code)
	end := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("ok-%d", i), body: `{"item":1}`}).Code)
		time.Sleep(20 * time.Millisecond)
	}
	n := len(ps.attempts())
	// 100, 200, 400, 800, 1600, 2000 ms (jitter: half to all): about 6-8 in 4s.
	assert.LessOrEqual(t, n, 10, "attempts on the failing key in 4s: %d", n)
	ps.setDown(false)
	drain(t, f.eng)
}

// countingFinish counts the Finish calls in flight at once (peak), each
// slowed down by 2ms for a key of a store just back.
type countingFinish struct {
	*prefixDown
	inflight, peak atomic.Int32
}

func (s *countingFinish) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if strings.Contains(key, "down-") {
		time.Sleep(2 * time.Millisecond) // a store just back, slow
	}
	return s.prefixDown.Finish(ctx, key, token, st, resp)
}

// TestLateWakeJittered: the pending Finishes woken by the store's return
// are spread by their jitter instead of hitting it all at once.
func TestLateWakeJittered(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	cs := &countingFinish{prefixDown: &prefixDown{Store: ms, down: true}}
	f := newFixtureStore(t, ms, cs, idem.Options{FinishRetryFor: time.Hour})
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	const n = 200
	for i := range n {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("down-%d", i), body: `{"item":1}`}).Code)
	}
	time.Sleep(4 * time.Second) // the backoff at its 2s cap
	cs.setDown(false)
	cs.peak.Store(0)
	require.Equal(t, 201, send(h, req{key: "other", body: `{"item":1}`}).Code)
	time.Sleep(150 * time.Millisecond)
	// Woken at once without jitter, 149 of the 200 were in flight together
	// within 150ms; with it, about a dozen.
	assert.Less(t, cs.peak.Load(), int32(n/2), "Finish calls in flight at once within 150ms of the store's return")
	drain(t, f.eng)
}

// TestPendingFinishFailsFastNoTakeover: when the pending Finish tried
// before the Begin fails fast (a dead pooled connection right after an
// outage, say), the request is answered in flight; it did go on to a Begin
// that got through, took the key over and ran the handler a second time,
// although the engine held the first run's response.
func TestPendingFinishFailsFastNoTakeover(t *testing.T) {
	f, fs, _ := newFlaky(t, idem.Options{})
	idem.SetLateBackoff(f.eng, time.Hour, time.Hour)
	spec := strictSpec()
	spec.InFlight.Lease = 100 * time.Millisecond
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	time.Sleep(150 * time.Millisecond) // past the lease; the first claim's Finish still fails (fast)
	before := fs.finishes.Load()
	r := send(h, req{key: "k", body: `{"item":1}`})
	assert.Greater(t, fs.finishes.Load(), before, "the pending Finish was tried first")
	assert.Equal(t, int32(1), f.calls.Load(), "status %d: the handler ran again (took over) though this instance holds its response", r.Code)
	fs.down.Store(false)
	drain(t, f.eng)
}

// slowDown is a store whose Finish of a "down-" key fails slowly (150ms:
// a shard that does not answer); TestLateBackoffHoldsSlowFailure: the
// backoff holds for it too (woken retries ran back to back, no pause).
type slowDown struct {
	*prefixDown
	starts atomic.Int32
}

func (s *slowDown) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if strings.Contains(key, "down-") {
		s.starts.Add(1)
		time.Sleep(150 * time.Millisecond)
	}
	return s.prefixDown.Finish(ctx, key, token, st, resp)
}

func TestLateBackoffHoldsSlowFailure(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	ps := &slowDown{prefixDown: &prefixDown{Store: ms, down: true}}
	f := newFixtureStore(t, ms, ps, idem.Options{FinishRetryFor: time.Hour})
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "down-k", body: `{"item":1}`}).Code)
	end := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("ok-%d", i), body: `{"item":1}`}).Code)
		time.Sleep(20 * time.Millisecond)
	}
	n := ps.starts.Load()
	assert.LessOrEqual(t, n, int32(8), "attempts on the failing key in 4s: %d (4s/150ms = 26 back to back)", n)
	ps.setDown(false)
	drain(t, f.eng)
}
