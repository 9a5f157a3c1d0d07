package idem_test

import (
	"context"
	"errors"
	"io"
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

// tickClock is an engine clock that advances a millisecond at every
// reading, so that every measured Duration is positive.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// TestEventFields checks, for every event kind (and the ways each comes
// about), the fields Event's documentation promises: the operation, the
// key, Protected, the states, the status sent to the client (for
// EventExecuted the handler's, protected or not) with its problem code,
// the cause, and the handler's run time.
func TestEventFields(t *testing.T) {
	created := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}
	type env struct {
		t  *testing.T
		f  *fixture
		ft *fakeTx
		p  *idem.Policy
		h  http.Handler
	}
	type setup struct {
		spec     func(*idem.Spec)
		opts     func(*idem.Options)
		store    func(ms *memstore.Store) idem.Store
		tx       bool
		handler  func(w http.ResponseWriter, r *http.Request)
		scenario func(e *env) *httptest.ResponseRecorder // returns what the client of the event's request got (nil: none)
	}
	cases := []struct {
		name  string
		setup setup
		kind  idem.EventKind
		want  idem.Event
		err   bool // Err set
		dur   bool // Duration > 0
	}{
		{
			name: "executed protected",
			setup: setup{scenario: func(e *env) *httptest.ResponseRecorder {
				return send(e.h, req{key: "k", body: `{}`})
			}},
			kind: idem.EventExecuted,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 201},
			dur:  true,
		},
		{
			name: "executed unprotected, no key",
			setup: setup{spec: func(s *idem.Spec) { s.Key.Required = idem.Optional },
				scenario: func(e *env) *httptest.ResponseRecorder { return send(e.h, req{body: `{}`}) }},
			kind: idem.EventExecuted,
			want: idem.Event{Status: 201},
			dur:  true,
		},
		{
			name: "executed unprotected, implicit 200",
			setup: setup{spec: func(s *idem.Spec) { s.Key.Required = idem.Optional },
				handler:  func(http.ResponseWriter, *http.Request) {},
				scenario: func(e *env) *httptest.ResponseRecorder { return send(e.h, req{body: `{}`}) }},
			kind: idem.EventExecuted,
			want: idem.Event{Status: 200},
			dur:  true,
		},
		{
			name: "executed after fail-open",
			setup: setup{opts: func(o *idem.Options) { o.FailOpen = true },
				store: func(ms *memstore.Store) idem.Store { return &failingStore{Store: ms, beginErr: errBoom} },
				scenario: func(e *env) *httptest.ResponseRecorder {
					return send(e.h, req{key: "k", body: `{}`})
				}},
			kind: idem.EventExecuted,
			want: idem.Event{Key: "k", Status: 201},
			dur:  true,
		},
		{
			name: "store-error before fail-open",
			setup: setup{opts: func(o *idem.Options) { o.FailOpen = true },
				store: func(ms *memstore.Store) idem.Store { return &failingStore{Store: ms, beginErr: errBoom} },
				scenario: func(e *env) *httptest.ResponseRecorder {
					send(e.h, req{key: "k", body: `{}`})
					return nil // the answer is the handler's, reported by EventExecuted
				}},
			kind: idem.EventStoreError,
			want: idem.Event{Key: "k"},
			err:  true,
		},
		{
			name: "fail-open",
			setup: setup{opts: func(o *idem.Options) { o.FailOpen = true },
				store: func(ms *memstore.Store) idem.Store { return &failingStore{Store: ms, beginErr: errBoom} },
				scenario: func(e *env) *httptest.ResponseRecorder {
					send(e.h, req{key: "k", body: `{}`})
					return nil
				}},
			kind: idem.EventFailOpen,
			want: idem.Event{Key: "k"},
			err:  true,
		},
		{
			name: "store-error fail-closed",
			setup: setup{store: func(ms *memstore.Store) idem.Store { return &failingStore{Store: ms, beginErr: errBoom} },
				scenario: func(e *env) *httptest.ResponseRecorder {
					return send(e.h, req{key: "k", body: `{}`})
				}},
			kind: idem.EventStoreError,
			want: idem.Event{Key: "k", Status: 503, Code: idem.CodeStoreUnavailable},
			err:  true,
		},
		{
			name: "store-error at finish",
			// No background retry of the Finish: it would outlive the test
			// (the store keeps failing).
			setup: setup{opts: func(o *idem.Options) { o.FinishRetryFor = -1 },
				store: func(ms *memstore.Store) idem.Store { return &failingStore{Store: ms, finishErr: errBoom} },
				scenario: func(e *env) *httptest.ResponseRecorder {
					return send(e.h, req{key: "k", body: `{}`})
				}},
			kind: idem.EventStoreError,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 201},
			err:  true,
		},
		{
			name: "store-error at a transactional commit",
			setup: setup{tx: true, scenario: func(e *env) *httptest.ResponseRecorder {
				e.ft.commitErr = errBoom
				return send(e.h, req{key: "k", body: `{}`})
			}},
			kind: idem.EventStoreError,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 503, Code: idem.CodeStoreUnavailable},
			err:  true,
		},
		{
			name: "fenced transactional commit",
			setup: setup{tx: true, scenario: func(e *env) *httptest.ResponseRecorder {
				e.ft.commitErr = idem.ErrFenced
				return send(e.h, req{key: "k", body: `{}`})
			}},
			kind: idem.EventFenced,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 409, Code: idem.CodeKeyInUse},
			err:  true,
		},
		{
			name: "fenced late completion",
			setup: setup{spec: func(s *idem.Spec) { s.InFlight.Lease = 20 * time.Millisecond },
				opts: func(o *idem.Options) { o.DisableHeartbeat = true },
				scenario: func(e *env) *httptest.ResponseRecorder {
					c := e.f.eng.Begin(jsonRequest(`{}`), e.p, idem.KeyFrom("k"))
					defer c.End()
					require.Equal(e.t, idem.Execute, c.Decision())
					w := httptest.NewRecorder()
					created(c.Writer(w), nil)
					time.Sleep(40 * time.Millisecond)
					require.Equal(e.t, 201, send(e.h, req{key: "k", body: `{}`}).Code, "taken over")
					require.ErrorIs(e.t, c.Finish(), idem.ErrFenced)
					return w
				}},
			kind: idem.EventFenced,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 201},
			err:  true,
		},
		{
			name: "lease-takeover",
			setup: setup{spec: func(s *idem.Spec) { s.InFlight.Lease = 20 * time.Millisecond },
				opts: func(o *idem.Options) { o.DisableHeartbeat = true },
				scenario: func(e *env) *httptest.ResponseRecorder {
					c := e.f.eng.Begin(jsonRequest(`{}`), e.p, idem.KeyFrom("k"))
					defer c.End()
					time.Sleep(40 * time.Millisecond)
					send(e.h, req{key: "k", body: `{}`})
					return nil // reported before the handler answers
				}},
			kind: idem.EventLeaseTakeover,
			want: idem.Event{Key: "k", Protected: true, Prior: idem.StatePending},
		},
		{
			name: "replayed",
			setup: setup{scenario: func(e *env) *httptest.ResponseRecorder {
				send(e.h, req{key: "k", body: `{}`})
				return send(e.h, req{key: "k", body: `{}`})
			}},
			kind: idem.EventReplayed,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 201},
		},
		{
			name: "replayed, not replayable",
			setup: setup{spec: func(s *idem.Spec) { s.Response.MaxBytes = 4 },
				scenario: func(e *env) *httptest.ResponseRecorder {
					send(e.h, req{key: "k", body: `{}`})
					return send(e.h, req{key: "k", body: `{}`})
				}},
			kind: idem.EventReplayed,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 409, Code: idem.CodeResponseUnavailable},
		},
		{
			name: "not-replayable",
			setup: setup{spec: func(s *idem.Spec) { s.Response.MaxBytes = 4 },
				scenario: func(e *env) *httptest.ResponseRecorder {
					return send(e.h, req{key: "k", body: `{}`})
				}},
			kind: idem.EventNotReplayable,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 201},
		},
		{
			name: "loose-mismatch",
			setup: setup{spec: func(s *idem.Spec) { s.Semantics = idem.Loose },
				scenario: func(e *env) *httptest.ResponseRecorder {
					send(e.h, req{key: "k", body: `{"a":1}`})
					return send(e.h, req{key: "k", body: `{"a":2}`})
				}},
			kind: idem.EventLooseMismatch,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateCompleted, Status: 201},
		},
		{
			name: "conflict",
			setup: setup{scenario: func(e *env) *httptest.ResponseRecorder {
				send(e.h, req{key: "k", body: `{"a":1}`})
				return send(e.h, req{key: "k", body: `{"a":2}`})
			}},
			kind: idem.EventConflict,
			want: idem.Event{Key: "k", Protected: true, Status: 422, Code: idem.CodeKeyReused},
		},
		{
			name: "in-flight",
			setup: setup{scenario: func(e *env) *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`))
				r.Header.Set("Content-Type", "application/json") // as send sets it
				c := e.f.eng.Begin(r, e.p, idem.KeyFrom("k"))
				defer c.End()
				return send(e.h, req{key: "k", body: `{}`})
			}},
			kind: idem.EventInFlight,
			want: idem.Event{Key: "k", Protected: true, State: idem.StatePending, Status: 409, Code: idem.CodeKeyInUse},
		},
		{
			name: "rejected, key missing",
			setup: setup{scenario: func(e *env) *httptest.ResponseRecorder {
				return send(e.h, req{body: `{}`})
			}},
			kind: idem.EventRejected,
			want: idem.Event{Status: 400, Code: idem.CodeKeyMissing},
		},
		{
			name: "rejected, body too large",
			setup: setup{spec: func(s *idem.Spec) { s.Request.MaxBytes = 2 },
				scenario: func(e *env) *httptest.ResponseRecorder {
					return send(e.h, req{key: "k", body: `{"a":1}`})
				}},
			kind: idem.EventRejected,
			want: idem.Event{Key: "k", Status: 413, Code: idem.CodeRequestTooLarge},
		},
		{
			name: "rejected, principal failed",
			setup: setup{opts: func(o *idem.Options) {
				o.Principal = func(*http.Request) (string, error) { return "", errBoom }
			}, scenario: func(e *env) *httptest.ResponseRecorder {
				return send(e.h, req{key: "k", body: `{}`})
			}},
			kind: idem.EventRejected,
			want: idem.Event{Key: "k", Status: 500, Code: idem.CodePrincipalUnavailable},
			err:  true,
		},
		{
			name: "rejected, principal's problem with a status out of range",
			setup: setup{opts: func(o *idem.Options) {
				o.Principal = func(*http.Request) (string, error) {
					return "", &idem.Problem{Status: 200, Code: "NO_TENANT", Detail: "no tenant"}
				}
			}, scenario: func(e *env) *httptest.ResponseRecorder {
				return send(e.h, req{key: "k", body: `{}`})
			}},
			kind: idem.EventRejected,
			want: idem.Event{Key: "k", Status: 500, Code: "NO_TENANT"},
			err:  true,
		},
		{
			name: "rejected, the request ended before its key was checked",
			setup: setup{opts: func(o *idem.Options) { o.FailOpen = true },
				scenario: func(e *env) *httptest.ResponseRecorder {
					return sendCtx(e.h, endedCtx(false), req{key: "k", body: `{}`})
				}},
			kind: idem.EventRejected,
			want: idem.Event{Key: "k", Protected: true, Status: idem.StatusClientClosedRequest, Code: idem.CodeRequestEnded},
			err:  true,
		},
		{
			name: "executed, a transactional commit failed as the request ended",
			setup: setup{tx: true, handler: func(w http.ResponseWriter, r *http.Request) {
				created(w, r)
				cancelRequest(r)
			}, scenario: func(e *env) *httptest.ResponseRecorder {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				e.ft.commitErr = context.Canceled
				return sendCtx(e.h, context.WithValue(ctx, cancelKey{}, cancel), req{key: "k", body: `{}`})
			}},
			kind: idem.EventExecuted,
			want: idem.Event{Key: "k", Protected: true, State: idem.StateFailed, Status: idem.StatusClientClosedRequest, Code: idem.CodeRequestEnded},
			err:  true,
			dur:  true,
		},
		{
			name: "heartbeat-failed, store error",
			setup: setup{spec: func(s *idem.Spec) { s.InFlight.Lease = 30 * time.Millisecond },
				store: func(ms *memstore.Store) idem.Store { return newExtendFailing(ms, errBoom) },
				handler: func(w http.ResponseWriter, r *http.Request) {
					waitExtendFailed(r)
					created(w, r)
				},
				scenario: func(e *env) *httptest.ResponseRecorder {
					sendExtendFailing(e.t.Context(), e.h, func() bool { _, ok := e.f.obs.find(idem.EventHeartbeatFailed); return ok })
					return nil // reported while the handler runs: no status yet
				}},
			kind: idem.EventHeartbeatFailed,
			want: idem.Event{Key: "k", Protected: true},
			err:  true,
		},
		{
			name: "heartbeat-failed, lease lost",
			setup: setup{spec: func(s *idem.Spec) { s.InFlight.Lease = 30 * time.Millisecond },
				store: func(ms *memstore.Store) idem.Store { return newExtendFailing(ms, idem.ErrFenced) },
				handler: func(w http.ResponseWriter, r *http.Request) {
					waitExtendFailed(r)
					created(w, r)
				},
				scenario: func(e *env) *httptest.ResponseRecorder {
					sendExtendFailing(e.t.Context(), e.h, func() bool { _, ok := e.f.obs.find(idem.EventHeartbeatFailed); return ok })
					return nil
				}},
			kind: idem.EventHeartbeatFailed,
			want: idem.Event{Key: "k", Protected: true},
			err:  true,
		},
		{
			name: "rejected by Engine.Refuse",
			setup: setup{scenario: func(e *env) *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				e.f.eng.Refuse(w, httptest.NewRequest("POST", "/orders", nil), e.p,
					&idem.Problem{Status: http.StatusBadRequest, Code: idem.CodeKeyInvalid, Detail: "malformed"})
				return w
			}},
			kind: idem.EventRejected,
			want: idem.Event{Status: 400, Code: idem.CodeKeyInvalid},
		},
		{
			name: "rejected by Engine.RefuseWithCause",
			setup: setup{scenario: func(e *env) *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				e.f.eng.RefuseWithCause(w, httptest.NewRequest("POST", "/orders", nil), e.p,
					&idem.Problem{Status: http.StatusBadRequest, Code: idem.CodeKeyInvalid, Detail: "malformed"}, errBoom)
				return w
			}},
			kind: idem.EventRejected,
			want: idem.Event{Status: 400, Code: idem.CodeKeyInvalid},
			err:  true,
		},
	}
	seen := map[idem.EventKind]bool{}
	for _, tc := range cases {
		seen[tc.kind] = true
		t.Run(tc.name, func(t *testing.T) {
			spec := strictSpec()
			if tc.setup.spec != nil {
				tc.setup.spec(&spec)
			}
			clock := &tickClock{t: time.Unix(1_700_000_000, 0)}
			opts := idem.Options{Now: clock.now}
			if tc.setup.opts != nil {
				tc.setup.opts(&opts)
			}
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			var s idem.Store = ms
			var ft *fakeTx
			switch {
			case tc.setup.tx:
				ft = &fakeTx{Store: ms}
				s = ft
				opts.Transactional = true
			case tc.setup.store != nil:
				s = tc.setup.store(ms)
			}
			f := newFixtureStore(t, ms, s, opts)
			p := mustCompile(t, spec)
			handler := tc.setup.handler
			if handler == nil {
				handler = created
			}
			e := &env{t: t, f: f, ft: ft, p: p, h: f.eng.Handler(p, http.HandlerFunc(handler))}
			w := tc.setup.scenario(e)

			var got []idem.Event
			f.obs.mu.Lock()
			for _, ev := range f.obs.evs {
				if ev.Kind == tc.kind {
					got = append(got, ev)
				}
			}
			f.obs.mu.Unlock()
			require.NotEmpty(t, got, "no %s event in %v", tc.kind, f.obs.kinds())
			ev := got[len(got)-1]
			if w != nil && tc.kind != idem.EventExecuted {
				assert.Equal(t, w.Code, ev.Status, "Status is the status sent to the client")
				if strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json") {
					assert.Contains(t, w.Body.String(), `"code":"`+ev.Code+`"`, "Code is the problem's")
				} else {
					assert.Empty(t, ev.Code, "no problem, no code")
				}
			}
			assert.Equal(t, tc.err, ev.Err != nil, "Err: %v", ev.Err)
			if tc.err && tc.kind != idem.EventRejected {
				assert.True(t, errors.Is(ev.Err, errBoom) || errors.Is(ev.Err, idem.ErrFenced) || errors.Is(ev.Err, context.Canceled), "Err: %v", ev.Err)
			}
			assert.Equal(t, tc.dur, ev.Duration > 0, "Duration: %v", ev.Duration)
			ev.Err, ev.Duration = nil, 0
			want := tc.want
			want.Kind, want.Operation = tc.kind, spec.Operation
			assert.Equal(t, want, ev)
		})
	}
	for k := idem.EventExecuted; k <= idem.EventHeartbeatFailed; k++ {
		assert.True(t, seen[k], "no case for %s", k)
	}
}

// An unprotected run with an Observer writes through a pass-through writer:
// what the client's writer supports (Flush, Hijack, sendfile's ReadFrom)
// still works, and the status is noted whichever way the handler wrote.
func TestUnprotectedWriterPassesThrough(t *testing.T) {
	spec := strictSpec()
	spec.Key.Required = idem.Optional
	p := mustCompile(t, spec)
	for _, tc := range []struct {
		name   string
		write  func(t *testing.T, w http.ResponseWriter)
		status int
	}{
		{"WriteString", func(t *testing.T, w http.ResponseWriter) {
			_, err := io.WriteString(w, "ok")
			require.NoError(t, err)
		}, 200},
		{"ReadFrom", func(t *testing.T, w http.ResponseWriter) {
			_, err := w.(io.ReaderFrom).ReadFrom(strings.NewReader("ok"))
			require.NoError(t, err)
		}, 200},
		{"Flush", func(t *testing.T, w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			require.NoError(t, http.NewResponseController(w).Flush())
		}, 202},
		{"Hijack", func(t *testing.T, w http.ResponseWriter) {
			_, _, err := http.NewResponseController(w).Hijack()
			require.ErrorIs(t, err, http.ErrNotSupported, "httptest's recorder cannot be hijacked: the error is its own")
			w.WriteHeader(http.StatusTeapot)
		}, 418},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			h := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tc.write(t, w) }))
			w := send(h, req{body: `{}`})
			require.Equal(t, tc.status, w.Code)
			ev, ok := f.obs.find(idem.EventExecuted)
			require.True(t, ok)
			assert.Equal(t, tc.status, ev.Status)
			assert.False(t, ev.Protected)
		})
	}
	t.Run("Flush reaches the client", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush()
		}))
		w := send(h, req{body: `{}`})
		assert.True(t, w.Flushed)
	})
	t.Run("a handler that did not finish", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		c := f.eng.Begin(httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)), p, idem.NoKey)
		require.Equal(t, idem.Execute, c.Decision())
		require.False(t, c.Protected())
		c.End() // an error, a panic: no Finish
		ev, ok := f.obs.find(idem.EventExecuted)
		require.True(t, ok, "reported as protected runs are")
		assert.Positive(t, ev.Duration)
		ev.Duration = 0
		assert.Equal(t, idem.Event{Kind: idem.EventExecuted, Operation: spec.Operation}, ev)
	})
}

// cancelKey carries, in a request's context, the function that cancels it
// (cancelRequest: the client goes away while the handler runs).
type cancelKey struct{}

func cancelRequest(r *http.Request) { r.Context().Value(cancelKey{}).(context.CancelFunc)() }

// jsonRequest is the request send makes, without its key: a strict
// takeover needs the same fingerprint.
func jsonRequest(body string) *http.Request {
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// extendFailing is a store whose lease extensions fail with err; each one
// signals the extendFailed in its context (the request's values).
type extendFailing struct {
	*memstore.Store
	err error
}

func newExtendFailing(ms *memstore.Store, err error) *extendFailing {
	return &extendFailing{Store: ms, err: err}
}

// extendFailedKey is the context key of the request's *extendFailed.
type extendFailedKey struct{}

// extendFailed is closed (ch) at the first failed extension; reported
// tells when the failure was reported (a Call that finishes first reports
// nothing).
type extendFailed struct {
	once     sync.Once
	ch       chan struct{}
	reported func() bool
	// cancel, if not nil, cancels the request's context at the first
	// failed extension, before the failure is reported: a client that went
	// away.
	cancel context.CancelFunc
}

func (s *extendFailing) ExtendLease(ctx context.Context, _ string, _ idem.Token, _ time.Duration) error {
	if f, ok := ctx.Value(extendFailedKey{}).(*extendFailed); ok {
		f.once.Do(func() {
			if f.cancel != nil {
				f.cancel()
			}
			close(f.ch)
		})
	}
	return s.err
}

// waitExtendFailed, in a handler, waits until the first failed extension
// of its request was reported (at most 10s).
func waitExtendFailed(r *http.Request) {
	f := r.Context().Value(extendFailedKey{}).(*extendFailed)
	<-f.ch
	for deadline := time.Now().Add(10 * time.Second); !f.reported() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// sendExtendFailing sends key "k" to h with an *extendFailed in the
// request's context (a child of ctx), for a handler that waits with
// waitExtendFailed until reported is true.
func sendExtendFailing(ctx context.Context, h http.Handler, reported func() bool) *httptest.ResponseRecorder {
	return sendExtendFailingCancel(ctx, h, reported, nil)
}

// sendExtendFailingCancel is sendExtendFailing whose request's context is
// cancelled by cancel, if not nil, at the first failed extension.
func sendExtendFailingCancel(ctx context.Context, h http.Handler, reported func() bool, cancel context.CancelFunc) *httptest.ResponseRecorder {
	ctx = context.WithValue(ctx, extendFailedKey{}, &extendFailed{ch: make(chan struct{}), reported: reported, cancel: cancel})
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
