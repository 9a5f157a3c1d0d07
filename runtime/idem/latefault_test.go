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

// lateScale divides the engine's late-finish backoff (100ms doubling to
// 2s) and its wakes' least pause and jitter (100ms each) in the tests that
// watch the schedule for a while (SetLateBackoff, SetLateWake): a tenth of
// the defaults, in a tenth of the time.
const lateScale = 10

// scaledLate sets e's backoff and wakes to a lateScale-th of the defaults.
func scaledLate(e *idem.Engine) {
	idem.SetLateBackoff(e, 100*time.Millisecond/lateScale, 2*time.Second/lateScale)
	idem.SetLateWake(e, 100*time.Millisecond/lateScale, 100*time.Millisecond/lateScale)
}

// lateAttemptsCeiling is the most attempts (the failed Finish included)
// that a Finish whose store keeps failing it can make within d, each
// attempt taking took, under the scaled schedule (scaledLate) while the
// store answers other calls all along: every pause that a store's wake may
// cut (the first, and each after an attempt not so woken) cut to the
// wakes' least pause (jitter 0), every other the shortest of its backoff
// step (half of it), the step doubling from its first to its cap.
func lateAttemptsCeiling(d, took time.Duration) int {
	first, most, least := 100*time.Millisecond/lateScale, 2*time.Second/lateScale, 100*time.Millisecond/lateScale
	n, at, wait, deaf := 1, took, first, false
	for {
		gap := wait / 2
		if !deaf {
			gap = min(least, gap)
		}
		if at += gap + took; at > d {
			return n
		}
		n++
		deaf = !deaf
		wait = min(2*wait, most)
	}
}

// TestLateBackoffHoldsWhileOtherKeysSucceed: a Finish that keeps failing
// (its key's shard down, a READONLY replica, OOM) keeps its backoff
// (doubling to its cap) while other store calls succeed; the wake on a
// store's answer did undo it (tried every wake's least pause: 41 attempts
// in 4s at the default schedule). Scaled (scaledLate): 400ms.
func TestLateBackoffHoldsWhileOtherKeysSucceed(t *testing.T) {
	ps := newPrefixDownStore(t)
	f := newFixtureStore(t, ps.Store, ps, idem.Options{FinishRetryFor: time.Hour})
	scaledLate(f.eng)
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour // the lease cap plays no part
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	const d = 4 * time.Second / lateScale
	require.Equal(t, 201, send(h, req{key: "down-k", body: `{"item":1}`}).Code)
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("ok-%d", i), body: `{"item":1}`}).Code)
		time.Sleep(20 * time.Millisecond / lateScale)
	}
	n := len(ps.attempts())
	// 11 at the most (about 6-8 with the jitter); every wake's least pause: 40.
	assert.LessOrEqual(t, n, lateAttemptsCeiling(d, 0), "attempts on the failing key in %v: %d", d, n)
	ps.setDown(false)
	drain(t, f.eng)
}

// countingFinish counts the Finish calls in flight at once (peak), each
// slowed down by took for a key of a store just back.
type countingFinish struct {
	*prefixDown
	took           time.Duration
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
		time.Sleep(s.took) // a store just back, slow
	}
	return s.prefixDown.Finish(ctx, key, token, st, resp)
}

// TestLateWakeJittered: the pending Finishes woken by the store's return
// are spread by their jitter instead of hitting it all at once. At half
// the default schedule (backoff 50ms doubling to 1s, wakes 50ms after the
// last attempt plus up to 50ms), each Finish 2ms: peaks of about 20 with
// the jitter, 120 to 190 without (at a quarter, 30 to 80 under -race
// against 145 to 190: too close to tell apart).
func TestLateWakeJittered(t *testing.T) {
	const scale = 2
	cs := &countingFinish{prefixDown: newPrefixDownStore(t), took: 2 * time.Millisecond}
	f := newFixtureStore(t, cs.Store, cs, idem.Options{FinishRetryFor: time.Hour})
	idem.SetLateBackoff(f.eng, 100*time.Millisecond/scale, 2*time.Second/scale)
	idem.SetLateWake(f.eng, 100*time.Millisecond/scale, 100*time.Millisecond/scale)
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	const n = 200
	for i := range n {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("down-%d", i), body: `{"item":1}`}).Code)
	}
	time.Sleep(4 * time.Second / scale) // the backoff at its cap
	cs.setDown(false)
	cs.peak.Store(0)
	require.Equal(t, 201, send(h, req{key: "other", body: `{"item":1}`}).Code)
	time.Sleep(150 * time.Millisecond / scale)
	// Woken at once without jitter, 149 of the 200 were in flight together
	// within 150ms at the default schedule; with it, about a dozen.
	assert.Less(t, cs.peak.Load(), int32(n/2), "Finish calls in flight at once within %v of the store's return", 150*time.Millisecond/scale)
	drain(t, f.eng)
}

// TestPendingFinishFailsFastNoTakeover: when the pending Finish tried
// before the Begin fails fast (a dead pooled connection right after an
// outage, say), the request is answered in flight; it did go on to a Begin
// that got through, took the key over and ran the handler a second time,
// although the engine held the first run's response.
func TestPendingFinishFailsFastNoTakeover(t *testing.T) {
	clk := newStoreClock()
	f, fs, _ := newFlakyAt(t, idem.Options{}, clk)
	idem.SetLateBackoff(f.eng, time.Hour, time.Hour)
	spec := strictSpec()
	spec.InFlight.Lease = 100 * time.Millisecond
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	clk.advance(150 * time.Millisecond) // past the lease on the store; the first claim's Finish still fails (fast)
	before := fs.finishes.Load()
	r := send(h, req{key: "k", body: `{"item":1}`})
	assert.Greater(t, fs.finishes.Load(), before, "the pending Finish was tried first")
	assert.Equal(t, int32(1), f.calls.Load(), "status %d: the handler ran again (took over) though this instance holds its response", r.Code)
	fs.down.Store(false)
	drain(t, f.eng)
}

// slowDown is a store whose Finish of a "down-" key fails slowly (took:
// a shard that does not answer); TestLateBackoffHoldsSlowFailure: the
// backoff holds for it too (woken retries ran back to back, no pause).
type slowDown struct {
	*prefixDown
	took   time.Duration
	starts atomic.Int32
}

func (s *slowDown) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if strings.Contains(key, "down-") {
		s.starts.Add(1)
		time.Sleep(s.took)
	}
	return s.prefixDown.Finish(ctx, key, token, st, resp)
}

// Scaled (scaledLate): 400ms, each failure taking 15ms.
func TestLateBackoffHoldsSlowFailure(t *testing.T) {
	ps := &slowDown{prefixDown: newPrefixDownStore(t), took: 150 * time.Millisecond / lateScale}
	f := newFixtureStore(t, ps.Store, ps, idem.Options{FinishRetryFor: time.Hour})
	scaledLate(f.eng)
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	const d = 4 * time.Second / lateScale
	require.Equal(t, 201, send(h, req{key: "down-k", body: `{"item":1}`}).Code)
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("ok-%d", i), body: `{"item":1}`}).Code)
		time.Sleep(20 * time.Millisecond / lateScale)
	}
	n := int(ps.starts.Load())
	// 8 at the most; back to back: d/took = 26.
	assert.LessOrEqual(t, n, lateAttemptsCeiling(d, ps.took), "attempts on the failing key in %v: %d (%v each)", d, n, ps.took)
	ps.setDown(false)
	drain(t, f.eng)
}
