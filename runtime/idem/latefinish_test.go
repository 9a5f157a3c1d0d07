package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
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

// drain waits for the engine's background work, at most 10 seconds: a
// release that hangs fails the test there, not at go test's timeout.
func drain(t testing.TB, e *idem.Engine, msgAndArgs ...any) {
	t.Helper()
	drainWithin(t, e, 10*time.Second, msgAndArgs...)
}

// drainWithin is drain waiting at most d.
func drainWithin(t testing.TB, e *idem.Engine, d time.Duration, msgAndArgs ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	require.NoError(t, e.Drain(ctx), msgAndArgs...)
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
	return newFlakyAt(t, opts, nil)
}

// storeClock is a memstore's clock that moves only when the test advances
// it: a lease runs out on the store at once, without sleeping past it
// (the engine's late-finish schedule stays on the wall clock).
type storeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newStoreClock() *storeClock { return &storeClock{t: time.Now()} }

func (c *storeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *storeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newFlakyAt is newFlaky over a memstore on clk (nil: its own clock).
func newFlakyAt(t *testing.T, opts idem.Options, clk *storeClock) (*fixture, *flakyFinish, *lockedBuffer) {
	t.Helper()
	mo := memstore.Options{SweepInterval: -1}
	if clk != nil {
		mo.Now = clk.now
	}
	ms := memstore.New(mo)
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

// A 5xx under FailuresRetry is finished FAILED without a response: a later
// attempt that stores it frees the key, logged at INFO as a release, not at
// WARN as a record finished (nothing is replayed from it).
func TestLateFinishFreesKey(t *testing.T) {
	f, fs, logs := newFlaky(t, idem.Options{})
	var calls atomic.Int32
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	require.Equal(t, http.StatusBadGateway, send(h, req{key: "k", body: `{"item":1}`}).Code)
	fs.down.Store(false)
	require.Eventually(t, func() bool { return f.obs.count(idem.EventExecuted) == 1 }, 10*time.Second, 10*time.Millisecond,
		"a later attempt stores the failure")
	ex, _ := f.obs.find(idem.EventExecuted)
	assert.Equal(t, idem.StateFailed, ex.State)
	assert.Equal(t, http.StatusBadGateway, ex.Status)
	out := logs.String()
	assert.Regexp(t, `level=INFO msg="idem: key released by a later attempt, after the store failed at finish" operation=createOrder key=k`, out)
	assert.NotContains(t, out, "record finished by a later attempt")
	require.Equal(t, http.StatusBadGateway, send(h, req{key: "k", body: `{"item":1}`}).Code)
	assert.Equal(t, int32(2), calls.Load(), "the key was free: the retry ran")
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
	// Not retried, so abandoned at once, after the request's store-error.
	kinds := f.obs.kinds()
	require.GreaterOrEqual(t, len(kinds), 2)
	assert.Equal(t, []idem.EventKind{idem.EventStoreError, idem.EventFinishAbandoned}, kinds[:2])
	ab, _ := f.obs.find(idem.EventFinishAbandoned)
	assert.Equal(t, idem.Event{Kind: idem.EventFinishAbandoned, Operation: "createOrder", Key: "k", Protected: true,
		State: idem.StateCompleted, Status: 201, Err: errStoreDown}, ab)
}

// The retries stop after FinishRetryFor has passed on the engine's clock
// (here long before it passes on the wall clock): the key stays in flight
// until its lease runs out. The clock stands still
// while the test counts the attempts, so that a loaded machine running the
// backoff late cannot use up FinishRetryFor before a second retry.
func TestLateFinishGivesUp(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	const retryFor = time.Minute
	f, fs, logs := newFlaky(t, idem.Options{FinishRetryFor: retryFor, Now: clock})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	require.Eventually(t, func() bool { return fs.finishes.Load() > 3 }, 20*time.Second, 10*time.Millisecond,
		"tried again, more than once, within FinishRetryFor")
	assert.NotContains(t, logs.String(), "gave up")
	mu.Lock()
	now = now.Add(retryFor)
	mu.Unlock()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "gave up finishing the record") },
		20*time.Second, 10*time.Millisecond, "FinishRetryFor passed on the engine's clock")
	n := fs.finishes.Load()
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, n, fs.finishes.Load(), "no attempt after giving up")
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
	_, ok := f.obs.find(idem.EventExecuted)
	assert.False(t, ok)
	// The run is counted all the same: executed + fenced + finish-abandoned.
	ab, ok := f.obs.find(idem.EventFinishAbandoned)
	require.True(t, ok, "giving up is observed")
	assert.Equal(t, idem.Event{Kind: idem.EventFinishAbandoned, Operation: "createOrder", Key: "k", Protected: true,
		State: idem.StateCompleted, Status: 201, Err: errStoreDown}, ab)
	assert.Equal(t, 1, f.obs.count(idem.EventFinishAbandoned))
	assert.Equal(t, "finish-abandoned", idem.EventFinishAbandoned.String())
}

