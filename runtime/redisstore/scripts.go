package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
)

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
//
// # Script protocol
//
// Each script takes one key and its fixed-size arguments packed into one
// string, ARGV[1] (built by Begin, Finish and ExtendLease in store.go; the
// sizes are record.go's beginArgLen, finishArgLen, extendArgLen); durations
// are 8-byte big-endian milliseconds, read with struct.unpack. One argument instead of six costs less to encode and to
// parse on both sides. The scripts read and write the record layout above
// exactly as the scripts of the previous protocol (one argument per field,
// kept in scripts_v1_test.go) did, and both generations are cached side by
// side under their own SHA-1, so during a rolling deploy old and new
// processes share records both ways: either one replays, finishes, takes
// over or extends what the other wrote (TestMixedProtocols).
//
// The begin and finish scripts later learnt to answer a re-run of the same
// call (see each below). That changed their source, so their SHA-1, but
// neither their arguments nor what they write, and the branches it added
// are taken only by the process that made the claim (they compare the
// claim's own token), so processes running the scripts from before and
// after share records too. (A re-run happens in the process that made the
// first call; TestMixedProtocols sends repeats to the current scripts.)
//
// The begin script later learnt to refuse, when ARGV byte 58 asks for the
// same fingerprint, the takeover of an expired PENDING record by another
// fingerprint (returning the record, as for a reclaimable FAILED one).
// That changed its source, so its SHA-1, but neither its arguments nor
// what it writes: it only answers "not acquired" in a case where the
// scripts before it took over. Processes running either still share
// records both ways; until the last process of a rolling deploy runs the
// current script, an older one may still let another body take an
// expired claim over under strict semantics, as it always did.
//
// # Notifications
//
// The begin and finish scripts publish with redis.pcall, after their write:
// a PUBLISH that fails (an ACL user without rights on the record's channel,
// NOPERM) leaves the write and the script's answer standing, and only the
// notification is lost (a waiter finds the change by polling). With
// redis.call, as the scripts had it before, the failed PUBLISH raised after
// the SET: Finish stored the record and reported an error, and a takeover
// wrote its claim and reported an error, which left the key blocked by a
// claim no request held until its lease ran out (TestNoChannelRights). The
// change altered both scripts' SHA-1, but nothing they write or answer when
// PUBLISH succeeds, so processes running either generation share records
// (the scripts of each are cached under their own SHA-1).

// beginScript claims KEYS[1]. ARGV[1] (59 bytes):
//
//	bytes 1-8    token
//	bytes 9-41   fingerprint
//	bytes 42-49  lease, ms
//	bytes 50-57  TTL, ms
//	byte 58      1: a reclaimable FAILED record, and a PENDING record whose
//	             lease expired, are claimed only with the same fingerprint
//	             (compared byte for byte; strict semantics)
//	byte 59      1: publish a change notification on the key's channel
//
// Returns an integer (the prior state: 0, 1 or 3) when the claim was made,
// or the existing record (a bulk string) when it was not. A record that
// cannot be claimed whatever the clock says (COMPLETED, or FAILED with a
// response: what a replay finds) is returned before anything else is done.
//
// A PENDING record that already carries the request's token is this very
// claim, made by an earlier run of the same call: go-redis sends a command
// again (MaxRetries; a ClusterClient's MaxRedirects) when the connection
// drops after it was sent, so the script may run twice for one Begin, the
// second time finding its own claim. It answers 0, as for a fresh claim, and renews the lease to now +
// lease, as the claim did (the caller counts its lease from the answer it
// gets, and the first run's lease may have run out meanwhile: that is no
// takeover, since no other claim came in between, or the token would be
// another), writing nothing else (tokens are fresh random values per
// claim, so no other claim carries it; the prior state the first run
// replaced is not known any more: the record has no field for it that
// the decoders of older processes would accept).
var beginScript = newScript(`
local a = ARGV[1]
local cur = redis.call('GET', KEYS[1])
local prior = 0
if cur then
  if string.byte(cur, 1) ~= 1 or #cur < 60 then
    return redis.error_reply('IDEMRECORD unknown record format')
  end
  prior = string.byte(cur, 2)
  if prior == 3 and string.byte(cur, 3) == 0 then
    if string.byte(a, 58) == 1 and string.sub(cur, 28, 60) ~= string.sub(a, 9, 41) then return cur end
  elseif prior ~= 1 then
    return cur
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease, ttl = struct.unpack('>i8>i8', a, 42)
if prior == 1 then
  if string.sub(cur, 4, 11) == string.sub(a, 1, 8) then
    redis.call('SETRANGE', KEYS[1], 11, struct.pack('>i8', now + lease))
    return 0
  end
  if struct.unpack('>i8', cur, 12) > now then return cur end
  if string.byte(a, 58) == 1 and string.sub(cur, 28, 60) ~= string.sub(a, 9, 41) then return cur end
end
local exp = now + ttl
redis.call('SET', KEYS[1],
  '\1\1\0' .. string.sub(a, 1, 8) .. struct.pack('>i8>i8', now + lease, exp) .. string.sub(a, 9, 41),
  'PXAT', exp)
if prior ~= 0 and string.byte(a, 59) == 1 then redis.pcall('PUBLISH', KEYS[1], '1') end
return prior
`)

