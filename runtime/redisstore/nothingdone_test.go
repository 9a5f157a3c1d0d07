package redisstore

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// Begin marks idem.ErrNothingDone the errors after which go-redis
// certainly did not run the script: a context done before the call, a
// refused dial (go-redis's retries included), no connection from the pool
// in time, and a refusal (an error reply Redis gives before the script
// ran, or before its one write) to the only write; and not one whose
// command was written and whose reply was lost, although the dials of
// go-redis's retries were refused after it, or a retry got a refusal (the
// last attempt's error alone would say nothing was sent): the claim was
// made there. Nor a proxy's error reply (before: marked, as any error
// reply to the only write was, although the proxy forwarded the command
// and the server claimed), nor a refusal go-redis retried.
func TestBeginNothingDone(t *testing.T) {
	req := func(key string) *idem.BeginRequest {
		return &idem.BeginRequest{Key: key, Token: 0x1234, Fingerprint: fp(1), Lease: time.Minute, TTL: time.Hour}
	}
	t.Run("context done", func(t *testing.T) {
		s, _ := newTestStore(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Begin(ctx, req("k"))
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, idem.ErrNothingDone)
	})
	t.Run("dial refused", func(t *testing.T) {
		c := testClient(t, func(o *redis.Options) { o.Addr = testenv.FreeAddr(t) })
		s := newStoreOn(t, c, Options{Prefix: "idemtest:refused:"})
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		require.Error(t, err)
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("pool timeout", func(t *testing.T) {
		c := testClient(t, func(o *redis.Options) { o.PoolSize, o.PoolTimeout, o.MaxRetries = 1, 50*time.Millisecond, -1 })
		s := newStoreOn(t, c, Options{})
		held := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			// BLPOP holds the pool's only connection for a second.
			_ = c.Do(ctxTimeout(t, 10*time.Second), "blpop", &hook{held, s.prefix + "nothing"}, 1).Err()
		}()
		<-held
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		<-done
		require.Error(t, err)
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
		_, found, gerr := s.Get(ctxTimeout(t, 10*time.Second), "k")
		require.NoError(t, gerr)
		assert.False(t, found)
	})
	t.Run("error reply", func(t *testing.T) {
		s, c := newTestStore(t, Options{})
		ctx := ctxTimeout(t, 10*time.Second)
		require.NoError(t, c.Set(ctx, s.key("k"), "not a record", time.Minute).Err())
		_, err := s.Begin(ctx, req("k"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "IDEMRECORD")
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("WRONGTYPE reply", func(t *testing.T) {
		s, c := newTestStore(t, Options{})
		ctx := ctxTimeout(t, 10*time.Second)
		require.NoError(t, c.RPush(ctx, s.key("k"), "not a record").Err())
		_, err := s.Begin(ctx, req("k"))
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(redisError(t, err), "WRONGTYPE "), "%v", err)
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("proxy error reply after forwarding", func(t *testing.T) {
		// Envoy's or twemproxy's answer when the upstream connection broke
		// after the command was forwarded: the server ran the script.
		s, p := lossyStore(t)
		p.answer(proxyAnswer{reply: "-ERR upstream failure after forwarding\r\n", forward: true})
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "upstream failure")
		assert.Equal(t, int32(1), p.evalCount(), "ERR is not retried: one write")
		assert.NotErrorIs(t, err, idem.ErrNothingDone, "%v", err)
		_, found, err := s.Get(ctxTimeout(t, 10*time.Second), "k")
		require.NoError(t, err)
		require.True(t, found, "the forwarded script claimed the key")
	})
	t.Run("LOADING, not retried", func(t *testing.T) {
		s, p := lossyStore(t, func(o *redis.Options) { o.MaxRetries = -1 })
		p.answer(proxyAnswer{reply: "-LOADING Redis is loading the dataset in memory\r\n"})
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		require.Error(t, err)
		assert.Equal(t, int32(1), p.evalCount())
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("LOADING, retried by go-redis", func(t *testing.T) {
		// With MaxRetries 3 (the default) go-redis sends the command again
		// after a LOADING reply: more than one write, not marked (the
		// first might have run, had its reply been lost instead).
		s, p := lossyStore(t)
		loading := proxyAnswer{reply: "-LOADING Redis is loading the dataset in memory\r\n"}
		p.answer(loading, loading, loading, loading)
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(redisError(t, err), "LOADING "), "%v", err)
		assert.Equal(t, int32(4), p.evalCount(), "the command and go-redis's 3 retries")
		assert.NotErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("reply lost, then an error reply", func(t *testing.T) {
		// The first write claimed the key and its reply was lost; go-redis's
		// retry was refused (an error reply it does not retry): the error
		// is the retry's, but the claim was made.
		s, p := lossyStore(t)
		p.loseReplies(1)
		p.answer(proxyAnswer{}, proxyAnswer{reply: "-OOM command not allowed when used memory > 'maxmemory'.\r\n"})
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		require.Error(t, err)
		assert.Equal(t, int32(1), p.dropped.Load())
		assert.True(t, strings.HasPrefix(redisError(t, err), "OOM "), "%v", err)
		assert.NotErrorIs(t, err, idem.ErrNothingDone, "%v", err)
		rec, found, err := s.Get(ctxTimeout(t, 10*time.Second), "k")
		require.NoError(t, err)
		require.True(t, found, "the lost reply's script claimed the key")
		assert.Equal(t, idem.Token(0x1234), rec.Token)
	})
	t.Run("reply lost, then reconnects closed", func(t *testing.T) {
		s, p := lossyStore(t)
		p.refuseOnLoss.Store(true)
		p.loseReplies(1)
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		require.Error(t, err)
		assert.Equal(t, int32(1), p.dropped.Load())
		assert.NotErrorIs(t, err, idem.ErrNothingDone, "%v", err)
		p.refuse.Store(false)
		_, found, err := s.Get(ctxTimeout(t, 10*time.Second), "k")
		require.NoError(t, err)
		require.True(t, found, "the lost reply's script claimed the key")
	})
	t.Run("reply lost, then dials refused", func(t *testing.T) {
		s, p := lossyStore(t)
		p.closeOnLoss.Store(true)
		p.loseReplies(1)
		_, err := s.Begin(ctxTimeout(t, 10*time.Second), req("k"))
		require.Error(t, err)
		assert.Equal(t, int32(1), p.dropped.Load())
		var oe *net.OpError
		require.ErrorAs(t, err, &oe, "the last attempt's error")
		assert.Equal(t, "dial", oe.Op, "the last attempt's error: %v", err)
		assert.NotErrorIs(t, err, idem.ErrNothingDone, "%v", err)
		direct := newStoreOn(t, testClient(t, nil), Options{Prefix: s.prefix})
		rec, found, err := direct.Get(ctxTimeout(t, 10*time.Second), "k")
		require.NoError(t, err)
		require.True(t, found, "the lost reply's script claimed the key")
		assert.Equal(t, idem.Token(0x1234), rec.Token)
	})
}

// hook is a key argument that closes its channel when go-redis writes
// it: the command holds its connection from then on.
type hook struct {
	written chan struct{}
	key     string
}

func (h *hook) MarshalBinary() ([]byte, error) {
	close(h.written)
	return []byte(h.key), nil
}

// redisError returns the message of the Redis error reply in err.
func redisError(t *testing.T, err error) string {
	t.Helper()
	var re redis.Error
	require.ErrorAs(t, err, &re)
	return re.Error()
}

// Only the replies that refuse a script before it ran (or before its one
// write) are refusals: by their code, the first word; not another error
// reply (a proxy's), nor a code that merely begins like one.
func TestRefusal(t *testing.T) {
	for msg, want := range map[string]bool{
		"READONLY You can't write against a read only replica.":             true,
		"NOREPLICAS Not enough good replicas to write.":                     true,
		"MISCONF Redis is configured to save RDB snapshots, but ...":        true,
		"OOM command not allowed when used memory > 'maxmemory'.":           true,
		"LOADING Redis is loading the dataset in memory":                    true,
		"BUSY Redis is busy running a script.":                              true,
		"NOPERM User u has no permissions to run the 'evalsha' command":     true,
		"NOAUTH Authentication required.":                                   true,
		"WRONGTYPE Operation against a key holding the wrong kind of value": true,
		"CLUSTERDOWN The cluster is down":                                   true,
		"TRYAGAIN Multiple keys request during rehashing of slot":           true,
		"MASTERDOWN Link with MASTER is down":                               true,
		"IDEMRECORD unknown record format":                                  true,
		"ERR upstream failure":                                              false,
		"ERR READONLY You can't write against a read only replica.":         false,
		"ERR Error running script (call to f_0): @user_script:1: OOM":       false,
		"BUSYKEY Target key name already exists.":                           false,
		"NOSCRIPT No matching script.":                                      false,
		"MOVED 3999 127.0.0.1:6381":                                         false,
		"READONLY":                                                          true,
		"":                                                                  false,
		"redis: nil":                                                        false,
	} {
		assert.Equal(t, want, refusal(msg), "%q", msg)
	}
}
