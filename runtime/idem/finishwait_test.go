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

// slowFinish holds every Finish while slow is set until gate is closed (or
// its context ends); the first one so held fails (errStoreDown) once the
// gate opens if failOnce is set.
type slowFinish struct {
	idem.Store
	slow     atomic.Bool
	failOnce atomic.Bool
	gate     chan struct{}
	finishes atomic.Int32
}

// ContextBound: it keeps neither a call's context nor its key (the
// engine then reuses its per-request memory, which a Finish going on in
// the background must not share: -race).
func (s *slowFinish) ContextBound() {}

func (s *slowFinish) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	s.finishes.Add(1)
	if s.slow.Load() {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s.failOnce.CompareAndSwap(true, false) {
			return errStoreDown
		}
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

func newSlowFinish(t *testing.T, opts idem.Options) (*fixture, *slowFinish, *lockedBuffer) {
	t.Helper()
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	s := &slowFinish{Store: ms, gate: make(chan struct{})}
	s.slow.Store(true)
	logs := &lockedBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	return newFixtureStore(t, ms, s, opts), s, logs
}

// Options.FinishWait: a Finish the store does not answer within it goes
// on in the background and the response is sent at once (before, and
// without FinishWait, it waited up to StoreTimeout: 5s here). A retry
// finds the key in flight until the Finish lands (at once: a retry on the
// same instance does not try a Finish of its own beside the one in
// flight), then replays; the handler ran once, reported executed once.
func TestFinishWait(t *testing.T) {
	f, s, logs := newSlowFinish(t, idem.Options{FinishWait: 50 * time.Millisecond, StoreTimeout: 5 * time.Second})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	start := time.Now()
	w := send(h, req{key: "k", body: `{"item":1}`})
	took := time.Since(start)
	require.Equal(t, 201, w.Code)
	assert.Less(t, took, 2*time.Second, "the response waited for the Finish")
	ev, ok := f.obs.find(idem.EventStoreError)
	require.True(t, ok, "the slow Finish is reported")
	assert.Contains(t, ev.Err.Error(), "FinishWait")
	assert.Contains(t, logs.String(), "the finish goes on in the background")
	_, ok = f.obs.find(idem.EventExecuted)
	assert.False(t, ok, "not executed before the record is stored")

	start = time.Now()
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
	assert.Less(t, time.Since(start), 2*time.Second, "a retry on this instance does not try a second Finish beside the one in flight")
	assert.Equal(t, int32(1), s.finishes.Load())
	close(s.gate)
	drain(t, f.eng, "the Finish in flight lands")
	ex, ok := f.obs.find(idem.EventExecuted)
	require.True(t, ok)
	assert.Equal(t, idem.StateCompleted, ex.State)
	assert.Equal(t, 201, ex.Status)
	assert.Contains(t, logs.String(), "record finished after its response was sent")
	r := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, r.Code, r.Body.String())
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, w.Body.String(), r.Body.String())
	assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once")
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted))
}

// A Finish handed over (FinishWait) that then fails is tried again as a
// failed Finish is: the next attempt stores the record.
func TestFinishWaitThenFails(t *testing.T) {
	f, s, logs := newSlowFinish(t, idem.Options{FinishWait: 30 * time.Millisecond})
	s.failOnce.Store(true)
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	w := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, w.Code)
	close(s.gate) // the Finish in flight fails; the next gets through
	drain(t, f.eng)
	assert.GreaterOrEqual(t, s.finishes.Load(), int32(2))
	assert.Contains(t, logs.String(), "record finished by a later attempt")
	r := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, r.Code, r.Body.String())
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted))
}

// Drain waits for a Finish handed over (FinishWait), and when its context
// ends first, cancels it and reports it abandoned.
func TestFinishWaitDrainGivesUp(t *testing.T) {
	f, s, _ := newSlowFinish(t, idem.Options{FinishWait: 30 * time.Millisecond})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := f.eng.Drain(ctx)
	var de *idem.DrainError
	require.True(t, errors.As(err, &de), "Drain gave up: %v", err)
	assert.Equal(t, 1, de.Finishes)
	assert.Equal(t, 1, f.obs.count(idem.EventFinishAbandoned))
	drain(t, f.eng, "the cancelled Finish ended")
	assert.Equal(t, int32(1), s.finishes.Load(), "cancelled, not tried again")
}

