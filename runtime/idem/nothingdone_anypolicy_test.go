package idem_test

import (
	"errors"
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

// A handler error marked idem.HandlerNothingDone is recognised for every
// protected run, not only under failures: replay outside transactions:
// the key is freed with an Info line, without the warnings of a handler
// that did not finish (under failures: retry) or of an error handler that
// recorded nothing (transactional mode, failures: replay).
func TestHandlerNothingDoneAnyPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		tx   bool
		spec idem.Spec
	}{
		{"failures retry", false, strictSpec()},
		{"transactional replay", true, replaySpec()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &lockedBuffer{}
			opts := idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(logs, nil))}
			var f *fixture
			if tc.tx {
				ms := memstore.New(memstore.Options{SweepInterval: -1})
				t.Cleanup(func() { _ = ms.Close() })
				opts.Transactional = true
				f = newFixtureStore(t, ms, &fakeTx{Store: ms}, opts)
			} else {
				f = newFixture(t, opts)
			}
			h := strictServer(f, mustCompile(t, tc.spec), idem.HandlerNothingDone(errors.New("psp unreachable")), func(w http.ResponseWriter, err error) {
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
			}, false, nil)
			require.Equal(t, http.StatusServiceUnavailable, post(h, "k1", true).Code)
			require.Equal(t, http.StatusServiceUnavailable, post(h, "k1", true).Code)
			assert.Equal(t, int32(2), f.calls.Load(), "the retry runs the operation again")
			out := logs.String()
			assert.Contains(t, out, "marked idem.HandlerNothingDone")
			assert.NotContains(t, out, "level=WARN", out)
		})
	}
}

// Without CaptureBody (unbounded), a handler that gave up as its client
// went away has its key freed: the warning that its answer "is stored and
// replayed" is not given (ported from the reviewer's
// TestReviewCancelledWarningUnbounded).
func TestCancelledWarningOnlyWhenStored(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	p := mustCompile(t, replaySpec())
	ended := make(chan error, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := f.eng.Begin(r, p, idem.RequestKey)
		defer c.End()
		if c.Decision() != idem.Execute {
			c.Respond(w)
			return
		}
		c.Writer(w)
		f.calls.Add(1)
		<-c.Context().Done()
		_ = c.HandlerFailed(c.Context().Err())
		ended <- nil
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, err := detachPost(&http.Client{Timeout: 50 * time.Millisecond}, srv.URL+"/orders", "k1")
	require.Error(t, err)
	<-ended
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "key released for a retry") },
		5*time.Second, 5*time.Millisecond, "the freed key is logged")
	assert.NotContains(t, logs.String(), "its answer is stored and replayed", "a contradictory warning")
}
