package idem

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"context"
	"sync"
)

// mapStore is a minimal Store with LeaseExtender for package-internal tests
// (memstore imports this package): no expiry, no takeover.
type mapStore struct {
	mu      sync.Mutex
	m       map[string]Record
	extends int
}

func (s *mapStore) keys() (k []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.m {
		k = append(k, key)
	}
	return k
}

func newMapStore() *mapStore { return &mapStore{m: map[string]Record{}} }

// ContextBound: the map store keeps no ctx.
func (*mapStore) ContextBound() {}

func (s *mapStore) Begin(_ context.Context, r *BeginRequest) (BeginResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.m[r.Key]; ok {
		return BeginResult{Record: rec}, nil
	}
	s.m[strings.Clone(r.Key)] = Record{State: StatePending, Fingerprint: r.Fingerprint, Token: r.Token}
	return BeginResult{Acquired: true}, nil
}

func (s *mapStore) Finish(_ context.Context, key string, token Token, st State, resp []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.m[key]
	if !ok || rec.State != StatePending || rec.Token != token {
		return ErrFenced
	}
	rec.State, rec.Response = st, append([]byte(nil), resp...)
	// Clone the key even though the map holds it already: assigning to an
	// existing string key stores the key given, and ContextBound promises
	// to keep none of the caller's keys (the engine reuses their memory).
	s.m[strings.Clone(key)] = rec
	return nil
}

func (s *mapStore) Get(_ context.Context, key string) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.m[key]
	return rec, ok, nil
}

func (s *mapStore) ExtendLease(context.Context, string, Token, time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extends++
	return nil
}

// A Call whose heartbeat ran is not recycled; one whose heartbeat never
// fired is.
func TestRecyclableAfterHeartbeat(t *testing.T) {
	s := newMapStore()
	e := New(s, Options{Principal: Anonymous})
	// A quick handler: a lease of 30s arms no heartbeat before 5s. A slow
	// one: a lease of 30ms, armed after 5 to 10ms; the handler runs until
	// the heartbeat has run (however late the machine runs its timers).
	quick := MustCompile(Spec{Operation: "op", Semantics: Strict, InFlight: InFlightSpec{Lease: 30 * time.Second}})
	slow := MustCompile(Spec{Operation: "op", Semantics: Strict, InFlight: InFlightSpec{Lease: 30 * time.Millisecond}})
	extends := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.extends
	}
	c := new(Call)
	run := func(p *Policy, key string, wait func()) *Call {
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", key)
		c.init(e, p, r)
		c.pooled = true
		c.begin(RequestKey)
		require.Equal(t, Execute, c.decision, "%s: %+v scope %q keys %q", key, c.prob, c.scope, s.keys())
		wait()
		c.Writer(httptest.NewRecorder()).WriteHeader(http.StatusNoContent)
		require.NoError(t, c.Finish())
		c.End()
		return c
	}
	for _, key := range []string{"quick", "again"} {
		require.True(t, run(quick, key, func() {}).recyclable())
		require.Nil(t, c.hb, "a quick handler gets no heartbeat timer")
		c.reset() // what recycle does before it puts the Call in the pool
	}
	assert.Zero(t, extends())
	// A recycled Call's claim is still heartbeaten.
	assert.False(t, run(slow, "slow", func() {
		for deadline := time.Now().Add(10 * time.Second); extends() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}).recyclable(), "the heartbeat ran")
	assert.Positive(t, extends())
}

// Recycling depends on the store's promise (ContextBound), not on
// heartbeats: an engine without them recycles its Calls too.
func TestRecyclableWithoutHeartbeat(t *testing.T) {
	e := New(newMapStore(), Options{Principal: Anonymous, DisableHeartbeat: true})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
	r.Header.Set("Idempotency-Key", "k")
	c := new(Call)
	c.init(e, p, r)
	c.pooled = true
	c.begin(RequestKey)
	require.Equal(t, Execute, c.decision)
	c.Writer(httptest.NewRecorder()).WriteHeader(http.StatusNoContent)
	require.NoError(t, c.Finish())
	c.End()
	assert.True(t, c.recyclable())
}

