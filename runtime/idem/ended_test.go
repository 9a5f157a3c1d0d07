package idem_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// logLevels is a slog.Handler that keeps the level of every record.
type logLevels struct {
	mu     sync.Mutex
	levels []slog.Level
	msgs   []string
}

func (l *logLevels) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLevels) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLevels) WithGroup(string) slog.Handler            { return l }
func (l *logLevels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.levels = append(l.levels, r.Level)
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}

// highest returns the highest level logged (slog.LevelDebug-4 if none).
func (l *logLevels) highest() (slog.Level, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	max, msg := slog.LevelDebug-4, ""
	for i, lv := range l.levels {
		if lv > max {
			max, msg = lv, l.msgs[i]
		}
	}
	return max, msg
}

// endedCtx returns a context that has ended as a request's does when its
// client goes away (context.Canceled) or a timeout middleware's deadline
// passes (context.DeadlineExceeded).
func endedCtx(deadline bool) context.Context {
	if deadline {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		_ = cancel // ended already; nothing to release but the timer, which never started
		return ctx
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func sendCtx(h http.Handler, ctx context.Context, r req) *httptest.ResponseRecorder {
	hr := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(r.body)).WithContext(ctx)
	hr.Header.Set("Content-Type", "application/json")
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, hr)
	return w
}

// endedStatus is the status of the CodeRequestEnded answer: 503 for a
// deadline, 499 for a client that went away.
func endedStatus(deadline bool) int {
	if deadline {
		return http.StatusServiceUnavailable
	}
	return idem.StatusClientClosedRequest
}

// requireEnded checks the quiet refusal of a request that ended before its
// key was checked: CodeRequestEnded, an EventRejected with the cause, no
// store error, no FailOpen, nothing logged above Info.
func requireEnded(t *testing.T, f *fixture, logs *logLevels, w *httptest.ResponseRecorder, deadline bool) {
	t.Helper()
	p := requireProblem(t, w, endedStatus(deadline), idem.CodeRequestEnded)
	assert.Contains(t, p.Detail, "nothing was executed")
	assert.Empty(t, w.Header().Get("Retry-After"))
	for _, k := range f.obs.kinds() {
		assert.NotContains(t, []idem.EventKind{idem.EventStoreError, idem.EventFailOpen}, k, "events: %v", f.obs.kinds())
	}
	ev, ok := f.obs.find(idem.EventRejected)
	require.True(t, ok, "events: %v", f.obs.kinds())
	assert.Equal(t, idem.CodeRequestEnded, ev.Code)
	assert.Equal(t, w.Code, ev.Status)
	assert.True(t, errors.Is(ev.Err, context.Canceled) || errors.Is(ev.Err, context.DeadlineExceeded), "Err: %v", ev.Err)
	lv, msg := logs.highest()
	assert.LessOrEqual(t, lv, slog.LevelInfo, "logged at %v: %s", lv, msg)
}

// A request whose own context has ended (its client went away, or a timeout
// middleware's deadline passed) makes the store's Begin fail with the
// context's error. That is no store outage: FailOpen must not run the
// handler (the key's record may be COMPLETED: it would run twice), and the
// refusal is no store error (503 IDEMPOTENCY_STORE_UNAVAILABLE,
// EventStoreError and an Error log at every disconnect).
func TestEndedRequestIsNoStoreFailure(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		for _, deadline := range []bool{false, true} {
			for _, completed := range []bool{false, true} {
				name := map[bool]string{false: "client gone", true: "deadline passed"}[deadline] +
					map[bool]string{false: "", true: ", fail open"}[failOpen] +
					map[bool]string{false: ", new key", true: ", completed key"}[completed]
				t.Run(name, func(t *testing.T) {
					logs := &logLevels{}
					f := newFixture(t, idem.Options{FailOpen: failOpen, Logger: slog.New(logs), Principal: idem.Anonymous})
					h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
					if completed {
						require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":"book"}`}).Code)
						f.obs.evs = nil
					}
					w := sendCtx(h, endedCtx(deadline), req{key: "k", body: `{"item":"book"}`})
					requireEnded(t, f, logs, w, deadline)
					assert.Equal(t, int32(map[bool]int{true: 1}[completed]), f.calls.Load(), "the handler must not run")
				})
			}
		}
	}
}

// Options.Principal that fails because the request ended (it called a
// service with the request's context) is no 500
// IDEMPOTENCY_PRINCIPAL_UNAVAILABLE either.
func TestEndedRequestPrincipalFails(t *testing.T) {
	logs := &logLevels{}
	f := newFixture(t, idem.Options{Logger: slog.New(logs), Principal: func(r *http.Request) (string, error) {
		return "", r.Context().Err()
	}})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	requireEnded(t, f, logs, sendCtx(h, endedCtx(false), req{key: "k", body: `{}`}), false)
	assert.Zero(t, f.calls.Load())
}

