package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

func beginReq(key string, tok idem.Token) *idem.BeginRequest {
	return &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: tok, Lease: time.Minute, TTL: time.Hour}
}

// TestScriptCacheFlushed: after SCRIPT FLUSH (or on a restarted server) the
// first call of each script falls back from EVALSHA to EVAL, which caches it
// again; later calls are EVALSHA only.
func TestScriptCacheFlushed(t *testing.T) {
	s, c := newTestStore(t, Options{})
	var (
		mu   sync.Mutex
		cmds []string
	)
	c.AddHook(recordHook{func(name string) {
		mu.Lock()
		cmds = append(cmds, name)
		mu.Unlock()
	}})
	took := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := cmds
		cmds = nil
		return out
	}
	ctx := context.Background()
	require.NoError(t, s.LoadScripts(ctx))
	exists, err := c.ScriptExists(ctx, beginScript.Hash(), finishScript.Hash(), extendScript.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true}, exists)
	took()

	require.NoError(t, c.ScriptFlush(ctx).Err())
	exists, err = c.ScriptExists(ctx, beginScript.Hash()).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false}, exists)
	took()

	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.Equal(t, []string{"evalsha", "eval"}, took(), "NOSCRIPT, then EVAL")
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("x")))
	assert.Equal(t, []string{"evalsha", "eval"}, took())

	r, err = s.Begin(ctx, beginReq("k2", 2))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.Equal(t, []string{"evalsha"}, took(), "EVAL cached the script")
	exists, err = c.ScriptExists(ctx, beginScript.Hash(), finishScript.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true}, exists)
}

type recordHook struct{ seen func(string) }

func (recordHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h recordHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.seen(cmd.Name())
		return next(ctx, cmd)
	}
}
func (recordHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRoundTrips counts the writes on the store's only connection: one per
// round trip. A first request costs Begin + Finish = 2; a replay 1.
func TestRoundTrips(t *testing.T) {
	var writes atomic.Int64
	c := testClient(t, func(o *redis.Options) {
		o.PoolSize = 1
		o.Dialer = countingDialer(&writes)
	})
	s, err := New(c, Options{Prefix: uniquePrefix(t, c)})
	require.NoError(t, err)
	ctx := context.Background()
	// Warm up: connection handshake, script cache.
	_, err = s.Begin(ctx, beginReq("warm", 1))
	require.NoError(t, err)
	require.NoError(t, s.Finish(ctx, "warm", 1, idem.StateCompleted, []byte("x")))

	writes.Store(0)
	r, err := s.Begin(ctx, beginReq("k", 2))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 2, idem.StateCompleted, []byte("resp")))
	assert.Equal(t, int64(2), writes.Load(), "first request: Begin + Finish")

	writes.Store(0)
	rec, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, []byte("resp"), rec.Response)
	assert.Equal(t, int64(1), writes.Load(), "replay by Get")

	writes.Store(0)
	r, err = s.Begin(ctx, beginReq("k", 3))
	require.NoError(t, err)
	assert.False(t, r.Acquired)
	assert.Equal(t, []byte("resp"), r.Record.Response)
	assert.Equal(t, int64(1), writes.Load(), "replay by Begin")
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// blackhole accepts connections and never answers, like a server that hangs.
func blackhole(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return l.Addr().String()
}

func TestOutage(t *testing.T) {
	ops := map[string]func(s *Store, ctx context.Context) error{
		"Begin": func(s *Store, ctx context.Context) error {
			_, err := s.Begin(ctx, beginReq("k", 1))
			return err
		},
		"Finish": func(s *Store, ctx context.Context) error {
			return s.Finish(ctx, "k", 1, idem.StateCompleted, nil)
		},
		"Get": func(s *Store, ctx context.Context) error {
			_, _, err := s.Get(ctx, "k")
			return err
		},
		"ExtendLease": func(s *Store, ctx context.Context) error {
			return s.ExtendLease(ctx, "k", 1, time.Second)
		},
	}
	t.Run("ClosedPort", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(&redis.Options{Addr: closedAddr(t), ContextTimeoutEnabled: true})
		defer c.Close()
		s, err := New(c, Options{})
		require.NoError(t, err)
		for name, op := range ops {
			start := time.Now()
			err := op(s, ctxTimeout(t, 10*time.Second))
			elapsed := time.Since(start)
			require.Error(t, err, name)
			assert.False(t, errors.Is(err, idem.ErrFenced), name)
			assert.ErrorContains(t, err, "connection refused", name)
			// go-redis's own retries (5 dials 100 ms apart, per attempt).
			assert.Less(t, elapsed, 2*time.Second, name)

			start = time.Now()
			err = op(s, ctxTimeout(t, 250*time.Millisecond))
			elapsed = time.Since(start)
			require.Error(t, err, name)
			assert.Less(t, elapsed, 600*time.Millisecond, "%s: the context bounds the retries", name)
		}
	})
	t.Run("HangingServer", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(&redis.Options{Addr: blackhole(t), ContextTimeoutEnabled: true})
		defer c.Close()
		s, err := New(c, Options{})
		require.NoError(t, err)
		for name, op := range ops {
			start := time.Now()
			err := op(s, ctxTimeout(t, 300*time.Millisecond))
			elapsed := time.Since(start)
			require.Error(t, err, name)
			assert.Less(t, elapsed, time.Second, "%s returned after %v", name, elapsed)
		}
	})
	t.Run("ServerStopped", func(t *testing.T) {
		t.Parallel()
		srv := startRedis(t)
		c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
		defer c.Close()
		s, err := New(c, Options{})
		require.NoError(t, err)
		ctx := ctxTimeout(t, 10*time.Second)
		_, err = s.Begin(ctx, beginReq("k", 1))
		require.NoError(t, err)

		srv.stop(t)
		for name, op := range ops {
			start := time.Now()
			err := op(s, ctxTimeout(t, 5*time.Second))
			require.Error(t, err, name)
			assert.Less(t, time.Since(start), 2*time.Second, name)
		}

		// A new server on the same address: empty script cache, no data.
		srv.start(t)
		r, err := s.Begin(ctx, beginReq("k", 2))
		require.NoError(t, err)
		assert.True(t, r.Acquired)
		require.NoError(t, s.Finish(ctx, "k", 2, idem.StateCompleted, nil))
	})
}

// redisProc is a private redis-server for tests that stop or disturb it.
type redisProc struct {
	addr string
	cmd  *exec.Cmd
}

func startRedis(t *testing.T) *redisProc {
	t.Helper()
	testenv.RedisURL(t) // skip where the shared one is not expected either
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	p := &redisProc{addr: closedAddr(t)}
	p.start(t)
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *redisProc) start(t *testing.T) {
	t.Helper()
	_, port, _ := net.SplitHostPort(p.addr)
	p.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	require.NoError(t, p.cmd.Start())
	c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		require.True(t, time.Now().Before(deadline), "redis-server on %s did not start", p.addr)
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *redisProc) stop(t *testing.T) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

func (p *redisProc) String() string { return fmt.Sprintf("redis-server@%s", p.addr) }