// A handler that keeps its ResponseWriter and request body past its return
// cannot reach the next request through a recycled Call.
func TestLeakedWriterAndBody(t *testing.T) {
	e := New(newMapStore(), Options{Principal: Anonymous})
	var leakedW http.ResponseWriter
	var leakedBody io.Reader
	h := e.Handler(MustCompile(Spec{Operation: "op", Semantics: Strict}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if leakedW == nil {
			leakedW, leakedBody = w, r.Body
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	}))
	for i, body := range []string{"first", "second", "third"} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", "k"+body)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, body, w.Body.String())
		if i > 0 {
			_, err := leakedW.Write([]byte("LEAK"))
			assert.Error(t, err, "a write after the handler returned is refused")
			_, err = leakedBody.Read(make([]byte, 8))
			assert.Error(t, err, "a read after the handler returned is refused")
		}
	}
}

type requestIndexKey struct{}

// keepingStore keeps what every call is handed (contexts, the BeginRequest,
// key strings), as a pooled network client may keep contexts (pgxpool starts
// connections with the caller's context values): it is not ContextBound, so
// the engine may reuse its Calls but never the memory it handed the store.
type keepingStore struct {
	m    *mapStore // not embedded: its ContextBound must not be promoted
	mu   sync.Mutex
	kept []kept
}

type kept struct {
	ctx  context.Context
	req  *BeginRequest // Begin only
	key  string        // as passed
	want string        // a copy of key at the call
}

func (s *keepingStore) keep(ctx context.Context, req *BeginRequest, key string) {
	s.mu.Lock()
	s.kept = append(s.kept, kept{ctx: ctx, req: req, key: key, want: strings.Clone(key)})
	s.mu.Unlock()
}

func (s *keepingStore) Finish(ctx context.Context, key string, token Token, state State, resp []byte) error {
	s.keep(ctx, nil, key)
	return s.m.Finish(ctx, key, token, state, resp)
}

func (s *keepingStore) Get(ctx context.Context, key string) (Record, bool, error) {
	s.keep(ctx, nil, key)
	return s.m.Get(ctx, key)
}

// keepingReadFirst is keepingStore promising ReadFirst: a replay of a key
// the engine saw final reads first (Get), and its store call asks for Done
// (as go-redis does on every command).
type keepingReadFirst struct{ *keepingStore }

func (keepingReadFirst) ReadFirst() {}

func (s keepingReadFirst) Get(ctx context.Context, key string) (Record, bool, error) {
	_ = ctx.Done()
	rec, ok, err := s.keepingStore.Get(ctx, key)
	if ok {
		rec.ExpiresAt = time.Now().Add(time.Hour)
	}
	return rec, ok, err
}

// The replays read first over a store that keeps what it is handed: the
// context of each Get (asked for Done, and released) and its key stay
// those of their own request while the Calls are reused.
func TestNoReuseUnderAReadFirstStoreThatKeepsContexts(t *testing.T) {
	s := &keepingStore{m: newMapStore()}
	e := New(keepingReadFirst{s}, Options{Principal: Anonymous})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	const n = 50
	for i := range n {
		// Every request thrice: an execution (Begin, Finish), then two
		// replays read first (Get), each on a Call from the pool.
		for range 3 {
			r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
			r.Header.Set("Idempotency-Key", "k"+strconv.Itoa(i))
			r = r.WithContext(context.WithValue(r.Context(), requestIndexKey{}, i))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, http.StatusCreated, w.Code)
		}
	}
	require.Equal(t, 4*n, len(s.kept))
	gets := 0
	for j, k := range s.kept {
		i := j / 4
		assert.Equal(t, i, k.ctx.Value(requestIndexKey{}), "a kept context still answers for its own request")
		assert.Equal(t, context.Canceled, k.ctx.Err(), "a kept context is released, as a cancelled WithTimeout")
		assert.True(t, closed(k.ctx.Done()))
		assert.Equal(t, k.want, k.key, "a kept key is unchanged")
		assert.Contains(t, k.key, "k"+strconv.Itoa(i))
		if j%4 >= 2 {
			gets++
			assert.Nil(t, k.req, "a replay read first")
		}
	}
	assert.Equal(t, 2*n, gets)
}

