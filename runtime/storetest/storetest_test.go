package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// slowStore is a memstore whose every call (and BeginTx) first waits delay,
// as on a loaded machine (2 cores, packages at once, -race), where a call
// to a store may take a few hundred milliseconds. Its transactions hold
// nothing: commit is Finish.
type slowStore struct {
	s     *memstore.Store
	delay time.Duration
}

func (s *slowStore) wait(ctx context.Context) error {
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowStore) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if err := s.wait(ctx); err != nil {
		return idem.BeginResult{}, err
	}
	return s.s.Begin(ctx, req)
}

func (s *slowStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.s.Finish(ctx, key, token, st, resp)
}

func (s *slowStore) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := s.wait(ctx); err != nil {
		return idem.Record{}, false, err
	}
	return s.s.Get(ctx, key)
}

func (s *slowStore) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.s.ExtendLease(ctx, key, token, lease)
}

func (s *slowStore) BeginTx(ctx context.Context, key string, token idem.Token) (context.Context, func(idem.State, []byte) error, func(), error) {
	if err := s.wait(ctx); err != nil {
		return nil, nil, nil, err
	}
	commit := func(st idem.State, resp []byte) error { return s.Finish(ctx, key, token, st, resp) }
	return ctx, commit, func() {}, nil
}

// TestHeartbeatPastExpiryOnSlowStore: the subtests that heartbeat past the
// claim's TTL pass on a store that answers each call only after 120ms, where
// the claim, its Get, BeginTx and the first heartbeat take longer than
// outliveTTL (300ms): claimToOutlive tries again with a longer TTL. (With a
// fixed TTL they failed: "heartbeat 0 in the transaction: idem: claim
// fenced", as in pgstore's conformance run under -race on a loaded machine.)
func TestHeartbeatPastExpiryOnSlowStore(t *testing.T) {
	for name, f := range map[string]func(*testing.T, idem.Store, func(string) string){
		"HeartbeatPastExpiry": testHeartbeatPastExpiry,
		"Transactor":          testTransactor,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			prefix := uniquePrefix()
			f(t, &slowStore{s: ms, delay: 120 * time.Millisecond}, func(k string) string { return prefix + k })
		})
	}
}

// TestExpiryOnSlowStore: ExpiryAfterTTL passes on a store that answers
// each call only after 250ms, where a Finish sent right after its Begin
// reaches the store past the claim's TTL of 200ms: finishWithinTTL tries
// again with a longer TTL. (With the same TTL at each try it failed: every
// Finish was fenced.)
func TestExpiryOnSlowStore(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	prefix := uniquePrefix()
	testExpiry(t, &slowStore{s: ms, delay: 250 * time.Millisecond}, func(k string) string { return prefix + k })
}

// TestStoreCallsBounded: the suite's calls to a store are bounded (testCtx,
// callCtx): no file of the package passes context.Background(),
// context.TODO() or a test's own Context() (done only when the test ends,
// which a hung call never lets it do) but to context.WithTimeout or
// context.WithDeadline. The suite runs against real servers (redisstore,
// pgstore): a hung one would hang the whole package until go test's
// timeout.
func TestStoreCallsBounded(t *testing.T) {
	testenv.CheckBounded(t, testenv.Unbounded{
		Files:    "*.go",
		Calls:    []string{"context.Background", "context.TODO", "t.Context", "tb.Context"},
		Bounding: []string{"context.WithTimeout", "context.WithDeadline"},
		Hint:     "give the call testCtx(t), or callCtx(t) in a helper",
	})
}