// Over a ReadFirst store a retry reads the record with Get first: a Get
// that fails because the request ended refuses it at once (the Begin
// after it would fail as well).
func TestEndedRequestReadFirst(t *testing.T) {
	cs := newCountingStore(t, nil)
	logs := &logLevels{}
	f := newFixtureStore(t, cs.ms, readFirstStore{cs}, idem.Options{Logger: slog.New(logs), Principal: idem.Anonymous, DisableHeartbeat: true})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{}`}).Code)
	f.obs.evs = nil
	begins, gets := cs.calls()
	requireEnded(t, f, logs, sendCtx(h, endedCtx(true), req{key: "k", body: `{}`}), true)
	b, g := cs.calls()
	assert.Equal(t, [2]int32{begins, gets + 1}, [2]int32{b, g}, "one Get, no Begin")
	assert.Equal(t, int32(1), f.calls.Load())
}

// endingStore ends a request's context from inside the store: before the
// Begin it is told to (the client leaves while the engine waits), or right
// after a Begin that claimed the key (it leaves before the transaction
// opens).
type endingStore struct {
	*fakeTx
	mu          sync.Mutex
	cancel      context.CancelFunc
	beforeBegin int // end the request before this Begin (1: the first)
	afterClaim  bool
	begins      int
}

func (s *endingStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	s.mu.Lock()
	s.begins++
	if s.begins == s.beforeBegin {
		s.cancel()
	}
	s.mu.Unlock()
	res, err := s.fakeTx.Begin(ctx, r)
	if err == nil && res.Acquired && s.afterClaim {
		s.cancel()
	}
	return res, err
}

func (s *endingStore) BeginTx(ctx context.Context, key string, token idem.Token) (context.Context, func(idem.State, []byte) error, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err // as a database driver does
	}
	return s.fakeTx.BeginTx(ctx, key, token)
}

// A duplicate that waits for the first request (InFlight.Wait) and whose
// own request ends meanwhile is answered as in flight, whether the engine
// notices the end while it sleeps or through the Begin that fails with it.
func TestEndedRequestWhileWaiting(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	es := &endingStore{fakeTx: &fakeTx{Store: ms}, cancel: cancel, beforeBegin: 2}
	logs := &logLevels{}
	f := newFixtureStore(t, ms, plainStore{es}, idem.Options{Logger: slog.New(logs), Principal: idem.Anonymous, DisableHeartbeat: true})
	spec := strictSpec()
	spec.InFlight.Wait = time.Minute
	p := mustCompile(t, spec)
	first := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
	first.Header.Set("Content-Type", "application/json")
	c := f.eng.Begin(first, p, idem.KeyFrom("k"))
	defer c.End()
	require.Equal(t, idem.Execute, c.Decision())
	es.mu.Lock()
	es.begins = 0
	es.mu.Unlock()

	w := sendCtx(f.eng.Handler(p, f.createOrder()), ctx, req{key: "k", body: `{}`})
	requireProblem(t, w, http.StatusConflict, idem.CodeKeyInUse)
	ev, ok := f.obs.find(idem.EventInFlight)
	require.True(t, ok, "events: %v", f.obs.kinds())
	assert.Equal(t, http.StatusConflict, ev.Status)
	_, ok = f.obs.find(idem.EventStoreError)
	assert.False(t, ok, "events: %v", f.obs.kinds())
	lv, msg := logs.highest()
	assert.LessOrEqual(t, lv, slog.LevelInfo, "logged at %v: %s", lv, msg)
}

// In transactional mode the transaction's context is the request's: a
// request that ends before BeginTx, or before its commit, makes them fail
// with its context's error. That is no store failure either: BeginTx's
// refuses the request quietly (nothing ran, the key is released in the
// background), and the commit's is an EventExecuted, FAILED, with
// CodeRequestEnded sent; the key is released and a retry runs.
func TestEndedRequestTransactional(t *testing.T) {
	t.Run("before BeginTx", func(t *testing.T) {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = ms.Close() })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		es := &endingStore{fakeTx: &fakeTx{Store: ms}, cancel: cancel, afterClaim: true}
		logs := &logLevels{}
		f := newFixtureStore(t, ms, es, idem.Options{Transactional: true, FailOpen: true, Logger: slog.New(logs), Principal: idem.Anonymous})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		requireEnded(t, f, logs, sendCtx(h, ctx, req{key: "k", body: `{}`}), false)
		assert.Zero(t, f.calls.Load(), "FailOpen must not run it")
		es.afterClaim = false
		drain(t, f.eng) // the release is made in the background
		require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{}`}).Code, "the key was released")
	})
	t.Run("before the commit", func(t *testing.T) {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = ms.Close() })
		ft := &fakeTx{Store: ms}
		logs := &logLevels{}
		f := newFixtureStore(t, ms, ft, idem.Options{Transactional: true, Logger: slog.New(logs), Principal: idem.Anonymous})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			w.WriteHeader(http.StatusCreated)
			cancel() // the client leaves; the database driver's commit fails with it
			ft.commitErr = r.Context().Err()
		}))
		w := sendCtx(h, ctx, req{key: "k", body: `{}`})
		p := requireProblem(t, w, idem.StatusClientClosedRequest, idem.CodeRequestEnded)
		assert.Contains(t, p.Detail, "before its result was committed")
		_, ok := f.obs.find(idem.EventStoreError)
		assert.False(t, ok, "events: %v", f.obs.kinds())
		ev, ok := f.obs.find(idem.EventExecuted)
		require.True(t, ok, "events: %v", f.obs.kinds())
		assert.ErrorIs(t, ev.Err, context.Canceled)
		ev.Err, ev.Duration = nil, 0
		assert.Equal(t, idem.Event{Kind: idem.EventExecuted, Operation: "createOrder", Key: "k", Protected: true,
			State: idem.StateFailed, Status: idem.StatusClientClosedRequest, Code: idem.CodeRequestEnded}, ev)
		lv, msg := logs.highest()
		assert.LessOrEqual(t, lv, slog.LevelInfo, "logged at %v: %s", lv, msg)
		ft.commitErr = nil
		drain(t, f.eng) // the key is released in the background
		require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{}`}).Code)
		assert.Equal(t, int32(2), f.calls.Load(), "the key was released: the retry runs")
	})
}