// A late attempt after another request took the key over (its lease ran
// out; served by another instance: one served by the same instance tries
// the pending Finish first, and is answered in flight while it fails) is
// fenced and changes nothing: the record keeps the second run's response.
func TestLateFinishFenced(t *testing.T) {
	clk := newStoreClock()
	f, fs, _ := newFlakyAt(t, idem.Options{FinishRetryFor: 10 * time.Second}, clk)
	spec := strictSpec()
	spec.InFlight.Lease = 50 * time.Millisecond
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	other := newFixtureStore(t, f.store, f.store, idem.Options{})
	h2 := other.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	clk.advance(60 * time.Millisecond) // the lease runs out
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 409, idem.CodeKeyInUse)
	second := send(h2, req{key: "k", body: `{"item":1}`})
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
	idem.UseLateBytes(f.eng, idem.MaxFinishRetryBytes-10) // a response of ~40 bytes does not fit
	require.Equal(t, 201, send(h, req{key: "k1", body: `{"item":1}`}).Code)
	assert.Contains(t, logs.String(), "store failed at finish")
	assert.NotContains(t, logs.String(), "background")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, int32(1), fs.finishes.Load(), "not retried")
	assert.Equal(t, 1, f.obs.count(idem.EventFinishAbandoned), "not retried: abandoned at once")

	idem.UseLateBytes(f.eng, -(idem.MaxFinishRetryBytes - 10))
	fs.first.Store(0) // fail the next claim's Finish
	require.Equal(t, 201, send(h, req{key: "k2", body: `{"item":1}`}).Code)
	assert.Contains(t, logs.String(), "trying again in the background")
	assert.Equal(t, 1, f.obs.count(idem.EventFinishAbandoned), "retried: not abandoned (yet)")
}

// txFlaky is fakeTx whose Finish (outside the transaction) fails while down.
type txFlaky struct {
	*fakeTx
	down       atomic.Bool
	beginTxErr error
	// commitLies: the commit takes effect, then reports an error (a
	// connection that broke during COMMIT).
	commitLies bool
	// downFinishes counts the Finish calls that failed while down.
	downFinishes atomic.Int32
}

func (s *txFlaky) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if s.down.Load() {
		s.downFinishes.Add(1)
		return errStoreDown
	}
	return s.fakeTx.Finish(ctx, key, token, st, resp)
}

func (s *txFlaky) BeginTx(ctx context.Context, key string, token idem.Token) (context.Context, func(idem.State, []byte) error, func(), error) {
	if s.beginTxErr != nil {
		return nil, nil, nil, s.beginTxErr
	}
	txctx, commit, rollback, err := s.fakeTx.BeginTx(ctx, key, token)
	if s.commitLies {
		c := commit
		commit = func(st idem.State, resp []byte) error {
			if err := c(st, resp); err != nil {
				return err
			}
			return errors.New("connection reset during COMMIT")
		}
	}
	return txctx, commit, rollback, err
}

