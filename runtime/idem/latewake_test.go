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
// while down is set, timing them.
type prefixDown struct {
	idem.Store
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

func newPrefixDown(t *testing.T, lease time.Duration) (*fixture, *prefixDown, http.Handler) {
	t.Helper()
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	ps := &prefixDown{Store: ms, down: true}
	f := newFixtureStore(t, ms, ps, idem.Options{FinishRetryFor: time.Hour})
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
// tries again at once instead of waiting out its backoff (an hour here).
func TestLateFinishWokenByStoreCall(t *testing.T) {
	f, ps, h := newPrefixDown(t, time.Hour)
	const n = 3
	for i := range n {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("down-%d", i), body: `{"item":1}`}).Code)
	}
	// The later requests' Begins woke the earlier retries, which failed
	// again (lateFinishFirst after their last attempt).
	time.Sleep(300 * time.Millisecond)
	tried := len(ps.attempts())
	time.Sleep(200 * time.Millisecond)
	require.Len(t, ps.attempts(), tried, "the backoff holds them")
	ps.setDown(false)
	require.Equal(t, 201, send(h, req{key: "other", body: `{"item":1}`}).Code, "a store call that succeeds")
	require.Eventually(t, func() bool { return f.obs.count(idem.EventExecuted) == n+1 }, 2*time.Second, 5*time.Millisecond,
		"every pending Finish was woken and finished")
	for i := range n {
		r := send(h, req{key: fmt.Sprintf("down-%d", i), body: `{"item":1}`})
		assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"), "key %d", i)
	}
	assert.Equal(t, int32(n+1), f.calls.Load())
	drain(t, f.eng)
}
