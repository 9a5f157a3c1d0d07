package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// prefixDown fails the Finish calls of keys (scope keys) holding "down-"
// while down is set, timing them. A LeaseExtender (memstore's): the
// engine knows when its claims' leases may run out.
type prefixDown struct {
	*memstore.Store
	mu   sync.Mutex
	down bool
	at   []time.Time // the failed Finish calls' times
}

func (s *prefixDown) setDown(v bool) {
	s.mu.Lock()
	s.down = v
	s.mu.Unlock()
}

func (s *prefixDown) attempts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

func (s *prefixDown) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	s.mu.Lock()
	down := s.down && strings.Contains(key, "down-")
	if down {
		s.at = append(s.at, time.Now())
	}
	s.mu.Unlock()
	if down {
		return errStoreDown
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

// newPrefixDownStore is a prefixDown over a new memstore, closed at the
// end of the test, with its "down-" keys down.
func newPrefixDownStore(t *testing.T) *prefixDown {
	t.Helper()
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	return &prefixDown{Store: ms, down: true}
}

func newPrefixDown(t *testing.T, lease time.Duration) (*fixture, *prefixDown, http.Handler) {
	t.Helper()
	ps := newPrefixDownStore(t)
	f := newFixtureStore(t, ps.Store, ps, idem.Options{FinishRetryFor: time.Hour})
	idem.SetLateBackoff(f.eng, time.Hour, time.Hour) // the backoff alone would not try again within the test
	spec := strictSpec()
	spec.InFlight.Lease = lease
	return f, ps, f.eng.Handler(mustCompile(t, spec), f.createOrder())
}

// Once the lease of a claim whose Finish failed may have run out, another
// instance may take its key over as soon as the store answers again: the
// Finish is then tried at least every 250ms (with jitter), whatever the
// backoff (an hour here), so that it reaches a store back from an outage
// longer than the lease before a client's retry is likely to.
func TestLateFinishShortAfterLease(t *testing.T) {
	const lease = 200 * time.Millisecond
	f, ps, h := newPrefixDown(t, lease)
	start := time.Now()
	require.Equal(t, 201, send(h, req{key: "down-k", body: `{"item":1}`}).Code)
	require.Eventually(t, func() bool { return len(ps.attempts()) >= 5 }, 5*time.Second, 5*time.Millisecond,
		"tried again every 250ms at most once the lease ran out")
	at := ps.attempts()
	assert.Less(t, at[1].Sub(start), lease+300*time.Millisecond, "the first retry came soon after the lease's end")
	for i := 2; i < len(at); i++ {
		assert.LessOrEqual(t, at[i].Sub(at[i-1]), 300*time.Millisecond, "attempt %d", i)
	}
	ps.setDown(false)
	require.Eventually(t, func() bool { return f.obs.count(idem.EventExecuted) == 1 }, 2*time.Second, 5*time.Millisecond,
		"the record is finished within the short cap of the store's return")
	r := send(h, req{key: "down-k", body: `{"item":1}`})
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
}

// A store call of the engine that succeeds (here another request's) wakes
// every Finish retried in the background: the store is back, and each
// tries again soon instead of waiting out its backoff (an hour here). One
// so woken that failed again is deaf to these wakes for its next backoff
// step (a store that answers other keys but not its own does not undo its
// backoff); a Drain still wakes it.
func TestLateFinishWokenByStoreCall(t *testing.T) {
	f, ps, h := newPrefixDown(t, time.Hour)
	const n = 3
	for i := range n {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("down-%d", i), body: `{"item":1}`}).Code)
	}
	// The later requests' Begins woke the earlier retries (down-0, down-1),
	// which failed again (lateFinishFirst after their last attempt, plus
	// up to 100ms): deaf to store wakes for their next step (an hour).
	time.Sleep(400 * time.Millisecond)
	tried := len(ps.attempts())
	time.Sleep(200 * time.Millisecond)
	require.Len(t, ps.attempts(), tried, "the backoff holds them")
	ps.setDown(false)
	require.Equal(t, 201, send(h, req{key: "other", body: `{"item":1}`}).Code, "a store call that succeeds")
	require.Eventually(t, func() bool { return f.obs.count(idem.EventExecuted) == 2 }, 2*time.Second, 5*time.Millisecond,
		"the pending Finish not woken before (down-2) was woken and finished")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 2, f.obs.count(idem.EventExecuted), "those woken before that failed again hold their backoff")
	drain(t, f.eng) // a Drain wakes them
	assert.Equal(t, n+1, f.obs.count(idem.EventExecuted))
	for i := range n {
		r := send(h, req{key: fmt.Sprintf("down-%d", i), body: `{"item":1}`})
		assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"), "key %d", i)
	}
	assert.Equal(t, int32(n+1), f.calls.Load())
}

