package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// errReset is what a Begin whose reply was lost with its connection
// returns: the store does not know whether the server claimed the key.
var errReset = errors.New("read tcp 127.0.0.1:6379: connection reset by peer")

// lostReply is a store (not in-process: no LocalReader) whose Begin makes
// the claim and then fails as a lost reply does: the connection broke
// after the server committed the claim.
type lostReply struct{ idem.Store }

func (s lostReply) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if _, err := s.Store.Begin(ctx, req); err != nil {
		return idem.BeginResult{}, err
	}
	return idem.BeginResult{}, errReset
}

// A Begin whose reply was lost may have claimed the key although the
// request is alive: the client is told the store failed (503, nothing
// ran), and the claim is released in the background, so its retry is not
// IDEMPOTENCY_KEY_IN_USE for a whole lease (before: 409).
func TestLostBeginReplyClaimReleased(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	f := newFixtureStore(t, ms, lostReply{ms}, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	w := send(h, req{key: "k", body: `{"item":"book"}`})
	requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
	assert.Equal(t, int32(0), f.calls.Load())
	drain(t, f.eng, "the release is done in the background")
	// The retry reaches an instance whose store answers (the same records).
	f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	retry := send(f2.eng.Handler(mustCompile(t, spec), f2.createOrder()), req{key: "k", body: `{"item":"book"}`})
	require.Equal(t, http.StatusCreated, retry.Code, "the claim was released: %s", retry.Body)
	assert.Equal(t, int32(1), f2.calls.Load())
}

// finishGate counts a store's Finish calls and holds each until gate,
// when set, is closed, or its context ends.
type finishGate struct {
	gate     chan struct{}
	finishes atomic.Int64
}

// pass counts a Finish and waits for gate (if set): nil once it is
// closed, the context's error if that ends first.
func (g *finishGate) pass(ctx context.Context) error {
	g.finishes.Add(1)
	if g.gate != nil {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// markedStore is a store whose Begin fails with err (after waiting for
// its context to end, when hang is set) without claiming, and whose
// Finish passes its finishGate.
type markedStore struct {
	idem.Store
	err  error
	hang bool
	finishGate
}

func (s *markedStore) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if s.hang {
		<-ctx.Done()
		if s.err == nil {
			return idem.BeginResult{}, ctx.Err()
		}
	}
	return idem.BeginResult{}, s.err
}

func (s *markedStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if err := s.pass(ctx); err != nil {
		return err
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

// A Begin error its store marked ErrNothingDone (no connection could be
// had, its context was done before it was sent) is released neither when
// it came with the request's end or the store timeout (before: a release
// was tried, a Finish on the struggling store for nothing) nor otherwise;
// an unmarked one is.
func TestNothingDoneNotReleased(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		hang     bool
		ended    bool
		releases int64
	}{
		{"ended, marked", idem.NothingDone(fmt.Errorf("store: begin: %w", context.Canceled)), false, true, 0},
		{"store timeout, marked", idem.NothingDone(errors.New("pool: acquire: timeout")), true, false, 0},
		{"refused, marked", idem.NothingDone(errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")), false, false, 0},
		{"reset, not marked", errReset, false, false, 1},
		{"ended, not marked", context.Canceled, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			s := &markedStore{Store: ms, err: tc.err, hang: tc.hang}
			f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, StoreTimeout: 20 * time.Millisecond})
			h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
			ctx := context.Background()
			if tc.ended {
				ctx = endedCtx(false)
			}
			w := sendCtx(h, ctx, req{key: "k", body: `{"item":1}`})
			assert.NotEqual(t, http.StatusCreated, w.Code)
			drain(t, f.eng)
			assert.Equal(t, tc.releases, s.finishes.Load(), "releases tried")
			assert.True(t, errors.Is(tc.err, idem.ErrNothingDone) == (tc.releases == 0))
		})
	}
}

// The releases after ambiguous Begin errors take at most
// MaxLostReplyReleases of the MaxClaimReleases slots: with those taken
// (the store failing fast, its releases hanging), the release of a Begin
// cut by its request's end still runs. The releases not tried are logged,
// at most once per interval, with how many since the last log and in all
// (before: not tried, silently).
func TestLostReplyReleasesBounded(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	gate := make(chan struct{})
	s := &markedStore{Store: ms, err: errReset, finishGate: finishGate{gate: gate}}
	var logged lockedBuffer
	f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, StoreTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
	idem.SetReleaseDropLogEvery(f.eng, time.Hour)
	t.Cleanup(func() {
		drain(t, f.eng)
	})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	for i := range idem.MaxLostReplyReleases + 3 {
		requireProblem(t, send(h, req{key: fmt.Sprintf("lost-%d", i), body: `{"item":1}`}), http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
	}
	require.Eventually(t, func() bool { return s.finishes.Load() == idem.MaxLostReplyReleases }, 10*time.Second, time.Millisecond,
		"releases under way: %d", s.finishes.Load())
	const dropped = "claim release not tried"
	assert.Equal(t, 1, strings.Count(logged.String(), dropped), "three not tried, logged once: %s", logged.String())
	assert.Contains(t, logged.String(), "MaxLostReplyReleases")
	assert.Contains(t, logged.String(), "not_tried=1 not_tried_total=1")

	// A Begin cut by its request's end gets a slot of the other half.
	s.err = nil
	s.hang = true
	sendCtx(h, endedCtx(false), req{key: "cut", body: `{"item":1}`})
	require.Eventually(t, func() bool { return s.finishes.Load() == idem.MaxLostReplyReleases+1 }, 10*time.Second, time.Millisecond,
		"the cut Begin's release is tried")
	assert.Equal(t, 1, strings.Count(logged.String(), dropped))

	// Once the interval has passed, the next one not tried is logged
	// with the count since the last log.
	s.err, s.hang = errReset, false
	idem.SetReleaseDropLogEvery(f.eng, 0)
	send(h, req{key: "lost-last", body: `{"item":1}`})
	assert.Equal(t, 2, strings.Count(logged.String(), dropped))
	assert.Contains(t, logged.String(), "not_tried=3 not_tried_total=4")
	close(gate)
}

// claimThenHang is a store whose Begin makes the claim and then does not
// answer until its context ends (the engine's StoreTimeout): a reply that
// came too late.
type claimThenHang struct{ idem.Store }

func (s claimThenHang) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if _, err := s.Store.Begin(ctx, req); err != nil {
		return idem.BeginResult{}, err
	}
	<-ctx.Done()
	return idem.BeginResult{}, ctx.Err()
}

// Under FailOpen, a store failure that may leave the key claimed (a Begin
// whose reply was lost after the server claimed, one cut by StoreTimeout
// after it landed, one that acquired the key before BeginTx failed) leads
// to an unprotected run: that claim stays in place while the run goes on,
// so the client's retry (it timed out, and reaches an instance whose store
// answers) is IDEMPOTENCY_KEY_IN_USE instead of a second, concurrent run;
// the claim is released once the run ends (it returned, or panicked), and
// the next retry runs. Before, the claim was released while the handler
// ran (the Begins' ~100ms later, BeginTx's before it started): the retry
// claimed the key and the handler ran twice at once.
func TestFailOpenClaimHeldWhileRunning(t *testing.T) {
	stores := map[string]func(ms *memstore.Store) (idem.Store, idem.Options){
		"lost reply": func(ms *memstore.Store) (idem.Store, idem.Options) { return lostReply{ms}, idem.Options{} },
		"cut by StoreTimeout": func(ms *memstore.Store) (idem.Store, idem.Options) {
			return claimThenHang{ms}, idem.Options{StoreTimeout: 20 * time.Millisecond}
		},
		"BeginTx failed": func(ms *memstore.Store) (idem.Store, idem.Options) {
			return &txFlaky{fakeTx: &fakeTx{Store: ms}, beginTxErr: errors.New("pool exhausted")}, idem.Options{Transactional: true}
		},
	}
	for name, mk := range stores {
		for _, panics := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, panics=%v", name, panics), func(t *testing.T) {
				ms := memstore.New(memstore.Options{SweepInterval: -1})
				t.Cleanup(func() { _ = ms.Close() })
				s, opts := mk(ms)
				opts.Principal, opts.DisableHeartbeat, opts.FailOpen = idem.Anonymous, true, true
				f := newFixtureStore(t, ms, s, opts)
				idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
				var runs, running, most atomic.Int32
				started, gate := make(chan struct{}), make(chan struct{})
				handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := running.Add(1)
					defer running.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					if runs.Add(1) == 1 {
						close(started)
						<-gate
						if panics {
							panic("kaboom")
						}
					}
					w.WriteHeader(http.StatusCreated)
				})
				spec := strictSpec()
				spec.InFlight.Lease = time.Hour
				h := f.eng.Handler(mustCompile(t, spec), handler)
				first := make(chan int, 1)
				go func() {
					w := httptest.NewRecorder()
					defer func() {
						if v := recover(); v != nil {
							assert.Equal(t, "kaboom", v)
						}
						first <- w.Code
					}()
					hr := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":1}`))
					hr.Header.Set("Content-Type", "application/json")
					hr.Header.Set("Idempotency-Key", "k")
					h.ServeHTTP(w, hr)
				}()
				<-started
				drain(t, f.eng, "no release under way while the run goes on")

				// The client's retry reaches an instance whose store answers.
				f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
				h2 := f2.eng.Handler(mustCompile(t, spec), handler)
				requireProblem(t, send(h2, req{key: "k", body: `{"item":1}`}), http.StatusConflict, idem.CodeKeyInUse)
				assert.Equal(t, int32(1), runs.Load(), "the retry did not run while the unprotected run goes on")

				close(gate)
				want := http.StatusCreated
				if panics {
					want = http.StatusInternalServerError
				}
				assert.Equal(t, want, <-first)
				drain(t, f.eng, "the release is done in the background")
				w := send(h2, req{key: "k", body: `{"item":1}`})
				require.Equal(t, http.StatusCreated, w.Code, "released once the run ended: %s", w.Body)
				assert.Equal(t, int32(2), runs.Load())
				assert.Equal(t, int32(1), most.Load(), "never two runs at once")
			})
		}
	}
}

