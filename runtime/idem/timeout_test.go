package idem_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// hangingStore is a store that, for the methods named in hang, accepts the
// call and never answers: it blocks until the context ends, like a store
// that accepts connections and then hangs. It records each hung call's
// deadline (relative to the call) and counts calls that returned.
type hangingStore struct {
	*memstore.Store
	hang map[string]bool

	mu        sync.Mutex
	deadlines map[string][]time.Duration // per method; -1 = no deadline
	started   atomic.Int32
	returned  atomic.Int32
	rollbacks atomic.Int32
}

func newHangingStore(t *testing.T, methods ...string) *hangingStore {
	return newHangingStoreAt(t, nil, methods...)
}

// newHangingStoreAt is newHangingStore over a memstore on clk (nil: its
// own clock).
func newHangingStoreAt(t *testing.T, clk *storeClock, methods ...string) *hangingStore {
	mo := memstore.Options{SweepInterval: -1}
	if clk != nil {
		mo.Now = clk.now
	}
	ms := memstore.New(mo)
	t.Cleanup(func() { _ = ms.Close() })
	h := &hangingStore{Store: ms, hang: map[string]bool{}, deadlines: map[string][]time.Duration{}}
	for _, m := range methods {
		h.hang[m] = true
	}
	return h
}

// block hangs until ctx ends when method is set to hang; it reports whether it did.
func (h *hangingStore) block(ctx context.Context, method string) (bool, error) {
	h.mu.Lock()
	hang := h.hang[method]
	h.mu.Unlock()
	if !hang {
		return false, nil
	}
	d := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	h.mu.Lock()
	h.deadlines[method] = append(h.deadlines[method], d)
	h.mu.Unlock()
	h.started.Add(1)
	defer h.returned.Add(1)
	<-ctx.Done()
	return true, ctx.Err()
}

func (h *hangingStore) setHang(method string, hang bool) {
	h.mu.Lock()
	h.hang[method] = hang
	h.mu.Unlock()
}

func (h *hangingStore) seen(method string) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.deadlines[method]...)
}

func (h *hangingStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	if hung, err := h.block(ctx, "Begin"); hung {
		return idem.BeginResult{}, err
	}
	return h.Store.Begin(ctx, r)
}

func (h *hangingStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if hung, err := h.block(ctx, "Finish"); hung {
		return err
	}
	return h.Store.Finish(ctx, key, token, st, resp)
}

func (h *hangingStore) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if hung, err := h.block(ctx, "ExtendLease"); hung {
		return err
	}
	return h.Store.ExtendLease(ctx, key, token, lease)
}

// BeginTx and its commit hang as told; the transaction itself is a no-op
// around the memstore record.
//
// "BeginTxLate" and "commitLate" hang until the context ends too, then
// succeed all the same (a store that answered just as the engine gave up).
func (h *hangingStore) BeginTx(ctx context.Context, key string, token idem.Token) (context.Context, func(idem.State, []byte) error, func(), error) {
	if hung, err := h.block(ctx, "BeginTx"); hung {
		return nil, nil, nil, err
	}
	_, _ = h.block(ctx, "BeginTxLate")
	commit := func(st idem.State, resp []byte) error {
		if hung, err := h.block(ctx, "commit"); hung {
			return err
		}
		if hung, _ := h.block(ctx, "commitLate"); hung {
			return h.Store.Finish(context.Background(), key, token, st, resp)
		}
		return h.Store.Finish(ctx, key, token, st, resp)
	}
	rollback := func() { h.rollbacks.Add(1) }
	return ctx, commit, rollback, nil
}

