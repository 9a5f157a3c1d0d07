package idem_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

const noPrincipal = "no Options.Principal"

// newFixtureNoPrincipal is newFixture with no Options.Principal at all
// (newFixture's nil means Anonymous).
func newFixtureNoPrincipal(t *testing.T, opts idem.Options) *fixture {
	t.Helper()
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	return fixtureOver(t, s, s, opts)
}

// TestNoPrincipalRefused: an Engine without Options.Principal cannot tell
// callers apart, so a request of a policy scoped per principal (the
// default) is refused: 500 IDEMPOTENCY_PRINCIPAL_UNAVAILABLE, the handler
// not run, nothing stored; the Observer sees an EventRejected marked
// Misconfigured. Before, the Engine only warned and every caller shared one
// key space: Bob sending Alice's key (strict), or under Window semantics
// only the same body (no key), got Alice's response, and his own request
// never ran (the security trial's HIGH 1).
func TestNoPrincipalRefused(t *testing.T) {
	window := strictSpec()
	window.Operation, window.Semantics, window.Window = "createPayout", idem.Window, time.Hour
	optional := strictSpec()
	optional.Key.Required = idem.Optional
	for name, tc := range map[string]struct {
		spec idem.Spec
		key  string
	}{
		"keyed":               {strictSpec(), "k1"},
		"window without key":  {window, ""},
		"optional key absent": {optional, ""},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuffer{}
			f := newFixtureNoPrincipal(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			h := f.eng.Handler(mustCompile(t, tc.spec), f.createOrder())
			for _, who := range []string{"alice", "bob"} {
				w := send(h, req{key: tc.key, body: `{"item":1}`, header: http.Header{"Authorization": {who}}})
				p := requireProblem(t, w, http.StatusInternalServerError, idem.CodePrincipalUnavailable)
				assert.Equal(t, "the server could not tell who makes this request", p.Detail, "nothing internal")
				assert.Empty(t, w.Header().Get("Idempotent-Replayed"), who)
			}
			assert.Equal(t, int32(0), f.calls.Load(), "the handler never runs")
			assert.Zero(t, f.store.Stats().Entries, "nothing stored")
			ev, ok := f.obs.find(idem.EventRejected)
			require.True(t, ok, "%v", f.obs.kinds())
			assert.Equal(t, idem.CodePrincipalUnavailable, ev.Code)
			assert.Equal(t, http.StatusInternalServerError, ev.Status)
			assert.True(t, ev.Misconfigured)
			assert.ErrorIs(t, ev.Err, idem.ErrNoPrincipal)
			assert.ErrorIs(t, ev.Err, idem.ErrMisconfigured)
			assert.Equal(t, tc.spec.Operation, ev.Operation)
			assert.Equal(t, tc.key, ev.Key)
			assert.False(t, ev.Protected)
			// One ERROR, at wiring (Handler), none per request.
			assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
			assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
			assert.NotContains(t, logs.String(), "principal unavailable")
		})
	}
}

// TestNoPrincipalSharedScope: a ScopeShared policy needs no principal (all
// callers share its keys by contract): with no Options.Principal it is
// served as before, keyed and under Window semantics without a key, and
// nothing is logged.
func TestNoPrincipalSharedScope(t *testing.T) {
	keyed := strictSpec()
	keyed.Operation, keyed.Scope = "sharedOrder", idem.ScopeShared
	window := keyed
	window.Operation, window.Semantics, window.Window = "sharedPayout", idem.Window, time.Hour
	for name, tc := range map[string]struct {
		spec idem.Spec
		key  string
	}{"keyed": {keyed, "k1"}, "window without key": {window, ""}} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuffer{}
			f := newFixtureNoPrincipal(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			h := f.eng.Handler(mustCompile(t, tc.spec), f.createOrder())
			require.Equal(t, http.StatusCreated, send(h, req{key: tc.key, body: `{"item":1}`, header: http.Header{"Authorization": {"alice"}}}).Code)
			w := send(h, req{key: tc.key, body: `{"item":1}`, header: http.Header{"Authorization": {"bob"}}})
			require.Equal(t, http.StatusCreated, w.Code)
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "one key space, as the contract says")
			assert.Equal(t, int32(1), f.calls.Load())
			assert.Empty(t, logs.String())
		})
	}
}

