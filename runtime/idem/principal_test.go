package idem_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

const noPrincipal = "no Options.Principal"

// TestNoPrincipalWarnsOnce: an Engine without Options.Principal that is
// given policies scoped per principal logs one warning when they are wired
// (not per request, not per handler), naming their operations and the fix.
func TestNoPrincipalWarnsOnce(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	shared := strictSpec()
	shared.Operation, shared.Scope = "sharedOrder", idem.ScopeShared
	other := strictSpec()
	other.Operation = "refundOrder"
	f.eng.Serves(mustCompile(t, shared), mustCompile(t, strictSpec()), mustCompile(t, other))
	require.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), `operations="createOrder, refundOrder"`)
	assert.Contains(t, logs.String(), "idem.Anonymous")

	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	for _, k := range []string{"k1", "k2", "k1"} {
		send(h, req{key: k, body: `{}`})
	}
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), "once per Engine: %s", logs.String())
}

// TestNoPrincipalWarnsAtHandler: Handler is wiring time: it warns before any
// request.
func TestNoPrincipalWarnsAtHandler(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
	assert.Contains(t, logs.String(), `operations=createOrder`)
	send(h, req{key: "k1", body: `{}`})
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
}

// TestNoPrincipalWarnsAtBegin: code that calls Begin without Serves gets the
// warning at the first request of such a policy, once.
func TestNoPrincipalWarnsAtBegin(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	p := mustCompile(t, strictSpec())
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k1")
		c := f.eng.Begin(r, p, idem.RequestKey)
		c.End()
	}
	assert.Equal(t, 1, strings.Count(logs.String(), noPrincipal), logs.String())
}

// TestNoPrincipalWarningNotNeeded: a Principal (Anonymous among them) or
// only shared scopes log nothing.
func TestNoPrincipalWarningNotNeeded(t *testing.T) {
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
			f := newFixture(t, tc.opts)
			h := f.eng.Handler(mustCompile(t, tc.spec), f.createOrder())
			send(h, req{key: "k1", body: `{}`})
			assert.NotContains(t, logs.String(), noPrincipal)
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
