package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/storebench"
)

func beginReq(key string, tok idem.Token) *idem.BeginRequest {
	return &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: tok, Lease: time.Minute, TTL: time.Hour}
}

// TestScriptCacheFlushed: after SCRIPT FLUSH (or on a restarted server) the
// first call of each script falls back from EVALSHA to EVAL, which caches it
// again; later calls are EVALSHA only. On a private server: SCRIPT FLUSH on
// the shared one would break clients that send EVALSHA without a fallback.
func TestScriptCacheFlushed(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	s := newStoreOn(t, c, Options{})
	took := recordCommands(c)
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

// TestRoundTrips counts the writes on the store's only connection: one per
// round trip (the script cache is filled in the warm-up).
func TestRoundTrips(t *testing.T) {
	var writes atomic.Int64
	c := testClient(t, func(o *redis.Options) {
		o.PoolSize = 1
		o.Dialer = testenv.CountingDialer(&writes)
	})
	s := newStoreOn(t, c, Options{})
	storebench.RoundTrips(t, s, &writes)
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
	// The bounds below are far from what they tell apart, so that a loaded
	// machine (scripts/test runs every package at once, with -race) does not
	// cross them: there an op whose own retries take 0.5s idle took 2.5s.
	t.Run("ClosedPort", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t), ContextTimeoutEnabled: true})
		defer c.Close()
		s, err := New(c, Options{})
		require.NoError(t, err)
		for name, op := range ops {
			start := time.Now()
			err := op(s, ctxTimeout(t, 30*time.Second))
			elapsed := time.Since(start)
			require.Error(t, err, name)
			assert.False(t, errors.Is(err, idem.ErrFenced), name)
			assert.ErrorContains(t, err, "connection refused", name)
			// go-redis's own retries (5 dials 100 ms apart, per attempt)
			// end the call, not its context.
			assert.Less(t, elapsed, 10*time.Second, name)
		}
		// A context shorter than the retries ends them: dials 1s apart make
		// the retries of one call last 4s and more, the context 250ms.
		slow := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t), ContextTimeoutEnabled: true, DialerRetryTimeout: time.Second})
		defer slow.Close()
		s, err = New(slow, Options{})
		require.NoError(t, err)
		for name, op := range ops {
			start := time.Now()
			err = op(s, ctxTimeout(t, 250*time.Millisecond))
			elapsed := time.Since(start)
			require.Error(t, err, name)
			assert.Less(t, elapsed, 2*time.Second, "%s: the context bounds the retries", name)
		}
	})
	t.Run("HangingServer", func(t *testing.T) {
		t.Parallel()
		// Dial, read and write timeouts of a minute: only the context
		// (300ms) can end a call early.
		c := redis.NewClient(&redis.Options{Addr: testenv.Blackhole(t), ContextTimeoutEnabled: true,
			DialTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
		defer c.Close()
		s, err := New(c, Options{})
		require.NoError(t, err)
		for name, op := range ops {
			start := time.Now()
			err := op(s, ctxTimeout(t, 300*time.Millisecond))
			elapsed := time.Since(start)
			require.Error(t, err, name)
			assert.Less(t, elapsed, 5*time.Second, "%s returned after %v", name, elapsed)
		}
	})
	t.Run("ServerStopped", func(t *testing.T) {
		t.Parallel()
		srv := testenv.StartRedis(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		defer c.Close()
		s, err := New(c, Options{})
		require.NoError(t, err)
		ctx := ctxTimeout(t, 10*time.Second)
		_, err = s.Begin(ctx, beginReq("k", 1))
		require.NoError(t, err)

		srv.Stop()
		for name, op := range ops {
			start := time.Now()
			err := op(s, ctxTimeout(t, 30*time.Second))
			require.Error(t, err, name)
			assert.Less(t, time.Since(start), 10*time.Second, "%s: go-redis's retries end the call, not its context", name)
		}

		// The server again, on the same address: empty script cache, no data
		// (it keeps nothing on disk).
		require.NoError(t, srv.Start())
		r, err := s.Begin(ctx, beginReq("k", 2))
		require.NoError(t, err)
		assert.True(t, r.Acquired)
		require.NoError(t, s.Finish(ctx, "k", 2, idem.StateCompleted, nil))
	})
}

// TestRingRouting: on a Ring of two servers, the store's commands (whose
// key go-redis reads through a pointer) go to the shard a plain command with
// the same key goes to, and records spread over both shards.
func TestRingRouting(t *testing.T) {
	t.Parallel()
	a, b := testenv.StartRedis(t), testenv.StartRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}, ContextTimeoutEnabled: true})
	defer ring.Close()
	s := newStoreOn(t, ring, Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	shards := map[string]int{}
	for i := range 40 {
		scope := fmt.Sprintf("u1:op:%d", i)
		r, err := s.Begin(ctx, beginReq(scope, idem.Token(i+1)))
		require.NoError(t, err)
		require.True(t, r.Acquired)
		require.NoError(t, s.Finish(ctx, scope, idem.Token(i+1), idem.StateCompleted, []byte("resp")))
		rec, found, err := s.Get(ctx, scope)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "resp", string(rec.Response))
		// A plain GET, routed by the Ring from a string key, finds it.
		require.NoError(t, ring.Get(ctx, s.key(scope)).Err())
		for name, srv := range map[string]*testenv.Redis{"a": a, "b": b} {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			if n, _ := c.Exists(ctx, s.key(scope)).Result(); n == 1 {
				shards[name]++
			}
			_ = c.Close()
		}
	}
	assert.Len(t, shards, 2, "records on both shards: %v", shards)
}

