package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// hashTag is Redis Cluster's rule: the bytes between the first '{' and the
// first '}' after it, when there are any; otherwise the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster takes mod 16384.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func slot(key string) int { return int(crc16(hashTag(key)) % 16384) }

func unescape(tag string) string {
	return strings.NewReplacer("%7B", "{", "%7D", "}", "%25", "%").Replace(tag)
}

func TestCRC16(t *testing.T) {
	assert.Equal(t, uint16(0x31C3), crc16("123456789")) // the reference check value
	// Slots Redis Cluster documents / reports for these keys.
	assert.Equal(t, 12182, slot("foo"))
	assert.Equal(t, slot("bar"), slot("{bar}baz"))
}

func TestKeyLayout(t *testing.T) {
	s, err := New(offlineClient(), Options{Prefix: "app:"})
	require.NoError(t, err)
	for _, tc := range []struct{ scope, key string }{
		{"u1:claimCoupon:3f2a", "app:{u1:claimCoupon:3f2a}"},
		{"ключ", "app:{ключ}"},
		{"a{b}c", "app:{a%7Bb%7Dc}"},
		{"}", "app:{%7D}"},
		{"{}", "app:{%7B%7D}"},
		{"100%", "app:{100%25}"},
		{"%7D", "app:{%257D}"},
	} {
		t.Run(tc.scope, func(t *testing.T) {
			k := s.key(tc.scope)
			assert.Equal(t, tc.key, k)
			assert.Equal(t, tc.scope, unescape(hashTag(k)))
		})
	}
	// The prefix never decides the slot.
	s2, err := New(offlineClient(), Options{Prefix: "other-service:v2:"})
	require.NoError(t, err)
	assert.Equal(t, slot(s.key("u1:op:k")), slot(s2.key("u1:op:k")))
	assert.Equal(t, slot("{u1:op:k}"), slot(s.key("u1:op:k")))

	_, err = New(offlineClient(), Options{Prefix: "a{b}:"})
	assert.Error(t, err)
	_, err = New(nil, Options{})
	assert.Error(t, err)
	s3, err := New(offlineClient(), Options{})
	require.NoError(t, err)
	assert.Equal(t, "idem:{k}", s3.key("k"))
}

// FuzzKey checks the properties the key layout promises for any scope key:
// the hash tag is exactly the (escaped) scope key, so one scope key is one
// slot, and escaping is reversible, so distinct scope keys never meet.
func FuzzKey(f *testing.F) {
	for _, seed := range []string{"a", "{", "}", "{}", "%", "%7B", "a}b{c", "u:op:k", "\xff"} {
		f.Add(seed)
	}
	s, err := New(offlineClient(), Options{Prefix: "p:"})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, scope string) {
		if scope == "" {
			return
		}
		k := s.key(scope)
		tag := hashTag(k)
		require.Equal(t, "p:{"+tag+"}", k, "the tag spans the whole scope part")
		require.NotEmpty(t, tag)
		require.Equal(t, scope, unescape(tag))
	})
}

// TestKeyOnServer checks where a record really lands, and that it is one key
// with the record's expiry.
func TestKeyOnServer(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := context.Background()
	_, err := s.Begin(ctx, &idem.BeginRequest{Key: "u1:op:{k}", Fingerprint: fp(1), Token: 7, Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	keys, err := c.Keys(ctx, s.prefix+"*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{s.prefix + "{u1:op:%7Bk%7D}"}, keys)
	typ, err := c.Type(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Equal(t, "string", typ)
	ttl, err := c.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.InDelta(t, time.Hour.Seconds(), ttl.Seconds(), 5)
	require.NoError(t, s.Finish(ctx, "u1:op:{k}", 7, idem.StateCompleted, []byte("body")))
	ttl2, err := c.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.InDelta(t, ttl.Seconds(), ttl2.Seconds(), 5, "Finish keeps the expiry")
	v, err := c.Get(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Len(t, v, headerLen+len("body"))
}

// offlineClient is a client that is never used to talk to a server.
func offlineClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
}

func TestNewChecksClient(t *testing.T) {
	_, err := New(redis.NewClient(&redis.Options{}), Options{})
	assert.ErrorContains(t, err, "ContextTimeoutEnabled")
	_, err = New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), Options{})
	assert.ErrorContains(t, err, "ContextTimeoutEnabled")
	_, err = New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true}), Options{})
	assert.NoError(t, err)
	_, err = New(redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true}), Options{})
	assert.NoError(t, err)
	_, err = New(redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true}), Options{})
	assert.NoError(t, err)
	s, err := New(redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true}), Options{})
	require.NoError(t, err)
	assert.Equal(t, byte(0), s.notify, "no publishing on a Ring")
}
