package idem_test

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

var errVisit = errors.New("visit: write failed")

// strictFlow is the generated strict middleware's shape around one
// operation whose typed response writes through visit.
func strictFlow(f *fixture, p *idem.Policy, visit func(http.ResponseWriter) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := f.eng.Begin(r, p, idem.KeyFrom(r.Header.Get("Idempotency-Key")))
		defer c.End()
		if c.Decision() != idem.Execute {
			c.Respond(w)
			return
		}
		f.calls.Add(1) // the operation ran
		if err := c.Complete(w, visit); err != nil {
			// The strict handler's ResponseErrorHandlerFunc.
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// A strict response whose Visit fails after its status reached the client
// is kept (not replayable): the operation ran and the client saw a 201, so a
// retry must not run it again. One that fails before writing anything frees
// the key, as does any failure in transactional mode (nothing was sent).
func TestCompleteVisitFails(t *testing.T) {
	t.Run("after the status", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := strictFlow(f, mustCompile(t, strictSpec()), func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"p1"`))
			return errVisit
		})
		first := send(h, req{key: "k", body: `{}`})
		require.Equal(t, http.StatusCreated, first.Code)
		ev, ok := f.obs.find(idem.EventExecuted)
		require.True(t, ok)
		assert.Equal(t, idem.StateCompleted, ev.State)
		assert.Equal(t, http.StatusCreated, ev.Status)
		_, ok = f.obs.find(idem.EventNotReplayable)
		assert.True(t, ok)

		dup := send(h, req{key: "k", body: `{}`})
		assert.Equal(t, int32(1), f.calls.Load(), "the operation ran again")
		pb := requireProblem(t, dup, http.StatusConflict, idem.CodeResponseUnavailable)
		assert.Equal(t, http.StatusCreated, pb.OriginalStatus)
		assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
	})
	t.Run("5xx status still frees the key", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := strictFlow(f, mustCompile(t, strictSpec()), func(w http.ResponseWriter) error {
			w.WriteHeader(http.StatusBadGateway)
			return errVisit
		})
		require.Equal(t, http.StatusBadGateway, send(h, req{key: "k", body: `{}`}).Code)
		require.Equal(t, http.StatusBadGateway, send(h, req{key: "k", body: `{}`}).Code)
		assert.Equal(t, int32(2), f.calls.Load())
	})
	t.Run("before the status", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := strictFlow(f, mustCompile(t, strictSpec()), func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			return errVisit
		})
		require.Equal(t, http.StatusInternalServerError, send(h, req{key: "k", body: `{}`}).Code)
		require.Equal(t, http.StatusInternalServerError, send(h, req{key: "k", body: `{}`}).Code)
		assert.Equal(t, int32(2), f.calls.Load(), "nothing reached the client: the key is freed")
		_, ok := f.obs.find(idem.EventNotReplayable)
		assert.False(t, ok)
	})
}

// A response cut short is logged as such, not as one larger than
// Response.MaxBytes, whether its Finish succeeds at once or in the
// background after the store failed.
func TestCompleteVisitFailsLogged(t *testing.T) {
	visit := func(w http.ResponseWriter) error {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"p1"`))
		return errVisit
	}
	const cut, large = "failed after its status was sent", "larger than Response.MaxBytes"
	t.Run("at once", func(t *testing.T) {
		logs := &lockedBuffer{}
		f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.Equal(t, http.StatusCreated, send(strictFlow(f, mustCompile(t, strictSpec()), visit), req{key: "k", body: `{}`}).Code)
		assert.Contains(t, logs.String(), cut)
		assert.NotContains(t, logs.String(), large)
	})
	t.Run("later", func(t *testing.T) {
		f, fs, logs := newFlaky(t, idem.Options{})
		require.Equal(t, http.StatusCreated, send(strictFlow(f, mustCompile(t, strictSpec()), visit), req{key: "k", body: `{}`}).Code)
		assert.NotContains(t, logs.String(), cut, "not stored yet")
		fs.down.Store(false)
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), cut) }, 20*time.Second, 10*time.Millisecond)
		assert.NotContains(t, logs.String(), large)
		_, ok := f.obs.find(idem.EventNotReplayable)
		assert.True(t, ok)
	})
	t.Run("too large", func(t *testing.T) {
		logs := &lockedBuffer{}
		f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		spec := strictSpec()
		spec.Response.MaxBytes = 4
		h := strictFlow(f, mustCompile(t, spec), func(w http.ResponseWriter) error {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"p1"}`))
			return nil
		})
		require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{}`}).Code)
		assert.Contains(t, logs.String(), large)
		assert.NotContains(t, logs.String(), cut)
	})
}

// In transactional mode the response is buffered: a failed Visit sent
// nothing, so the transaction rolls back and the key is freed.
func TestCompleteVisitFailsTransactional(t *testing.T) {
	f, ft := newTxFixture(t)
	h := strictFlow(f, mustCompile(t, strictSpec()), func(w http.ResponseWriter) error {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"p1"`))
		return errVisit
	})
	for range 2 {
		w := send(h, req{key: "k", body: `{}`})
		require.Equal(t, http.StatusInternalServerError, w.Code)
		assert.NotContains(t, w.Body.String(), "p1", "nothing buffered reached the client")
	}
	assert.Equal(t, int32(2), f.calls.Load())
	assert.Equal(t, 0, ft.commits)
	assert.Equal(t, 2, ft.rollbacks)
}
