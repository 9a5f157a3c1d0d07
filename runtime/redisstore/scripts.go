package redisstore

import "github.com/redis/go-redis/v9"

// The record is one Redis string (see doc.go for the layout). Lua indexes
// strings from 1, so the 0-based offsets of record.go appear here plus one:
//
//	byte 1     format version (1)
//	byte 2     state (1 PENDING, 2 COMPLETED, 3 FAILED)
//	byte 3     flags (bit 0: a response follows the header)
//	bytes 4-11   token, 8 bytes big-endian, compared as a string (Lua numbers
//	             are doubles and cannot hold every uint64)
//	bytes 12-19  lease expiry, Unix ms, signed 64-bit big-endian
//	bytes 20-27  record expiry, Unix ms, signed 64-bit big-endian
//	bytes 28-60  fingerprint (33 bytes)
//	bytes 61-    response
//
// Times come from the server's clock (TIME); millisecond values fit a
// double exactly. The record's own expiry is the key's PXAT, so Redis
// forgets it at ExpiresAt on its own.

// beginScript claims KEYS[1].
//
//	ARGV[1] token (8 bytes)   ARGV[2] fingerprint (33 bytes)
//	ARGV[3] lease in ms       ARGV[4] TTL in ms
//	ARGV[5] "1": a reclaimable FAILED record needs the same fingerprint
//	ARGV[6] "1": publish a change notification on the key's channel
//
// Returns an integer (the prior state: 0, 1 or 3) when the claim was made,
// or the existing record (a bulk string) when it was not.
var beginScript = redis.NewScript(`
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

// finishScript completes the PENDING record KEYS[1] held by a token.
//
//	ARGV[1] token (8 bytes)
//	ARGV[2] state byte followed by the flags byte (2 bytes)
//	ARGV[3] response (appended when non-empty)
//	ARGV[4] "1": publish a change notification on the key's channel
//
// Returns 1 when finished, 0 when fenced (no record, not PENDING, other token).
// SETRANGE and APPEND keep the key's expiry.
var finishScript = redis.NewScript(`
local h = redis.call('GETRANGE', KEYS[1], 0, 10)
if #h < 11 or string.byte(h, 1) ~= 1 or string.byte(h, 2) ~= 1 or string.sub(h, 4, 11) ~= ARGV[1] then
  return 0
end
redis.call('SETRANGE', KEYS[1], 1, ARGV[2])
if #ARGV[3] > 0 then redis.call('APPEND', KEYS[1], ARGV[3]) end
if ARGV[4] == '1' then redis.call('PUBLISH', KEYS[1], string.sub(ARGV[2], 1, 1)) end
return 1
`)

// extendScript moves the lease expiry of the PENDING record KEYS[1] held by a
// token to the server's now + ARGV[2] ms. Returns 1, or 0 when fenced.
var extendScript = redis.NewScript(`
local h = redis.call('GETRANGE', KEYS[1], 0, 10)
if #h < 11 or string.byte(h, 1) ~= 1 or string.byte(h, 2) ~= 1 or string.sub(h, 4, 11) ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SETRANGE', KEYS[1], 11, struct.pack('>i8', now + tonumber(ARGV[2])))
return 1
`)
