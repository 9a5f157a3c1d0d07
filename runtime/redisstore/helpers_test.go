package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// testClient returns a client for the test server, closed at the end of the test.
func testClient(tb testing.TB, tweak func(*redis.Options)) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL(tb))
	require.NoError(tb, err)
	opt.ContextTimeoutEnabled = true
	if tweak != nil {
		tweak(opt)
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// uniquePrefix gives each test its own key space, so tests can run in
// parallel and repeatedly against one server; its keys are deleted afterwards.
func uniquePrefix(tb testing.TB, c redis.UniversalClient) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(tb.Name())
	p := "idemtest:" + name + ":" + hex.EncodeToString(b[:]) + ":"
	tb.Cleanup(func() { deleteKeys(context.Background(), c, p) })
	return p
}

// deleteKeys deletes the keys under prefix p, on every primary of a cluster.
func deleteKeys(ctx context.Context, c redis.UniversalClient, p string) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		// SCAN covers one node: scan each primary, delete there (the keys
		// of one SCAN may lie in different slots).
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			deletePrefix(ctx, n, p)
			return nil
		})
		return
	}
	deletePrefix(ctx, c, p)
}

// deletePrefix deletes the keys under prefix p that c's SCAN sees: those of
// one node. Use deleteKeys.
func deletePrefix(ctx context.Context, c redis.Cmdable, p string) {
	iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
	for iter.Next(ctx) {
		_ = c.Del(ctx, iter.Val()).Err()
	}
}

// clusterClient returns a client of the test Redis Cluster, closed at the
// end of the test.
func clusterClient(tb testing.TB, tweak func(*redis.ClusterOptions)) *redis.ClusterClient {
	tb.Helper()
	opt := &redis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(tb), ContextTimeoutEnabled: true}
	if tweak != nil {
		tweak(opt)
	}
	var gates *probeGates
	if opt.RouteByLatency {
		gates = gateLatencyProbes(opt)
	}
	c := redis.NewClusterClient(opt)
	if gates != nil {
		c.OnNewNode(gates.open) // after go-redis's own callback
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// probeGates works around a data race in go-redis (v9.23.0) with
// RouteByLatency: a new node's latency probe starts (go updateLatency)
// before the cluster client's OnNewNode callback sets the node client's
// HIMPORT registry, which the probe's first connection reads (initConn),
// unsynchronized. The race detector failed TestClusterGetOnPrimary on it
// (1 run in 40 on a shared machine). Here every node client's dials wait
// until the OnNewNode callbacks have run for it.
type probeGates struct {
	mu    sync.Mutex
	gates map[*redis.Client]chan struct{}
}

func gateLatencyProbes(opt *redis.ClusterOptions) *probeGates {
	g := &probeGates{gates: map[*redis.Client]chan struct{}{}}
	opt.NewClient = func(o *redis.Options) *redis.Client {
		c := redis.NewClient(o)
		gate := make(chan struct{})
		c.AddHook(dialGate(gate))
		g.mu.Lock()
		g.gates[c] = gate
		g.mu.Unlock()
		return c
	}
	return g
}

func (g *probeGates) open(c *redis.Client) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gate, ok := g.gates[c]; ok {
		close(gate)
		delete(g.gates, c)
	}
}

// dialGate is a hook whose dials wait until its channel is closed.
type dialGate chan struct{}

// A gate never opened (a go-redis that made node clients without running
// the OnNewNode callbacks) fails the dial after gateFallback, loudly, rather
// than blocking a latency probe (context.TODO) forever.
func (g dialGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		t := time.NewTimer(gateFallback)
		defer t.Stop()
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, fmt.Errorf("redisstore test: the dial gate for %s never opened (go-redis did not run OnNewNode for this node client?)", addr)
		}
		return next(ctx, network, addr)
	}
}

const gateFallback = 30 * time.Second

func (dialGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sentinelClient returns a failover client of the test Sentinel setup,
// closed at the end of the test.
func sentinelClient(tb testing.TB) *redis.Client {
	tb.Helper()
	addrs, master := testenv.RedisSentinel(tb)
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: master, SentinelAddrs: addrs, ContextTimeoutEnabled: true,
	})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// newStoreOn returns a Store on c with a key space of its own.
func newStoreOn(tb testing.TB, c redis.UniversalClient, opts Options) *Store {
	tb.Helper()
	if opts.Prefix == "" {
		opts.Prefix = uniquePrefix(tb, c)
	}
	s, err := New(c, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func newTestStore(tb testing.TB, opts Options) (*Store, *redis.Client) {
	tb.Helper()
	c := testClient(tb, nil)
	return newStoreOn(tb, c, opts), c
}

func fp(b byte) idem.Fingerprint {
	var f idem.Fingerprint
	f[0] = 1
	for i := 1; i < len(f); i++ {
		f[i] = b
	}
	return f
}

func ctxTimeout(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// recordCommands records the name of every command c sends from now on
// (pipelines aside); took returns those sent since its last call.
func recordCommands(c redis.UniversalClient) (took func() []string) {
	var (
		mu   sync.Mutex
		cmds []string
	)
	c.AddHook(recordHook{func(name string) {
		mu.Lock()
		cmds = append(cmds, name)
		mu.Unlock()
	}})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := cmds
		cmds = nil
		return out
	}
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
