package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// countingStore is a memstore that counts the engine's calls and can be
// made to fail or lie on Get. readFirstStore is the same store promising
// ReadFirst.
type countingStore struct {
	ms                 *memstore.Store
	begins, gets, fins atomic.Int32
	getErr             error
	getOverride        func() (idem.Record, bool)
}

func (s *countingStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	s.begins.Add(1)
	return s.ms.Begin(ctx, r)
}

func (s *countingStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	s.fins.Add(1)
	return s.ms.Finish(ctx, key, token, st, resp)
}

func (s *countingStore) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	s.gets.Add(1)
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	if s.getErr != nil {
		return idem.Record{}, false, s.getErr
	}
	if s.getOverride != nil {
		rec, ok := s.getOverride()
		return rec, ok, nil
	}
	return s.ms.Get(ctx, key)
}

type readFirstStore struct{ *countingStore }

func (readFirstStore) ReadFirst() {}

// calls returns how many Begins and Gets the store saw.
func (s *countingStore) calls() (begins, gets int32) { return s.begins.Load(), s.gets.Load() }

func newCountingStore(t *testing.T, now func() time.Time) *countingStore {
	ms := memstore.New(memstore.Options{SweepInterval: -1, Now: now})
	t.Cleanup(func() { _ = ms.Close() })
	return &countingStore{ms: ms}
}

func newReadFirst(t *testing.T, spec idem.Spec, opts idem.Options) (*fixture, *countingStore, http.Handler) {
	t.Helper()
	cs := newCountingStore(t, nil)
	f := newFixtureStore(t, cs.ms, readFirstStore{cs}, opts)
	return f, cs, f.eng.Handler(mustCompile(t, spec), f.createOrder())
}

func TestReadFirstReplay(t *testing.T) {
	f, cs, h := newReadFirst(t, strictSpec(), idem.Options{})
	r := req{key: "k-1", body: `{"item":"book","qty":1}`}

	first := send(h, r)
	require.Equal(t, http.StatusCreated, first.Code)
	b, g := cs.calls()
	assert.Equal(t, [2]int32{1, 0}, [2]int32{b, g}, "a first request claims with Begin alone")

	for i := range 3 {
		again := send(h, r)
		require.Equal(t, http.StatusCreated, again.Code)
		assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, first.Body.String(), again.Body.String())
		assert.Equal(t, "/orders/42", again.Header().Get("Location"))
		b, g := cs.calls()
		assert.Equal(t, [2]int32{1, int32(i + 1)}, [2]int32{b, g}, "a retry of a key completed here is read with Get alone")
	}
	assert.Equal(t, int32(1), f.calls.Load())
	n := 0
	for _, k := range f.obs.kinds() {
		if k == idem.EventReplayed {
			n++
		}
	}
	assert.Equal(t, 3, n, "every replay is observed")

	// Another key is a first request: Begin alone.
	require.Equal(t, http.StatusCreated, send(h, req{key: "k-2", body: `{"item":"book","qty":1}`}).Code)
	b, g = cs.calls()
	assert.Equal(t, [2]int32{2, 3}, [2]int32{b, g})
}

func TestReadFirstConflict(t *testing.T) {
	f, cs, h := newReadFirst(t, strictSpec(), idem.Options{})
	require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":"book"}`}).Code)
	w := send(h, req{key: "k", body: `{"item":"pen"}`})
	requireProblem(t, w, http.StatusUnprocessableEntity, idem.CodeKeyReused)
	b, g := cs.calls()
	assert.Equal(t, [2]int32{1, 1}, [2]int32{b, g}, "the conflict is found by Get")
	assert.Equal(t, int32(1), f.calls.Load())
}

func TestReadFirstLooseMismatch(t *testing.T) {
	spec := strictSpec()
	spec.Semantics = idem.Loose
	f, cs, h := newReadFirst(t, spec, idem.Options{})
	first := send(h, req{key: "k", body: `{"item":"book"}`})
	w := send(h, req{key: "k", body: `{"item":"pen"}`})
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, first.Body.String(), w.Body.String())
	_, ok := f.obs.find(idem.EventLooseMismatch)
	assert.True(t, ok, "the mismatch is observed")
	b, g := cs.calls()
	assert.Equal(t, [2]int32{1, 1}, [2]int32{b, g})
}

