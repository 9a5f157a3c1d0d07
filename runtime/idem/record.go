package idem

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"net/http"
	"slices"
	"strings"
	"unsafe"

	"github.com/idemgen/idemgen/runtime/internal/swar"
)

// The stored response (Record.Response) is an engine-owned compact binary
// encoding, opaque to stores:
//
//	byte    version (1)
//	byte    flags: bit 0 = not replayable (the body exceeded Response.MaxBytes; no body stored)
//	               bit 1 = tagged: the record ends with a tag
//	uvarint status (200..599)
//	uvarint number of header fields n
//	n x     uvarint len, canonical name, uvarint len, value
//	rest    the body, then, when tagged, the tag: 16 bytes, 2 little-endian
//	        words: domain, key (tagKey)
//
// The body comes without a length so the encoding can be written as the
// response streams; the tag, written when the response is complete, after
// it. Decoding checks every length and never panics. The header fields are
// those of the allowlist the record was stored under (Content-Type,
// Content-Encoding, then Response.Headers); decoding takes whatever names a
// record holds, so what is stored may change without a new version
// (Content-Encoding was added so: older records, without it, decode as
// before, and older processes decode newer records).
//
// The tag (recordTag) is written only over a LocalReader store, whose
// records no other process reads: releases before it refuse a record
// with flag bit 1, so records in a shared store (Redis, PostgreSQL) stay
// untagged, readable by every release.

const (
	recordVersion       = 1
	flagNotReplayable   = 1 << 0
	flagTagged          = 1 << 1
	maxRecordHeaders    = 64
	recordHeaderReserve = 2 // version, flags
)

// The field count is written as one uvarint byte after the fields: this
// fails to compile if maxRecordHeaders no longer fits in one.
const _ = uint(127 - maxRecordHeaders)

// recordTag names the request a record answers, in the terms of the
// Engine that wrote it: the key its fingerprint cache finds the request's
// fingerprint by (a keyed digest of the request's bytes, their body's
// length, the policy) and the cache's domain, which names the digest's
// seed. A request whose tag equals a record's has the bytes of the
// request that made it (but for a collision of the digest: see fpCache),
// and so its fingerprint. A record of another Engine (or process) has
// another domain and is compared by fingerprint.
type recordTag struct {
	domain uint64
	key    uint64 // tagKey of the request's fpKey
}

// newRecordTag returns the tag of records that the Engine whose cache has
// domain writes for requests of key k.
func newRecordTag(domain uint64, k fpKey) recordTag {
	return recordTag{domain: domain, key: tagKey(k)}
}

// tagKey folds an fpKey into one word for a record's tag (every byte a
// record keeps is memory the store takes, per record): its digest,
// with the body's length and the policy word mixed in. The digest covers
// the length and the policy's id already (fpCache.digest), so the mix
// only matters for the keylessKey bit of the policy word. A tag is one
// 64-bit word: two requests under one key match by accident with about
// 2^-64 chance per pair, whatever their lengths (the cache's key, which
// keeps the length apart, collides only between inputs of one length).
func tagKey(k fpKey) uint64 {
	return k.digest ^ bits.RotateLeft64(k.n*0x9e3779b97f4a7c15, 29) ^ k.policy*0xc2b2ae3d27d4eb4f
}

// recordTagLen is the length of a tag, at the end of a tagged record.
const recordTagLen = 16

// appendRecordTag tags the record b (complete: head and body) with t.
func appendRecordTag(b []byte, t *recordTag) []byte {
	b[1] |= flagTagged
	var w [recordTagLen]byte
	binary.LittleEndian.PutUint64(w[0:], t.domain)
	binary.LittleEndian.PutUint64(w[8:], t.key)
	return append(b, w[:]...)
}

