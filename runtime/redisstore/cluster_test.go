package redisstore

import (
	"context"
	"fmt"
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

// These tests run against the Redis Cluster of scripts/services (three
// primaries); the conformance suite runs there too (TestConformance/Cluster).

// TestClusterSlots: records of different scope keys spread over the slots
// and primaries, while everything of one record (its key, and its
// notification channel, which has the same name) is in the slot of its scope
// key alone, as the server itself computes it; and each record lives on the
// primary that owns that slot.
func TestClusterSlots(t *testing.T) {
	c := clusterClient(t, nil)
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	const n = 300
	slots := map[int64]bool{}
	nodes := map[string]int{}
	for i := range n {
		scope := fmt.Sprintf("u%d:claimCoupon:%x", i%7, i*7919)
		if i%50 == 0 {
			scope += ":{brace}%" // escaped, still one tag
		}
		r, err := s.Begin(ctx, &idem.BeginRequest{Key: scope, Fingerprint: fp(1), Token: idem.Token(i + 1), Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, r.Acquired)
		require.NoError(t, s.Finish(ctx, scope, idem.Token(i+1), idem.StateCompleted, []byte("resp")))

		key := s.key(scope)
		got, err := c.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(slot(key)), got, "the server's slot of %q", key)
		tagOnly, err := c.ClusterKeySlot(ctx, "{"+hashTag(key)+"}").Result()
		require.NoError(t, err)
		assert.Equal(t, tagOnly, got, "the prefix does not count")
		slots[got] = true

		owner, err := c.MasterForKey(ctx, key)
		require.NoError(t, err)
		// Asked directly (no redirection), the owner has it.
		v, err := owner.Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), v, "%q on its slot's primary %s", key, owner.Options().Addr)
		nodes[owner.Options().Addr]++

		rec, found, err := s.Get(ctx, scope)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "resp", string(rec.Response))
	}
	assert.Greater(t, len(slots), n*9/10, "distinct slots for %d scope keys", n)
	assert.Len(t, nodes, len(testenv.RedisClusterAddrs(t)), "records on every primary: %v", nodes)
	// Every key a record uses: one, of type string.
	var total atomic.Int64
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			total.Add(1)
		}
		return iter.Err()
	}))
	assert.Equal(t, int64(n), total.Load(), "one key per record")
}

// TestClusterScriptCacheFlushed: SCRIPT FLUSH on one primary makes the
// first script call routed there fall back from EVALSHA to EVAL (on that
// node), which caches it again; the other primaries are not affected. (It
// flushes a primary of the shared cluster: only this package's tests use
// that cluster, and the store always falls back.)
func TestClusterScriptCacheFlushed(t *testing.T) {
	c := clusterClient(t, nil)
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	require.NoError(t, s.LoadScripts(ctx))
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		ok, err := n.ScriptExists(ctx, beginScript.Hash(), finishScript.Hash(), extendScript.Hash()).Result()
		if err == nil && (!ok[0] || !ok[1] || !ok[2]) {
			err = fmt.Errorf("%s: scripts not loaded: %v", n.Options().Addr, ok)
		}
		return err
	}))

	// Two scope keys on different primaries.
	a := "u1:op:a"
	ownerA, err := c.MasterForKey(ctx, s.key(a))
	require.NoError(t, err)
	var b string
	for i := 0; ; i++ {
		b = fmt.Sprintf("u1:op:b%d", i)
		ownerB, err := c.MasterForKey(ctx, s.key(b))
		require.NoError(t, err)
		if ownerB.Options().Addr != ownerA.Options().Addr {
			break
		}
	}

	took := recordCommands(c)

	require.NoError(t, ownerA.ScriptFlush(ctx).Err())
	ok, err := ownerA.ScriptExists(ctx, beginScript.Hash()).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false}, ok)
	took()

	r, err := s.Begin(ctx, beginReq(b, 1))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.Equal(t, []string{"evalsha"}, took(), "the other primary still has it")

	r, err = s.Begin(ctx, beginReq(a, 2))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.Equal(t, []string{"evalsha", "eval"}, took(), "NOSCRIPT, then EVAL")
	require.NoError(t, s.Finish(ctx, a, 2, idem.StateCompleted, []byte("x")))
	assert.Equal(t, []string{"evalsha", "eval"}, took())

	r, err = s.Begin(ctx, beginReq(a, 3))
	require.NoError(t, err)
	assert.False(t, r.Acquired)
	assert.Equal(t, "x", string(r.Record.Response))
	assert.Equal(t, []string{"evalsha"}, took(), "EVAL cached the script on that primary")
	ok, err = ownerA.ScriptExists(ctx, beginScript.Hash(), finishScript.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true}, ok)
}

