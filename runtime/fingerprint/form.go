package fingerprint

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
)

// Forms. parseForm decodes a query or form body into s.buf as the
// canonical encoding of its pairs in their order of arrival: for each, the
// name and the value, each with its length (uvarint) in front (a record;
// at least 2 bytes, so offsets grow with arrival). Pairs whose names
// arrive in order (most forms) need nothing more: s.buf is then their
// canonical encoding but for the count in front. Else sortPairs orders the
// records' offsets by name, then arrival, with keys (uint64) that pack the
// first bytes of the name, its length up to one past them and the offset:
// a radix sort of integers, and only the records whose names share those
// first bytes are sorted again by their next bytes.
//
// So the cost is linear in the input, whatever the names: a record's key
// is built once, and once more for every pfx bytes of its name it shares
// with another; a radix pass is over keys. Memory: s.buf takes at most 1.5
// bytes a byte of input (pairs "a&", 2 bytes, make 3-byte records), and
// the keys, out of order, 16 bytes a pair (with the radix scratch).

// parseForm decodes the application/x-www-form-urlencoded text src (a URL
// query or a form body) into s.buf (see above) and returns the count of
// its pairs and whether their names arrive in order. It reports false on a
// malformed percent escape.
func parseForm[T string | []byte](s *state, src T) (n int, sorted, ok bool) {
	// A record takes at most its text's bytes and 2 (the lengths): the
	// records of n pairs, at most the input's bytes (n-1 '&' at least)
	// and n+1, and one more length byte per 64 bytes of long fields. One
	// allocation at most.
	need := len(src) + len(src)/64 + countAmp(src) + 2
	if cap(s.buf) < need {
		s.buf = make([]byte, 0, need)
	}
	buf := s.buf[:0]
	sorted = true
	prev, prevLen := 0, -1 // the last name: buf[prev:prev+prevLen]
	for i := 0; i < len(src); {
		// The pair ends at '&' or the end, its name at the first '='
		// (or the end); esc: it has a '+' or '%' to decode.
		end, eq, esc := i, -1, false
		for ; end < len(src); end++ {
			if c := queryByte[src[end]]; c == 1 {
				break
			} else if c == 2 && eq < 0 {
				eq = end
			} else if c == 3 {
				esc = true
			}
		}
		if eq < 0 {
			eq = end
		}
		if end > i && !esc && eq-i < 0x80 && end-eq <= 0x80 {
			// Short plain fields (most): copied as they are.
			at := len(buf) + 1
			buf = append(buf, byte(eq-i))
			buf = append(buf, src[i:eq]...)
			if prevLen >= 0 && sorted {
				sorted = bytes.Compare(buf[prev:prev+prevLen], buf[at:at+eq-i]) <= 0
			}
			prev, prevLen = at, eq-i
			vs := min(eq+1, end)
			buf = append(buf, byte(end-vs))
			buf = append(buf, src[vs:end]...)
			n++
		} else if end > i {
			at := len(buf)
			if buf, ok = appendFormField(buf, src[i:eq]); !ok {
				s.buf = buf
				return 0, false, false
			}
			name, next := field(buf, at)
			if prevLen >= 0 && sorted {
				sorted = bytes.Compare(buf[prev:prev+prevLen], buf[name:next]) <= 0
			}
			prev, prevLen = name, next-name
			var value T
			if eq < end {
				value = src[eq+1 : end]
			}
			if buf, ok = appendFormField(buf, value); !ok {
				s.buf = buf
				return 0, false, false
			}
			n++
		}
		i = end + 1
	}
	s.buf = buf
	return n, sorted, true
}

// countAmp returns the count of '&' in src.
func countAmp[T string | []byte](src T) int {
	switch v := any(src).(type) {
	case string:
		return strings.Count(v, "&")
	case []byte:
		return bytes.Count(v, []byte{'&'})
	}
	return len(src) // not reached (T is string or []byte); a bound all the same
}

// appendFormField appends the decoded src (appendFormDecoded) with its
// length (uvarint) in front.
func appendFormField[T string | []byte](dst []byte, src T) ([]byte, bool) {
	at := len(dst)
	dst = append(dst, 0)
	dst, ok := appendFormDecoded(dst, src)
	if !ok {
		return dst, false
	}
	n := len(dst) - at - 1
	if n < 0x80 {
		dst[at] = byte(n)
		return dst, true
	}
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	dst = append(dst, l[:k-1]...)
	copy(dst[at+k:], dst[at+1:at+1+n])
	copy(dst[at:], l[:k])
	return dst, true
}

// field returns the start and end of the bytes of the record field (name
// or value) at buf[off:], after its length.
func field(buf []byte, off int) (int, int) {
	if n := buf[off]; n < 0x80 {
		return off + 1, off + 1 + int(n)
	}
	n, k := binary.Uvarint(buf[off:])
	return off + k, off + k + int(n)
}

// record returns the end of the record (pair) at buf[off:].
func record(buf []byte, off int) int {
	_, end := field(buf, off)
	_, end = field(buf, end)
	return end
}

