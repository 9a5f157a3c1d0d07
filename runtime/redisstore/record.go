package redisstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Record layout, format version 1 (0-based byte offsets; scripts.go has the
// same table in Lua's 1-based terms).
const (
	formatVersion = 1

	offVersion = 0
	offState   = 1
	offFlags   = 2
	offToken   = 3
	offLease   = 11
	offExpires = 19
	offFP      = 27
	headerLen  = offFP + len(idem.Fingerprint{}) // 60

	flagResponse = 1
)

// Sizes of the packed script arguments (see scripts.go).
const (
	beginArgLen  = 8 + len(idem.Fingerprint{}) + 8 + 8 + 2 // 59
	finishArgLen = 8 + 3
	extendArgLen = 8 + 8
)

var errFormat = errors.New("redisstore: stored value is not a record of a known format")

// decodeRecord parses a stored value. The response aliases v's bytes (a
// string from a reply, which nobody writes to): the store contract lets a
// returned Record.Response be shared, and neither the store nor the engine
// modifies it.
func decodeRecord(v string) (idem.Record, error) {
	if len(v) < headerLen || v[offVersion] != formatVersion {
		return idem.Record{}, errFormat
	}
	rec := idem.Record{
		State:          idem.State(v[offState]),
		Token:          idem.Token(be64(v[offToken:])),
		LeaseExpiresAt: time.UnixMilli(int64(be64(v[offLease:]))),
		ExpiresAt:      time.UnixMilli(int64(be64(v[offExpires:]))),
	}
	switch rec.State {
	case idem.StatePending, idem.StateCompleted, idem.StateFailed:
	default:
		return idem.Record{}, fmt.Errorf("%w: state %d", errFormat, rec.State)
	}
	copy(rec.Fingerprint[:], v[offFP:headerLen])
	switch v[offFlags] {
	case flagResponse:
		rec.Response = unsafe.Slice(unsafe.StringData(v[headerLen:]), len(v)-headerLen)
		if rec.Response == nil { // an empty response: keep it apart from none
			rec.Response = []byte{}
		}
	case 0:
		if len(v) > headerLen {
			return idem.Record{}, fmt.Errorf("%w: trailing bytes without a response flag", errFormat)
		}
	default:
		return idem.Record{}, fmt.Errorf("%w: flags %#x", errFormat, v[offFlags])
	}
	return rec, nil
}

// encodeRecord is the inverse of decodeRecord; the scripts build records
// themselves, so it serves tests and benchmarks.
func encodeRecord(rec *idem.Record) string {
	var b strings.Builder
	b.Grow(headerLen + len(rec.Response))
	var hdr [headerLen]byte
	hdr[offVersion] = formatVersion
	hdr[offState] = byte(rec.State)
	if rec.Response != nil {
		hdr[offFlags] = flagResponse
	}
	binary.BigEndian.PutUint64(hdr[offToken:], uint64(rec.Token))
	binary.BigEndian.PutUint64(hdr[offLease:], uint64(rec.LeaseExpiresAt.UnixMilli()))
	binary.BigEndian.PutUint64(hdr[offExpires:], uint64(rec.ExpiresAt.UnixMilli()))
	copy(hdr[offFP:], rec.Fingerprint[:])
	b.Write(hdr[:])
	b.Write(rec.Response)
	return b.String()
}

// be64 reads a big-endian uint64 from the first 8 bytes of s.
func be64(s string) uint64 {
	_ = s[7]
	return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
}