// Without FinishWait (the default) the response waits for the Finish:
// records before reply.
func TestFinishWaitOff(t *testing.T) {
	f, s, _ := newSlowFinish(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	const hold = 100 * time.Millisecond
	start := time.Now()
	time.AfterFunc(hold, func() { close(s.gate) })
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	assert.GreaterOrEqual(t, time.Since(start), hold, "the response waited for the Finish")
	_, ok := f.obs.find(idem.EventStoreError)
	assert.False(t, ok)
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted))
}

// The Finishes handed over (FinishWait) store what their responses were,
// while the engine reuses each request's memory (the store is
// ContextBound) for the next ones.
func TestFinishWaitManyKeys(t *testing.T) {
	f, s, _ := newSlowFinish(t, idem.Options{FinishWait: 5 * time.Millisecond})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	const n = 20
	var bodies [n]string
	for i := range n {
		w := send(h, req{key: fmt.Sprintf("k%d", i), body: fmt.Sprintf(`{"item":%d}`, i)})
		require.Equal(t, 201, w.Code)
		bodies[i] = w.Body.String()
	}
	close(s.gate)
	drain(t, f.eng)
	assert.Equal(t, n, f.obs.count(idem.EventExecuted))
	for i := range n {
		r := send(h, req{key: fmt.Sprintf("k%d", i), body: fmt.Sprintf(`{"item":%d}`, i)})
		assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"), "key %d", i)
		assert.Equal(t, bodies[i], r.Body.String(), "key %d", i)
	}
	assert.Equal(t, int32(n), f.calls.Load())
}

// Under a policy that waits for a key in flight (InFlight.Wait), a retry
// on the instance whose Finish was handed over (FinishWait) waits for that
// Finish to land and replays, as a retry on another instance does (it
// waits on the PENDING record). It got 409 at once before (the review's
// TestReviewFinishWaitSameInstanceWaitPolicy).
func TestFinishWaitSameInstanceWaits(t *testing.T) {
	f, s, _ := newSlowFinish(t, idem.Options{FinishWait: 30 * time.Millisecond})
	spec := strictSpec()
	spec.InFlight.Wait = 3 * time.Second
	pol := mustCompile(t, spec)
	h := f.eng.Handler(pol, f.createOrder())
	other := newFixtureStore(t, f.store, f.store, idem.Options{})
	h2 := other.eng.Handler(pol, f.createOrder())
	first := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, first.Code)
	const hold = 300 * time.Millisecond
	start := time.Now()
	time.AfterFunc(hold, func() { close(s.gate) })

	type answer struct {
		code     int
		replayed string
		body     string
		took     time.Duration
	}
	serve := func(h http.Handler) answer {
		w := send(h, req{key: "k", body: `{"item":1}`})
		return answer{w.Code, w.Header().Get("Idempotent-Replayed"), w.Body.String(), time.Since(start)}
	}
	var wg sync.WaitGroup
	var same, elsewhere answer
	wg.Add(2)
	go func() { defer wg.Done(); same = serve(h) }()
	go func() { defer wg.Done(); elsewhere = serve(h2) }()
	wg.Wait()
	assert.Equal(t, 201, elsewhere.code, "another instance waits and replays")
	assert.Equal(t, 201, same.code, "the same instance waits for the Finish in flight and replays")
	assert.Equal(t, "true", same.replayed)
	assert.Equal(t, first.Body.String(), same.body)
	assert.GreaterOrEqual(t, same.took, hold, "it waited for the Finish to land")
	assert.Equal(t, int32(1), s.finishes.Load(), "no Finish of its own beside the one in flight")
	assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once")
	drain(t, f.eng)
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted))
}