// serve runs one request through h with a context that never ends (as a
// net/http server's does while the client waits) and reports how long it took.
func serveTimed(h http.Handler, key string) (*httptest.ResponseRecorder, time.Duration) {
	w := httptest.NewRecorder()
	r, _ := http.NewRequestWithContext(context.Background(), "POST", "/orders", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	start := time.Now()
	h.ServeHTTP(w, r)
	return w, time.Since(start)
}

// TestStoreTimeout: a store that accepts calls and never answers makes
// requests fail closed within Options.StoreTimeout, instead of holding them
// as long as the client waits; no call the engine makes outlives its bound.
func TestStoreTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	const bound = 3 * time.Second // generous: a loaded machine is slow, never wrong
	created := func(calls *atomic.Int32) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.WriteHeader(201)
			_, _ = io.WriteString(w, "created")
		})
	}
	t.Run("Begin", func(t *testing.T) {
		hs := newHangingStore(t, "Begin")
		f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout, UnavailableRetryAfter: 2 * time.Second})
		h := f.eng.Handler(mustCompile(t, strictSpec()), created(&f.calls))
		w, took := serveTimed(h, "k")
		assert.Less(t, took, bound)
		requireProblem(t, w, 503, idem.CodeStoreUnavailable)
		assert.Equal(t, "2", w.Header().Get("Retry-After"))
		assert.Zero(t, f.calls.Load(), "nothing ran")
		ds := hs.seen("Begin")
		require.Len(t, ds, 1)
		assert.LessOrEqual(t, ds[0], timeout, "Begin's deadline is the store timeout")
		assert.Positive(t, ds[0])
		ev, ok := f.obs.find(idem.EventStoreError)
		require.True(t, ok)
		assert.ErrorIs(t, ev.Err, context.DeadlineExceeded)
	})
	t.Run("BeginWhileWaiting", func(t *testing.T) {
		// A duplicate waiting for the first request: the store hangs between
		// its polls. Each Begin (the first in the Call's own context, later
		// ones in a context of their own) and the watch are bounded.
		hs := newHangingStore(t)
		f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout})
		spec := strictSpec()
		spec.InFlight.Wait = time.Minute
		release := make(chan struct{})
		started := make(chan struct{})
		h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			w.WriteHeader(201)
		}))
		first := make(chan struct{})
		go func() { serveTimed(h, "k"); close(first) }()
		<-started
		var begins atomic.Int32
		// Hang the store from the second Begin of the duplicate on.
		wrapped := &countingBegin{hangingStore: hs, n: &begins, hangFrom: 2}
		f2 := newFixtureStore(t, hs.Store, wrapped, idem.Options{StoreTimeout: timeout})
		h2 := f2.eng.Handler(mustCompile(t, spec), created(&f2.calls))
		w, took := serveTimed(h2, "k")
		assert.Less(t, took, bound, "the wait is a minute, but the hung store ends it")
		requireProblem(t, w, 503, idem.CodeStoreUnavailable)
		assert.GreaterOrEqual(t, begins.Load(), int32(2))
		close(release)
		<-first
	})
	t.Run("Finish", func(t *testing.T) {
		hs := newHangingStore(t, "Finish")
		f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout})
		h := f.eng.Handler(mustCompile(t, strictSpec()), created(&f.calls))
		w, took := serveTimed(h, "k")
		assert.Less(t, took, bound, "the request ends although Finish never answers")
		assert.Equal(t, 201, w.Code, "the client already has its response")
		assert.Equal(t, int32(1), f.calls.Load())
		ds := hs.seen("Finish")
		require.Len(t, ds, 1)
		assert.LessOrEqual(t, ds[0], timeout)
		ev, ok := f.obs.find(idem.EventStoreError)
		require.True(t, ok)
		assert.ErrorIs(t, ev.Err, context.DeadlineExceeded)
	})
	t.Run("Heartbeat", func(t *testing.T) {
		// The stores engineer's report: the heartbeat extended the lease in a
		// context without deadline, so a hung store kept the heartbeat (and its
		// goroutine) forever. Each extension is now bounded by
		// min(lease/3, StoreTimeout).
		for _, tc := range []struct {
			name         string
			lease, store time.Duration
		}{
			{"lease bound", 300 * time.Millisecond, 5 * time.Second},
			{"store timeout bound", 600 * time.Millisecond, 50 * time.Millisecond},
		} {
			t.Run(tc.name, func(t *testing.T) {
				hs := newHangingStore(t, "ExtendLease")
				f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: tc.store})
				spec := strictSpec()
				spec.InFlight.Lease = tc.lease
				bound := min(tc.lease/3, tc.store)
				h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					// Run until two extensions have been attempted.
					deadline := time.Now().Add(10 * time.Second)
					for len(hs.seen("ExtendLease")) < 2 && time.Now().Before(deadline) {
						time.Sleep(5 * time.Millisecond)
					}
					w.WriteHeader(201)
				}))
				w, _ := serveTimed(h, "k")
				require.Equal(t, 201, w.Code)
				ds := hs.seen("ExtendLease")
				require.GreaterOrEqual(t, len(ds), 2)
				for _, d := range ds {
					assert.Positive(t, d, "ExtendLease got a deadline")
					assert.LessOrEqual(t, d, bound)
				}
				// Every hung extension returns by its deadline.
				require.Eventually(t, func() bool { return hs.returned.Load() == hs.started.Load() },
					5*time.Second, 10*time.Millisecond, "hung ExtendLease calls did not return")
			})
		}
	})
	t.Run("BeginTx", func(t *testing.T) {
		hs := newHangingStore(t, "BeginTx")
		f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout, Transactional: true})
		h := f.eng.Handler(mustCompile(t, strictSpec()), created(&f.calls))
		w, took := serveTimed(h, "k")
		assert.Less(t, took, bound)
		requireProblem(t, w, 503, idem.CodeStoreUnavailable)
		assert.Zero(t, f.calls.Load(), "nothing ran")
		ev, ok := f.obs.find(idem.EventStoreError)
		require.True(t, ok)
		assert.ErrorIs(t, ev.Err, context.Canceled)
		assert.Contains(t, ev.Err.Error(), "did not answer within Options.StoreTimeout", "the cause, not only the context's error")
		// The key was released (in the background: Drain waits for it):
		// once the store answers, a retry runs.
		drain(t, f.eng)
		hs.setHang("BeginTx", false)
		w, _ = serveTimed(h, "k")
		assert.Equal(t, 201, w.Code)
		assert.Equal(t, int32(1), f.calls.Load())
	})
	t.Run("Commit", func(t *testing.T) {
		hs := newHangingStore(t, "commit")
		f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout, Transactional: true})
		var handlerCtx context.Context
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			// The handler runs longer than the store timeout: the
			// transaction's context must not end while it runs.
			time.Sleep(2 * timeout)
			assert.NoError(t, r.Context().Err(), "the transaction's context ended while the handler ran")
			handlerCtx = r.Context()
			w.WriteHeader(201)
		}))
		w, took := serveTimed(h, "k")
		assert.Less(t, took, bound)
		requireProblem(t, w, 503, idem.CodeStoreUnavailable)
		assert.Equal(t, int32(1), f.calls.Load())
		require.NotNil(t, handlerCtx)
		assert.Error(t, handlerCtx.Err(), "the transaction's context ends with the call")
		ev, ok := f.obs.find(idem.EventStoreError)
		require.True(t, ok)
		assert.ErrorIs(t, ev.Err, context.Canceled)
		assert.Contains(t, ev.Err.Error(), "did not answer within Options.StoreTimeout", "the cause, not only the context's error")
		// The key was freed (best effort, in the background: Drain waits
		// for it): a retry runs.
		drain(t, f.eng)
		hs.setHang("commit", false)
		w, _ = serveTimed(h, "k")
		assert.Equal(t, 201, w.Code)
	})
	t.Run("BeginTxAnswersLate", func(t *testing.T) {
		// BeginTx succeeds, but only after the timer cancelled the
		// transaction's context: the transaction is unusable, so the
		// engine refuses, rolls it back and frees the key.
		hs := newHangingStore(t, "BeginTxLate")
		f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout, Transactional: true})
		h := f.eng.Handler(mustCompile(t, strictSpec()), created(&f.calls))
		w, _ := serveTimed(h, "k")
		requireProblem(t, w, 503, idem.CodeStoreUnavailable)
		assert.Zero(t, f.calls.Load())
		assert.Equal(t, int32(1), hs.rollbacks.Load(), "rolled back")
		drain(t, f.eng) // the release is made in the background
		hs.setHang("BeginTxLate", false)
		w, _ = serveTimed(h, "k")
		assert.Equal(t, 201, w.Code, "the key was freed")
	})
	t.Run("CommitAnswersLate", func(t *testing.T) {
		// The commit succeeds just as the timer fires: it counts.
		hs := newHangingStore(t, "commitLate")
		f := newFixtureStore(t, hs.Store, hs, idem.Options{StoreTimeout: timeout, Transactional: true})
		h := f.eng.Handler(mustCompile(t, strictSpec()), created(&f.calls))
		w, _ := serveTimed(h, "k")
		assert.Equal(t, 201, w.Code, "committed: %s", w.Body)
		assert.Equal(t, "created", w.Body.String())
		w, _ = serveTimed(h, "k")
		assert.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, int32(1), f.calls.Load())
	})
	t.Run("Default", func(t *testing.T) {
		hs := newHangingStore(t, "Begin")
		eng := idem.New(hs, idem.Options{Principal: idem.Anonymous, Logger: discardLogger})
		p := mustCompile(t, strictSpec())
		r, _ := http.NewRequest("POST", "/orders", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k")
		// Cut it short through the request's context: the default bound
		// (DefaultStoreTimeout) is what Begin saw.
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for len(hs.seen("Begin")) == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		c := eng.Begin(r.WithContext(ctx), p, idem.RequestKey)
		c.End()
		ds := hs.seen("Begin")
		require.Len(t, ds, 1)
		assert.LessOrEqual(t, ds[0], idem.DefaultStoreTimeout)
		assert.Greater(t, ds[0], idem.DefaultStoreTimeout-time.Second)
	})
}