// appendPairs appends the canonical encoding of the n pairs that
// parseForm decoded into s.buf: their count, then their records in order.
func (s *state) appendPairs(dst []byte, n int, sorted bool) []byte {
	dst = binary.AppendUvarint(dst, uint64(n))
	if sorted {
		return append(dst, s.buf...)
	}
	for _, k := range s.sortPairs(n) {
		off := int(k & s.formLayout.offMask)
		dst = append(dst, s.buf[off:record(s.buf, off)]...)
	}
	return dst
}

// writePairs writes to s.d the records of the n pairs that parseForm
// decoded into s.buf, in order (appendPairs without the count).
func (s *state) writePairs(n int, sorted bool) {
	if sorted {
		s.d.Write(s.buf)
		return
	}
	const chunk = 16 << 10
	tmp := s.tmp[:0]
	for _, k := range s.sortPairs(n) {
		off := int(k & s.formLayout.offMask)
		tmp = append(tmp, s.buf[off:record(s.buf, off)]...)
		if len(tmp) >= chunk {
			s.d.Write(tmp)
			tmp = tmp[:0]
		}
	}
	s.d.Write(tmp)
	s.tmp = tmp
}

// formLayout is how a sort key of sortPairs packs, from the most
// significant bits: pfx bytes of the name from the depth sorted by (zero
// padded), its length from there up to pfx+1 (cls bits), the record's
// offset in s.buf (off bits).
type formLayout struct {
	pfx, cls, off int
	offMask       uint64
}

func newFormLayout(size int) formLayout { return layoutFor(max(bits.Len(uint(size)), 1)) }

// layoutFor returns the key layout whose offsets take off bits (1 to 54).
func layoutFor(off int) formLayout {
	l := formLayout{off: off}
	l.offMask = 1<<l.off - 1
	l.pfx = 7 // at least 1 (l.off is at most 54)
	for l.pfx > 1 && 8*l.pfx+bits.Len(uint(l.pfx+1))+l.off > 64 {
		l.pfx--
	}
	l.cls = bits.Len(uint(l.pfx + 1))
	return l
}

// key returns the sort key of the record at buf[off:] at depth d (the
// name's bytes before d are those of all the keys sorted with it).
func (l *formLayout) key(buf []byte, off, d int) uint64 {
	start, end := field(buf, off)
	rest := buf[min(start+d, end):end]
	var pfx uint64
	for i := range min(l.pfx, len(rest)) {
		pfx |= uint64(rest[i]) << (8 * (l.pfx - 1 - i))
	}
	cls := uint64(min(len(rest), l.pfx+1))
	return (pfx<<l.cls|cls)<<l.off | uint64(off)
}

// sortPairs returns the keys of the n records in s.buf, ordered by name,
// then offset (arrival); a key's offset is k & s.formLayout.offMask.
func (s *state) sortPairs(n int) []uint64 {
	if cap(s.formKeys) < 2*n {
		s.formKeys = make([]uint64, 2*n)
	}
	keys, tmp := s.formKeys[:n], s.formKeys[n:2*n]
	for i, off := 0, 0; i < n; i++ {
		keys[i] = uint64(off)
		off = record(s.buf, off)
	}
	s.formLayout = newFormLayout(len(s.buf))
	sortKeys(s.buf, keys, tmp, 0, &s.formLayout)
	return keys
}

// sortKeys sorts keys (of records whose names have the same first d
// bytes, and at least d of them), which are in offset order, by name from
// byte d, then offset; tmp is scratch as long as keys.
func sortKeys(buf []byte, keys, tmp []uint64, d int, l *formLayout) {
	long := uint64(l.pfx + 1) // the cls of names longer than the prefix
	for {
		for i, k := range keys {
			keys[i] = l.key(buf, int(k&l.offMask), d)
		}
		if len(keys) > radixMin {
			radixKeys(keys, tmp, l.off)
		} else {
			slices.Sort(keys)
		}
		// Keys of equal prefix and cls of names past it: sorted by
		// their next bytes. All of them: in this loop (not recursing
		// once a byte of a long common part).
		whole := false
		for a := 0; a < len(keys); {
			top := keys[a] >> l.off
			b := a + 1
			for b < len(keys) && keys[b]>>l.off == top {
				b++
			}
			if b-a > 1 && top&(1<<l.cls-1) == long {
				if b-a == len(keys) {
					whole = true
				} else {
					sortKeys(buf, keys[a:b], tmp[a:b], d+l.pfx, l)
				}
			}
			a = b
		}
		if !whole {
			return
		}
		d += l.pfx
	}
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

// radixKeys sorts keys, which are in offset order, by their bits from
// shift up, stably (so then by offset), with tmp as scratch of the same
// length: a pass a byte, from the least significant, skipping those that
// all keys share.
func radixKeys(keys, tmp []uint64, shift int) {
	digits := (64 - shift + 7) / 8
	var counts [8][256]int
	for _, k := range keys {
		k >>= shift
		for d := range digits {
			counts[d][byte(k>>(8*d))]++
		}
	}
	src, dst := keys, tmp[:len(keys)]
	for d := range digits {
		c, sh := &counts[d], shift+8*d
		if c[byte(src[0]>>sh)] == len(src) {
			continue
		}
		sum := 0
		for b := range c {
			c[b], sum = sum, sum+c[b]
		}
		for _, k := range src {
			b := byte(k >> sh)
			dst[c[b]] = k
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}