// A key is remembered until its record expires: a request with it after
// the window claims with Begin alone (the engine's clock and the store's are
// one here).
func TestReadFirstWindowEnded(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cs := newCountingStore(t, clock)
	f := newFixtureStore(t, cs.ms, readFirstStore{cs}, idem.Options{Now: clock})
	spec := strictSpec()
	spec.Window = time.Minute
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	r := req{key: "k", body: `{"item":"book"}`}
	require.Equal(t, http.StatusCreated, send(h, r).Code)
	mu.Lock()
	now = now.Add(59 * time.Second)
	mu.Unlock()
	require.Equal(t, "true", send(h, r).Header().Get("Idempotent-Replayed"))
	b, g := cs.calls()
	assert.Equal(t, [2]int32{1, 1}, [2]int32{b, g}, "within the window: Get")
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	w := send(h, r)
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(2), f.calls.Load(), "executed again")
	b, g = cs.calls()
	assert.Equal(t, [2]int32{2, 1}, [2]int32{b, g}, "after it: Begin alone")
}

// A key remembered here whose record the store no longer has (evicted,
// deleted, or expired on a clock ahead of the engine's) is read, then
// claimed with Begin: the request executes again.
func TestReadFirstRecordGone(t *testing.T) {
	f, cs, h := newReadFirst(t, strictSpec(), idem.Options{})
	r := req{key: "k", body: `{"item":"book"}`}
	require.Equal(t, http.StatusCreated, send(h, r).Code)
	cs.ms = memstore.New(memstore.Options{SweepInterval: -1}) // forgets everything
	t.Cleanup(func() { _ = cs.ms.Close() })
	w := send(h, r)
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(2), f.calls.Load(), "executed again")
	b, g := cs.calls()
	assert.Equal(t, [2]int32{2, 1}, [2]int32{b, g}, "Get found nothing, Begin claimed")
}