// The claim an unprotected run holds (FailOpen, BeginTx failed) may run
// out during a long run, and another request take the key over and
// complete it: its release at the run's end is fenced, and reports
// nothing (no EventFenced, no "late completion rejected": no protected
// run lost its claim); the other request's record stays.
func TestFailOpenHeldClaimTakenOver(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	logs := &lockedBuffer{}
	s := &txFlaky{fakeTx: &fakeTx{Store: ms}, beginTxErr: errors.New("pool exhausted")}
	f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, FailOpen: true, Transactional: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	spec := strictSpec()
	spec.InFlight.Lease = 50 * time.Millisecond
	started, gate := make(chan struct{}), make(chan struct{})
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-gate
		w.WriteHeader(http.StatusAccepted)
	}))
	first := make(chan int, 1)
	go func() { first <- send(h, req{key: "k", body: `{"item":1}`}).Code }()
	<-started
	time.Sleep(2 * spec.InFlight.Lease)
	f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	h2 := f2.eng.Handler(mustCompile(t, spec), f2.createOrder())
	require.Equal(t, http.StatusCreated, send(h2, req{key: "k", body: `{"item":1}`}).Code, "took the expired claim over")
	close(gate)
	assert.Equal(t, http.StatusAccepted, <-first)
	drain(t, f.eng, "the release (in the background) is done")
	assert.Zero(t, f.obs.count(idem.EventFenced), "events: %v", f.obs.kinds())
	assert.NotContains(t, logs.String(), "late completion rejected")
	w := send(h2, req{key: "k", body: `{"item":1}`})
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "the other request's record stays")
	assert.Equal(t, int32(1), f2.calls.Load())
}