// countingBegin hangs Begin from its hangFrom-th call on.
type countingBegin struct {
	*hangingStore
	n        *atomic.Int32
	hangFrom int32
}

func (c *countingBegin) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	if c.n.Add(1) >= c.hangFrom {
		<-ctx.Done()
		return idem.BeginResult{}, ctx.Err()
	}
	return c.hangingStore.Store.Begin(ctx, r)
}

// doneStore is, as far as contexts go, a store over a network client: not
// ContextBound, it looks at Done on every call (go-redis does before each
// command, pgx watches it), and Begin of a key with "hang" in it waits for
// the context to end. It counts the calls whose context it saw end before
// the context's deadline (early): a timer that ends a call it does not
// belong to.
type doneStore struct {
	ms    *memstore.Store
	early *atomic.Int32
}

// ended returns ctx's error once ctx has ended, counting an early end.
func (d doneStore) ended(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Now().Before(dl) {
		d.early.Add(1)
	}
	return err
}

func (d doneStore) peek(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return d.ended(ctx)
	default:
		return nil
	}
}

func (d doneStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	if err := d.peek(ctx); err != nil {
		return idem.BeginResult{}, err
	}
	if strings.Contains(r.Key, "hang") {
		<-ctx.Done()
		return idem.BeginResult{}, d.ended(ctx)
	}
	return d.ms.Begin(ctx, r)
}