// TestFinishedRecordMemory: a finished record takes the server memory of
// the same string written with one SET (Finish rewrites the record; an
// APPEND of the response would leave Redis up to twice that, its greedy
// growth).
func TestFinishedRecordMemory(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	for _, size := range []int{100, 4000} {
		scope := fmt.Sprintf("k%d", size)
		r, err := s.Begin(ctx, beginReq(scope, 1))
		require.NoError(t, err)
		require.True(t, r.Acquired)
		require.NoError(t, s.Finish(ctx, scope, 1, idem.StateCompleted, make([]byte, size)))
		v, err := c.Get(ctx, s.key(scope)).Result()
		require.NoError(t, err)
		require.NoError(t, c.Set(ctx, s.key(scope+"-set"), v, time.Hour).Err())
		got, err := c.MemoryUsage(ctx, s.key(scope)).Result()
		require.NoError(t, err)
		want, err := c.MemoryUsage(ctx, s.key(scope+"-set")).Result()
		require.NoError(t, err)
		assert.LessOrEqual(t, got, want+8, "MEMORY USAGE of a finished record with a %d-byte response", size)
		ttl, err := c.PTTL(ctx, s.key(scope)).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 59*time.Minute, "the key keeps its expiry")
	}
}

// TestCommandText: a hook that formats the store's commands (a tracing hook
// recording the statement, say) sees the key and the arguments, not the
// pointers they are passed by.
func TestCommandText(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	var texts []string
	c.AddHook(textHook{func(s string) {
		if strings.HasPrefix(s, "evalsha ") || strings.HasPrefix(s, "get ") { // not the handshake
			texts = append(texts, s)
		}
	}})
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("the response")))
	_, _, err = s.Get(ctx, "k")
	require.NoError(t, err)
	require.Len(t, texts, 3)
	key := s.key("k")
	for _, text := range texts {
		assert.Contains(t, text, " "+key, "%s", text)
		assert.NotContains(t, text, "0xc", "%s", text)
	}
	assert.Contains(t, texts[1], `"the response"`)
}

type textHook struct{ seen func(string) }

func (textHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h textHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.seen(cmd.String())
		return err
	}
}
func (textHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestReplayWhileWritesRefused: a server that refuses writes (here, for
// want of the replica min-replicas-to-write asks for) still answers Get
// and the claim script of a replay, which reads only; a new key's claim,
// a write, is refused. On a private server.
func TestReplayWhileWritesRefused(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("the response")))
	require.NoError(t, c.ConfigSet(ctx, "min-replicas-to-write", "1").Err())

	rec, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "the response", string(rec.Response))
	r, err = s.Begin(ctx, beginReq("k", 2))
	require.NoError(t, err)
	require.False(t, r.Acquired)
	assert.Equal(t, "the response", string(r.Record.Response))
	_, err = s.Begin(ctx, beginReq("new", 3))
	require.Error(t, err, "a claim writes")
	assert.Contains(t, err.Error(), "NOREPLICAS")
	// GETEX, which the store sends for clients reading from replicas, is
	// refused like a write: the engine then claims (see idem.ReadFirst).
	assert.Error(t, c.Do(ctx, "getex", s.key("k")).Err())
}

// TestOutOfMemory: a Redis at its maxmemory under maxmemory-policy
// noeviction (what the package documentation recommends) refuses writes
// (OOM) and evicts nothing: a new key is answered 503
// IDEMPOTENCY_STORE_UNAVAILABLE and its handler does not run, a completed
// record is still replayed, and a Finish is refused (the record stays
// PENDING).
func TestOutOfMemory(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, "--maxmemory-policy", "noeviction")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict})
	var runs atomic.Int64
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	do := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/x", nil)
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const done, fresh = "0193a8f0-0000-7000-8000-000000000001", "0193a8f0-0000-7000-8000-000000000002"
	require.Equal(t, http.StatusCreated, do(done).Code)
	r, err := s.Begin(ctx, beginReq("held", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)

	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err()) // below what Redis uses
	rec := do(fresh)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), idem.CodeStoreUnavailable)
	rec = do(done)
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int64(1), runs.Load())
	err = s.Finish(ctx, "held", 1, idem.StateCompleted, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OOM")
	got, _, err := s.Get(ctx, "held")
	require.NoError(t, err)
	assert.Equal(t, idem.StatePending, got.State)
}

// TestFinishAfterRestart: Redis stops while a handler runs (after its
// claim), so its Finish fails; the engine tries it again in the background
// (idem.Options.FinishRetryFor), and once Redis is back (with its records:
// appendfsync always) the record holds the response: a retry gets the
// replay, the handler having run once.
func TestFinishAfterRestart(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	s := newStoreOn(t, c, Options{})
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous, StoreTimeout: 500 * time.Millisecond, FinishRetryFor: time.Minute,
		Logger: slog.New(slog.DiscardHandler)})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict})
	var runs atomic.Int64
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			srv.Stop()
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, "run %d", runs.Load())
	}))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/x", strings.NewReader(`{"a":1}`))
		req.Header.Set("Idempotency-Key", "0193a8f0-0000-7000-8000-000000000003")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	first := do()
	require.Equal(t, http.StatusCreated, first.Code, "the handler's answer goes out")
	require.NoError(t, srv.Start())
	var r *httptest.ResponseRecorder
	require.Eventually(t, func() bool {
		r = do()
		return r.Header().Get("Idempotent-Replayed") == "true"
	}, 30*time.Second, 100*time.Millisecond, "a retry gets the replay once the finish reached the restarted Redis")
	assert.Equal(t, first.Body.String(), r.Body.String())
	assert.Equal(t, int64(1), runs.Load(), "the handler ran once")
}