// cutRecordTag returns a tagged record's tag and the record without it;
// false when the record is untagged (or too short to hold a tag).
func cutRecordTag(b []byte) (recordTag, []byte, bool) {
	var t recordTag
	if len(b) < recordHeaderReserve+recordTagLen || b[0] != recordVersion || b[1]&flagTagged == 0 {
		return t, b, false
	}
	rest := b[:len(b)-recordTagLen]
	w := b[len(rest):]
	t.domain = binary.LittleEndian.Uint64(w[0:])
	t.key = binary.LittleEndian.Uint64(w[8:])
	return t, rest, true
}

// storedResponse is a decoded record; its strings and body alias the record bytes.
type storedResponse struct {
	status        int
	notReplayable bool
	header        []headerField
	body          []byte
}

type headerField struct{ name, value string }

var errCorruptRecord = errors.New("idem: stored response is corrupt or of an unknown version")

// appendRecordHead appends the version, flags, status and the allowlisted header fields of h.
//
// A Content-Type present with no value (h["Content-Type"] = nil, which
// keeps net/http from sniffing one) is stored as one empty value, and
// replayed as present with no value again (writeReplay): an explicit empty
// value, which net/http would send as "Content-Type: ", is replayed so too.
// Releases before this replay it as the empty value (no sniffing either).
func appendRecordHead(dst []byte, status int, h http.Header, allow []string) []byte {
	return appendRecordHeadExcept(dst, status, h, allow, 0)
}

// appendRecordHeadExcept is appendRecordHead leaving out allow[i] for each
// bit i set in except (the recorder's representation headers that a
// middleware in front of the engine set: see recorder.outer).
func appendRecordHeadExcept(dst []byte, status int, h http.Header, allow []string, except uint8) []byte {
	dst = append(dst, recordVersion, 0)
	dst = binary.AppendUvarint(dst, uint64(status))
	// The number of fields is at most maxRecordHeaders (< 128): one uvarint
	// byte, set once the fields are written, so h is read in one pass.
	at := len(dst)
	dst = append(dst, 0)
	n, found := 0, 0
	missed := uint64(0) // the lengths of the names of allow not in h as spelled (lengthBit)
	for i, name := range allow {
		vs, ok := h[name]
		if except&(1<<i) != 0 {
			ok = false
		}
		if !ok {
			missed |= lengthBit(name)
			continue
		}
		found++
		var full bool
		if dst, n, full = appendRecordFields(dst, n, name, vs); full {
			dst[at] = byte(n)
			return dst
		}
	}
	if missed != 0 && len(h) > found {
		// Some of h is not an allowlisted name as spelled: a name set in
		// another case (h["location"] = ...), which net/http sends as it
		// is, is stored under its canonical name. A response whose names
		// are all allowlisted, as spelled, skips this scan; in it, a name
		// of another length than every name missed is none of them. (Two
		// spellings of one name besides the canonical one may come apart
		// in the record; the replay then keeps one of them.)
		for k, vs := range h {
			if missed&lengthBit(k) == 0 {
				continue
			}
			name := foldedName(k, allow)
			if name == "" {
				continue
			}
			if i := foldedIndex(k); i >= 0 && except&(1<<i) != 0 {
				continue // a representation header set in front of the engine
			}
			if _, ok := h[name]; ok {
				continue // stored as spelled canonically
			}
			var full bool
			if dst, n, full = appendRecordFields(dst, n, name, vs); full {
				break
			}
		}
	}
	dst[at] = byte(n)
	return dst
}

// headFields returns the offset of a record head's field count (b holds
// at least the head, as appendRecordHead writes it).
func headFields(b []byte) int {
	_, n := binary.Uvarint(b[recordHeaderReserve:])
	return recordHeaderReserve + n
}

// nextField returns the name and value of the field at b[i:] (in a head
// appendRecordHead wrote) and the offset of the next.
func nextField(b []byte, i int) (name, value []byte, next int) {
	name, rest, _ := uvarintBytesEmpty(b[i:])
	value, rest, _ = uvarintBytesEmpty(rest)
	return name, value, len(b) - len(rest)
}

