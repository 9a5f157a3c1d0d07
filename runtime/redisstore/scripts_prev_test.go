package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Scripts of the current protocol (one packed argument) that scripts.go
// replaced with scripts taking the same arguments, verbatim, kept to check
// that processes running either share records during a rolling deploy.

// fullReadExtendScript, the previous extend script, read the whole record
// (GET) where the current one reads its header (GETRANGE 0 59).
var fullReadExtendScript = redis.NewScript(`
local a = ARGV[1]
local h = redis.call('GET', KEYS[1])
if not h or #h < 27 or string.byte(h, 1) ~= 1 or string.byte(h, 2) ~= 1 or string.sub(h, 4, 11) ~= string.sub(a, 1, 8) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = now + struct.unpack('>i8', a, 9)
if lease > struct.unpack('>i8', h, 20) then
  redis.call('SET', KEYS[1], string.sub(h, 1, 11) .. struct.pack('>i8>i8', lease, lease) .. string.sub(h, 28), 'PXAT', lease)
else
  redis.call('SETRANGE', KEYS[1], 11, struct.pack('>i8', lease))
end
return 1
`)

// fullReadFinishScript, the previous finish script, read the whole record
// (GET) where the current one reads its header (GETRANGE 0 59), and its
// response (GETRANGE 60 -1) only to compare it.
var fullReadFinishScript = redis.NewScript(`
local a = ARGV[1]
local cur = redis.call('GET', KEYS[1])
if not cur or #cur < 11 or string.byte(cur, 1) ~= 1 or string.sub(cur, 4, 11) ~= string.sub(a, 1, 8) then
  return 0
end
if string.byte(cur, 2) ~= 1 then
  if string.sub(cur, 2, 3) == string.sub(a, 9, 10) and string.sub(cur, 61) == ARGV[2] then return 1 end
  return 0
end
redis.call('SET', KEYS[1], '\1' .. string.sub(a, 9, 10) .. string.sub(cur, 4) .. ARGV[2], 'KEEPTTL')
if string.byte(a, 11) == 1 then redis.pcall('PUBLISH', KEYS[1], string.sub(a, 9, 9)) end
return 1
`)

// fullReadStore is a Store whose Finish and ExtendLease run the previous
// scripts, which read the whole record: a process of the previous generation. Begin, Get and Watch are
// the current ones (their scripts did not change).
type fullReadStore struct {
	*Store
	c redis.UniversalClient
}

func (p *fullReadStore) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	if err := check(ctx, "finish", key); err != nil {
		return err
	}
	if state != idem.StateCompleted && state != idem.StateFailed {
		return fmt.Errorf("redisstore: finish: state %v is not COMPLETED or FAILED", state)
	}
	n, err := fullReadFinishScript.Run(ctx, p.c, []string{p.key(key)}, finishArg(nil, token, state, response, p.notify), response).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: finish: %w", err)
	}
	if n == 0 {
		return idem.ErrFenced
	}
	return nil
}

func (p *fullReadStore) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if err := check(ctx, "extend lease", key); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("redisstore: extend lease: lease (%v) must be positive", lease)
	}
	n, err := fullReadExtendScript.Run(ctx, p.c, []string{p.key(key)}, extendArg(nil, token, lease)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: extend lease: %w", err)
	}
	if n == 0 {
		return idem.ErrFenced
	}
	return nil
}

// mixedFullReadStore sends each call whose script changed to the previous
// script (fullReadStore) or to the current one, as old decides: the
// processes of a rolling deploy.
type mixedFullReadStore struct {
	*Store
	fullRead *fullReadStore
	old      func(op string) bool
}

var (
	_ idem.LeaseExtender = (*mixedFullReadStore)(nil)
	_ idem.Watcher       = (*mixedFullReadStore)(nil)
)

func (g *mixedFullReadStore) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	if g.old("finish") {
		return g.fullRead.Finish(ctx, key, token, state, response)
	}
	return g.Store.Finish(ctx, key, token, state, response)
}

func (g *mixedFullReadStore) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if g.old("extend") {
		return g.fullRead.ExtendLease(ctx, key, token, lease)
	}
	return g.Store.ExtendLease(ctx, key, token, lease)
}

// TestScriptGenerations runs the conformance suite over processes running
// the previous scripts and the current ones, sharing one Redis.
func TestScriptGenerations(t *testing.T) {
	runRollingDeploy(t, map[string]func() func(string) bool{
		"Previous":    func() func(string) bool { return func(string) bool { return true } },
		"Alternating": alternating,
	}, func(s *Store, c redis.UniversalClient, old func(string) bool) idem.Store {
		return &mixedFullReadStore{Store: s, fullRead: &fullReadStore{Store: s, c: c}, old: old}
	})
}

