package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// aclClient starts a private Redis and returns a client logged in as a user
// with every command and key but no pub/sub channel (resetchannels: what
// Redis 7's default acl-pubsub-default gives a user created without
// channel rights), so its PUBLISH and SUBSCRIBE are refused (NOPERM).
func aclClient(t *testing.T) *redis.Client {
	t.Helper()
	c := userClient(t, "~*", "resetchannels", "+@all")
	ctx := ctxTimeout(t, 30*time.Second)
	err := c.Publish(ctx, "idem:{k}", "1").Err()
	require.Error(t, err, "the user may not publish")
	require.True(t, redis.HasErrorPrefix(err, "NOPERM"), "%v", err)
	return c
}

// userClient starts a private Redis and returns a client logged in as the
// user app, created there with rules (and closed at the end of the test).
func userClient(t *testing.T, rules ...string) *redis.Client {
	t.Helper()
	srv := testenv.StartRedis(t)
	ctx := ctxTimeout(t, 30*time.Second)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer admin.Close()
	require.NoError(t, admin.Do(ctx, setUser("app", rules)...).Err())
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "app", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setUser is the ACL SETUSER command that (re)creates user, password pw,
// with rules and no other rights.
func setUser(user string, rules []string) []any {
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">pw"}
	for _, r := range rules {
		args = append(args, r)
	}
	return args
}

// runConformanceAs runs the conformance suite on stores over c, all with
// prefix: the suite's keys are its own in every test.
func runConformanceAs(t *testing.T, ctx context.Context, c redis.UniversalClient, prefix string) {
	t.Helper()
	storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
		s, err := New(c, Options{Prefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.NoError(t, s.LoadScripts(ctx))
		return s
	})
}

// TestNoChannelRights: under an ACL user that may not publish on the record
// channels, the PUBLISH a script makes after its write fails, but the write
// stands and so does the script's answer: Finish succeeds, and a takeover or
// reclaim acquires the key. (With redis.call the script raised after the
// write: Finish stored the record and reported an error, and a takeover wrote
// its claim and reported an error, a 503 that left the key blocked by the
// claim of no one until its lease ran out, at every retry.)
func TestNoChannelRights(t *testing.T) {
	t.Parallel()
	c := aclClient(t)
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 30*time.Second)

	r, err := s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("resp")), "the PUBLISH failed, not the Finish")
	rec, ok, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, idem.StateCompleted, rec.State)
	assert.Equal(t, "resp", string(rec.Response))
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("resp")), "a re-run")

	// A takeover of an expired lease.
	req := beginReq("t", 5)
	req.Lease = time.Millisecond
	_, err = s.Begin(ctx, req)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	r, err = s.Begin(ctx, beginReq("t", 6))
	require.NoError(t, err, "the takeover's PUBLISH failed, not the takeover")
	assert.True(t, r.Acquired)
	assert.Equal(t, idem.StatePending, r.Prior)
	rec, _, err = s.Get(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, idem.Token(6), rec.Token)

	// A reclaim of a FAILED record.
	require.NoError(t, s.Finish(ctx, "t", 6, idem.StateFailed, nil))
	r, err = s.Begin(ctx, beginReq("t", 7))
	require.NoError(t, err)
	assert.True(t, r.Acquired)
	assert.Equal(t, idem.StateFailed, r.Prior)
	require.NoError(t, s.Finish(ctx, "t", 7, idem.StateCompleted, nil))
}

// TestLeastPrivilegeACL runs the conformance suite as a user with the rights
// the package documentation lists, and no others: the commands the store
// and its scripts send, on the prefix's keys and channels.
func TestLeastPrivilegeACL(t *testing.T) {
	const prefix = "idemtest:"
	c := userClient(t, aclRules(prefix)...)
	ctx := ctxTimeout(t, 30*time.Second)
	require.Error(t, c.Set(ctx, "other", "1", 0).Err(), "the user is confined to the prefix")
	require.Error(t, c.Set(ctx, prefix+"x:{k}", "1", 0).Err(), "nor to the records of a prefix that extends it")
	runConformanceAs(t, ctx, c, prefix)
}

// TestWatchRefused: a SUBSCRIBE the server refuses (an ACL user without the
// channel) is never confirmed; Watch says "look again" after about
// readyTimeout instead of waiting out its context, so a waiting duplicate
// goes on polling.
func TestWatchRefused(t *testing.T) {
	t.Parallel()
	s := newStoreOn(t, aclClient(t), Options{})
	ctx := ctxTimeout(t, 5*time.Second)
	for range 2 {
		start := time.Now()
		ch, stop := s.Watch(ctx, "k")
		took := time.Since(start)
		stop()
		assert.True(t, closed(ch), "look again")
		assert.Less(t, took, readyTimeout+time.Second)
	}
}

// pendingChannels returns the channels whose SUBSCRIBE the hub of s counts
// as unconfirmed.
func pendingChannels(s *Store) []string {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	var chans []string
	for c := range s.hub.pending {
		chans = append(chans, c)
	}
	return chans
}

