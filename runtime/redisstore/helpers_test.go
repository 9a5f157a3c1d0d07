package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
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
	tb.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = c.Del(ctx, keys...).Err()
		}
	})
	return p
}

func newTestStore(tb testing.TB, opts Options) (*Store, *redis.Client) {
	tb.Helper()
	c := testClient(tb, nil)
	if opts.Prefix == "" {
		opts.Prefix = uniquePrefix(tb, c)
	}
	s, err := New(c, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s, c
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