// Once the wait's deadline passes with the Finish handed over still in
// flight, the retry on its instance is answered in flight (409), having
// waited InFlight.Wait.
func TestFinishWaitSameInstanceWaitRunsOut(t *testing.T) {
	f, s, _ := newSlowFinish(t, idem.Options{FinishWait: 30 * time.Millisecond})
	spec := strictSpec()
	const wait = 200 * time.Millisecond
	spec.InFlight.Wait = wait
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	start := time.Now()
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
	assert.GreaterOrEqual(t, time.Since(start), wait, "it waited out InFlight.Wait")
	assert.Equal(t, int32(1), s.finishes.Load(), "no Finish of its own beside the one in flight")
	close(s.gate)
	drain(t, f.eng)
	r := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, r.Code)
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
}

type finishTraceKey struct{}

// valueSeen records whether Finish saw the request's context value (a
// tracing or tenant-routing store wrapper reads it), on entry and, when
// hold is set, again after hold is closed.
type valueSeen struct {
	idem.Store
	hold                  chan struct{}
	finishes, seen, after atomic.Int32
}

func (s *valueSeen) ContextBound() {}

func (s *valueSeen) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	s.finishes.Add(1)
	if ctx.Value(finishTraceKey{}) != nil {
		s.seen.Add(1)
	}
	if s.hold != nil {
		<-s.hold
		if ctx.Value(finishTraceKey{}) != nil {
			s.after.Add(1)
		}
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

// With FinishWait on, the store's Finish gets the request's context values
// while the request waits for it, as without FinishWait (it got none
// before: the review's TestReviewFinishWaitDropsRequestValues). A Finish
// handed over loses them at the hand-over: the request goes on and ends,
// and its context's values may be reused by another request.
func TestFinishWaitRequestValues(t *testing.T) {
	for _, wait := range []time.Duration{0, time.Second} {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = ms.Close() })
		s := &valueSeen{Store: ms}
		f := newFixtureStore(t, ms, s, idem.Options{FinishWait: wait})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		ctx := context.WithValue(context.Background(), finishTraceKey{}, "span-1")
		require.Equal(t, 201, sendCtx(h, ctx, req{key: "k", body: `{"item":1}`}).Code)
		assert.Equal(t, int32(1), s.finishes.Load())
		assert.Equal(t, int32(1), s.seen.Load(), "FinishWait=%v: the store's Finish got the request's context values", wait)
	}

	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	s := &valueSeen{Store: ms, hold: make(chan struct{})}
	f := newFixtureStore(t, ms, s, idem.Options{FinishWait: 30 * time.Millisecond})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	ctx := context.WithValue(context.Background(), finishTraceKey{}, "span-1")
	require.Equal(t, 201, sendCtx(h, ctx, req{key: "k", body: `{"item":1}`}).Code)
	close(s.hold)
	drain(t, f.eng)
	assert.Equal(t, int32(1), s.seen.Load(), "on entry, while the request waited")
	assert.Zero(t, s.after.Load(), "none after the hand-over")
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted))
}

// New warns when FinishWait is set but not below the store timeout (it
// then changes nothing); it said nothing before.
func TestFinishWaitNotBelowStoreTimeoutWarns(t *testing.T) {
	for _, tc := range []struct {
		opts idem.Options
		warn bool
	}{
		{idem.Options{FinishWait: 5 * time.Second}, true}, // the default store timeout
		{idem.Options{FinishWait: time.Second, StoreTimeout: 500 * time.Millisecond}, true},
		{idem.Options{FinishWait: 100 * time.Millisecond}, false},
		{idem.Options{}, false},
	} {
		logs := &lockedBuffer{}
		tc.opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
		tc.opts.Principal = idem.Anonymous
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		idem.New(ms, tc.opts)
		_ = ms.Close()
		got := logs.String()
		if tc.warn {
			assert.Contains(t, got, "level=WARN", "FinishWait %v, StoreTimeout %v", tc.opts.FinishWait, tc.opts.StoreTimeout)
			assert.Contains(t, got, "Options.FinishWait is not below the store timeout")
		} else {
			assert.Empty(t, got, "FinishWait %v, StoreTimeout %v", tc.opts.FinishWait, tc.opts.StoreTimeout)
		}
	}
}