// A client's retry that reaches this instance after the lease of a claim
// whose Finish is being retried ran out, once the store is back, does not
// race that Finish: the engine tries it first, before the retry's Begin
// (which would take the key over and run the handler again), and the
// retry gets the replay. The store here answers at once, between two
// background attempts.
func TestLateFinishBeforeTakeover(t *testing.T) {
	clk := newStoreClock()
	f, fs, logs := newFlakyAt(t, idem.Options{}, clk)
	spec := strictSpec()
	spec.InFlight.Lease = 100 * time.Millisecond
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	for i := range 5 {
		fs.first.Store(0) // fail the next claim's Finish
		fs.down.Store(true)
		key := fmt.Sprintf("k%d", i)
		w := send(h, req{key: key, body: `{"item":1}`})
		require.Equal(t, 201, w.Code)
		clk.advance(150 * time.Millisecond) // past the lease, on the store
		fs.down.Store(false)
		r := send(h, req{key: key, body: `{"item":1}`})
		require.Equal(t, 201, r.Code, r.Body.String())
		require.Equal(t, "true", r.Header().Get("Idempotent-Replayed"), "round %d: the retry replays", i)
		assert.Equal(t, w.Body.String(), r.Body.String())
		assert.Equal(t, int32(i+1), f.calls.Load(), "the handler ran once per key")
	}
	drain(t, f.eng)
	assert.Equal(t, 5, f.obs.count(idem.EventExecuted))
	assert.Zero(t, f.obs.count(idem.EventFenced))
	assert.Zero(t, f.obs.count(idem.EventLeaseTakeover))
	assert.Equal(t, 5, strings.Count(logs.String(), "record finished by a later attempt"))
}

// A retry that tries the pending Finish of its key first (after the lease)
// on a store that hangs is answered in flight within StoreTimeout (409
// with Retry-After, as for a key in use): it neither goes on to a Begin
// (which, answered, would take the key over and run the handler again)
// nor, under FailOpen, runs the handler unprotected. Begin does not hang:
// the answer is the pending Finish's alone.
func TestLateFinishBeforeTakeoverHangs(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("FailOpen=%v", failOpen), func(t *testing.T) {
			const timeout = time.Second
			clk := newStoreClock()
			hs := newHangingStoreAt(t, clk, "Finish")
			f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout, FailOpen: failOpen})
			spec := strictSpec()
			spec.InFlight.Lease = 100 * time.Millisecond
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			w, _ := serveTimed(h, "k")
			require.Equal(t, 201, w.Code)
			clk.advance(150 * time.Millisecond) // past the lease, on the store
			started := hs.started.Load()
			w, took := serveTimed(h, "k")
			requireProblem(t, w, 409, idem.CodeKeyInUse)
			assert.NotEmpty(t, w.Header().Get("Retry-After"))
			assert.Less(t, took, 2*timeout, "one StoreTimeout")
			assert.GreaterOrEqual(t, hs.started.Load(), started+1, "the pending Finish was tried")
			assert.Equal(t, int32(1), f.calls.Load(), "the handler did not run again")
			hs.setHang("Finish", false)
			drain(t, f.eng)
			w, _ = serveTimed(h, "k")
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, int32(1), f.calls.Load())
		})
	}
}
