package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/runtime/idem"
)

// The previous script protocol (one argument per field), verbatim, and the
// store code that called it, kept to check that processes of both
// generations share records during a rolling deploy (TestMixedProtocols).
// The record layout is the same; only the scripts' arguments differ.

// v1BeginScript claims KEYS[1].
//
//	ARGV[1] token (8 bytes)   ARGV[2] fingerprint (33 bytes)
//	ARGV[3] lease in ms       ARGV[4] TTL in ms
//	ARGV[5] "1": a reclaimable FAILED record needs the same fingerprint
//	ARGV[6] "1": publish a change notification on the key's channel
//
// Returns an integer (the prior state: 0, 1 or 3) when the claim was made,
// or the existing record (a bulk string) when it was not.
var v1BeginScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prior = 0
if cur then
  if string.byte(cur, 1) ~= 1 or #cur < 60 then
    return redis.error_reply('IDEMRECORD unknown record format')
  end
  local st = string.byte(cur, 2)
  if st == 1 then
    if struct.unpack('>i8', cur, 12) > now then return cur end
    prior = 1
  elseif st == 3 and string.byte(cur, 3) == 0 then
    if ARGV[5] == '1' and string.sub(cur, 28, 60) ~= ARGV[2] then return cur end
    prior = 3
  else
    return cur
  end
end
local exp = now + tonumber(ARGV[4])
redis.call('SET', KEYS[1],
  '\1\1\0' .. ARGV[1] .. struct.pack('>i8>i8', now + tonumber(ARGV[3]), exp) .. ARGV[2],
  'PXAT', exp)
if prior ~= 0 and ARGV[6] == '1' then redis.call('PUBLISH', KEYS[1], '1') end
return prior
`)

// v1FinishScript completes the PENDING record KEYS[1] held by a token.
//
//	ARGV[1] token (8 bytes)
//	ARGV[2] state byte followed by the flags byte (2 bytes)
//	ARGV[3] response (appended when non-empty)
//	ARGV[4] "1": publish a change notification on the key's channel
//
// Returns 1 when finished, 0 when fenced (no record, not PENDING, other token).
// SETRANGE and APPEND keep the key's expiry.
var v1FinishScript = redis.NewScript(`
local h = redis.call('GETRANGE', KEYS[1], 0, 10)
if #h < 11 or string.byte(h, 1) ~= 1 or string.byte(h, 2) ~= 1 or string.sub(h, 4, 11) ~= ARGV[1] then
  return 0
end
redis.call('SETRANGE', KEYS[1], 1, ARGV[2])
if #ARGV[3] > 0 then redis.call('APPEND', KEYS[1], ARGV[3]) end
if ARGV[4] == '1' then redis.call('PUBLISH', KEYS[1], string.sub(ARGV[2], 1, 1)) end
return 1
`)

// v1ExtendScript moves the lease expiry of the PENDING record KEYS[1] held by a
// token to the server's now + ARGV[2] ms. Returns 1, or 0 when fenced.
var v1ExtendScript = redis.NewScript(`
local h = redis.call('GETRANGE', KEYS[1], 0, 10)
if #h < 11 or string.byte(h, 1) ~= 1 or string.byte(h, 2) ~= 1 or string.sub(h, 4, 11) ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SETRANGE', KEYS[1], 11, struct.pack('>i8', now + tonumber(ARGV[2])))
return 1
`)

// v1Store is the previous Store's Begin, Finish, Get and ExtendLease over
// the v1 scripts (decodeRecord is the current one: the format is the same,
// and the old decoder differed only in copying the response).
type v1Store struct {
	client redis.UniversalClient
	s      *Store // for the key and the notify setting
}

func (v *v1Store) notify() string {
	if v.s.notify == 1 {
		return "1"
	}
	return "0"
}

func v1TokenBytes(t idem.Token) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(t))
}

func (v *v1Store) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if err := check(ctx, "begin", req.Key); err != nil {
		return idem.BeginResult{}, err
	}
	if req.Lease <= 0 || req.TTL <= 0 {
		return idem.BeginResult{}, fmt.Errorf("redisstore: begin: lease (%v) and TTL (%v) must be positive", req.Lease, req.TTL)
	}
	same := "0"
	if req.SameFingerprintToReclaim {
		same = "1"
	}
	r, err := v1BeginScript.Run(ctx, v.client, []string{v.s.key(req.Key)},
		v1TokenBytes(req.Token), req.Fingerprint[:], ms(req.Lease), ms(req.TTL), same, v.notify()).Result()
	if err != nil {
		return idem.BeginResult{}, fmt.Errorf("redisstore: begin: %w", err)
	}
	switch r := r.(type) {
	case int64:
		return idem.BeginResult{Acquired: true, Prior: idem.State(r)}, nil
	case string:
		rec, err := decodeRecord(r)
		if err != nil {
			return idem.BeginResult{}, fmt.Errorf("redisstore: begin: %w", err)
		}
		return idem.BeginResult{Record: rec}, nil
	default:
		return idem.BeginResult{}, fmt.Errorf("redisstore: begin: unexpected script reply %T", r)
	}
}

func (v *v1Store) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	if err := check(ctx, "finish", key); err != nil {
		return err
	}
	if state != idem.StateCompleted && state != idem.StateFailed {
		return fmt.Errorf("redisstore: finish: state %v is not COMPLETED or FAILED", state)
	}
	sf := []byte{byte(state), 0}
	if response != nil {
		sf[1] = flagResponse
	}
	n, err := v1FinishScript.Run(ctx, v.client, []string{v.s.key(key)},
		v1TokenBytes(token), sf, response, v.notify()).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: finish: %w", err)
	}
	if n == 0 {
		return idem.ErrFenced
	}
	return nil
}

func (v *v1Store) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := check(ctx, "get", key); err != nil {
		return idem.Record{}, false, err
	}
	r, err := v.client.Get(ctx, v.s.key(key)).Result()
	if errors.Is(err, redis.Nil) {
		return idem.Record{}, false, nil
	}
	if err != nil {
		return idem.Record{}, false, fmt.Errorf("redisstore: get: %w", err)
	}
	rec, err := decodeRecord(r)
	if err != nil {
		return idem.Record{}, false, fmt.Errorf("redisstore: get: %w", err)
	}
	return rec, true, nil
}

func (v *v1Store) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if err := check(ctx, "extend lease", key); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("redisstore: extend lease: lease (%v) must be positive", lease)
	}
	n, err := v1ExtendScript.Run(ctx, v.client, []string{v.s.key(key)}, v1TokenBytes(token), ms(lease)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: extend lease: %w", err)
	}
	if n == 0 {
		return idem.ErrFenced
	}
	return nil
}
