package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
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
	dst = append(dst, kind)
	return appendFieldString(dst, key)
}

func appendField(dst, s []byte) []byte { return appendFieldString(dst, string(s)) }

func appendFieldString(dst []byte, s string) []byte {
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
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