func (s *keepingStore) Begin(ctx context.Context, r *BeginRequest) (BeginResult, error) {
	s.keep(ctx, r, r.Key)
	return s.m.Begin(ctx, r)
}

func TestNoReuseUnderAStoreThatKeepsContexts(t *testing.T) {
	s := &keepingStore{m: newMapStore()}
	e := New(s, Options{Principal: Anonymous})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	const n = 50
	for i := range n {
		// Every request twice: an execution (Begin, Finish), then a replay
		// (Begin), each on a Call from the pool.
		for range 2 {
			r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
			r.Header.Set("Idempotency-Key", "k"+strconv.Itoa(i))
			r = r.WithContext(context.WithValue(r.Context(), requestIndexKey{}, i))
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	require.Equal(t, 3*n, len(s.kept))
	for j, k := range s.kept {
		i := j / 3
		assert.Equal(t, i, k.ctx.Value(requestIndexKey{}), "a kept context still answers for its own request")
		assert.Equal(t, context.Canceled, k.ctx.Err(), "a kept context is released, as a cancelled WithTimeout")
		assert.Equal(t, k.want, k.key, "a kept key is unchanged")
		assert.Contains(t, k.key, "k"+strconv.Itoa(i))
		if k.req != nil {
			assert.Equal(t, k.want, k.req.Key, "a kept BeginRequest is unchanged")
		}
	}
}

// Over a store that is not ContextBound, the Calls of Handler are reused
// all the same: what the store was handed lives in a storeSide and a
// claimSide of the request's own.
func TestRecycledOverAStoreThatKeepsContexts(t *testing.T) {
	s := &keepingStore{m: newMapStore()}
	e := New(s, Options{Principal: Anonymous})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
	r.Header.Set("Idempotency-Key", "k")
	c := new(Call)
	c.initPooled(e, p, r)
	c.begin(RequestKey)
	require.NotSame(t, &c.own, c.ss)
	require.NotSame(t, &c.ownClaim, c.cs)
	require.Equal(t, Execute, c.decision)
	c.Writer(httptest.NewRecorder()).WriteHeader(http.StatusNoContent)
	require.NoError(t, c.Finish())
	c.End()
	ss, cs := c.ss, c.cs
	assert.True(t, c.recyclable())
	c.reset()
	require.Len(t, s.kept, 2)
	assert.Same(t, &cs.breq, s.kept[0].req)
	assert.Same(t, &ss.bctx, s.kept[0].ctx)
	assert.Same(t, &cs.fctx, s.kept[1].ctx)
	assert.Equal(t, s.kept[0].want, cs.breq.Key, "the claimSide outlives the Call's reset")
	assert.Equal(t, s.kept[0].want, s.kept[0].key, "and so does the storeSide (the scope key)")

	// Under a ContextBound store the Call's own storeSide and claimSide
	// serve.
	c.initPooled(New(newMapStore(), Options{Principal: Anonymous}), p, r)
	assert.Same(t, &c.own, c.ss)
	assert.Same(t, &c.ownClaim, c.cs)
}

// Handlers that end around the scheduler's ticks, from many goroutines: a
// Call taken to be armed as it finishes is never recycled under the
// scheduler (run with -race).
func TestHeartbeatSchedulerRaces(t *testing.T) {
	s := newMapStore()
	e := New(s, Options{Principal: Anonymous})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict, InFlight: InFlightSpec{Lease: 6 * time.Millisecond}})
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("Idempotency-Key")[1:])
		time.Sleep(time.Duration(n%5) * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	}))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
				r.Header.Set("Idempotency-Key", "k"+strconv.Itoa(g*1000+i))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				assert.Equal(t, http.StatusCreated, w.Code)
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Positive(t, s.extends, "handlers of 2 to 4ms outlived a sixth of a 6ms lease")
}