func newTxFlaky(t *testing.T) (*fixture, *txFlaky, *lockedBuffer) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	s := &txFlaky{fakeTx: &fakeTx{Store: ms}}
	logs := &lockedBuffer{}
	f := newFixtureStore(t, ms, s, idem.Options{Transactional: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return f, s, logs
}

func (o *events) count(k idem.EventKind) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, e := range o.evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// A transaction whose commit failed because the request ended reports its
// EventExecuted (FAILED, CodeRequestEnded) at once; when the release of the
// key failed too and succeeds later in the background, a second
// EventExecuted is reported for the same run.
func TestLateReleaseAfterEndedCommit(t *testing.T) {
	f, s, logs := newTxFlaky(t)
	s.commitErr = context.Canceled
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(201)
		s.down.Store(true) // the store fails as the request finishes
		cancel()           // and the client goes away
	}))
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, 1, f.obs.count(idem.EventExecuted), "the run is reported once")
	// The release is made in the background, its first attempt at once:
	// the store comes back once that attempt failed.
	require.Eventually(t, func() bool { return s.downFinishes.Load() > 0 }, 5*time.Second, time.Millisecond)
	s.down.Store(false)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "key released by a later attempt") },
		5*time.Second, 10*time.Millisecond, "the background release succeeds")
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted), "the run is still reported once")
}

// BeginTx failed: the handler never ran (503). The release of the key
// failed and succeeded later: an EventExecuted (Protected, FAILED) is
// reported for a handler that never ran.
func TestLateReleaseAfterBeginTxFailure(t *testing.T) {
	for _, down := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync release", true: "late release"}[down], func(t *testing.T) {
			f, s, _ := newTxFlaky(t)
			s.beginTxErr = errors.New("pool exhausted")
			s.down.Store(down)
			h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
			requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 503, idem.CodeStoreUnavailable)
			s.down.Store(false)
			time.Sleep(time.Second)
			assert.Equal(t, int32(0), f.calls.Load())
			assert.Equal(t, 0, f.obs.count(idem.EventExecuted), "no handler ran: no EventExecuted")
		})
	}
}

// Giving up the release of a key whose claim ran no handler (its
// transaction could not begin; in the background, whatever
// FinishRetryFor) is logged, not observed as a run abandoned.
func TestLateReleaseGivesUp(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	s := &txFlaky{fakeTx: &fakeTx{Store: ms}, beginTxErr: errors.New("pool exhausted")}
	s.down.Store(true)
	logs := &lockedBuffer{}
	f := newFixtureStore(t, ms, s, idem.Options{Transactional: true, FinishRetryFor: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 503, idem.CodeStoreUnavailable)
	drain(t, f.eng)
	assert.Contains(t, logs.String(), "gave up releasing the claim whose transaction could not begin")
	assert.Equal(t, 0, f.obs.count(idem.EventFinishAbandoned))
	assert.Equal(t, 1, f.obs.count(idem.EventReleaseAbandoned), "observed as a release given up")
	assert.Equal(t, int32(0), f.calls.Load())
}

// The commit took effect but reported an error; the release (fenced, since
// the record is COMPLETED) failed on the store and is retried: the late
// attempt finds the record COMPLETED under the claim's own token, reports
// the run executed, and no takeover (no EventFenced).
func TestLateReleaseAfterCommitTookEffect(t *testing.T) {
	f, s, logs := newTxFlaky(t)
	s.commitLies = true
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(201)
		s.down.Store(true)
	}))
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 503, idem.CodeStoreUnavailable)
	// The release is made in the background, its first attempt at once:
	// the store comes back once that attempt failed.
	require.Eventually(t, func() bool { return s.downFinishes.Load() > 0 }, 5*time.Second, time.Millisecond)
	s.down.Store(false)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "a commit reported failed had taken effect") },
		5*time.Second, 10*time.Millisecond, "the background release is fenced: the record holds the commit's result")
	r := send(h, req{key: "k", body: `{"item":1}`})
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"), "the commit took effect")
	assert.Equal(t, 0, f.obs.count(idem.EventFenced), "no takeover happened")
	assert.NotContains(t, logs.String(), "late completion rejected", "no takeover happened")
	ex, ok := f.obs.find(idem.EventExecuted)
	require.True(t, ok, "the run that took effect is counted executed (runs = executed + fenced + finish-abandoned)")
	assert.Equal(t, idem.StateCompleted, ex.State)
	assert.Equal(t, 201, ex.Status)
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted))
	assert.Contains(t, logs.String(), "a commit reported failed had taken effect")
}