func (d doneStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if err := d.peek(ctx); err != nil {
		return err
	}
	return d.ms.Finish(ctx, key, token, st, resp)
}

func (d doneStore) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := d.peek(ctx); err != nil {
		return idem.Record{}, false, err
	}
	return d.ms.Get(ctx, key)
}

// TestStoreWatchesDone runs requests in parallel over a store that watches
// Done, under request contexts that can be cancelled, while some store calls
// run into their deadline: the deadline queues must never end a call
// before its deadline, and each hung call ends at its deadline.
func TestStoreWatchesDone(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	// A replay that does not hang seldom reaches it. It may on a loaded
	// machine: under -race beside the other packages of scripts/test a
	// replay outlived 20ms, and later 100ms, and failed closed with 503, as
	// it should past a deadline. Such a replay is sent again; what fails
	// the test is a call whose context ended before its deadline (the store
	// counts those), or a 503 sooner than the timeout.
	const timeout = 100 * time.Millisecond
	ds := doneStore{ms: ms, early: new(atomic.Int32)}
	f := newFixtureStore(t, ms, ds, idem.Options{StoreTimeout: timeout})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(201)
	}))
	serve := func(key string) (*httptest.ResponseRecorder, time.Duration) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := httptest.NewRecorder()
		r, _ := http.NewRequestWithContext(ctx, "POST", "/orders", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		start := time.Now()
		h.ServeHTTP(w, r)
		return w, time.Since(start)
	}
	// At most maxSlow slow refusals in all (a tenth of the replays), and
	// 3 in a row for one replay: a store whose every call outlives its
	// deadline fails the test instead of retrying until go test's timeout.
	const maxSlow = 4 * 135 / 10
	var slow atomic.Int32
	tooSlow := func() bool { return slow.Add(1) > maxSlow }
	w, took := serve("k")
	for try := 0; w.Code == http.StatusServiceUnavailable && took >= timeout; try++ {
		require.False(t, tooSlow() || try >= 3, "the first request outlived the store timeout %d times", try+1)
		w, took = serve("k")
	}
	require.Equal(t, 201, w.Code)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				if i%10 == 0 {
					w, took := serve("hang-" + strconv.Itoa(g*1000+i))
					assert.Equal(t, http.StatusServiceUnavailable, w.Code, "a store call past its deadline fails closed")
					assert.NotEmpty(t, w.Header().Get("Retry-After"))
					assert.GreaterOrEqual(t, took, timeout)
					assert.Less(t, took, 5*time.Second)
					continue
				}
				for try := 0; ; try++ {
					w, took := serve("k")
					if w.Code == http.StatusServiceUnavailable && took >= timeout {
						// The machine outran the store timeout: fail closed, then retry.
						if tooSlow() || try >= 3 {
							t.Errorf("replay %d/%d outlived the store timeout %d times in a row (%d in all)", g, i, try+1, slow.Load())
							return
						}
						continue
					}
					if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
						t.Errorf("replay %d/%d after %v: %d %s", g, i, took, w.Code, w.Body)
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Zero(t, ds.early.Load(), "store calls whose context ended before its deadline")
	assert.LessOrEqual(t, slow.Load(), int32(maxSlow), "replays that outlived the store timeout")
	if n := slow.Load(); n > 0 {
		t.Logf("%d replays outlived the store timeout (%v) and were sent again", n, timeout)
	}
}

