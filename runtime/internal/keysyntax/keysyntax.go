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
// which a key must not: two spellings of one key would be two keys.) A key
// is parsed on every request, so the 36 bytes are checked eight at a time
// (five overlapping loads, the hyphens' places in them masked). A byte
// (below 0x80) is k or more when adding 0x80-k to it sets its high bit,
// which carries into no other byte.
func ParseUUID(s string, format Format) (string, error) {
	if len(s) != 36 {
		return "", NotUUID
	}
	// The words at 0, 8, 16, 24 and 28: the hyphens are bytes 0 and 5 of
	// the second (8 and 13) and 2 and 7 of the third (18 and 23).
	const (
		dash1 = 0x0000ff00000000ff
		dash2 = 0xff00000000ff0000
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	w0, w1, w2 := swar.Load64(s), swar.Load64(s[8:]), swar.Load64(s[16:])
	w3, w4 := swar.Load64(s[24:]), swar.Load64(s[28:])
	if w1&dash1 != '-'*ones&dash1 || w2&dash2 != '-'*ones&dash2 {
		return "", NotUUID
	}
	b0, u0, l0 := uuidWord(w0, 0)
	b1, u1, l1 := uuidWord(w1, dash1)
	b2, u2, l2 := uuidWord(w2, dash2)
	b3, u3, l3 := uuidWord(w3, 0)
	b4, u4, l4 := uuidWord(w4, 0)
	bad, upper := (b0|b1|b2|b3|b4)&highs, u0|u1|u2|u3|u4
	if bad != 0 {
		return "", NotUUID
	}
	// The nil and max UUIDs: every digit 0, every digit f (either case;
	// l* are lower-cased, their hyphens zero).
	if l0|l3|l4 == '0'*ones && l1 == '0'*ones&^dash1 && l2 == '0'*ones&^dash2 ||
		l0&l3&l4 == 'f'*ones && l1 == 'f'*ones&^dash1 && l2 == 'f'*ones&^dash2 {
		return "", NilUUID
	}
	version, variant := s[14], s[19]|0x20 // digits have the 0x20 bit already
	if version < '1' || version > '8' || (variant != '8' && variant != '9' && variant != 'a' && variant != 'b') {
		return "", UUIDVer
	}
	if (format == UUIDv4 && version != '4') || (format == UUIDv7 && version != '7') {
		return "", UUIDVer
	}
	if upper != 0 {
		s = strings.ToLower(s)
	}
	return s, nil
}

// uuidWord checks the 8 bytes of w for hex digits, but those that skip
// marks (0xff each: hyphens, checked apart). bad has the high bit of every
// byte that is no hex digit set (and other bits: only its high bits mean
// anything), upper is nonzero when some byte lacks the 0x20 bit (once bad
// is clear: an upper-case hex digit, the only ones without it), and lower
// is w lower-cased with the skipped bytes zero.
func uuidWord(w, skip uint64) (bad, upper, lower uint64) {
	const ones = 0x0101010101010101
	v := w &^ (0x80 * ones) // a byte of w of 0x80 and above is bad by its own high bit
	l := v | 0x20*ones
	digit := (v + (0x80-'0')*ones) &^ (v + (0x80-'9'-1)*ones)
	letter := (l + (0x80-'a')*ones) &^ (l + (0x80-'f'-1)*ones)
	return (w | ^(digit | letter)) &^ skip, (l ^ v) &^ skip, l &^ skip
}