// replaySniffs reports whether net/http sniffs a Content-Type for the
// replay of the record head b (the head only): its status has a body, and
// it holds no Content-Type and no Content-Encoding but blank ones (as
// writeReplay sets them, the first of the values read).
func replaySniffs(head []byte) bool {
	status, _ := binary.Uvarint(head[recordHeaderReserve:])
	if !bodyAllowedForStatus(int(status)) {
		return false
	}
	at := headFields(head)
	ce := false // a Content-Encoding field was read
	for i, p := 0, at+1; i < int(head[at]); i++ {
		name, value, next := nextField(head, p)
		switch string(name) {
		case "Content-Type":
			return false
		case "Content-Encoding":
			if !ce && len(value) > 0 {
				return false
			}
			ce = true
		}
		p = next
	}
	return true
}

// insertContentType adds the field Content-Type: v to the record b, whose
// head is headLen bytes (the body follows), and returns the record and the
// length of its head. The field goes after the Content-Type fields the head
// holds (a second value, as net/http sends the one it sniffed after one set
// under another spelling), or first; one empty Content-Type field, which
// stands for a Content-Type present with no value (appendRecordHead), which
// net/http sends as nothing, is replaced. A head at maxRecordHeaders fields
// drops its last (one appendRecordHead would not have reached with this
// field first).
func insertContentType(b []byte, headLen int, v string) ([]byte, int) {
	at := headFields(b)
	count := int(b[at])
	pos, last := at+1, at+1 // where the field goes; the last field
	cts, ctAt, ctEmpty := 0, 0, false
	for i, p := 0, at+1; i < count; i++ {
		last = p
		name, value, next := nextField(b[:headLen], p)
		if string(name) == "Content-Type" {
			cts, ctAt, ctEmpty = cts+1, p, len(value) == 0
			pos = next
		}
		p = next
	}
	switch {
	case cts == 1 && ctEmpty:
		b = append(b[:ctAt], b[pos:]...)
		headLen, count, pos = headLen-(pos-ctAt), count-1, ctAt
	case count == maxRecordHeaders:
		b = append(b[:last], b[headLen:]...)
		headLen, count, pos = last, count-1, min(pos, last)
	}
	f := binary.AppendUvarint(make([]byte, 0, 16+len(v)), uint64(len("Content-Type")))
	f = append(f, "Content-Type"...)
	f = binary.AppendUvarint(f, uint64(len(v)))
	f = append(f, v...)
	b = slices.Insert(b, pos, f...)
	b[at] = byte(count + 1)
	return b, headLen + len(f)
}

// lengthBit is bit len(s) of a word, bit 63 for every length from 63 on.
func lengthBit(s string) uint64 { return 1 << min(len(s), 63) }

// foldedName returns the name of allow that k spells in another case, or "".
func foldedName(k string, allow []string) string {
	for _, name := range allow {
		if len(k) == len(name) && k != name && strings.EqualFold(k, name) {
			return name
		}
	}
	return ""
}

// nilContentType stands for a Content-Type present with no value.
var nilContentType = []string{""}