// TestWatchRefusedForgetsPending: a refused SUBSCRIBE is never confirmed, so
// its count of unconfirmed SUBSCRIBE commands never goes; channels are per
// key, so one such count per watched key piled up for good. Once a
// channel's last watch has ended, its count is dropped readyTimeout later
// (by the next Watch or stop). Both ways of a refused watch are covered:
// one that waits out readyTimeout (and subscribes again), one whose context
// ends first.
func TestWatchRefusedForgetsPending(t *testing.T) {
	t.Parallel()
	s := newStoreOn(t, aclClient(t), Options{})
	ctx := ctxTimeout(t, 30*time.Second)

	ch, stop := s.Watch(ctx, "waited")
	stop()
	require.True(t, closed(ch))
	for i := range 5 {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		ch, stop := s.Watch(short, fmt.Sprint("ended-", i))
		stop()
		cancel()
		require.True(t, closed(ch))
	}
	require.Len(t, pendingChannels(s), 6, "not confirmed yet")

	time.Sleep(readyTimeout + 100*time.Millisecond)
	ch, stop = s.Watch(ctx, "last")
	assert.ElementsMatch(t, []string{s.key("last")}, pendingChannels(s), "the stale counts are gone")
	stop()
	require.True(t, closed(ch))
	time.Sleep(readyTimeout + 100*time.Millisecond)
	_, stop = s.Watch(ctx, "waited") // again, from scratch
	stop()
	assert.ElementsMatch(t, []string{s.key("waited")}, pendingChannels(s))
	s.hub.mu.Lock()
	assert.Empty(t, s.hub.sets)
	assert.LessOrEqual(t, len(s.hub.unconfirmed), 1)
	s.hub.mu.Unlock()
}

// aclRules are the rights the package documentation lists, for prefix.
func aclRules(prefix string) []string {
	return []string{"~" + prefix + "{*", "&" + prefix + "{*",
		"+evalsha", "+eval", "+script|load", "+get", "+set", "+setrange", "+getrange", "+time", "+publish",
		"+subscribe", "+unsubscribe", "+ping"}
}

// clusterACLRules are the rights the package documentation lists for a
// Cluster client with the default node selection, for prefix: aclRules and
// the commands of the cluster client.
func clusterACLRules(prefix string) []string {
	return append(aclRules(prefix), "+cluster|slots", "+command", "+asking")
}

// TestClusterLeastPrivilegeACL runs the conformance suite on the test Redis
// Cluster as a user (on every node; dropped afterwards) with the rights
// the package documentation lists for a Cluster client, and no others, and
// then finds no command refused to it in any node's ACL LOG. Without
// +command, go-redis's cluster client sent a COMMAND, refused, to the nodes
// with every call it routed.
func TestClusterLeastPrivilegeACL(t *testing.T) {
	addrs := testenv.RedisClusterAddrs(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	var b [4]byte
	_, _ = rand.Read(b[:])
	user := "idemtest-acl-" + hex.EncodeToString(b[:])
	prefix := user + ":"
	var admins []*redis.Client
	for _, addr := range addrs {
		a := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		admins = append(admins, a)
		require.NoError(t, a.Do(ctx, setUser(user, clusterACLRules(prefix))...).Err())
	}
	t.Cleanup(func() {
		for _, a := range admins {
			_ = a.Do(context.Background(), "ACL", "DELUSER", user).Err()
			_ = a.Close()
		}
	})
	c := clusterClient(t, func(o *redis.ClusterOptions) { o.Username, o.Password = user, "pw" })
	other := prefix + "x:{k}" // the records of a tenant whose prefix extends this one
	require.Error(t, c.Set(ctx, other, "1", 0).Err(), "the user is confined to the prefix's records")

	t.Cleanup(func() { deleteKeys(context.Background(), clusterClient(t, nil), prefix) })
	t.Run("Conformance", func(t *testing.T) { runConformanceAs(t, ctx, c, prefix) })

	for i, a := range admins {
		entries, err := a.Do(ctx, "ACL", "LOG", "1000").Slice()
		require.NoError(t, err)
		var refused []string
		for _, e := range entries {
			f := map[string]any{}
			if kv, ok := e.([]any); ok {
				for j := 0; j+1 < len(kv); j += 2 {
					f[fmt.Sprint(kv[j])] = kv[j+1]
				}
			} else if m, ok := e.(map[any]any); ok {
				for k, v := range m {
					f[fmt.Sprint(k)] = v
				}
			}
			if f["username"] == user && f["object"] != other {
				refused = append(refused, fmt.Sprintf("%v %v (%v)", f["reason"], f["object"], f["count"]))
			}
		}
		assert.Empty(t, refused, "commands refused to the user on %s", addrs[i])
	}
}

// TestACLGlobPrefix: ACL key patterns are globs. For a prefix with glob
// characters the pattern the package doc gives, with each escaped, grants
// the prefix's keys and no others; unescaped, it grants other keys and not
// the prefix's.
func TestACLGlobPrefix(t *testing.T) {
	srv := testenv.StartRedis(t)
	ctx := ctxTimeout(t, 30*time.Second)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer admin.Close()
	const prefix = `svc[a]:`
	for _, c := range []struct {
		pattern      string
		own, foreign bool // may write prefix+"{k}", "svca:{k}"
	}{
		{`~svc\[a\]:{*`, true, false},
		{`~svc[a]:{*`, false, true},
	} {
		require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "glob", "reset", "on", ">pw", c.pattern, "+set").Err())
		u := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "glob", Password: "pw", ContextTimeoutEnabled: true})
		assert.Equal(t, c.own, u.Set(ctx, prefix+"{k}", "1", 0).Err() == nil, c.pattern)
		assert.Equal(t, c.foreign, u.Set(ctx, "svca:{k}", "1", 0).Err() == nil, c.pattern)
		require.NoError(t, u.Close())
	}
}
