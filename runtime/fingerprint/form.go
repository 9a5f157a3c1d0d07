package fingerprint

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// pair is one decoded name=value pair of a query or form body; its bytes
// are buf[noff:noff+nlen] and buf[voff:voff+vlen] of the decoding buffer.
type pair struct {
	noff, nlen, voff, vlen int
}

// parseForm decodes the application/x-www-form-urlencoded text src (a URL
// query or a form body) into s.buf and returns its pairs, ordered by name
// with the values of one name in their order of arrival. It reports false
// on a malformed percent escape.
func parseForm[T string | []byte](s *state, src T) ([]pair, bool) {
	buf := s.buf[:0]
	pairs := s.pairs[:0]
	sorted := true
	for i := 0; i < len(src); {
		end := i
		for end < len(src) && src[end] != '&' {
			end++
		}
		if end > i {
			eq := i
			for eq < end && src[eq] != '=' {
				eq++
			}
			var p pair
			var ok bool
			p.noff = len(buf)
			if buf, ok = appendFormDecoded(buf, src[i:eq]); !ok {
				s.buf, s.pairs = buf, pairs
				return nil, false
			}
			p.nlen = len(buf) - p.noff
			p.voff = len(buf)
			if eq < end {
				if buf, ok = appendFormDecoded(buf, src[eq+1:end]); !ok {
					s.buf, s.pairs = buf, pairs
					return nil, false
				}
			}
			p.vlen = len(buf) - p.voff
			if len(pairs) > 0 && sorted {
				q := &pairs[len(pairs)-1]
				sorted = bytes.Compare(buf[q.noff:q.noff+q.nlen], buf[p.noff:p.noff+p.nlen]) <= 0
			}
			pairs = append(pairs, p)
		}
		i = end + 1
	}
	if !sorted {
		// Stable: equal names keep their order. noff grows with arrival,
		// but not past an empty pair ("=", no bytes): the pair after it
		// starts where it does, and ends past it unless it is empty too
		// (the same pair again). So pairs of one name are ordered by
		// start, then end.
		slices.SortFunc(pairs, func(a, b pair) int {
			if c := bytes.Compare(buf[a.noff:a.noff+a.nlen], buf[b.noff:b.noff+b.nlen]); c != 0 {
				return c
			}
			if a.noff != b.noff {
				return a.noff - b.noff
			}
			return a.voff + a.vlen - (b.voff + b.vlen)
		})
	}
	s.buf, s.pairs = buf, pairs
	return pairs, true
}

// appendFormDecoded appends src with '+' decoded to a space and %XX to the
// byte XX; it reports false on a '%' not followed by two hex digits.
func appendFormDecoded[T string | []byte](dst []byte, src T) ([]byte, bool) {
	for i := 0; i < len(src); {
		j := i
		for j < len(src) && src[j] != '+' && src[j] != '%' {
			j++
		}
		dst = append(dst, src[i:j]...)
		if j == len(src) {
			break
		}
		if src[j] == '+' {
			dst = append(dst, ' ')
			i = j + 1
			continue
		}
		if j+2 >= len(src) {
			return dst, false
		}
		a, b := unhex(src[j+1]), unhex(src[j+2])
		if a < 0 || b < 0 {
			return dst, false
		}
		dst = append(dst, byte(a<<4|b))
		i = j + 3
	}
	return dst, true
}

// appendPairs appends the canonical encoding of pairs (decoded into buf):
// their count, then each name and value with its length in front.
func appendPairs(dst, buf []byte, pairs []pair) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(pairs)))
	for _, p := range pairs {
		dst = binary.AppendUvarint(dst, uint64(p.nlen))
		dst = append(dst, buf[p.noff:p.noff+p.nlen]...)
		dst = binary.AppendUvarint(dst, uint64(p.vlen))
		dst = append(dst, buf[p.voff:p.voff+p.vlen]...)
	}
	return dst
}

// appendPlainQuery appends to dst what appendPairs appends for the pairs
// parseForm finds in q, when that is quick to see without decoding: q has
// no '+', '%' or empty pair, fewer than 128 pairs, no name or value of 128
// bytes or more, and its names arrive in order (so that the pairs need no
// sort). Else it reports false, with dst unchanged but for its spare
// capacity. (Most queries are like that, and this spares Sum the decoding
// and the pair records.)
func appendPlainQuery(dst []byte, q string) ([]byte, bool) {
	base := len(dst)
	dst = append(dst, 0) // the count, fewer than 128
	count := 0
	prev := "" // the name of the last pair
	for i := 0; i < len(q); {
		// The name ends at '&', '=' or the end; the value, if any, at
		// '&' or the end ('=' is a plain byte in it).
		end := i
		for end < len(q) && queryByte[q[end]] == 0 {
			end++
		}
		name, value := q[i:end], ""
		if end < len(q) && q[end] == '=' {
			vs := end + 1
			end = vs
			for end < len(q) && queryByte[q[end]]&1 == 0 {
				end++
			}
			value = q[vs:end]
		}
		if end < len(q) && q[end] != '&' {
			return dst[:base], false // '+' or '%'
		}
		if end == i || count == 127 || end-i >= 128 || (count > 0 && prev > name) {
			return dst[:base], false
		}
		dst = append(dst, byte(len(name)))
		dst = append(dst, name...)
		dst = append(dst, byte(len(value)))
		dst = append(dst, value...)
		prev = name
		count++
		i = end + 1
	}
	dst[base] = byte(count)
	return dst, true
}

// queryByte classifies the bytes of a query for appendPlainQuery: 1 for
// '&', 2 for '=', 3 for '+' and '%' (which need decoding), 0 for the rest.
var queryByte = [256]uint8{'&': 1, '=': 2, '+': 3, '%': 3}