// A Call from the pool over a store that is not ContextBound makes what it
// hands the store once its scope key is built, in one allocation: a
// storeSide alone for a replay read first, a storeSide and a claimSide
// together for a request that claims (and a claimSide later for one read
// first that Get did not settle).
func TestSidesOfAPooledCall(t *testing.T) {
	s := &keepingStore{m: newMapStore()}
	e := New(keepingReadFirst{s}, Options{Principal: Anonymous})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	call := func(key string) *Call {
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", key)
		c := new(Call)
		c.initPooled(e, p, r)
		c.begin(RequestKey)
		return c
	}
	together := func(c *Call) bool {
		return uintptr(unsafe.Pointer(c.cs))-uintptr(unsafe.Pointer(c.ss)) == unsafe.Offsetof(sides{}.cs)
	}

	c := call("k1")
	require.Equal(t, Execute, c.decision)
	assert.False(t, c.readsFirst)
	require.NotNil(t, c.cs)
	assert.True(t, together(c), "one allocation")
	assert.Equal(t, unsafe.Pointer(&c.ss.scopeBuf[0]), unsafe.Pointer(unsafe.StringData(c.scope)), "the scope key lives in it")
	c.Writer(httptest.NewRecorder()).WriteHeader(http.StatusCreated)
	require.NoError(t, c.Finish())
	c.End()

	c = call("k1")
	require.Equal(t, Replay, c.decision)
	assert.True(t, c.readsFirst)
	assert.Nil(t, c.cs, "a replay read first makes no claimSide")
	assert.NotSame(t, &c.own, c.ss)
	assert.Equal(t, unsafe.Pointer(&c.ss.scopeBuf[0]), unsafe.Pointer(unsafe.StringData(c.scope)), "the scope key lives in its storeSide")
	assert.Equal(t, "k1", c.key)
	c.End()

	// Read first, not settled (the record is gone): Begin claims.
	s.m.mu.Lock()
	clear(s.m.m)
	s.m.mu.Unlock()
	c = call("k1")
	require.Equal(t, Execute, c.decision)
	assert.True(t, c.readsFirst)
	require.NotNil(t, c.cs)
	// Made apart (claimSide), which addresses cannot tell: a claimSide
	// alone (304 bytes) is in a storeSide's size class (320) and may
	// follow one in memory at the offset sides puts it.
	c.Writer(httptest.NewRecorder()).WriteHeader(http.StatusCreated)
	require.NoError(t, c.Finish())
	c.End()
}

// TestSidesSizeClass: what a pooled Call over a store that is not
// ContextBound allocates for a request that claims (sides) takes no more
// heap than the one storeSide of before the split into storeSide and
// claimSide (640 bytes: its size class, for 608), and a storeSide alone
// (a replay read first) takes 320 (a boundedCtx of 160 bytes, its queue
// neighbours a heap index in its padding): a boundedCtx of 8 bytes more
// puts a storeSide in the next class (352), 24 more sides (704).
func TestSidesSizeClass(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	perObject := func(alloc func() any) uint64 {
		const n = 1000
		keep := make([]any, n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range keep {
			keep[i] = alloc()
		}
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	assert.LessOrEqual(t, perObject(func() any { return new(sides) }), uint64(640))
	assert.LessOrEqual(t, perObject(func() any { return new(storeSide) }), uint64(320))
}

// keepingLocal is a keepingStore that is a LocalReader (and not
// ContextBound): its Engine may answer a keyed request from ReadLocal.
type keepingLocal struct{ *keepingStore }

func (s keepingLocal) ReadLocal(key string, _ []byte) (Record, bool) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	rec, ok := s.m.m[key]
	return rec, ok
}

// TestSidesOfALocalReplay: a request whose fingerprint waits for the
// LocalReader (fpLater), answered from it without a claim, makes no
// claimSide (it made both sides up front before).
func TestSidesOfALocalReplay(t *testing.T) {
	s := keepingLocal{&keepingStore{m: newMapStore()}}
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	call := func(e *Engine, key string) *Call {
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", key)
		c := new(Call)
		c.initPooled(e, p, r)
		c.begin(RequestKey)
		return c
	}
	c := call(New(s, Options{Principal: Anonymous}), "k1")
	require.Equal(t, Execute, c.decision)
	c.Writer(httptest.NewRecorder()).WriteHeader(http.StatusCreated)
	require.NoError(t, c.Finish())
	c.End()

	c = call(New(s, Options{Principal: Anonymous}), "k1") // an Engine whose fingerprint cache is cold
	require.Equal(t, Replay, c.decision)
	assert.Nil(t, c.cs, "a replay answered by ReadLocal makes no claimSide")
	c.End()
}