// The claim of a transaction whose commit failed is released in the
// background, its first attempt at once: the 503 goes out once the commit
// failed, without waiting for the store to answer the release (before:
// the release was made before the 503, which a store whose Finish did not
// answer held up to another StoreTimeout). Drain waits for the release,
// after which a retry runs.
func TestUncommittedReleaseDoesNotHold503(t *testing.T) {
	const st = 300 * time.Millisecond
	hs := newHangingStore(t, "commit", "Finish")
	var logged lockedBuffer
	f := newFixtureStore(t, hs.Store, hs, idem.Options{Principal: idem.Anonymous, StoreTimeout: st, Transactional: true,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(201)
	}))
	w, took := serveTimed(h, "k")
	requireProblem(t, w, 503, idem.CodeStoreUnavailable)
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Less(t, took, st*3/2, "the 503 waited %v for the release", took)
	require.Eventually(t, func() bool { return len(hs.seen("Finish")) == 1 }, 5*time.Second, time.Millisecond,
		"the release is tried at once")
	hs.setHang("commit", false)
	hs.setHang("Finish", false) // the store answers again: a later attempt gets through
	drain(t, f.eng)
	assert.Contains(t, logged.String(), "key released by a later attempt, after the store failed: the claim whose commit failed (its request refused)")
	w, _ = serveTimed(h, "k")
	assert.Equal(t, 201, w.Code, "the key was freed")
	assert.Equal(t, int32(2), f.calls.Load())
}
