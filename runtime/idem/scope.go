package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/internal/swar"
)

// Scope keys.
//
// A record is stored under an encoded scope: principal + operation + key.
// The encoding is injective (no two distinct triples give the same string)
// and its output is valid UTF-8 without NUL or other control bytes, so every
// store can use it as is:
//
//	"i1" field(principal) field(operation) kind field(key)
//
// where field(s) = decimal(len(s)) ":" escape(s), kind is 'k' for a client
// key and 'f' for a fingerprint standing in for a missing key (Window
// semantics), and escape keeps valid UTF-8 except '%', control bytes and
// DEL, which (like bytes of invalid UTF-8) become %XX. The length prefix
// counts raw bytes, so a decoder knows where each field ends: the encoding
// can be decoded, hence it is injective. A principal longer than
// maxPrincipal bytes is replaced by its SHA-256 (tagged 'h' instead of 'p'),
// which keeps scope keys short (under 1600 bytes in all) at the price of
// injectivity up to SHA-256 collisions.

const (
	scopeVersion = "i1"
	maxPrincipal = 128
	kindKey      = 'k'
	kindFP       = 'f'
)

// appendScope appends the encoded scope to dst.
func appendScope(dst []byte, principal, operation string, kind byte, key string) []byte {
	return appendFieldString(appendScopeHead(dst, principal, operation, kind), key)
}

// appendScopeHead appends the encoded scope up to its key field (kind
// included). Compile encodes a policy's head for requests without a
// principal once (Policy.anonKeyScope).
func appendScopeHead(dst []byte, principal, operation string, kind byte) []byte {
	dst = append(dst, scopeVersion...)
	if len(principal) > maxPrincipal {
		sum := sha256.Sum256([]byte(principal))
		dst = append(dst, 'h')
		dst = appendField(dst, hex.AppendEncode(make([]byte, 0, 64), sum[:]))
	} else {
		dst = append(dst, 'p')
		dst = appendFieldString(dst, principal)
	}
	dst = appendFieldString(dst, operation)
	return append(dst, kind)
}

func appendField(dst, s []byte) []byte { return appendFieldString(dst, string(s)) }

func appendFieldString(dst []byte, s string) []byte {
	dst = appendFieldLen(dst, len(s))
	i := plainPrefix(s)
	dst = append(dst, s[:i]...)
	if i == len(s) {
		return dst // fast path: nothing to escape (most fields)
	}
	return appendEscaped(dst, s[i:])
}

// appendFieldLen appends the length prefix of a field: decimal(n) ":".
func appendFieldLen(dst []byte, n int) []byte {
	if n < 100 {
		// Fast path: one or two digits, without strconv.
		if n >= 10 {
			dst = append(dst, byte('0'+n/10))
		}
		return append(dst, byte('0'+n%10), ':')
	}
	return append(strconv.AppendInt(dst, int64(n), 10), ':')
}

// appendKeyField is appendFieldString for a key that ParseKey returned.
// Such a key is visible ASCII (0x21 to 0x7E), which escape keeps but for
// '%': a key without '%' (most keys, and every UUID) is its own escape, and
// one IndexByte finds that out faster than plainPrefix.
func appendKeyField(dst []byte, key string) []byte {
	if strings.IndexByte(key, '%') >= 0 {
		return appendFieldString(dst, key)
	}
	return append(appendFieldLen(dst, len(key)), key...)
}

// appendEscaped appends escape(s), a byte (or a rune of valid UTF-8) at a
// time: the definition that plainPrefix's fast path skips ahead of.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '%' {
			dst = append(dst, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			if r, n := utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError || n > 1 {
				dst = append(dst, s[i:i+n]...)
				i += n
				continue
			}
		}
		dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&15])
		i++
	}
	return dst
}

const hexDigits = "0123456789ABCDEF"

// plainPrefix returns the length of the longest prefix of s made of bytes
// that escape keeps and that are ASCII (0x20 to 0x7E but '%'), eight bytes
// at a time.
func plainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := swar.Load64(s[i:])
		if swar.ControlOrHigh(x)|swar.HasZero(x^0x2525252525252525) != 0 {
			break
		}
	}
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f && s[i] != '%' {
		i++
	}
	return i
}
