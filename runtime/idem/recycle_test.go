package idem

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

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
	s.m[key] = rec
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
	e := New(s, Options{})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict, InFlight: InFlightSpec{Lease: 30 * time.Millisecond}})
	c := new(Call)
	run := func(key string, d time.Duration) *Call {
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", key)
		c.init(e, p, r)
		c.pooled = true
		c.begin(RequestKey)
		require.Equal(t, Execute, c.decision)
		time.Sleep(d)
		c.Writer(httptest.NewRecorder()).WriteHeader(http.StatusNoContent)
		require.NoError(t, c.Finish())
		c.End()
		return c
	}
	for _, key := range []string{"quick", "again"} {
		require.True(t, run(key, 0).recyclable())
		require.Nil(t, c.hb, "a quick handler gets no heartbeat timer")
		c.reset() // what recycle does before it puts the Call in the pool
	}
	assert.Zero(t, s.extends)
	// A recycled Call's claim is still heartbeaten: armed after 5 to 10ms.
	assert.False(t, run("slow", 25*time.Millisecond).recyclable(), "the heartbeat ran")
	assert.Positive(t, s.extends)
}

// Recycling depends on the store's promise (ContextBound), not on
// heartbeats: an engine without them recycles its Calls too.
func TestRecyclableWithoutHeartbeat(t *testing.T) {
	e := New(newMapStore(), Options{DisableHeartbeat: true})
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
	e := New(newMapStore(), Options{})
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

// keepingStore keeps the ctx of every Begin, as a pooled network client may
// (pgxpool starts connections with the caller's context values): it is not
// ContextBound, so the engine must not reuse the memory behind those contexts.
type keepingStore struct {
	m    *mapStore // not embedded: its ContextBound must not be promoted
	mu   sync.Mutex
	kept []context.Context
}

func (s *keepingStore) Finish(ctx context.Context, key string, token Token, state State, resp []byte) error {
	return s.m.Finish(ctx, key, token, state, resp)
}

func (s *keepingStore) Get(ctx context.Context, key string) (Record, bool, error) {
	return s.m.Get(ctx, key)
}

func (s *keepingStore) Begin(ctx context.Context, r *BeginRequest) (BeginResult, error) {
	s.mu.Lock()
	s.kept = append(s.kept, ctx)
	s.mu.Unlock()
	return s.m.Begin(ctx, r)
}

func TestNoReuseUnderAStoreThatKeepsContexts(t *testing.T) {
	s := &keepingStore{m: newMapStore()}
	e := New(s, Options{})
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	const n = 50
	for i := range n {
		// Every request twice: an execution, then a replay (the path that
		// reuses Calls under a ContextBound store).
		for range 2 {
			r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
			r.Header.Set("Idempotency-Key", "k"+strconv.Itoa(i))
			r = r.WithContext(context.WithValue(r.Context(), requestIndexKey{}, i))
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	require.Len(t, s.kept, 2*n)
	for j, ctx := range s.kept {
		assert.Equal(t, j/2, ctx.Value(requestIndexKey{}), "a kept context still answers for its own request")
	}
}

// Handlers that end around the scheduler's ticks, from many goroutines: a
// Call taken to be armed as it finishes is never recycled under the
// scheduler (run with -race).
func TestHeartbeatSchedulerRaces(t *testing.T) {
	s := newMapStore()
	e := New(s, Options{})
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