// TestNoPrincipalLogsOnce: an Engine without Options.Principal that is
// given policies scoped per principal logs one ERROR when they are wired
// (not per request, not per handler), naming their operations and the fix.
func TestNoPrincipalLogsOnce(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixtureNoPrincipal(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	shared := strictSpec()
	shared.Operation, shared.Scope = "sharedOrder", idem.ScopeShared
	other := strictSpec()
	other.Operation = "refundOrder"
	f.eng.Serves(mustCompile(t, shared), mustCompile(t, strictSpec()), mustCompile(t, other))
	require.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
	assert.Contains(t, logs.String(), "level=ERROR")
	assert.Contains(t, logs.String(), `operations="createOrder, refundOrder"`)
	assert.Contains(t, logs.String(), "idem.Anonymous")
	assert.Contains(t, logs.String(), "refused")

	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	for _, k := range []string{"k1", "k2", "k1"} {
		send(h, req{key: k, body: `{}`})
	}
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), "once per Engine: %s", logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "level="), "nothing else: %s", logs.String())
}

// TestNoPrincipalLogsAtHandler: Handler is wiring time: it logs before any
// request.
func TestNoPrincipalLogsAtHandler(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixtureNoPrincipal(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
	assert.Contains(t, logs.String(), `operations=createOrder`)
	send(h, req{key: "k1", body: `{}`})
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
}

// TestNoPrincipalLogsAtBegin: code that calls Begin without Serves gets the
// ERROR at the first request of such a policy, once, and every request
// refused.
func TestNoPrincipalLogsAtBegin(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixtureNoPrincipal(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	p := mustCompile(t, strictSpec())
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k1")
		c := f.eng.Begin(r, p, idem.RequestKey)
		assert.Equal(t, idem.Reject, c.Decision())
		w := httptest.NewRecorder()
		c.Respond(w)
		requireProblem(t, w, http.StatusInternalServerError, idem.CodePrincipalUnavailable)
		c.End()
	}
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
	assert.Contains(t, logs.String(), "level=ERROR")
}

// TestNoPrincipalNotLogged: a Principal (Anonymous among them) or only
// shared scopes log nothing.
func TestNoPrincipalNotLogged(t *testing.T) {
	shared := strictSpec()
	shared.Scope = idem.ScopeShared
	for name, tc := range map[string]struct {
		opts idem.Options
		spec idem.Spec
	}{
		"principal": {idem.Options{Principal: func(*http.Request) (string, error) { return "alice", nil }}, strictSpec()},
		"anonymous": {idem.Options{Principal: idem.Anonymous}, strictSpec()},
		"shared":    {idem.Options{}, shared},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuffer{}
			tc.opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
			f := newFixtureNoPrincipal(t, tc.opts)
			h := f.eng.Handler(mustCompile(t, tc.spec), f.createOrder())
			require.Equal(t, http.StatusCreated, send(h, req{key: "k1", body: `{}`}).Code)
			assert.Empty(t, logs.String())
		})
	}
}

// TestAnonymousSharesKeys: Anonymous is one principal: two callers with the
// same key share its record, as with a nil Principal.
func TestAnonymousSharesKeys(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	require.Equal(t, http.StatusCreated, send(h, req{key: "k1", body: `{}`, header: http.Header{"Authorization": {"alice"}}}).Code)
	w := send(h, req{key: "k1", body: `{}`, header: http.Header{"Authorization": {"bob"}}})
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
}

