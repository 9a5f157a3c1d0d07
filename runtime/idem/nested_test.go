package idem_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// unwrapping is a middleware's ResponseWriter that wraps the one it was
// handed and says so (Unwrap), as http.ResponseController expects.
type unwrapping struct{ http.ResponseWriter }

func (u unwrapping) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// A doubled wiring (the engine in front of itself for one request: a
// hand-added HTTPMiddleware beside x.Handler) passes through the inner run:
// it does not answer 409 IDEMPOTENCY_KEY_IN_USE, which the outer run would
// record and replay for the whole window. One warning says so.
func TestNestedEnginePassesThrough(t *testing.T) {
	p := mustCompile(t, strictSpec())
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler // between the two runs
	}{
		{"direct", func(h http.Handler) http.Handler { return h }},
		{"unwrapping writer", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(unwrapping{w}, r) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			h := f.eng.Handler(p, tc.wrap(f.eng.Handler(p, f.createOrder())))
			for _, key := range []string{"k1", "k2"} {
				first := send(h, req{key: key, body: `{"item":"x"}`})
				require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
				again := send(h, req{key: key, body: `{"item":"x"}`})
				require.Equal(t, http.StatusCreated, again.Code, again.Body.String())
				assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
				assert.Equal(t, first.Body.String(), again.Body.String())
			}
			assert.Equal(t, int32(2), f.calls.Load())
			assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
			assert.Contains(t, logs.String(), "doubled wiring")
			assert.Contains(t, logs.String(), "operation=createOrder")
		})
	}
}

// Nested is false for a writer that is no recorder, for another policy's
// recorder (two operations' engines nested run both), and once the
// recorder's request ended; it allocates nothing.
func TestNestedOnlyForTheSamePolicyInFlight(t *testing.T) {
	p := mustCompile(t, strictSpec())
	other := strictSpec()
	other.Operation, other.Path = "createOther", "/other"
	q := mustCompile(t, other)
	f := newFixture(t, idem.Options{})
	var inner, innerQ bool
	var kept http.ResponseWriter
	h := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		inner, innerQ, kept = f.eng.Nested(w, p), f.eng.Nested(unwrapping{w}, q), w
		var u http.ResponseWriter = unwrapping{w}
		if n := testing.AllocsPerRun(100, func() { f.eng.Nested(u, p) }); n != 0 {
			t.Errorf("Nested allocates %v times", n)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	send(h, req{key: "k", body: `{}`})
	assert.True(t, inner)
	assert.False(t, innerQ)
	assert.False(t, f.eng.Nested(kept, p), "the request ended")
	assert.False(t, f.eng.Nested(httptest.NewRecorder(), p))
	assert.False(t, f.eng.Nested(nil, p))
}
