package idem_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// rerunStore runs every Begin and Finish twice and answers the second run:
// what a store does when its client sends a call again after losing the
// reply (go-redis, say). The Store contract has a Begin's re-run answered
// acquired (the stores of this module do); an earlier form of it allowed
// the claim's own PENDING record too, which rerunStore answers: the engine
// still recognizes it as its own claim.
type rerunStore struct{ plainStore }

func (s rerunStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	first, err := s.s.Begin(ctx, r)
	if err != nil || !first.Acquired {
		return first, err
	}
	rec, _, err := s.s.Get(ctx, r.Key)
	if err != nil {
		return idem.BeginResult{}, err
	}
	return idem.BeginResult{Record: rec}, nil
}

func (s rerunStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if err := s.s.Finish(ctx, key, token, st, resp); err != nil {
		return err
	}
	return s.s.Finish(ctx, key, token, st, resp)
}

// TestBeginFindsOwnClaim: a Begin that reports a PENDING record carrying
// the request's own token is the request's claim: the handler runs (not
// 409 IDEMPOTENCY_KEY_IN_USE), its completion is not reported fenced, and
// a retry replays it.
func TestBeginFindsOwnClaim(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	f := newFixtureStore(t, ms, rerunStore{plainStore{ms}}, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())

	w := send(h, req{key: "k-own", body: `{"item":"a"}`})
	require.Equal(t, http.StatusCreated, w.Code, "body: %s", w.Body)
	require.Equal(t, int32(1), f.calls.Load())
	ev, ok := f.obs.find(idem.EventExecuted)
	require.True(t, ok, "events: %v", f.obs.kinds())
	require.Equal(t, idem.StateCompleted, ev.State)
	require.Equal(t, idem.State(0), ev.Prior)
	require.NotContains(t, f.obs.kinds(), idem.EventFenced)

	w2 := send(h, req{key: "k-own", body: `{"item":"a"}`})
	require.Equal(t, http.StatusCreated, w2.Code, "body: %s", w2.Body)
	require.Equal(t, w.Body.String(), w2.Body.String(), "a replay")
	require.Equal(t, int32(1), f.calls.Load())
}

// TestBeginFindsOthersClaim: a PENDING record of another token is still
// another request's claim (the own-token rule is no loophole).
func TestBeginFindsOthersClaim(t *testing.T) {
	f := newFixture(t, idem.Options{})
	p := mustCompile(t, strictSpec())
	block := make(chan struct{})
	started := make(chan struct{})
	slow := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-block
		w.WriteHeader(http.StatusCreated)
	}))
	done := make(chan struct{})
	go func() { send(slow, req{key: "k-other", body: `{}`}); close(done) }()
	<-started
	w := send(f.eng.Handler(p, f.createOrder()), req{key: "k-other", body: `{}`})
	close(block)
	<-done
	requireProblem(t, w, http.StatusConflict, idem.CodeKeyInUse)
	require.Equal(t, int32(0), f.calls.Load())
}