// The commit took effect but its reply was lost, and the store answers the
// release at once (fenced: the record is COMPLETED under the claim's own
// token): the run is reported executed once the release finds the record.
func TestCommitReplyLostCountsExecuted(t *testing.T) {
	f, s, _ := newTxFlaky(t)
	s.commitLies = true
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(201)
	}))
	requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 503, idem.CodeStoreUnavailable)
	drain(t, f.eng)
	require.Equal(t, 1, f.obs.count(idem.EventExecuted), "the run that took effect is counted executed")
	assert.Equal(t, 1, f.obs.count(idem.EventStoreError), "and its request's store-error")
	r := send(h, req{key: "k", body: `{"item":1}`})
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted), "a replay is no run")
	assert.Equal(t, int32(1), f.calls.Load())

	// A commit that failed for real (rolled back) is not counted.
	s.commitLies = false
	s.commitErr = errors.New("serialization failure")
	requireProblem(t, send(h, req{key: "k2", body: `{"item":1}`}), 503, idem.CodeStoreUnavailable)
	drain(t, f.eng)
	assert.Equal(t, 1, f.obs.count(idem.EventExecuted))
}

// rfFlaky is a ReadFirst store whose Finish fails while down.
type rfFlaky struct {
	readFirstStore
	down atomic.Bool
	ok   atomic.Bool // a Finish succeeded
}

func (s *rfFlaky) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if s.down.Load() {
		return errStoreDown
	}
	err := s.readFirstStore.Finish(ctx, key, token, st, resp)
	if err == nil {
		s.ok.Store(true)
	}
	return err
}

// Over a ReadFirst store, a key finished by a later attempt is read first
// by its next retry, as one finished at once is. Without an Observer it is
// not: Call.start is zero, and the hint expires a window after year 1.
func TestLateFinishReadFirst(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "finished at once", true: "finished later"}[late], func(t *testing.T) {
			cs := newCountingStore(t, nil)
			s := &rfFlaky{readFirstStore: readFirstStore{cs}}
			s.down.Store(late)
			eng := idem.New(s, idem.Options{Principal: idem.Anonymous, Logger: discardLogger}) // no Observer
			f := &fixture{t: t}
			h := eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
			require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
			s.down.Store(false)
			require.Eventually(t, s.ok.Load, 5*time.Second, 10*time.Millisecond)
			_, gets := cs.calls()
			r := send(h, req{key: "k", body: `{"item":1}`})
			require.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
			_, gets2 := cs.calls()
			assert.Equal(t, gets+1, gets2, "the retry read first (Get)")
		})
	}
}

// The same with an Observer: the hint is kept (root cause: Call.start is
// set only with an Observer).
func TestLateFinishReadFirstWithObserver(t *testing.T) {
	cs := newCountingStore(t, nil)
	s := &rfFlaky{readFirstStore: readFirstStore{cs}}
	s.down.Store(true)
	f := newFixtureStore(t, cs.ms, s, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	s.down.Store(false)
	require.Eventually(t, s.ok.Load, 5*time.Second, 10*time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	_, gets := cs.calls()
	r := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	_, gets2 := cs.calls()
	assert.Equal(t, gets+1, gets2, "the retry read first (Get)")
}

type routeKey struct{}

// routeInfo is like chi's RouteContext: put in the request's context by a
// router, and reset and reused (sync.Pool) once the request is over.
type routeInfo struct{ pattern string }

type patternObs struct{ seen chan bool }

func (o patternObs) Observe(ctx context.Context, e idem.Event) {
	if e.Kind == idem.EventExecuted {
		_, ok := ctx.Value(routeKey{}).(*routeInfo)
		o.seen <- ok
	}
}

// A router's per-request context value (chi pools its route context) is
// reused once the request is over: the events of a later attempt come with
// a context of their own, without the request's values, so an Observer
// never reads one the router reused.
func TestLateEventContext(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	fs := &flakyFinish{Store: ms}
	fs.down.Store(true)
	obs := patternObs{seen: make(chan bool, 4)}
	eng := idem.New(fs, idem.Options{Principal: idem.Anonymous, Logger: discardLogger, Observer: obs})
	f := &fixture{t: t}
	inner := eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	router := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := &routeInfo{pattern: "/orders"}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, ri)))
		ri.pattern = "" // back to the pool
	})
	require.Equal(t, 201, send(router, req{key: "k", body: `{"item":1}`}).Code)
	fs.down.Store(false)
	select {
	case has := <-obs.seen:
		assert.False(t, has, "the event's context carries none of the request's values")
	case <-time.After(5 * time.Second):
		t.Fatal("no late EventExecuted")
	}
}

