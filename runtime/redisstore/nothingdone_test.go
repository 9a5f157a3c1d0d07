package redisstore

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// closedAddr returns an address nothing listens on (a port just freed).
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// Begin marks idem.ErrNothingDone the errors after which go-redis
// certainly did not run the script: a context done before the call, a
// refused dial (go-redis's retries included), no connection from the pool
// in time, and an error reply to the only write; and not one whose
// command was written and whose reply was lost, although the dials of
// go-redis's retries were refused after it (the last attempt's error
// alone would say nothing was sent): the claim was made there.
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
		c := testClient(t, func(o *redis.Options) { o.Addr = closedAddr(t) })
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
