package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// events collects observed events.
type events struct {
	mu  sync.Mutex
	evs []idem.Event
}

func (o *events) Observe(_ context.Context, e idem.Event) {
	o.mu.Lock()
	o.evs = append(o.evs, e)
	o.mu.Unlock()
}

func (o *events) kinds() []idem.EventKind {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ks []idem.EventKind
	for _, e := range o.evs {
		ks = append(ks, e.Kind)
	}
	return ks
}

func (o *events) find(k idem.EventKind) (idem.Event, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.evs {
		if e.Kind == k {
			return e, true
		}
	}
	return idem.Event{}, false
}

// discardLogger drops logs; tests assert through events.
var discardLogger = slog.New(slog.DiscardHandler)

type fixture struct {
	t     *testing.T
	store *memstore.Store
	eng   *idem.Engine
	obs   *events
	calls atomic.Int32
}

func newFixture(t *testing.T, opts idem.Options) *fixture {
	t.Helper()
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	return newFixtureStore(t, s, s, opts)
}

// newFixtureStore builds a fixture over s (ms is s when it is a memstore).
// A nil opts.Principal means idem.Anonymous: the fixture's callers are one
// principal unless the test says otherwise (newFixtureNoPrincipal for an
// Engine with no Principal at all).
func newFixtureStore(t *testing.T, ms *memstore.Store, s idem.Store, opts idem.Options) *fixture {
	if opts.Principal == nil {
		opts.Principal = idem.Anonymous
	}
	return fixtureOver(t, ms, s, opts)
}

func fixtureOver(t *testing.T, ms *memstore.Store, s idem.Store, opts idem.Options) *fixture {
	f := &fixture{t: t, store: ms, obs: &events{}}
	if opts.Observer == nil {
		opts.Observer = f.obs
	}
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	f.eng = idem.New(s, opts)
	return f
}

// createOrder is the handler under test: it decodes the JSON body, counts
// calls and answers 201 with a Location, a Set-Cookie and a JSON body.
func (f *fixture) createOrder() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.calls.Add(1)
		var in map[string]any
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/42")
		w.Header().Set("Set-Cookie", "session=secret")
		w.Header().Set("X-Not-Allowed", "nope")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": 42, "call": n, "item": in["item"]})
	})
}

func mustCompile(t *testing.T, s idem.Spec) *idem.Policy {
	t.Helper()
	p, err := idem.Compile(s)
	require.NoError(t, err)
	return p
}

func strictSpec() idem.Spec {
	return idem.Spec{
		Operation: "createOrder", Method: "POST", Path: "/orders",
		Semantics: idem.Strict,
		Response:  idem.ResponseSpec{Headers: []string{"Location"}},
	}
}

type req struct {
	method string
	target string
	key    string // "" = no header
	body   string
	header http.Header
}

func send(h http.Handler, r req) *httptest.ResponseRecorder {
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.target == "" {
		r.target = "/orders"
	}
	hr := httptest.NewRequest(r.method, r.target, strings.NewReader(r.body))
	hr.Header.Set("Content-Type", "application/json")
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	for k, v := range r.header {
		hr.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, hr)
	return w
}

type problemBody struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail"`
	Code           string `json:"code"`
	OriginalStatus int    `json:"original_status"`
}

func requireProblem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) problemBody {
	t.Helper()
	require.Equal(t, status, w.Code, "status; body: %s", w.Body.String())
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	var p problemBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), "problem body %q", w.Body.String())
	require.Equal(t, status, p.Status)
	require.Equal(t, code, p.Code)
	require.Equal(t, idem.DefaultProblemTypeBase+code, p.Type)
	require.NotEmpty(t, p.Title)
	return p
}

// failingStore fails as told.
type failingStore struct {
	idem.Store
	beginErr, finishErr error
}

func (s *failingStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	if s.beginErr != nil {
		return idem.BeginResult{}, s.beginErr
	}
	return s.Store.Begin(ctx, r)
}

func (s *failingStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if s.finishErr != nil {
		return s.finishErr
	}
	return s.Store.Finish(ctx, key, token, st, resp)
}

// plainStore hides the optional abilities of a store.
type plainStore struct{ s idem.Store }

func (p plainStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	return p.s.Begin(ctx, r)
}
func (p plainStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	return p.s.Finish(ctx, key, token, st, resp)
}
func (p plainStore) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	return p.s.Get(ctx, key)
}

var errBoom = errors.New("boom")