// FinishRetryFor below the first backoff: one more attempt is still made,
// as the request's log says.
func TestLateFinishTinyRetryFor(t *testing.T) {
	f, fs, logs := newFlaky(t, idem.Options{FinishRetryFor: 20 * time.Millisecond})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	fs.down.Store(false)
	time.Sleep(300 * time.Millisecond)
	assert.Contains(t, logs.String(), "trying again in the background")
	assert.Greater(t, fs.finishes.Load(), int32(1), "tried again, as the log says")
}

// A response over Response.MaxBytes finished at once reports
// EventNotReplayable (and logs it); one finished by a later attempt does not.
func TestLateFinishNotReplayable(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "at once", true: "later"}[late], func(t *testing.T) {
			f, fs, _ := newFlaky(t, idem.Options{})
			fs.down.Store(late)
			spec := strictSpec()
			spec.Response.MaxBytes = 8
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
			fs.down.Store(false)
			require.Eventually(t, func() bool { return f.obs.count(idem.EventExecuted) == 1 }, 5*time.Second, 10*time.Millisecond)
			assert.Equal(t, 1, f.obs.count(idem.EventNotReplayable))
		})
	}
}

// Drain waits for the Finish calls tried again in the background, and
// wakes the retries waiting out their backoff: each tries again at once,
// and one that fails goes on with its schedule (another Drain wakes it
// again). The backoff here is an hour, so only a wake gets an attempt
// before the test's deadlines.
func TestDrainWakesRetries(t *testing.T) {
	f, fs, _ := newFlaky(t, idem.Options{FinishRetryFor: 10 * time.Hour})
	idem.SetLateBackoff(f.eng, time.Hour, time.Hour)
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	drain(t, f.eng) // nothing to wait for
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	require.Equal(t, int32(1), fs.finishes.Load())

	first := make(chan error, 1)
	go func() { first <- f.eng.Drain(context.Background()) }()
	require.Eventually(t, func() bool { return fs.finishes.Load() == 2 }, 20*time.Second, 5*time.Millisecond,
		"Drain woke the retry: it tried again at once")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int32(2), fs.finishes.Load(), "it failed, and waits out its backoff again")
	select {
	case err := <-first:
		t.Fatalf("Drain returned %v with the store still down", err)
	default:
	}

	fs.down.Store(false)
	drainWithin(t, f.eng, 20*time.Second, "the store is back: the woken retry finishes the record")
	require.NoError(t, <-first)
	assert.Equal(t, int32(3), fs.finishes.Load())
	_, ok := f.obs.find(idem.EventExecuted)
	assert.True(t, ok, "the record was finished before Drain returned")
	r := send(h, req{key: "k", body: `{"item":1}`})
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
}

// Drain may be called while the engine serves requests whose Finish fails
// (a retry beginning as Drain waits): it neither races nor panics, and
// returns once the retries under way end.
func TestDrainWhileServing(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	fs := &failingStore{Store: ms, finishErr: errStoreDown}
	f := newFixtureStore(t, ms, fs, idem.Options{FinishRetryFor: 150 * time.Millisecond})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				send(h, req{key: fmt.Sprintf("k-%d-%d", g, i), body: `{"item":1}`})
			}
		}()
	}
	for range 20 {
		drain(t, f.eng, "the retries give up after FinishRetryFor")
	}
	wg.Wait()
	drain(t, f.eng)
}

