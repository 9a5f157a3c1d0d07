package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// TestSentinelFailover: on a private Sentinel setup, a record written before
// a failover (and replicated: WAIT) is still there after it, and the store
// goes on working on the promoted replica, whose script cache is empty
// (EVALSHA falls back to EVAL). The conformance suite runs on the shared
// Sentinel setup (TestConformance/Sentinel); this test disturbs its servers.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	sn := testenv.StartSentinel(t)
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: sn.Master, SentinelAddrs: []string{sn.Addr}, ContextTimeoutEnabled: true,
	})
	defer c.Close()
	s := newStoreOn(t, c, Options{})
	ctx := ctxTimeout(t, 60*time.Second)

	r, err := s.Begin(ctx, beginReq("before", 1))
	require.NoError(t, err)
	require.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "before", 1, idem.StateCompleted, []byte("kept")))
	n, err := c.Wait(ctx, 1, 0).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the replica has the record")

	sentinel := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
	defer sentinel.Close()
	require.NoError(t, sentinel.Failover(ctx, sn.Master).Err())
	require.Eventually(t, func() bool {
		addr, err := sentinel.GetMasterAddrByName(ctx, sn.Master).Result()
		return err == nil && addr[0]+":"+addr[1] == sn.Replica.Addr
	}, 30*time.Second, 50*time.Millisecond, "the sentinel promotes the replica")

	// Until the old primary is demoted, a client still connected to it may
	// write there, and such writes are lost when it resynchronizes: Redis's
	// asynchronous failover (see the package documentation). The sentinel
	// demotes it once it looks at it again (INFO every 10 s); do it now, as
	// the sentinel would.
	old := redis.NewClient(&redis.Options{Addr: sn.Primary.Addr})
	defer old.Close()
	host, port, _ := strings.Cut(sn.Replica.Addr, ":")
	require.NoError(t, old.ReplicaOf(ctx, host, port).Err())
	require.Eventually(t, func() bool {
		role, err := old.Do(ctx, "ROLE").Slice()
		return err == nil && role[0] == "slave"
	}, 30*time.Second, 50*time.Millisecond, "the old primary becomes a replica of the promoted one")

	// The client follows the switch (the sentinel's +switch-master, or a
	// READONLY answer from the demoted primary) within a few attempts.
	require.Eventually(t, func() bool {
		r, err = s.Begin(ctx, beginReq("before", 2))
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "Begin after the failover: %v", err)
	assert.False(t, r.Acquired)
	assert.Equal(t, idem.StateCompleted, r.Record.State)
	assert.Equal(t, "kept", string(r.Record.Response))

	require.Eventually(t, func() bool {
		r, err = s.Begin(ctx, beginReq("after", 3))
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "a claim after the failover: %v", err)
	assert.True(t, r.Acquired)
	require.NoError(t, s.Finish(ctx, "after", 3, idem.StateCompleted, []byte("new")))
	rec, found, err := s.Get(ctx, "after")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "new", string(rec.Response))

	// Everything went to the promoted replica.
	direct := redis.NewClient(&redis.Options{Addr: sn.Replica.Addr})
	defer direct.Close()
	role, err := direct.Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	assert.Equal(t, "master", role[0])
	v, err := direct.Exists(context.Background(), s.key("after"), s.key("before")).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), v)
}