// A completion the store refused (fenced) is not remembered.
func TestReadFirstNotAfterFailedFinish(t *testing.T) {
	cs := newCountingStore(t, nil)
	fs := &failingStore{Store: cs, finishErr: idem.ErrFenced}
	f := newFixtureStore(t, cs.ms, readFirstFailing{fs}, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	r := req{key: "k", body: `{"item":"book"}`}
	send(h, r)
	send(h, r)
	_, g := cs.calls()
	assert.Equal(t, int32(0), g)
}

type readFirstFailing struct{ *failingStore }

func (readFirstFailing) ReadFirst() {}

// Records are scoped by principal: another principal's request with the
// same key is not a retry of the first, and is not read first.
func TestReadFirstScopedByPrincipal(t *testing.T) {
	f, cs, h := newReadFirst(t, strictSpec(), idem.Options{Principal: func(r *http.Request) (string, error) {
		return r.Header.Get("X-User"), nil
	}})
	alice := req{key: "k", body: `{"item":"book"}`, header: http.Header{"X-User": {"alice"}}}
	bob := req{key: "k", body: `{"item":"book"}`, header: http.Header{"X-User": {"bob"}}}
	require.Equal(t, http.StatusCreated, send(h, alice).Code)
	w := send(h, bob)
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
	b, g := cs.calls()
	assert.Equal(t, [2]int32{2, 0}, [2]int32{b, g})
	require.Equal(t, "true", send(h, alice).Header().Get("Idempotent-Replayed"))
	require.Equal(t, "true", send(h, bob).Header().Get("Idempotent-Replayed"))
	b, g = cs.calls()
	assert.Equal(t, [2]int32{2, 2}, [2]int32{b, g})
	assert.Equal(t, int32(2), f.calls.Load())
}

// A decision read first is observed as the same decision claimed: the
// same events, field by field (Duration aside).
func TestReadFirstSameEvents(t *testing.T) {
	run := func(readFirst bool) []idem.Event {
		cs := newCountingStore(t, nil)
		var s idem.Store = cs
		if readFirst {
			s = readFirstStore{cs}
		}
		obs := &events{}
		first := idem.New(s, idem.Options{Principal: idem.Anonymous, Logger: discardLogger, Observer: obs})
		spec := strictSpec()
		spec.Semantics = idem.Loose
		f := &fixture{t: t}
		h := first.Handler(mustCompile(t, spec), f.createOrder())
		send(h, req{key: "k", body: `{"item":"book"}`})
		send(h, req{key: "k", body: `{"item":"book"}`})
		send(h, req{key: "k", body: `{"item":"pen"}`})
		if readFirst {
			_, g := cs.calls()
			require.Equal(t, int32(2), g)
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		out := slices.Clone(obs.evs)
		for i := range out {
			out[i].Duration = 0
		}
		return out
	}
	claimed, read := run(false), run(true)
	require.Len(t, claimed, 4, "executed, replayed, loose mismatch, replayed")
	assert.Equal(t, claimed, read)
}

// Records Get does not settle go on to Begin: in flight, or free again.
func TestReadFirstUnsettled(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  idem.Record
	}{
		{"pending", idem.Record{State: idem.StatePending, Token: 7}},
		{"failed without a response", idem.Record{State: idem.StateFailed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, cs, h := newReadFirst(t, strictSpec(), idem.Options{})
			r := req{key: "k", body: `{"item":"book"}`}
			require.Equal(t, http.StatusCreated, send(h, r).Code)
			cs.getOverride = func() (idem.Record, bool) { return c.rec, true }
			w := send(h, r)
			// Begin finds the real (completed) record and replays it.
			require.Equal(t, http.StatusCreated, w.Code)
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			b, g := cs.calls()
			assert.Equal(t, [2]int32{2, 1}, [2]int32{b, g})
			assert.Equal(t, int32(1), f.calls.Load())
		})
	}
}

// A failure that frees the key is not remembered: its retry claims with
// Begin alone. A failure stored for replay is.
func TestReadFirstFailures(t *testing.T) {
	for _, c := range []struct {
		name           string
		failures       idem.FailurePolicy
		gets, executed int32
	}{
		{"retry", idem.FailuresRetry, 0, 2},
		{"replay", idem.FailuresReplay, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := strictSpec()
			spec.Failures = c.failures
			cs := newCountingStore(t, nil)
			var calls atomic.Int32
			eng := idem.New(readFirstStore{cs}, idem.Options{Principal: idem.Anonymous, Logger: discardLogger})
			h := eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				http.Error(w, "down", http.StatusBadGateway)
			}))
			r := req{key: "k", body: `{"item":"book"}`}
			require.Equal(t, http.StatusBadGateway, send(h, r).Code)
			require.Equal(t, http.StatusBadGateway, send(h, r).Code)
			_, g := cs.calls()
			assert.Equal(t, c.gets, g)
			assert.Equal(t, c.executed, calls.Load())
		})
	}
}