// An Observer that panics on the EventExecuted of FailOpen's unprotected
// run (reported by Finish when the handler returned, by End when it
// panicked) does not keep the claim held through that run from being
// released: a retry on an instance whose store answers runs (before: the
// release came after Observe, and was skipped; the retry was
// IDEMPOTENCY_KEY_IN_USE for the claim's lease).
func TestFailOpenObserverPanicReleasesHeldClaim(t *testing.T) {
	stores := map[string]func(ms *memstore.Store) (idem.Store, idem.Options){
		"lost reply": func(ms *memstore.Store) (idem.Store, idem.Options) { return lostReply{ms}, idem.Options{} },
		"BeginTx failed": func(ms *memstore.Store) (idem.Store, idem.Options) {
			return &txFlaky{fakeTx: &fakeTx{Store: ms}, beginTxErr: errors.New("pool exhausted")}, idem.Options{Transactional: true}
		},
	}
	for name, mk := range stores {
		for _, panics := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, handler panics=%v", name, panics), func(t *testing.T) {
				ms := memstore.New(memstore.Options{SweepInterval: -1})
				t.Cleanup(func() { _ = ms.Close() })
				s, opts := mk(ms)
				opts.Principal, opts.DisableHeartbeat, opts.FailOpen = idem.Anonymous, true, true
				opts.Observer = idem.ObserverFunc(func(ctx context.Context, e idem.Event) {
					if e.Kind == idem.EventExecuted {
						panic("observer bug")
					}
				})
				f := newFixtureStore(t, ms, s, opts)
				idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
				spec := strictSpec()
				spec.InFlight.Lease = time.Hour
				h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if panics {
						panic("kaboom")
					}
					w.WriteHeader(http.StatusCreated)
				}))
				func() {
					defer func() { assert.Equal(t, "observer bug", recover()) }()
					send(h, req{key: "k", body: `{"item":1}`})
				}()
				drain(t, f.eng)
				f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
				w := send(f2.eng.Handler(mustCompile(t, spec), f2.createOrder()), req{key: "k", body: `{"item":1}`})
				assert.Equal(t, http.StatusCreated, w.Code, "the held claim was released: %s", w.Body)
			})
		}
	}
}