// An engine clock that stands still (a test's frozen Options.Now) does not
// keep a retry going while the store is down: FinishRetryFor also counts
// on the wall clock, and the retry gives up once either has passed it.
func TestLateFinishFrozenClock(t *testing.T) {
	frozen := time.Unix(1_700_000_000, 0)
	const retryFor = 300 * time.Millisecond
	f, fs, logs := newFlaky(t, idem.Options{FinishRetryFor: retryFor, Now: func() time.Time { return frozen }})
	idem.SetLateBackoff(f.eng, 10*time.Millisecond, 20*time.Millisecond) // every pause well within FinishRetryFor
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	drain(t, f.eng, "the retry gave up after FinishRetryFor on the wall clock")
	require.Contains(t, logs.String(), "gave up finishing the record")
	assert.Greater(t, fs.finishes.Load(), int32(1), "tried again before giving up")
	m := regexp.MustCompile(`gave up finishing the record.* after=(\S+)`).FindStringSubmatch(logs.String())
	require.NotNil(t, m, logs.String())
	after, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after, retryFor-20*time.Millisecond, "the time it tried, on the wall clock")
	n := fs.finishes.Load()
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, n, fs.finishes.Load(), "no attempt after giving up")
}

// downFinish fails every Finish while down.
type downFinish struct {
	idem.Store
	down atomic.Bool
}

func (s *downFinish) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

// MaxFinishRetries Finish calls are retried at once, not one more; Drain
// wakes them all once the store is back, and the bound counts only the
// retries under way.
func TestLateFinishMaxRetries(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	ds := &downFinish{Store: ms}
	ds.down.Store(true)
	logs := &lockedBuffer{}
	f := newFixtureStore(t, ms, ds, idem.Options{FinishRetryFor: 10 * time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	idem.SetLateBackoff(f.eng, time.Hour, time.Hour) // only Drain wakes them
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	const retrying = "trying again in the background"
	for i := range idem.MaxFinishRetries {
		require.Equal(t, 201, send(h, req{key: fmt.Sprintf("k%d", i), body: `{"item":1}`}).Code)
	}
	require.Equal(t, idem.MaxFinishRetries, strings.Count(logs.String(), retrying))
	require.Equal(t, 201, send(h, req{key: "over", body: `{"item":1}`}).Code)
	assert.Equal(t, idem.MaxFinishRetries, strings.Count(logs.String(), retrying), "the one past the bound is not retried")
	assert.Contains(t, logs.String(), `msg="idem: store failed at finish" operation=createOrder key=over`)

	ds.down.Store(false)
	drainWithin(t, f.eng, 30*time.Second, "Drain wakes them all, the store is back")
	assert.Equal(t, idem.MaxFinishRetries, f.obs.count(idem.EventExecuted), "each finished by a later attempt")

	ds.down.Store(true)
	require.Equal(t, 201, send(h, req{key: "again", body: `{"item":1}`}).Code)
	assert.Equal(t, idem.MaxFinishRetries+1, strings.Count(logs.String(), retrying), "retried: none is under way")
	ds.down.Store(false)
	drain(t, f.eng)
}

// With the default FinishRetryFor, a store outage longer than the lease
// does not throw the record away: nobody can take the key over while the
// store is down, and a late Finish is fenced by its token, so the engine
// goes on trying (for the operation's window, at most
// DefaultFinishRetryFor) and the record holds the response once the store
// answers again; a retry then gets the replay, the handler having run once.
func TestLateFinishOutlastsLease(t *testing.T) {
	f, fs, logs := newFlaky(t, idem.Options{})
	spec := strictSpec()
	spec.InFlight.Lease = 100 * time.Millisecond
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	w := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, w.Code)
	time.Sleep(600 * time.Millisecond) // the outage lasts six leases
	fs.down.Store(false)
	require.Eventually(t, func() bool { return f.obs.count(idem.EventExecuted) == 1 }, 10*time.Second, 10*time.Millisecond,
		"a later attempt, after the lease, finishes the record")
	assert.Zero(t, f.obs.count(idem.EventFinishAbandoned), "not abandoned at the lease")
	assert.NotContains(t, logs.String(), "gave up")
	r := send(h, req{key: "k", body: `{"item":1}`})
	require.Equal(t, 201, r.Code, r.Body.String())
	assert.Equal(t, "true", r.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once")
}