// A failed Get is no answer: Begin decides, as without reading first. So a
// store that refuses the read but answers the claim (Redis refusing GETEX
// while it refuses writes) still replays, and FailOpen never runs the
// handler again for a request that completed.
func TestReadFirstGetFails(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprint("fail open ", failOpen), func(t *testing.T) {
			f, cs, h := newReadFirst(t, strictSpec(), idem.Options{FailOpen: failOpen})
			r := req{key: "k", body: `{"item":"book"}`}
			first := send(h, r)
			require.Equal(t, http.StatusCreated, first.Code)
			cs.getErr = errBoom
			w := send(h, r)
			require.Equal(t, http.StatusCreated, w.Code)
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, first.Body.String(), w.Body.String())
			assert.Equal(t, int32(1), f.calls.Load(), "not executed again")
			b, g := cs.calls()
			assert.Equal(t, [2]int32{2, 1}, [2]int32{b, g}, "Begin after the failed Get")
			_, ok := f.obs.find(idem.EventStoreError)
			assert.False(t, ok, "the Get's failure is not the decision's")
		})
	}
	t.Run("Begin fails too", func(t *testing.T) {
		cs := newCountingStore(t, nil)
		fs := &failingStore{Store: cs}
		f := newFixtureStore(t, cs.ms, readFirstFailing{fs}, idem.Options{})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		r := req{key: "k", body: `{"item":"book"}`}
		require.Equal(t, http.StatusCreated, send(h, r).Code)
		cs.getErr, fs.beginErr = errBoom, errBoom
		w := send(h, r)
		requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
		assert.NotEmpty(t, w.Header().Get("Retry-After"))
		n := 0
		for _, k := range f.obs.kinds() {
			if k == idem.EventStoreError {
				n++
			}
		}
		assert.Equal(t, 1, n, "one failure reported: Begin's")
	})
	t.Run("timeout", func(t *testing.T) {
		// Get is bounded by StoreTimeout, as Begin is: a store that waits
		// on its context gets DeadlineExceeded, and the request is answered
		// as a store outage at once, without a Begin in no time left.
		block := &blockingGet{countingStore: newCountingStore(t, nil)}
		f := newFixtureStore(t, block.ms, block, idem.Options{StoreTimeout: 20 * time.Millisecond})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		r := req{key: "k", body: `{"item":"book"}`}
		require.Equal(t, http.StatusCreated, send(h, r).Code)
		w := send(h, r)
		requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
		assert.ErrorIs(t, block.err, context.DeadlineExceeded)
		b, g := block.calls()
		assert.Equal(t, [2]int32{1, 1}, [2]int32{b, g}, "no Begin after the Get ran out of time")
		ev, ok := f.obs.find(idem.EventStoreError)
		require.True(t, ok)
		assert.ErrorIs(t, ev.Err, context.DeadlineExceeded)
	})
}

// hungStore is a ReadFirst store over a countingStore whose Get and Begin,
// once hung, wait on their contexts (a store that accepts connections and
// never answers), or, with getDelay, whose Get fails after that long. It
// notes the deadlines they were handed.
type hungStore struct {
	*countingStore
	hung     atomic.Bool
	getDelay time.Duration

	mu               sync.Mutex
	getDL, beginDL   time.Time
	getErr, beginErr error
}

func (*hungStore) ReadFirst() {}

func (s *hungStore) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if !s.hung.Load() {
		return s.countingStore.Get(ctx, key)
	}
	s.gets.Add(1)
	dl, _ := ctx.Deadline()
	err := errBoom
	if s.getDelay > 0 {
		time.Sleep(s.getDelay)
	} else {
		<-ctx.Done()
		err = ctx.Err()
	}
	s.mu.Lock()
	s.getDL, s.getErr = dl, err
	s.mu.Unlock()
	return idem.Record{}, false, err
}

func (s *hungStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	if !s.hung.Load() {
		return s.countingStore.Begin(ctx, r)
	}
	s.begins.Add(1)
	dl, _ := ctx.Deadline()
	<-ctx.Done()
	s.mu.Lock()
	s.beginDL, s.beginErr = dl, ctx.Err()
	s.mu.Unlock()
	return idem.BeginResult{}, ctx.Err()
}

// A retry read first from a store that hangs is answered within one
// StoreTimeout (docs/runtime.md, "Fail closed, in bounded time"), not
// after a Get's and then a Begin's: closed (503) or, with FailOpen, by an
// unprotected run.
func TestReadFirstHungStoreOneTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprint("fail open ", failOpen), func(t *testing.T) {
			hs := &hungStore{countingStore: newCountingStore(t, nil)}
			f := newFixtureStore(t, hs.ms, hs, idem.Options{StoreTimeout: timeout, FailOpen: failOpen})
			h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
			r := req{key: "k", body: `{"item":"book"}`}
			require.Equal(t, http.StatusCreated, send(h, r).Code)
			hs.hung.Store(true)
			start := time.Now()
			w := send(h, r)
			took := time.Since(start)
			if failOpen {
				require.Equal(t, http.StatusCreated, w.Code)
				assert.Equal(t, int32(2), f.calls.Load(), "run unprotected")
				_, ok := f.obs.find(idem.EventFailOpen)
				assert.True(t, ok)
			} else {
				requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
				assert.Equal(t, int32(1), f.calls.Load())
			}
			// Twice the timeout without the fix: a margin no load makes up.
			assert.Less(t, took, timeout*3/2, "one StoreTimeout for the store calls up to the claim")
			b, g := hs.calls()
			assert.Equal(t, [2]int32{1, 1}, [2]int32{b, g}, "no Begin after the Get ran out of time")
		})
	}
}

