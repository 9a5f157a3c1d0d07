package idem_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// claimsAnyway is a store whose Begin makes the claim although the
// request's context has ended, then fails with the context's error: as
// pgx does when the cancel request it sends PostgreSQL loses the race with
// the claim's commit.
type claimsAnyway struct{ idem.Store }

func (s claimsAnyway) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	res, err := s.Store.Begin(context.WithoutCancel(ctx), req)
	if err == nil && ctx.Err() != nil {
		return idem.BeginResult{}, ctx.Err()
	}
	return res, err
}

// A Begin that failed because the request ended may have claimed the key
// all the same: the engine releases that claim in the background, so the
// retry is not answered IDEMPOTENCY_KEY_IN_USE for a whole lease. The
// ended request's answer does not change.
func TestUnansweredClaimReleased(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		t.Run(map[bool]string{false: "client gone", true: "deadline passed"}[deadline], func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			logs := &logLevels{}
			f := newFixtureStore(t, ms, claimsAnyway{ms}, idem.Options{Logger: slog.New(logs), Principal: idem.Anonymous, DisableHeartbeat: true})
			spec := strictSpec()
			spec.InFlight.Lease = time.Hour
			h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
			w := sendCtx(h, endedCtx(deadline), req{key: "k", body: `{"item":"book"}`})
			requireEnded(t, f, logs, w, deadline)
			assert.Equal(t, int32(0), f.calls.Load())

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, f.eng.Drain(ctx), "the release is done in the background")
			retry := send(h, req{key: "k", body: `{"item":"book"}`})
			require.Equal(t, http.StatusCreated, retry.Code, "the claim was released: %s", retry.Body)
			assert.Equal(t, int32(1), f.calls.Load())
			lv, msg := logs.highest()
			assert.LessOrEqual(t, lv, slog.LevelInfo, "logged at %v: %s", lv, msg)
		})
	}
}

// When the Begin did not claim the key (the common case), the release is
// fenced and changes nothing: a claim another request made since is kept.
func TestUnansweredNoClaimKeepsOthers(t *testing.T) {
	logs := &logLevels{}
	f := newFixture(t, idem.Options{Logger: slog.New(logs), Principal: idem.Anonymous})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	requireEnded(t, f, logs, sendCtx(h, endedCtx(false), req{key: "k", body: `{"item":"book"}`}), false)
	require.Equal(t, http.StatusCreated, send(h, req{key: "k", body: `{"item":"book"}`}).Code)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.eng.Drain(ctx))
	dup := send(h, req{key: "k", body: `{"item":"book"}`})
	assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
	lv, msg := logs.highest()
	assert.LessOrEqual(t, lv, slog.LevelInfo, "logged at %v: %s", lv, msg)
}
