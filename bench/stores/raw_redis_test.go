package stores

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/bench/internal/workload"
)

// names records the names of the commands a client sends.
type names struct {
	mu  sync.Mutex
	got []string
}

func (n *names) DialHook(next redis.DialHook) redis.DialHook { return next }
func (n *names) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		n.mu.Lock()
		n.got = append(n.got, cmd.Name())
		n.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (n *names) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (n *names) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	got := n.got
	n.got = nil
	return got
}

// The raw Redis client is the minimum of the protocol: a claim is one SET
// NX GET (no script), a finish one fenced script, a replay one GET; a
// second first request under a used key is refused.
func TestRawRedisMinimum(t *testing.T) {
	c, _, prefix := redisClient(t)
	n := &names{}
	c.AddHook(n)
	require.NoError(t, rawFinish.Load(context.Background(), c).Err())
	n.take()
	first, replay := rawRedisFirst(c, prefix, workload.Handler()), rawRedisReplay(c, prefix)
	cl := workload.NewClient(workload.Payload)
	cl.W.Keep = true
	cl.SetKey(workload.KeyOf(1<<28, 1))
	require.Equal(t, http.StatusCreated, cl.Do(first))
	assert.Equal(t, []string{"set", "evalsha"}, n.take(), "first request: claim, finish")
	require.Equal(t, http.StatusConflict, cl.Do(first), "a used key is not claimed again")
	assert.Equal(t, []string{"set"}, n.take())
	cl.W.Body = cl.W.Body[:0]
	require.Equal(t, http.StatusCreated, cl.Do(replay))
	assert.Equal(t, []string{"get"}, n.take())
	assert.Equal(t, string(workload.Response), string(cl.W.Body))
}