// TestEmptyPrincipalRefused: a Principal other than Anonymous that answers
// "" (userID(r) on a request without a caller) is refused as a Principal
// error (500 IDEMPOTENCY_PRINCIPAL_UNAVAILABLE, logged with the fix), under
// every semantics and scope, and nothing runs: "" is the key space all
// anonymous callers share, so under Window semantics a second caller
// without a key sending the same body got the first caller's response
// (the security review's TestWindowKeylessCrossCaller). A *Problem error
// still passes through, and Anonymous still shares "" silently.
func TestEmptyPrincipalRefused(t *testing.T) {
	userID := func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }
	window := strictSpec()
	window.Operation, window.Semantics, window.Window = "guestCheckout", idem.Window, time.Hour
	for name, spec := range map[string]idem.Spec{"strict": strictSpec(), "window": window} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuffer{}
			f := newFixture(t, idem.Options{Principal: userID, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			key := "k"
			if spec.Semantics == idem.Window {
				key = "" // recorded by body
			}
			for range 2 {
				requireProblem(t, send(h, req{key: key, body: `{"item":1}`}), 500, idem.CodePrincipalUnavailable)
			}
			assert.Equal(t, int32(0), f.calls.Load(), "nothing runs")
			assert.Equal(t, 2, strings.Count(logs.String(), "idem: principal unavailable"), logs.String())
			assert.Contains(t, logs.String(), "empty principal")
			ev, ok := f.obs.find(idem.EventRejected)
			require.True(t, ok)
			assert.ErrorIs(t, ev.Err, idem.ErrEmptyPrincipal)
			assert.Equal(t, idem.CodePrincipalUnavailable, ev.Code)
			// A caller is served.
			require.Equal(t, http.StatusCreated, send(h, req{key: key, body: `{"item":1}`, header: http.Header{"X-User": {"alice"}}}).Code)
		})
	}
	t.Run("shared", func(t *testing.T) {
		// The principal selects no key space: all callers share the keys
		// anyway, "" included; a caller unknown is served, and replayed.
		shared := strictSpec()
		shared.Operation, shared.Scope = "sharedOrder", idem.ScopeShared
		logs := &lockedBuffer{}
		f := newFixture(t, idem.Options{Principal: userID, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		h := f.eng.Handler(mustCompile(t, shared), f.createOrder())
		require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":1}`}).Code)
		w := send(h, req{key: "k", body: `{"item":1}`, header: http.Header{"X-User": {"alice"}}})
		require.Equal(t, http.StatusCreated, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "one key space for all callers")
		assert.Equal(t, int32(1), f.calls.Load())
		assert.NotContains(t, logs.String(), "principal unavailable")
	})
	t.Run("unprotected", func(t *testing.T) {
		// An optional key left out under strict or loose semantics: the
		// request is not recorded, so it runs as without the middleware.
		for _, sem := range []idem.Semantics{idem.Strict, idem.Loose} {
			spec := strictSpec()
			spec.Semantics, spec.Key.Required = sem, idem.Optional
			f := newFixture(t, idem.Options{Principal: userID})
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			for range 2 {
				require.Equal(t, http.StatusCreated, send(h, req{body: `{"item":1}`}).Code, "%v", sem)
			}
			assert.Equal(t, int32(2), f.calls.Load(), "%v: runs each time, unprotected", sem)
			// With a key, the principal selects its key space: refused.
			requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 500, idem.CodePrincipalUnavailable)
			assert.Equal(t, int32(2), f.calls.Load())
		}
	})
	t.Run("problem", func(t *testing.T) {
		f := newFixture(t, idem.Options{Principal: func(r *http.Request) (string, error) {
			return "", &idem.Problem{Status: 401, Code: "UNAUTHENTICATED", Detail: "sign in"}
		}})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		w := send(h, req{key: "k", body: `{}`})
		assert.Equal(t, 401, w.Code)
		assert.Contains(t, w.Body.String(), "UNAUTHENTICATED")
	})
	t.Run("anonymous", func(t *testing.T) {
		logs := &lockedBuffer{}
		f := newFixture(t, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		h := f.eng.Handler(mustCompile(t, window), f.createOrder())
		require.Equal(t, http.StatusCreated, send(h, req{body: `{"item":1}`}).Code)
		assert.Equal(t, "true", send(h, req{body: `{"item":1}`}).Header().Get("Idempotent-Replayed"))
		assert.Empty(t, logs.String())
	})
	t.Run("wrapped anonymous", func(t *testing.T) {
		// Only Anonymous itself may answer "": a func that calls it is
		// another Principal.
		f := newFixture(t, idem.Options{Principal: func(r *http.Request) (string, error) { return idem.Anonymous(r) }})
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		requireProblem(t, send(h, req{key: "k", body: `{}`}), 500, idem.CodePrincipalUnavailable)
	})
}