// appendRecordFields appends the fields name: v for each v of vs (n fields
// are written so far); full reports that it stopped at maxRecordHeaders.
func appendRecordFields(dst []byte, n int, name string, vs []string) (_ []byte, _ int, full bool) {
	if len(vs) == 0 && name == "Content-Type" {
		vs = nilContentType
	}
	for _, v := range vs {
		if n == maxRecordHeaders {
			return dst, n, true
		}
		n++
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		v = sanitizeHeaderValue(v)
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst, n, false
}

// sanitizeHeaderValue drops what net/http would refuse to send (CR, LF, NUL,
// other controls but HTAB); values are stored as sent.
func sanitizeHeaderValue(v string) string {
	for i := plainValuePrefix(v); i < len(v); i++ {
		if !validHeaderValueByte(v[i]) {
			b := make([]byte, 0, len(v))
			for j := 0; j < len(v); j++ {
				if validHeaderValueByte(v[j]) {
					b = append(b, v[j])
				}
			}
			return string(b)
		}
	}
	return v
}

// plainValuePrefix returns a multiple of 8 up to which every byte of v is
// valid in a header value (validHeaderValueByte), checked eight bytes at a
// time; the caller checks the rest a byte at a time. Bytes 0x20 to 0x7E and
// from 0x80 pass; the first block holding another byte (or HTAB, which is
// valid, or a 0x7E after a 0xFF, which carries into it) stops it.
func plainValuePrefix(v string) int {
	i := 0
	for ; i+8 <= len(v); i += 8 {
		if x := swar.Load64(v[i:]); swar.ControlOrHigh(x)&^highBytes(x) != 0 {
			break
		}
	}
	return i
}

// validHeaderValue reports whether every byte of v is valid in a header value.
func validHeaderValue(v string) bool {
	for i := plainValuePrefix(v); i < len(v); i++ {
		if !validHeaderValueByte(v[i]) {
			return false
		}
	}
	return true
}

// highBytes has the high bit of each byte of x that has it set.
func highBytes(x uint64) uint64 { return x & 0x8080808080808080 }

func validHeaderValueByte(c byte) bool { return c == '\t' || (c >= 0x20 && c != 0x7f) }

// decodeRecord parses an encoded response. The result aliases b, which must
// not change afterwards (the store contract: a returned Record.Response is
// never modified). It never panics.
func decodeRecord(b []byte, dst *storedResponse, fields []headerField) error {
	if len(b) < recordHeaderReserve || b[0] != recordVersion || b[1]&^(flagNotReplayable|flagTagged) != 0 {
		return errCorruptRecord
	}
	if b[1]&flagTagged != 0 {
		var ok bool
		if _, b, ok = cutRecordTag(b); !ok {
			return errCorruptRecord
		}
	}
	dst.notReplayable = b[1]&flagNotReplayable != 0
	b = b[2:]
	status, n := binary.Uvarint(b)
	if n <= 0 || status < 200 || status > 599 {
		return errCorruptRecord
	}
	dst.status = int(status)
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > maxRecordHeaders {
		return errCorruptRecord
	}
	b = b[n:]
	fields = fields[:0]
	for i := uint64(0); i < count; i++ {
		var name, value []byte
		if name, b = uvarintBytes(b); name == nil || !validToken(bytesString(name)) {
			return errCorruptRecord
		}
		var ok bool
		if value, b, ok = uvarintBytesEmpty(b); !ok {
			return errCorruptRecord
		}
		if !validHeaderValue(bytesString(value)) {
			return errCorruptRecord
		}
		fields = append(fields, headerField{name: internHeader(name), value: bytesString(value)})
	}
	dst.header = fields
	dst.body = b
	if dst.notReplayable && len(b) != 0 {
		return errCorruptRecord
	}
	return nil
}

// uvarintBytes reads a non-empty length-prefixed byte string.
func uvarintBytes(b []byte) ([]byte, []byte) {
	v, rest, ok := uvarintBytesEmpty(b)
	if !ok || len(v) == 0 {
		return nil, b
	}
	return v, rest
}

func uvarintBytesEmpty(b []byte) (v, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, b, false
	}
	b = b[n:]
	return b[:l:l], b[l:], true
}

// bytesString aliases b as a string (no copy): b is never modified afterwards.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// internHeader returns a constant string for common header names, so that a
// replayed header map does not keep the record alive.
func internHeader(b []byte) string {
	switch string(b) {
	case "Content-Type":
		return "Content-Type"
	case "Content-Encoding":
		return "Content-Encoding"
	case "Location":
		return "Location"
	case "Etag":
		return "Etag"
	case "Content-Language":
		return "Content-Language"
	case "Cache-Control":
		return "Cache-Control"
	case "Last-Modified":
		return "Last-Modified"
	}
	return bytesString(b)
}