// TestScriptGenerationsSameOutcome runs the previous and the current script
// with the same arguments on copies of the same value (records in every
// state, with and without a 64 KiB response, values that are no record, a
// missing key, a key of another type) and compares what they answer and
// what they leave: the value (the times the scripts write, read from the
// server's clock at different moments, within a second) and its expiry.
func TestScriptGenerationsSameOutcome(t *testing.T) {
	t.Parallel()
	s, c := newTestStore(t, Options{})
	ctx := ctxTimeout(t, 60*time.Second)
	const tok, other = idem.Token(1<<64 - 9), idem.Token(11)
	big := bigResponse(64 << 10)
	changed := append([]byte(nil), big...)
	changed[len(changed)-1] = '0'
	now := time.Now()
	rec := func(state idem.State, token idem.Token, lease time.Duration, resp []byte) string {
		return encodeRecord(&idem.Record{State: state, Token: token, Fingerprint: fp(2),
			LeaseExpiresAt: now.Add(lease), ExpiresAt: now.Add(time.Hour), Response: resp})
	}
	pending := rec(idem.StatePending, tok, time.Minute, nil)
	values := map[string]string{
		"missing":                     "",
		"pending":                     pending,
		"pending, lease ran out":      rec(idem.StatePending, tok, -time.Minute, nil),
		"pending, other token":        rec(idem.StatePending, other, time.Minute, nil),
		"completed":                   rec(idem.StateCompleted, tok, time.Minute, []byte("ok")),
		"completed, no response":      rec(idem.StateCompleted, tok, time.Minute, nil),
		"completed 64KiB":             rec(idem.StateCompleted, tok, time.Minute, big),
		"completed 64KiB, other":      rec(idem.StateCompleted, other, time.Minute, big),
		"failed":                      rec(idem.StateFailed, tok, time.Minute, nil),
		"failed 64KiB":                rec(idem.StateFailed, tok, time.Minute, big),
		"short pending (no record)":   pending[:40],
		"shorter pending (no record)": pending[:20],
		"version 2 (no record)":       "\x02" + pending[1:],
		"hash":                        "",
	}
	calls := map[string]struct {
		prev *redis.Script
		cur  *script
		args []any
	}{
		"extend":              {fullReadExtendScript, extendScript, []any{extendArg(nil, tok, time.Minute)}},
		"extend past expiry":  {fullReadExtendScript, extendScript, []any{extendArg(nil, tok, 3*time.Hour)}},
		"extend, other token": {fullReadExtendScript, extendScript, []any{extendArg(nil, other, 3*time.Hour)}},
		"finish 64KiB":        {fullReadFinishScript, finishScript, []any{finishArg(nil, tok, idem.StateCompleted, big, 1), big}},
		"finish 64KiB, last byte": {fullReadFinishScript, finishScript,
			[]any{finishArg(nil, tok, idem.StateCompleted, changed, 1), changed}},
		"finish 64KiB, shorter": {fullReadFinishScript, finishScript,
			[]any{finishArg(nil, tok, idem.StateCompleted, big[:len(big)-1], 1), big[:len(big)-1]}},
		"finish 64KiB, other token": {fullReadFinishScript, finishScript, []any{finishArg(nil, other, idem.StateCompleted, big, 1), big}},
		"finish":                    {fullReadFinishScript, finishScript, []any{finishArg(nil, tok, idem.StateCompleted, []byte("ok"), 1), "ok"}},
		"finish, no response":       {fullReadFinishScript, finishScript, []any{finishArg(nil, tok, idem.StateCompleted, nil, 1), ""}},
		"finish failed":             {fullReadFinishScript, finishScript, []any{finishArg(nil, tok, idem.StateFailed, nil, 1), ""}},
		"finish failed 64KiB":       {fullReadFinishScript, finishScript, []any{finishArg(nil, tok, idem.StateFailed, big, 1), big}},
	}
	for vname, v := range values {
		for cname, call := range calls {
			t.Run(vname+"/"+cname, func(t *testing.T) {
				var (
					replies [2]any
					errs    [2]string
					vals    [2]string
					ttls    [2]time.Duration
				)
				for i := range 2 {
					key := s.key(fmt.Sprintf("%s/%s/%d", vname, cname, i))
					switch vname {
					case "missing":
					case "hash":
						require.NoError(t, c.HSet(ctx, key, "f", "v").Err())
					default:
						require.NoError(t, c.Set(ctx, key, v, time.Hour).Err())
					}
					var cmd *redis.Cmd
					if i == 0 {
						cmd = call.prev.Eval(ctx, c, []string{key}, call.args...)
					} else {
						cmd = c.Eval(ctx, call.cur.src, []string{key}, call.args...)
					}
					replies[i], _ = cmd.Result()
					if err := cmd.Err(); err != nil {
						// The message names the script's SHA-1.
						errs[i], _, _ = strings.Cut(err.Error(), " script: ")
					}
					if vname != "hash" {
						vals[i], _ = c.Get(ctx, key).Result()
					}
					ttls[i] = c.PTTL(ctx, key).Val()
				}
				assert.Equal(t, errs[0], errs[1], "error")
				assert.Equal(t, replies[0], replies[1], "reply")
				assertSameRecord(t, vals[0], vals[1], ttls[0], ttls[1])
			})
		}
	}
}