// gatedFinishTx is a transactional store whose BeginTx fails, and whose
// Finish passes its finishGate.
type gatedFinishTx struct {
	*txFlaky
	finishGate
}

func newGatedFinishTx(ms *memstore.Store, gate chan struct{}) *gatedFinishTx {
	return &gatedFinishTx{txFlaky: &txFlaky{fakeTx: &fakeTx{Store: ms}, beginTxErr: errors.New("pool exhausted")},
		finishGate: finishGate{gate: gate}}
}

func (s *gatedFinishTx) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if err := s.pass(ctx); err != nil {
		return err
	}
	return s.txFlaky.Finish(ctx, key, token, st, resp)
}

// The release of the claim held through FailOpen's unprotected run after
// BeginTx failed is made in the background, at once: the response does
// not wait for it, however long the store takes (before: Finish released
// it before returning, and a store that did not answer held the response
// up to StoreTimeout after the handler returned). It is tried
// ClaimReleaseAttempts times, and Drain waits for it.
func TestFailOpenHeldReleaseDoesNotHoldResponse(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	s := newGatedFinishTx(ms, make(chan struct{})) // never closed: each Finish runs to StoreTimeout
	const st = 300 * time.Millisecond
	f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, FailOpen: true,
		Transactional: true, StoreTimeout: st})
	idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
	for _, panics := range []bool{false, true} {
		var returned time.Time
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			returned = time.Now()
			if panics {
				panic("kaboom")
			}
			w.WriteHeader(http.StatusCreated)
		}))
		w := httptest.NewRecorder()
		func() {
			defer func() {
				if v := recover(); v != nil {
					assert.Equal(t, "kaboom", v)
				}
			}()
			hr := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":1}`))
			hr.Header.Set("Content-Type", "application/json")
			hr.Header.Set("Idempotency-Key", fmt.Sprintf("k-%v", panics))
			h.ServeHTTP(w, hr)
		}()
		blocked := time.Since(returned)
		if panics {
			assert.Equal(t, http.StatusInternalServerError, w.Code)
		} else {
			assert.Equal(t, http.StatusCreated, w.Code)
		}
		assert.Less(t, blocked, st/2, "panics=%v: the response waited %v for the release after the handler", panics, blocked)
	}
	drain(t, f.eng)
	assert.Equal(t, int64(2*idem.ClaimReleaseAttempts), s.finishes.Load(), "releases tried")
}

// The held claim's release is tried at once once the run ends, without
// the backoff of a retry: with a store that answers, a retry right after
// the response finds the key free (here within a second, whereas the
// backoff is an hour).
func TestFailOpenHeldReleaseAtOnce(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	gate := make(chan struct{})
	close(gate)
	s := newGatedFinishTx(ms, gate)
	f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, FailOpen: true, Transactional: true})
	idem.SetLateBackoff(f.eng, time.Hour, time.Hour)
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":1}`}).Code)
	f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	h2 := f2.eng.Handler(mustCompile(t, spec), f2.createOrder())
	require.Eventually(t, func() bool { return s.finishes.Load() == 1 }, time.Second, time.Millisecond, "released at once")
	drainWithin(t, f.eng, time.Second)
	require.Equal(t, http.StatusCreated, send(h2, req{key: "k", body: `{"item":1}`}).Code, "the key is free")
	assert.Equal(t, int64(1), s.finishes.Load())
}

