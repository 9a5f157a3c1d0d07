package idem_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// The claim FailOpen holds through an unprotected run
// after a failed Begin is released, once the run ends, as the failed Begin's
// kind says: a lost reply (not cut) as finishLostReply, whose Info line names
// the lost reply and carries begin_error; one cut by StoreTimeout as
// finishUnanswered. Nothing checked that the held release keeps the Begin's
// cut (Call.held's closure captures it).
func TestFailOpenHeldReleaseKeepsBeginKind(t *testing.T) {
	for name, tc := range map[string]struct {
		mk   func(ms *memstore.Store) (idem.Store, idem.Options)
		want string
	}{
		"lost reply": {func(ms *memstore.Store) (idem.Store, idem.Options) { return lostReply{ms}, idem.Options{} },
			"had claimed it all the same\" operation=createOrder key=k releases=1"},
		"cut by StoreTimeout": {func(ms *memstore.Store) (idem.Store, idem.Options) {
			return claimThenHang{ms}, idem.Options{StoreTimeout: 20 * time.Millisecond}
		}, "a Begin that failed as its context ended"},
	} {
		t.Run(name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			s, opts := tc.mk(ms)
			var logged lockedBuffer
			opts.Principal, opts.DisableHeartbeat, opts.FailOpen = idem.Anonymous, true, true
			opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
			f := newFixtureStore(t, ms, s, opts)
			spec := strictSpec()
			spec.InFlight.Lease = time.Hour
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":1}`}).Code)
			drain(t, f.eng)
			assert.Contains(t, logged.String(), tc.want)
			if name == "lost reply" {
				assert.Contains(t, logged.String(), "its reply lost, say")
				assert.Contains(t, logged.String(), "begin_error=")
			}
		})
	}
}

// Only the claim whose commit failed is said, when its
// release is given up, to maybe hold the commit's result; the claim whose
// transaction could not begin is not.
func TestGaveUpTailOnlyUncommitted(t *testing.T) {
	const tail = "(or holds the commit's result, if it was kept after all)"
	t.Run("uncommitted", func(t *testing.T) {
		f, s, logs := newTxFlaky(t)
		s.commitLies = true
		idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			w.WriteHeader(201)
			s.down.Store(true)
		}))
		requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 503, idem.CodeStoreUnavailable)
		drain(t, f.eng)
		assert.Contains(t, logs.String(), "gave up releasing the claim whose commit failed (its request refused): the key stays in flight until its lease runs out "+tail)
	})
	t.Run("unbegun", func(t *testing.T) {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = ms.Close() })
		s := &txFlaky{fakeTx: &fakeTx{Store: ms}, beginTxErr: errStoreDown}
		s.down.Store(true)
		logs := &lockedBuffer{}
		f := newFixtureStore(t, ms, s, idem.Options{Transactional: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		idem.SetLateBackoff(f.eng, time.Millisecond, time.Millisecond)
		h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
		requireProblem(t, send(h, req{key: "k", body: `{"item":1}`}), 503, idem.CodeStoreUnavailable)
		drain(t, f.eng)
		require.Contains(t, logs.String(), "gave up releasing the claim whose transaction could not begin")
		assert.NotContains(t, logs.String(), tail)
	})
}
