//go:build !race

package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// replyHook answers every command with val, without a round trip.
type replyHook struct{ val string }

func (replyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h replyHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		cmd.(*redis.StringCmd).SetVal(h.val)
		return nil
	}
}
func (replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGetAllocs: Get allocates go-redis's command and nothing of its own
// (the reply is the client's: here a hook's, without a round trip). Its
// command name was boxed into an interface on every call (one allocation
// more).
func TestGetAllocs(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	rec := idem.Record{State: idem.StateCompleted, Fingerprint: fp(1), Response: []byte("resp")}
	c.AddHook(replyHook{encodeRecord(&rec)})
	s, err := New(c, Options{Prefix: "idemtest:allocs:"})
	require.NoError(t, err)
	ctx := context.Background()
	got, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "resp", string(got.Response))
	n := testing.AllocsPerRun(200, func() { _, _, _ = s.Get(ctx, "k") })
	require.Equal(t, 1.0, n, "allocations per Get")
}
