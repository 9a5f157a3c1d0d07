package fingerprint

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special flags, in the high bit of each byte, the bytes of x that a
// string scan must stop at: quote, backslash, control characters and
// non-ASCII bytes (isSpecial, in the tests, defines them). No byte is
// flagged if none is special, and the lowest flagged byte is the first
// special one: only a special byte borrows, and a borrow only moves
// upwards; bytes above it may be flagged falsely.
func special(x uint64) uint64 {
	// x^0x02 maps the quote to 0x20 and keeps the control characters
	// below 0x20 (and the space above), so one "less than 0x21" test
	// finds both; x^'\\' maps the backslash to 0, which "less than 1"
	// finds. Without a borrow, the high bit of a byte from 0x80 up is
	// set in y-0x21 unless y is 0x80 to 0xA0 (x is 0x80 to 0x9F, or
	// 0xA2), and in b-1 unless x is 0xDC: in one of the two always, so the differences flag non-ASCII
	// bytes too, without the usual "&^ y", "&^ b" and "| x".
	y := x ^ (0x02 * lsb)
	b := x ^ ('\\' * lsb)
	return ((y - 0x21*lsb) | (b - lsb)) & msb
}

// skipPlain returns the index of the first byte from in[i] that special
// flags, or, if there is none in the eight-byte words from in[i], the
// index of the tail of fewer than eight bytes, which the caller looks at
// byte by byte. It is small enough to be inlined.
func skipPlain(in []byte, i int) int {
	for i+8 <= len(in) {
		if m := special(binary.LittleEndian.Uint64(in[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// scanString checks the JSON string that starts at in[i] (its opening
// quote), as copyString does, and returns the index after it and whether
// it holds escapes.
func scanString(in []byte, i int) (int, bool, string) {
	i++
	esc := false
	for {
		i = skipPlain(in, i)
		if i >= len(in) {
			return i, esc, errEOF
		}
		switch c := in[i]; {
		case c == '"':
			return i + 1, esc, ""
		case c == '\\':
			esc = true
			_, size, ok := decodeEscape(in, i)
			if !ok {
				return i, esc, errEscape
			}
			i += size
		case c < 0x20:
			return i, esc, errString
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return i, esc, errUTF8
			}
			i += size
		default:
			i++
		}
	}
}

// verbatimString returns the index after the JSON string that starts at
// in[i] (its opening quote) if it is valid and its canonical text is its
// input text (its escapes, if any, are among \" \\ \b \f \n \r \t), else
// -1, for the general path to decide.
func verbatimString(in []byte, i int) int {
	i++
	for {
		i = skipPlain(in, i)
		if i >= len(in) {
			return -1
		}
		switch c := in[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 < len(in) {
				switch in[i+1] {
				case '"', '\\', 'b', 'f', 'n', 'r', 't':
					i += 2
					continue
				}
			}
			return -1
		case c < 0x20:
			return -1
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		default:
			i++
		}
	}
}

// copyString copies the JSON string that starts at in[i] (its opening
// quote) to buf[w:] in canonical form and returns the indexes after it in
// in and buf, and whether its canonical text differs from its input text
// (the escapes \" \\ \b \f \n \r \t are their own canonical form; the
// others are rewritten). It checks the string: no control
// characters, valid escapes without unpaired surrogates, valid UTF-8. On
// failure reason is set and i is the offset of the problem.
//
// The canonical form of a string is never longer than its input, so the
// caller's slack (len(buf)-w >= len(in)-i+16) covers the 8-byte stores.
func copyString(buf []byte, w int, in []byte, i int) (int, int, bool, string) {
	buf[w] = '"'
	w++
	i++
	changed := false
	for {
		// Eight bytes at a time: copy them, then look for a quote,
		// backslash, control character or non-ASCII byte. The lowest
		// flagged byte of each test is exact (a borrow only moves
		// upwards), so the lowest flagged byte of their union is a hit.
		// Sixteen bytes at a time first.
		for i+16 <= len(in) {
			t := in[i : i+16]
			x, y := binary.LittleEndian.Uint64(t), binary.LittleEndian.Uint64(t[8:])
			d := buf[w : w+16]
			binary.LittleEndian.PutUint64(d, x)
			binary.LittleEndian.PutUint64(d[8:], y)
			if m := special(x); m != 0 {
				k := bits.TrailingZeros64(m) >> 3
				i += k
				w += k
				goto found
			}
			if m := special(y); m != 0 {
				k := 8 + bits.TrailingZeros64(m)>>3
				i += k
				w += k
				goto found
			}
			i += 16
			w += 16
		}
		for i+8 <= len(in) {
			x := binary.LittleEndian.Uint64(in[i:])
			binary.LittleEndian.PutUint64(buf[w:], x)
			if m := special(x); m != 0 {
				k := bits.TrailingZeros64(m) >> 3
				i += k
				w += k
				break
			}
			i += 8
			w += 8
		}
		if i >= len(in) {
			return i, w, changed, errEOF
		}
	found:
		switch c := in[i]; {
		case c == '"':
			buf[w] = '"'
			return i + 1, w + 1, changed, ""
		case c == '\\':
			if i+1 < len(in) {
				// The short escapes other than \/ are their own
				// canonical form.
				switch e := in[i+1]; e {
				case '"', '\\', 'b', 'f', 'n', 'r', 't':
					buf[w], buf[w+1] = '\\', e
					i += 2
					w += 2
					continue
				case '/':
					buf[w] = '/'
					changed = true
					i += 2
					w++
					continue
				case 'u':
					// A \uXXXX escape of a printable character other
					// than '"' and '\\', not a surrogate, written as
					// UTF-8 inline; the others below.
					if i+6 > len(in) {
						break
					}
					t := in[i+2 : i+6]
					a, b, c, d := hexVal[t[0]], hexVal[t[1]], hexVal[t[2]], hexVal[t[3]]
					if a|b|c|d >= 16 {
						break
					}
					r := uint(a)<<12 | uint(b)<<8 | uint(c)<<4 | uint(d)
					if r < 0x80 {
						if r < 0x20 || r == '"' || r == '\\' {
							break
						}
						buf[w] = byte(r)
						w++
					} else if r < 0x800 {
						buf[w], buf[w+1] = byte(0xC0|r>>6), byte(0x80|r&0x3F)
						w += 2
					} else if r-0xD800 >= 0x800 {
						buf[w], buf[w+1], buf[w+2] = byte(0xE0|r>>12), byte(0x80|r>>6&0x3F), byte(0x80|r&0x3F)
						w += 3
					} else {
						break // a surrogate
					}
					changed = true
					i += 6
					continue
				}
			}
			changed = true
			r, size, ok := decodeEscape(in, i)
			if !ok {
				return i, w, changed, errEscape
			}
			w = putCanonicalRune(buf, w, r)
			i += size
		case c < 0x20:
			return i, w, changed, errString
		case c >= utf8.RuneSelf:
			// Two- and three-byte sequences inline (but those starting
			// with E0 or ED, which need more checks).
			if i+3 <= len(in) {
				t := in[i : i+3]
				if c-0xC2 < 0x1E && t[1]&0xC0 == 0x80 {
					buf[w], buf[w+1] = c, t[1]
					i += 2
					w += 2
					continue
				}
				if c-0xE1 < 0x0F && c != 0xED && t[1]&0xC0 == 0x80 && t[2]&0xC0 == 0x80 {
					buf[w], buf[w+1], buf[w+2] = c, t[1], t[2]
					i += 3
					w += 3
					continue
				}
			}
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return i, w, changed, errUTF8
			}
			copy(buf[w:], in[i:i+size])
			i += size
			w += size
		default:
			buf[w] = c
			i++
			w++
		}
	}
}

func unhex(c byte) rune {
	switch {
	case c-'0' < 10:
		return rune(c - '0')
	case c|0x20-'a' < 6:
		return rune(c|0x20-'a') + 10
	}
	return -1
}

// decodeEscape decodes the escape sequence at s[i] == '\\'. It rejects
// unpaired surrogates.
func decodeEscape(s []byte, i int) (r rune, size int, ok bool) {
	if i+1 >= len(s) {
		return 0, 0, false
	}
	switch s[i+1] {
	case '"', '\\', '/':
		return rune(s[i+1]), 2, true
	case 'b':
		return '\b', 2, true
	case 'f':
		return '\f', 2, true
	case 'n':
		return '\n', 2, true
	case 'r':
		return '\r', 2, true
	case 't':
		return '\t', 2, true
	case 'u':
		r = hex4(s, i+2)
		if r < 0 {
			return 0, 0, false
		}
		if r < 0xD800 || r >= 0xE000 {
			return r, 6, true
		}
		if r >= 0xDC00 || i+12 > len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
			return 0, 0, false
		}
		lo := hex4(s, i+8)
		if lo < 0xDC00 || lo >= 0xE000 {
			return 0, 0, false
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, true
	}
	return 0, 0, false
}

// hexVal maps a hex digit to its value, any other byte to 0xFF.
var hexVal = func() (t [256]byte) {
	for c := range t {
		t[c] = 0xFF
		if v := unhex(byte(c)); v >= 0 {
			t[c] = byte(v)
		}
	}
	return t
}()

func hex4(s []byte, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	a, b, c, d := unhex(s[i]), unhex(s[i+1]), unhex(s[i+2]), unhex(s[i+3])
	if a|b|c|d < 0 {
		return -1
	}
	return a<<12 | b<<8 | c<<4 | d
}

// appendUnescaped appends the decoded content of a JSON string (between
// its quotes, already checked by copyString).
func appendUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			return append(dst, raw[i:]...)
		}
		dst = append(dst, raw[i:i+k]...)
		i += k
		r, size, _ := decodeEscape(raw, i)
		dst = utf8.AppendRune(dst, r)
		i += size
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// putCanonicalRune writes r at buf[w:] as the canonical form writes it
// inside a string and returns the index after it: `\"`, `\\`, the short
// escapes \b \f \n \r \t, \u00xx (lower-case hex) for the other control
// characters, and UTF-8 for everything else.
func putCanonicalRune(buf []byte, w int, r rune) int {
	var e byte
	switch r {
	case '"':
		e = '"'
	case '\\':
		e = '\\'
	case '\b':
		e = 'b'
	case '\f':
		e = 'f'
	case '\n':
		e = 'n'
	case '\r':
		e = 'r'
	case '\t':
		e = 't'
	default:
		if r < 0x20 {
			buf[w], buf[w+1], buf[w+2], buf[w+3] = '\\', 'u', '0', '0'
			buf[w+4], buf[w+5] = hexDigits[r>>4], hexDigits[r&0xF]
			return w + 6
		}
		if r < utf8.RuneSelf {
			buf[w] = byte(r)
			return w + 1
		}
		return w + utf8.EncodeRune(buf[w:], r)
	}
	buf[w], buf[w+1] = '\\', e
	return w + 2
}