// The held claims' releases take slots of MaxClaimReleases: with those
// taken (the store's Finish hanging), a release that is not tried is
// logged, naming the claim held through the unprotected run, and the
// others are made once the store answers.
func TestFailOpenHeldReleasesBounded(t *testing.T) {
	testBeginTxReleasesBounded(t, true, "the claim held through FailOpen's unprotected run (its transaction could not begin)")
}

// Without FailOpen, the claim whose BeginTx failed is released in the
// background, its first attempt at once: the 503 goes out without
// waiting for the store (before: the release was made before the
// refusal, and a store whose Finish did not answer held the 503 up to
// StoreTimeout). Drain waits for the release, after which a retry runs.
func TestUnbegunReleaseDoesNotHold503(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	gate := make(chan struct{})
	s := newGatedFinishTx(ms, gate)
	const st = 300 * time.Millisecond
	f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true,
		Transactional: true, StoreTimeout: st})
	idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
	spec := strictSpec()
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	start := time.Now()
	w := send(h, req{key: "k", body: `{"item":1}`})
	took := time.Since(start)
	requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
	assert.Less(t, took, st/2, "the 503 waited %v for the release", took)
	assert.Zero(t, f.obs.count(idem.EventExecuted), "events: %v", f.obs.kinds())
	close(gate) // the store answers again: the release under way gets through
	drain(t, f.eng)
	assert.Equal(t, int64(1), s.finishes.Load(), "releases tried")
	f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	h2 := f2.eng.Handler(mustCompile(t, spec), f2.createOrder())
	assert.Equal(t, http.StatusCreated, send(h2, req{key: "k", body: `{"item":1}`}).Code, "the key is free")
}

// Those releases take slots of MaxClaimReleases: with those taken (the
// store's Finish hanging), a release that is not tried is logged, naming
// the claim whose transaction could not begin, and its 503 is sent all
// the same; the others are made once the store answers.
func TestUnbegunReleasesBounded(t *testing.T) {
	testBeginTxReleasesBounded(t, false, "the claim whose transaction could not begin (its request refused)")
}

// testBeginTxReleasesBounded sends MaxClaimReleases+1 requests whose
// BeginTx fails to a store whose Finish hangs until gate is closed: under
// FailOpen each runs (201), without it each is refused (503), and its
// claim's release is made in the background. The last one's is not
// tried: logged once, naming the claim as claim, and its key stays in
// flight; the others are made once the store answers.
func testBeginTxReleasesBounded(t *testing.T, failOpen bool, claim string) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	gate := make(chan struct{})
	s := newGatedFinishTx(ms, gate)
	var logged lockedBuffer
	f := newFixtureStore(t, ms, s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, FailOpen: failOpen,
		Transactional: true, StoreTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	idem.SetReleaseDropLogEvery(f.eng, time.Hour)
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	for i := range idem.MaxClaimReleases + 1 {
		w := send(h, req{key: fmt.Sprintf("k-%d", i), body: `{"item":1}`})
		if failOpen {
			require.Equal(t, http.StatusCreated, w.Code)
		} else {
			requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
		}
	}
	require.Eventually(t, func() bool { return s.finishes.Load() == idem.MaxClaimReleases }, 10*time.Second, time.Millisecond,
		"releases under way: %d", s.finishes.Load())
	assert.Equal(t, 1, strings.Count(logged.String(), "claim release not tried"), "%s", logged.String())
	assert.Contains(t, logged.String(), claim+" stays in flight")
	close(gate)
	drain(t, f.eng)
	f2 := newFixtureStore(t, ms, ms, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	h2 := f2.eng.Handler(mustCompile(t, spec), f2.createOrder())
	assert.Equal(t, http.StatusCreated, send(h2, req{key: "k-0", body: `{"item":1}`}).Code, "released")
	requireProblem(t, send(h2, req{key: fmt.Sprintf("k-%d", idem.MaxClaimReleases), body: `{"item":1}`}), http.StatusConflict, idem.CodeKeyInUse)
}