// finishScript completes the PENDING record KEYS[1] held by a token.
//
//	ARGV[1] (11 bytes): bytes 1-8 token, byte 9 state, byte 10 flags,
//	        byte 11 1: publish a change notification on the key's channel
//	ARGV[2] response (appended when non-empty)
//
// Returns 1 when finished, 0 when fenced (no record, another token, or a
// final record other than the one asked for).
//
// A final record that carries the token and already holds the requested
// state, flags and response is what an earlier run of the same call wrote
// (go-redis sends a command again when the connection drops after it was
// sent): the script answers 1 and writes and publishes nothing, so the
// Finish that took effect is not reported fenced.
//
// It writes the whole record with one SET … KEEPTTL (which keeps the key's
// expiry): the same bytes as the v1 script's SETRANGE of state and flags
// and APPEND of the response, but APPEND grows a string greedily, so Redis
// kept up to twice the record's size (MEMORY USAGE of a record with a
// 100-byte response: 488 bytes against 304; with 4000 bytes, 8296 against
// 4208; see TestFinishedRecordMemory).
//
// It reads the header (GETRANGE 0 59; a missing key reads as "", which the
// length check fences), and the response (GETRANGE 60 -1, "" when there is
// none) only to compare it, for a final record with the token, state and
// flags asked for. Reading the whole record, as the script before it did
// with GET, copied a response into Lua for nothing when another token's
// record fenced the call, and twice (GET, then string.sub) for a re-run.
// The record the SET rewrites is PENDING, so its header (see extendScript),
// and the SET writes the same bytes. The script before it has the same
// arguments and answers and writes the same bytes, so processes running
// either share records (TestScriptGenerations,
// TestScriptGenerationsSameOutcome).
var finishScript = newScript(`
local a = ARGV[1]
local h = redis.call('GETRANGE', KEYS[1], 0, 59)
if #h < 11 or string.byte(h, 1) ~= 1 or string.sub(h, 4, 11) ~= string.sub(a, 1, 8) then
  return 0
end
if string.byte(h, 2) ~= 1 then
  if string.sub(h, 2, 3) == string.sub(a, 9, 10) and redis.call('GETRANGE', KEYS[1], 60, -1) == ARGV[2] then return 1 end
  return 0
end
redis.call('SET', KEYS[1], '\1' .. string.sub(a, 9, 10) .. string.sub(h, 4) .. ARGV[2], 'KEEPTTL')
if string.byte(a, 11) == 1 then redis.pcall('PUBLISH', KEYS[1], string.sub(a, 9, 9)) end
return 1
`)

// extendScript moves the lease expiry of the PENDING record KEYS[1] held by a
// token to the server's now + the lease, and the record's expiry (bytes
// 20-27 and the key's PXAT) to the lease's end when that is later, so a
// record whose holder heartbeats never expires under it (a handler running
// past the window keeps its record); it moves both with one SET … PXAT of
// the whole record (a PENDING record is its 60-byte header), not with
// PEXPIREAT, so the scripts need no command beyond those the package doc's
// ACL lists. ARGV[1] (16 bytes): bytes 1-8 token,
// bytes 9-16 lease, ms. Returns 1, or 0 when fenced. Running it twice (a
// command go-redis sent again) sets the lease from the second run's clock, a
// few milliseconds later: the same outcome.
//
// It reads the header only (GETRANGE 0 59; a missing key reads as "", which
// the length check fences): a heartbeat that meets a final record (its own
// request's, when one was on its way as Finish stopped the heartbeat, or a
// takeover's) is fenced on the header, and reading the whole record, as
// the script before it did with GET, copied the response into Lua for
// nothing: with a 64 KiB response, about 100 µs of the server's time per
// call, against 3 µs now (BenchmarkScriptPaths). The script takes
// effect on a PENDING record only, and a PENDING record is exactly its
// header: every begin script, of every generation, writes 60 bytes; a
// Begin's re-run and a heartbeat rewrite bytes within the header; the
// finish scripts set the final state before they append a response (in
// one script, so no other sees a PENDING record with a response). So the
// SET writes the bytes it wrote when it read the whole record
// (TestProtocolsWriteSameRecords checks the length of PENDING records), and a
// record shorter than the header (no script writes one) reads the same
// either way.
//
// The script before the one that moves the expiry moved the lease only.
// Its arguments, its answers and the record layout are the same, so
// processes running either share records (TestMixedProtocols): a record
// whose expiry this one moved is a record with a later expiry to the older
// scripts, and a heartbeat of an older process moves only the lease, as it
// always did (its own handlers can still outlive their records; once every
// process runs a script that moves the expiry, none can). The one that read
// the whole record (GET) has the same arguments and answers, and writes the
// same bytes, as this one: processes running either share records
// (TestScriptGenerations, TestScriptGenerationsSameOutcome).
var extendScript = newScript(`
local a = ARGV[1]
local h = redis.call('GETRANGE', KEYS[1], 0, 59)
if #h < 27 or string.byte(h, 1) ~= 1 or string.byte(h, 2) ~= 1 or string.sub(h, 4, 11) ~= string.sub(a, 1, 8) then
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

// script is a Lua script with its SHA-1, both kept boxed as command
// arguments so that sending them allocates nothing.
type script struct {
	src, sha       string
	srcArg, shaArg any
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(h[:])
	return &script{src: src, sha: sha, srcArg: src, shaArg: sha}
}

// Hash is the script's SHA-1 (hex), the name EVALSHA runs it by.
func (s *script) Hash() string { return s.sha }
