// Package keysyntax is the syntax of an idempotency key, shared by the
// server (runtime/idem's ParseKey) and the client (runtime/idemclient's
// EnforceKeyFormat), so that the client refuses exactly the keys the
// server would refuse.
package keysyntax

import (
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/internal/swar"
)

// Format is the syntax a key must have; the values are runtime/idem's
// Format's.
type Format uint8

const (
	// Token: 1 to maxLength visible ASCII characters (0x21-0x7E).
	Token Format = iota
	// UUID: a UUID of an RFC 9562 version (1-8, variant 10xx) in the
	// canonical 8-4-4-4-12 hex form, either case; not the nil or max UUID.
	UUID
	// UUIDv4: as UUID, version 4 only.
	UUIDv4
	// UUIDv7: as UUID, version 7 only.
	UUIDv7
)

// Detail explains why a key is invalid (constant strings: no allocation).
type Detail string

func (d Detail) Error() string { return string(d) }

// The details of an invalid key.
const (
	Empty   Detail = "the idempotency key is empty"
	BadChar Detail = "the idempotency key contains characters other than visible ASCII"
	BadSF   Detail = "the idempotency key is a malformed RFC 8941 string"
	NotUUID Detail = "the idempotency key is not a UUID in canonical 8-4-4-4-12 form"
	UUIDVer Detail = "the idempotency key is a UUID of a version this operation does not accept"
	NilUUID Detail = "the idempotency key is the nil or max UUID"
)

// TooLong is the error of a key longer than its limit (the limit).
type TooLong int

func (n TooLong) Error() string {
	return "the idempotency key is longer than the " + strconv.Itoa(int(n)) + " characters allowed"
}

// Parse validates a raw key value (bare, or an RFC 8941 sf-string with \"
// and \\ escapes) against a format and a maximum length (which the caller
// bounds), and returns the normalized key (UUIDs in lower case). It
// allocates only for an sf-string holding escapes and an upper-case UUID;
// its errors are a Detail or a TooLong.
func Parse(raw string, format Format, maxLength int) (string, error) {
	k := raw
	if len(raw) > 0 && raw[0] == '"' {
		var ok bool
		if k, ok = UnquoteSFString(raw); !ok {
			return "", BadSF
		}
	}
	if k == "" {
		return "", Empty
	}
	switch format {
	case UUID, UUIDv4, UUIDv7:
		// The form first: a UUID in another spelling ({...}, urn:uuid:...)
		// is told it is not canonical, not that it is too long.
		k, err := ParseUUID(k, format)
		if err == nil && len(k) > maxLength {
			return "", TooLong(maxLength)
		}
		return k, err
	}
	if len(k) > maxLength {
		return "", TooLong(maxLength)
	}
	if !VisibleASCII(k) {
		return "", BadChar
	}
	return k, nil
}

// VisibleASCII reports whether every byte of s is 0x21 to 0x7E. It checks
// eight bytes at a time (a key is parsed on every request): a block passes
// when no byte is a control byte, DEL or above (controlOrHigh) nor a space
// (a zero byte of x^0x20...); the bytes after the last whole block, and a
// block that does not pass, are checked a byte at a time.
func VisibleASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := swar.Load64(s[i:])
		if swar.ControlOrHigh(x)|swar.HasZero(x^0x2020202020202020) != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// UnquoteSFString decodes an RFC 8941 sf-string: DQUOTE *chr DQUOTE where chr
// is 0x20-0x7E except DQUOTE and backslash, or an escaped DQUOTE or backslash.
// It allocates only when the string holds escapes.
func UnquoteSFString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	in := s[1 : len(s)-1]
	esc := false
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\':
			if i+1 >= len(in) || (in[i+1] != '"' && in[i+1] != '\\') {
				return "", false
			}
			esc = true
			i++
		case c == '"' || c < 0x20 || c > 0x7e:
			return "", false
		}
	}
	if !esc {
		return in, true
	}
	b := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		if in[i] == '\\' {
			i++
		}
		b = append(b, in[i])
	}
	return string(b), true
}

// ParseUUID checks the canonical 8-4-4-4-12 form, an RFC 9562 variant and
// version (that of format for UUIDv4 and UUIDv7), and lowercases.
// (google/uuid.Parse also accepts braces, urn: and hyphen-less forms,
// which a key must not: two spellings of one key would be two keys.) The
// 32 digits go through uuidDigit without a branch each: a key is parsed
// on every request.
func ParseUUID(s string, format Format) (string, error) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return "", NotUUID
	}
	// or gathers the flags and the values' bits (all zero: the nil UUID),
	// and the values' common bits (all 15: the max UUID).
	var or, and byte = 0, 0xff
	for _, part := range [5]string{s[:8], s[9:13], s[14:18], s[19:23], s[24:]} {
		for i := 0; i < len(part); i++ {
			d := uuidDigit[part[i]]
			or |= d
			and &= d
		}
	}
	if or&uuidBad != 0 {
		return "", NotUUID
	}
	if or&0xf == 0 || and&0xf == 0xf {
		return "", NilUUID
	}
	version := uuidDigit[s[14]] & 0xf
	variant := uuidDigit[s[19]] & 0xf
	if variant&0xc != 0x8 || version < 1 || version > 8 {
		return "", UUIDVer
	}
	if (format == UUIDv4 && version != 4) || (format == UUIDv7 && version != 7) {
		return "", UUIDVer
	}
	if or&uuidUpper != 0 {
		s = strings.ToLower(s)
	}
	return s, nil
}

// uuidDigit maps a hex digit to its value, with uuidUpper for 'A' to 'F';
// any other byte to uuidBad.
var uuidDigit = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			t[c] = byte(c-'A'+10) | uuidUpper
		default:
			t[c] = uuidBad
		}
	}
	return t
}()

const (
	uuidUpper = 0x20
	uuidBad   = 0x40
)
