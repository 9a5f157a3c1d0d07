package idem_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestHeartbeatPastWindow: a holder whose handler runs past the window (kept
// alive by heartbeats past its lease) keeps its record: a duplicate that
// comes after the window is answered in flight, not run again, the holder's
// completion is recorded (not fenced), and a later retry replays it. The
// handler runs once. The store's clock is the test's, moved on by less than
// the lease after each extension the store grants (as in
// TestHeartbeatKeepsLease). Before ExtendLease moved the record's expiry,
// the record expired at claim + window under the running handler: the
// duplicate ran the operation again, the first run's Finish was fenced, and
// every later retry ran it once more.
func TestHeartbeatPastWindow(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ms := memstore.New(memstore.Options{SweepInterval: -1, Now: clock})
	defer ms.Close()
	ext := &extendCounter{Store: ms}
	f := newFixtureStore(t, ms, ext, idem.Options{})
	spec := strictSpec()
	spec.Window = 100 * time.Millisecond
	spec.InFlight.Lease = 60 * time.Millisecond
	started, release := make(chan struct{}), make(chan struct{})
	released := sync.OnceFunc(func() { close(release) })
	defer released()
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.calls.Add(1) == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(201)
	}))
	done := make(chan int)
	go func() { done <- send(h, req{key: "k", body: `{}`}).Code }()
	<-started
	for range 5 { // 5 x 40ms: twice the window
		n := ext.granted.Load()
		require.Eventually(t, func() bool { return ext.granted.Load() > n }, 10*time.Second, time.Millisecond,
			"the heartbeat extends the lease")
		mu.Lock()
		now = now.Add(40 * time.Millisecond)
		mu.Unlock()
	}
	requireProblem(t, send(h, req{key: "k", body: `{}`}), 409, idem.CodeKeyInUse)
	released()
	assert.Equal(t, 201, <-done)
	_, fenced := f.obs.find(idem.EventFenced)
	assert.False(t, fenced, "the completion past the window is recorded")
	w := send(h, req{key: "k", body: `{}`})
	assert.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "a retry after the completion replays it")
	assert.Equal(t, int32(1), f.calls.Load(), "the handler runs once")
}