// TestClusterWatchAcrossNodes: one Store's watches share one pub/sub
// connection (to one node), and Redis Cluster broadcasts PUBLISH to every
// node, so changes to records on every primary reach it.
func TestClusterWatchAcrossNodes(t *testing.T) {
	c := clusterClient(t, nil)
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	byNode := map[string]string{}
	for i := 0; len(byNode) < len(testenv.RedisClusterAddrs(t)); i++ {
		require.Less(t, i, 1000)
		k := fmt.Sprintf("u1:op:w%d", i)
		n, err := c.MasterForKey(ctx, s.key(k))
		require.NoError(t, err)
		if _, ok := byNode[n.Options().Addr]; !ok {
			byNode[n.Options().Addr] = k
		}
	}
	tok := idem.Token(0)
	for _, k := range byNode {
		tok++
		r, err := s.Begin(ctx, beginReq(k, tok))
		require.NoError(t, err)
		require.True(t, r.Acquired)
		ch, stop := s.Watch(ctx, k)
		require.NoError(t, s.Finish(ctx, k, tok, idem.StateCompleted, nil))
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no notification for %s", k)
		}
		stop()
	}
}

// TestClusterRoundTrips: on a cluster too, a first request is two round
// trips and a replay one (no redirection: the client knows the slots).
func TestClusterRoundTrips(t *testing.T) {
	var writes atomic.Int64
	c := clusterClient(t, func(o *redis.ClusterOptions) {
		o.PoolSize = 1
		o.Dialer = testenv.CountingDialer(&writes)
	})
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	// Scripts on every primary, a connection to each.
	require.NoError(t, s.LoadScripts(ctx))
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.Ping(ctx).Err()
	}))
	storebench.RoundTrips(t, s, &writes)
}

// TestClusterGetOnPrimary: a Cluster client built to read from replicas
// (ReadOnly, RouteByLatency, RouteRandomly) sends a command to a replica
// when COMMAND calls it readonly. Get must read what Begin's script reads
// (idem.ReadFirst), so over such a client it sends GETEX without options,
// which COMMAND calls a write: the primary answers it. Over any other client
// it sends GET, which a server refusing writes still answers.
func TestClusterGetOnPrimary(t *testing.T) {
	c := clusterClient(t, func(o *redis.ClusterOptions) { o.ReadOnly, o.RouteRandomly = true, true })
	ctx := ctxTimeout(t, 30*time.Second)
	info, err := c.Command(ctx).Result()
	require.NoError(t, err)
	require.Contains(t, info, "get")
	require.Contains(t, info, "getex")
	assert.True(t, info["get"].ReadOnly, "GET would go to a replica")
	assert.False(t, info["getex"].ReadOnly, "GETEX goes to the primary")

	s := newStoreOn(t, c, Options{})
	took := recordCommands(c)
	_, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.False(t, found)
	assert.Equal(t, []string{"getex"}, took())
	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("x")))
	rec, found, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, idem.StateCompleted, rec.State)
	assert.Equal(t, "x", string(rec.Response))
	ttl, err := c.PTTL(ctx, s.key("k")).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Duration(0), "GETEX without options keeps the key's expiry")

	for name, tweak := range map[string]func(*redis.ClusterOptions){
		"default": nil, "RouteByLatency": func(o *redis.ClusterOptions) { o.RouteByLatency = true },
	} {
		c := clusterClient(t, tweak)
		s := newStoreOn(t, c, Options{})
		took := recordCommands(c)
		_, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		want := "get"
		if tweak != nil {
			want = "getex"
		}
		assert.Equal(t, []string{want}, took(), name)
	}
}