// A Get that fails before its deadline (a store that refuses the read)
// leaves Begin what is left of the same StoreTimeout.
func TestReadFirstBeginGetsWhatIsLeft(t *testing.T) {
	hs := &hungStore{countingStore: newCountingStore(t, nil), getDelay: 20 * time.Millisecond}
	f := newFixtureStore(t, hs.ms, hs, idem.Options{StoreTimeout: 300 * time.Millisecond})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	r := req{key: "k", body: `{"item":"book"}`}
	require.Equal(t, http.StatusCreated, send(h, r).Code)
	hs.hung.Store(true)
	w := send(h, r)
	requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
	b, g := hs.calls()
	require.Equal(t, [2]int32{2, 1}, [2]int32{b, g}, "Begin after the Get that failed quickly")
	hs.mu.Lock()
	defer hs.mu.Unlock()
	assert.ErrorIs(t, hs.getErr, errBoom)
	assert.ErrorIs(t, hs.beginErr, context.DeadlineExceeded)
	require.False(t, hs.getDL.IsZero())
	assert.False(t, hs.beginDL.After(hs.getDL), "Begin's deadline (%v) is the Get's (%v)", hs.beginDL, hs.getDL)
}

// blockingGet waits on its context in Get.
type blockingGet struct {
	*countingStore
	err error
}

func (blockingGet) ReadFirst() {}

func (s *blockingGet) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	s.gets.Add(1)
	<-ctx.Done()
	s.err = ctx.Err()
	return idem.Record{}, false, s.err
}

// A store that does not promise ReadFirst is never read first.
func TestNoReadFirst(t *testing.T) {
	cs := newCountingStore(t, nil)
	f := newFixtureStore(t, cs.ms, cs, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	r := req{key: "k", body: `{"item":"book"}`}
	for range 3 {
		require.Equal(t, http.StatusCreated, send(h, r).Code)
	}
	b, g := cs.calls()
	assert.Equal(t, [2]int32{3, 0}, [2]int32{b, g})
}

// An Engine that did not complete a record learns it from its first replay
// (through Begin), and reads first from then on.
func TestReadFirstLearnsFromReplay(t *testing.T) {
	cs := newCountingStore(t, nil)
	other := idem.New(readFirstStore{cs}, idem.Options{Principal: idem.Anonymous, Logger: discardLogger})
	f := newFixtureStore(t, cs.ms, readFirstStore{cs}, idem.Options{})
	spec := mustCompile(t, strictSpec())
	r := req{key: "k", body: `{"item":"book"}`}
	require.Equal(t, http.StatusCreated, send(other.Handler(spec, f.createOrder()), r).Code)
	h := f.eng.Handler(spec, f.createOrder())
	w := send(h, r)
	require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	b, g := cs.calls()
	assert.Equal(t, [2]int32{2, 0}, [2]int32{b, g}, "this Engine never saw the key: Begin")
	w = send(h, r)
	require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	b, g = cs.calls()
	assert.Equal(t, [2]int32{2, 1}, [2]int32{b, g}, "then Get")
}

// Many keys, completed and replayed concurrently, some colliding in the
// table: every request gets its own key's answer (run with -race).
func TestReadFirstConcurrent(t *testing.T) {
	f, _, h := newReadFirst(t, strictSpec(), idem.Options{})
	const keys, rounds = 5000, 3
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for k := w; k < keys; k += 8 {
					body := fmt.Sprintf(`{"item":"i%d"}`, k)
					resp := send(h, req{key: fmt.Sprint("k-", k), body: body})
					if resp.Code != http.StatusCreated || (r > 0) != (resp.Header().Get("Idempotent-Replayed") == "true") {
						errs <- fmt.Errorf("key %d round %d: %d %q", k, r, resp.Code, resp.Header().Get("Idempotent-Replayed"))
						return
					}
					if want := fmt.Sprintf(`"item":"i%d"`, k); !assert.Contains(t, resp.Body.String(), want) {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, int32(keys), f.calls.Load())
}
