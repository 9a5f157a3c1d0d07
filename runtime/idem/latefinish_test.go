package idem_test

import (
	"bytes"
	"context"
	"errors"
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

// flakyFinish fails the Finish calls of the first claim's token while
// down is set (a store that stopped answering after the claim), and
// counts every Finish.
type flakyFinish struct {
	idem.Store
	down     atomic.Bool
	first    atomic.Uint64 // the first claim's token
	finishes atomic.Int32
}

var errStoreDown = errors.New("store down")

func (s *flakyFinish) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	s.first.CompareAndSwap(0, uint64(r.Token))
	return s.Store.Begin(ctx, r)
}

func (s *flakyFinish) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	s.finishes.Add(1)
	if s.down.Load() && uint64(token) == s.first.Load() {
		return errStoreDown
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

// lockedBuffer is a log sink safe for the background goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newFlaky(t *testing.T, opts idem.Options) (*fixture, *flakyFinish, *lockedBuffer) {
	t.Helper()
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	fs := &flakyFinish{Store: ms}
	fs.down.Store(true)
	logs := &lockedBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	return newFixtureStore(t, ms, fs, opts), fs, logs
}

// A Finish that fails on the store is tried again in the background: once
// the store answers, the record holds the response and a retry replays it,
// the handler having run once (not again after the lease).
func TestLateFinish(t *testing.T) {
	f, fs, logs := newFlaky(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	w := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, w.Code, "the response went out")
	ev, ok := f.obs.find(idem.EventStoreError)
	require.True(t, ok)
	require.ErrorIs(t, ev.Err, errStoreDown)
	assert.Contains(t, logs.String(), "trying again in the background")

	// Still down: a duplicate finds the key in flight.
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
	tries := fs.finishes.Load()
	require.Eventually(t, func() bool { return fs.finishes.Load() > tries }, 5*time.Second, 10*time.Millisecond,
		"the failed Finish is tried again")

	fs.down.Store(false)
	require.Eventually(t, func() bool {
		_, ok := f.obs.find(idem.EventExecuted)
		return ok
	}, 10*time.Second, 10*time.Millisecond, "a later attempt finishes the record")
	ex, _ := f.obs.find(idem.EventExecuted)
	assert.Equal(t, idem.StateCompleted, ex.State)
	assert.Equal(t, 201, ex.Status)
	assert.True(t, ex.Protected)
	assert.Contains(t, logs.String(), "record finished by a later attempt")

	r := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, r.Code, r.Body.String())
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, w.Body.String(), r.Body.String())
	assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once")
}

// FinishRetryFor < 0: a failed Finish is not tried again.
func TestLateFinishOff(t *testing.T) {
	f, fs, logs := newFlaky(t, idem.Options{FinishRetryFor: -1})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	fs.down.Store(false)
	time.Sleep(400 * time.Millisecond) // more than the first retries' backoff
	assert.Equal(t, int32(1), fs.finishes.Load())
	assert.NotContains(t, logs.String(), "background")
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
}

// The retries stop after FinishRetryFor: the key stays in flight until its
// lease runs out.
func TestLateFinishGivesUp(t *testing.T) {
	f, fs, logs := newFlaky(t, idem.Options{FinishRetryFor: 500 * time.Millisecond})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	require.Eventually(t, func() bool { return bytes.Contains([]byte(logs.String()), []byte("gave up finishing the record")) },
		5*time.Second, 10*time.Millisecond)
	n := fs.finishes.Load()
	assert.Greater(t, n, int32(2), "tried again, more than once, within FinishRetryFor")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, n, fs.finishes.Load(), "no attempt after giving up")
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
	_, ok := f.obs.find(idem.EventExecuted)
	assert.False(t, ok)
}

// A late attempt after another request took the key over (its lease ran
// out) is fenced and changes nothing: the record keeps the second run's
// response.
func TestLateFinishFenced(t *testing.T) {
	f, fs, _ := newFlaky(t, idem.Options{FinishRetryFor: 10 * time.Second})
	spec := strictSpec()
	spec.InFlight.Lease = 50 * time.Millisecond
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	time.Sleep(60 * time.Millisecond) // the lease runs out
	second := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, second.Code, second.Body.String())
	require.Empty(t, second.Header().Get("Idempotent-Replayed"), "the retry took the key over")
	fs.down.Store(false)
	require.Eventually(t, func() bool {
		_, ok := f.obs.find(idem.EventFenced)
		return ok
	}, 10*time.Second, 10*time.Millisecond, "the late attempt is fenced")
	r := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, r.Code)
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, second.Body.String(), r.Body.String(), "the record keeps the second run's response")
	assert.Equal(t, int32(2), f.calls.Load())
}

// The release of a key whose handler did not finish (it panicked) is tried
// again likewise: a retry then runs the handler without waiting for the
// lease.
func TestLateRelease(t *testing.T) {
	f, fs, _ := newFlaky(t, idem.Options{})
	var panicked atomic.Bool
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panicked.CompareAndSwap(false, true) {
			panic(http.ErrAbortHandler)
		}
		f.createOrder().ServeHTTP(w, r)
	}))
	require.Panics(t, func() { send(h, req{key: "k", body: `{"item":1}`}) })
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
	fs.down.Store(false)
	require.Eventually(t, func() bool {
		return send(h, req{key: "k", body: `{"item":1}`}).Code == 201
	}, 10*time.Second, 20*time.Millisecond, "the key is released by a later attempt")
	assert.Equal(t, int32(1), f.calls.Load())
}

// Past the bound on the responses kept for retries, a failed Finish is
// not retried (it is reported as before), and the bound counts only the
// retries under way.
func TestLateFinishBounded(t *testing.T) {
	f, fs, logs := newFlaky(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	idem.UseLateBytes(f.eng, idem.MaxLateBytes-10) // a response of ~40 bytes does not fit
	require.Equal(t, 201, send(h, req{key: "k1", body: `{"item":1}`}).Code)
	assert.Contains(t, logs.String(), "store failed at finish")
	assert.NotContains(t, logs.String(), "background")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, int32(1), fs.finishes.Load(), "not retried")

	idem.UseLateBytes(f.eng, -(idem.MaxLateBytes - 10))
	fs.first.Store(0) // fail the next claim's Finish
	require.Equal(t, 201, send(h, req{key: "k2", body: `{"item":1}`}).Code)
	assert.Contains(t, logs.String(), "trying again in the background")
}
