package fingerprint

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects that a JSON body may
// have to be canonicalized; a deeper body is hashed as raw bytes.
const MaxDepth = 512

// member is an object member or an element of an unordered array, in the
// order it arrived. Its canonical text is out[start:next.start] (with a
// trailing comma); for an object member, its unescaped name is
// in[koff:koff+klen] or, if kesc, keys[koff:koff+klen].
type member struct {
	start      int
	koff, klen int
	kesc       bool
}

// frame is an open array or object.
type frame struct {
	open     int   // offset of '{' or '[' in out
	mbase    int   // len(mem) when opened
	kbase    int   // len(keys) when opened
	node     *node // pointer automaton state of this container
	idx      int   // index of the current array element
	cur      int   // offset in out where the current member or element starts
	obj      bool
	record   bool // array: record element spans (it is unordered)
	unsorted bool // object: members arrived out of order
	drop     bool // the current member or element is volatile
}

// sortItem is a member or element being reordered.
type sortItem struct {
	key        []byte
	start, end int
}

// jsonError says why a body is not canonicalized as JSON; it is set only on
// failure, as a constant, so that failing costs no allocation.
type jsonError struct {
	off    int
	reason string
}

const (
	errEOF     = "unexpected end of input"
	errToken   = "invalid character"
	errString  = "invalid string"
	errEscape  = "invalid escape sequence"
	errUTF8    = "invalid UTF-8"
	errNumber  = "invalid number"
	errExp     = "exponent out of range"
	errDepth   = "nesting deeper than MaxDepth"
	errTrailer = "data after the top-level value"
)

func isDigit(c byte) bool { return c-'0' < 10 }

func skipWS(in []byte, i int) int {
	for i < len(in) && in[i] <= ' ' && (in[i] == ' ' || in[i] == '\n' || in[i] == '\r' || in[i] == '\t') {
		i++
	}
	return i
}

// canonJSON appends the canonical form (v1) of the JSON text in to s.out.
// On failure s.out is left at an unspecified length and s.err says why.
func (s *state) canonJSON(in []byte, root *node) bool {
	out := s.out
	frames := s.frames[:0]
	mem := s.mem[:0]
	keys := s.keys[:0]

	i := 0
	n := len(in)
	nd := root // automaton state of the value about to be parsed
	var f *frame

value:
	i = skipWS(in, i)
	if i >= n {
		s.err = jsonError{i, errEOF}
		goto failed
	}
	switch c := in[i]; c {
	case '"':
		j, esc, reason := scanString(in, i+1)
		if reason != "" {
			s.err = jsonError{j, reason}
			goto failed
		}
		if !esc {
			out = append(out, in[i:j+1]...)
		} else {
			var ok bool
			if out, ok = appendUnescapedCanonical(out, in[i+1:j]); !ok {
				s.err = jsonError{i, errEscape}
				goto failed
			}
		}
		i = j + 1
	case '{':
		if len(frames) == MaxDepth {
			s.err = jsonError{i, errDepth}
			goto failed
		}
		i = skipWS(in, i+1)
		if i < n && in[i] == '}' {
			out = append(out, '{', '}')
			i++
			break
		}
		frames = append(frames, frame{open: len(out), mbase: len(mem), kbase: len(keys), node: nd, obj: true})
		out = append(out, '{')
		goto key
	case '[':
		if len(frames) == MaxDepth {
			s.err = jsonError{i, errDepth}
			goto failed
		}
		i = skipWS(in, i+1)
		if i < n && in[i] == ']' {
			out = append(out, '[', ']')
			i++
			break
		}
		frames = append(frames, frame{open: len(out), mbase: len(mem), kbase: len(keys), node: nd,
			record: nd != nil && nd.unordered})
		out = append(out, '[')
		f = &frames[len(frames)-1]
		f.cur = len(out)
		nd = nd.elem(0)
		if nd != nil && nd.volatile {
			f.drop = true
		} else if f.record {
			mem = append(mem, member{start: len(out)})
		}
		goto value
	case 't':
		if i+4 > n || string(in[i:i+4]) != "true" {
			s.err = jsonError{i, errToken}
			goto failed
		}
		out = append(out, "true"...)
		i += 4
	case 'f':
		if i+5 > n || string(in[i:i+5]) != "false" {
			s.err = jsonError{i, errToken}
			goto failed
		}
		out = append(out, "false"...)
		i += 5
	case 'n':
		if i+4 > n || string(in[i:i+4]) != "null" {
			s.err = jsonError{i, errToken}
			goto failed
		}
		out = append(out, "null"...)
		i += 4
	default:
		if c != '-' && !isDigit(c) {
			s.err = jsonError{i, errToken}
			goto failed
		}
		var reason string
		out, i, reason = s.number(out, in, i)
		if reason != "" {
			s.err = jsonError{i, reason}
			goto failed
		}
	}

after:
	if len(frames) == 0 {
		i = skipWS(in, i)
		if i != n {
			s.err = jsonError{i, errTrailer}
			goto failed
		}
		s.out, s.frames, s.mem, s.keys = out, frames, mem, keys
		return true
	}
	f = &frames[len(frames)-1]
	if f.drop {
		out = out[:f.cur]
		f.drop = false
	} else {
		out = append(out, ',')
	}
	i = skipWS(in, i)
	if i >= n {
		s.err = jsonError{i, errEOF}
		goto failed
	}
	if f.obj {
		switch in[i] {
		case ',':
			i++
			goto key
		case '}':
			i++
		default:
			s.err = jsonError{i, errToken}
			goto failed
		}
		if f.unsorted && len(mem)-f.mbase > 1 {
			s.permute(out, mem[f.mbase:], in, keys, f.open+1, true)
		}
		mem = mem[:f.mbase]
		keys = keys[:f.kbase]
		if len(out) == f.open+1 {
			out = append(out, '}')
		} else {
			out[len(out)-1] = '}'
		}
	} else {
		switch in[i] {
		case ',':
			i++
			f.idx++
			f.cur = len(out)
			nd = f.node.elem(f.idx)
			if nd != nil && nd.volatile {
				f.drop = true
			} else if f.record {
				mem = append(mem, member{start: len(out)})
			}
			goto value
		case ']':
			i++
		default:
			s.err = jsonError{i, errToken}
			goto failed
		}
		if f.record {
			if len(mem)-f.mbase > 1 {
				s.permute(out, mem[f.mbase:], in, keys, f.open+1, false)
			}
			mem = mem[:f.mbase]
		}
		if len(out) == f.open+1 {
			out = append(out, ']')
		} else {
			out[len(out)-1] = ']'
		}
	}
	frames = frames[:len(frames)-1]
	goto after

key:
	f = &frames[len(frames)-1]
	i = skipWS(in, i)
	if i >= n {
		s.err = jsonError{i, errEOF}
		goto failed
	}
	if in[i] != '"' {
		s.err = jsonError{i, errToken}
		goto failed
	}
	{
		j, esc, reason := scanString(in, i+1)
		if reason != "" {
			s.err = jsonError{j, reason}
			goto failed
		}
		m := member{start: len(out), koff: i + 1, klen: j - i - 1, kesc: esc}
		var name []byte
		if !esc {
			name = in[i+1 : j]
		} else {
			var ok bool
			m.koff = len(keys)
			if keys, ok = appendUnescaped(keys, in[i+1:j]); !ok {
				s.err = jsonError{i, errEscape}
				goto failed
			}
			m.klen = len(keys) - m.koff
			name = keys[m.koff:]
		}
		f.cur = len(out)
		nd = f.node.child(name)
		if nd != nil && nd.volatile {
			f.drop = true
		} else {
			if len(mem) > f.mbase && !f.unsorted {
				p := &mem[len(mem)-1]
				prev := in[p.koff : p.koff+p.klen]
				if p.kesc {
					prev = keys[p.koff : p.koff+p.klen]
				}
				if bytes.Compare(prev, name) > 0 {
					f.unsorted = true
				}
			}
			mem = append(mem, m)
			if !esc {
				out = append(out, in[i:j+1]...)
			} else {
				out = appendQuoted(out, name)
			}
			out = append(out, ':')
		}
		i = skipWS(in, j+1)
		if i >= n {
			s.err = jsonError{i, errEOF}
			goto failed
		}
		if in[i] != ':' {
			s.err = jsonError{i, errToken}
			goto failed
		}
		i++
	}
	goto value

failed:
	s.out, s.frames, s.mem, s.keys = out, frames, mem, keys
	return false
}

// permute reorders the members (obj) or elements of the container whose
// content starts at out[body:] and ends at len(out), each with a trailing
// comma: members by unescaped name, then arrival; elements by their
// canonical text.
func (s *state) permute(out []byte, ms []member, in, keys []byte, body int, obj bool) {
	items := s.items[:0]
	for k := range ms {
		end := len(out)
		if k+1 < len(ms) {
			end = ms[k+1].start
		}
		it := sortItem{start: ms[k].start, end: end}
		switch {
		case !obj:
			it.key = out[it.start : end-1]
		case ms[k].kesc:
			it.key = keys[ms[k].koff : ms[k].koff+ms[k].klen]
		default:
			it.key = in[ms[k].koff : ms[k].koff+ms[k].klen]
		}
		items = append(items, it)
	}
	if len(items) <= 12 {
		for a := 1; a < len(items); a++ {
			for b := a; b > 0 && cmpItem(&items[b-1], &items[b]) > 0; b-- {
				items[b-1], items[b] = items[b], items[b-1]
			}
		}
	} else {
		slices.SortFunc(items, func(a, b sortItem) int { return cmpItem(&a, &b) })
	}
	tmp := s.tmp[:0]
	for k := range items {
		tmp = append(tmp, out[items[k].start:items[k].end]...)
	}
	copy(out[body:], tmp)
	s.tmp = tmp
	clear(items) // drop references into the body
	s.items = items[:0]
}

func cmpItem(a, b *sortItem) int {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return a.start - b.start
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// scanString scans a JSON string whose content starts at in[i], after the
// opening quote. It returns the index of the closing quote and whether the
// content holds escapes (which it does not check; the decoder does). It
// checks that the content has no control characters and is valid UTF-8.
// On failure, reason is set and j is the offset of the problem.
func scanString(in []byte, i int) (j int, esc bool, reason string) {
	for {
		// Eight bytes at a time, up to the first quote, backslash,
		// control character or non-ASCII byte. The lowest flagged byte of
		// each test is exact (a borrow only moves upwards), so the lowest
		// flagged byte of their union is a real hit.
		for i+8 <= len(in) {
			w := binary.LittleEndian.Uint64(in[i:])
			q := w ^ ('"' * lsb)
			b := w ^ ('\\' * lsb)
			m := ((q - lsb) &^ q) | ((b - lsb) &^ b) | ((w - 0x20*lsb) &^ w) | w
			if m &= msb; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(in) {
			return i, esc, errEOF
		}
		switch c := in[i]; {
		case c == '"':
			return i, esc, ""
		case c == '\\':
			esc = true
			i += 2
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
// its quotes, already scanned by scanString).
func appendUnescaped(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			return append(dst, raw[i:]...), true
		}
		dst = append(dst, raw[i:i+k]...)
		i += k
		r, size, ok := decodeEscape(raw, i)
		if !ok {
			return dst, false
		}
		dst = utf8.AppendRune(dst, r)
		i += size
	}
	return dst, true
}

// appendUnescapedCanonical appends the canonical quoted form of the JSON
// string whose content (between its quotes, already scanned) is raw.
func appendUnescapedCanonical(dst, raw []byte) ([]byte, bool) {
	dst = append(dst, '"')
	for i := 0; i < len(raw); {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			dst = append(dst, raw[i:]...)
			break
		}
		dst = append(dst, raw[i:i+k]...)
		i += k
		r, size, ok := decodeEscape(raw, i)
		if !ok {
			return dst, false
		}
		dst = appendCanonicalRune(dst, r)
		i += size
	}
	return append(dst, '"'), true
}

// appendQuoted appends the canonical quoted form of the decoded string s.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			start := i
			for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' {
				i++
			}
			dst = append(dst, s[start:i]...)
			continue
		}
		dst = appendCanonicalRune(dst, rune(c))
		i++
	}
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendCanonicalRune appends r as the canonical form writes it inside a
// string: `\"`, `\\`, the short escapes \b \f \n \r \t, \u00xx (lower-case
// hex) for the other control characters, and UTF-8 for everything else.
func appendCanonicalRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// maxExp bounds the magnitude of a number's exponent (as written); a larger
// exponent (on a non-zero number) makes the body be hashed raw.
const maxExp = 1_000_000_000_000_000

// number appends the canonical form of the JSON number at in[i] and returns
// the index after it. See the package documentation for the form.
func (s *state) number(out, in []byte, i int) ([]byte, int, string) {
	n := len(in)
	start := i
	if in[i] == '-' {
		i++
	}
	if i >= n {
		return out, i, errNumber
	}
	intStart := i
	switch c := in[i]; {
	case c == '0':
		i++
	case c-'1' < 9:
		i++
		for i < n && isDigit(in[i]) {
			i++
		}
	default:
		return out, i, errNumber
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < n && in[i] == '.' {
		i++
		fracStart = i
		for i < n && isDigit(in[i]) {
			i++
		}
		if i == fracStart {
			return out, i, errNumber
		}
		fracEnd = i
	}
	if i < n && in[i]|0x20 == 'e' {
		return s.numberExp(out, in, start, intStart, intEnd, fracStart, fracEnd, i)
	}
	// Fast path: no exponent. The digits are already in place unless the
	// number is large or has many leading fraction zeros.
	fe := fracEnd
	for fe > fracStart && in[fe-1] == '0' {
		fe--
	}
	if in[intStart] != '0' {
		if intEnd-intStart <= 21 {
			out = append(out, in[start:intEnd]...)
			if fe > fracStart {
				out = append(out, '.')
				out = append(out, in[fracStart:fe]...)
			}
			return out, i, ""
		}
	} else {
		if fe == fracStart {
			return append(out, '0'), i, ""
		}
		if leadingZeros(in[fracStart:fe]) < 6 {
			out = append(out, in[start:intEnd]...)
			out = append(out, '.')
			out = append(out, in[fracStart:fe]...)
			return out, i, ""
		}
	}
	return s.numberSlow(out, in[start] == '-', in[intStart:intEnd], in[fracStart:fracEnd], 0, i)
}

func leadingZeros(b []byte) int {
	k := 0
	for k < len(b) && b[k] == '0' {
		k++
	}
	return k
}

// numberExp finishes a number with an exponent at in[i] ('e' or 'E').
func (s *state) numberExp(out, in []byte, start, intStart, intEnd, fracStart, fracEnd, i int) ([]byte, int, string) {
	n := len(in)
	i++
	neg := false
	if i < n && (in[i] == '+' || in[i] == '-') {
		neg = in[i] == '-'
		i++
	}
	es := i
	var e int64
	big := false
	for i < n && isDigit(in[i]) {
		if e < maxExp {
			e = e*10 + int64(in[i]-'0')
		} else {
			big = true
		}
		i++
	}
	if i == es {
		return out, i, errNumber
	}
	if neg {
		e = -e
	}
	if big || e >= maxExp || e <= -maxExp {
		// Zero with any exponent is still zero.
		if leadingZeros(in[intStart:intEnd]) == intEnd-intStart && leadingZeros(in[fracStart:fracEnd]) == fracEnd-fracStart {
			return append(out, '0'), i, ""
		}
		return out, start, errExp
	}
	return s.numberSlow(out, in[start] == '-', in[intStart:intEnd], in[fracStart:fracEnd], e, i)
}

// numberSlow writes ±(intDigits.fracDigits)×10^e in the canonical layout.
func (s *state) numberSlow(out []byte, neg bool, intDigits, fracDigits []byte, e int64, next int) ([]byte, int, string) {
	num := append(append(s.num[:0], intDigits...), fracDigits...)
	s.num = num
	lz := leadingZeros(num)
	if lz == len(num) {
		return append(out, '0'), next, ""
	}
	tz := 0
	for num[len(num)-1-tz] == '0' {
		tz++
	}
	d := num[lz : len(num)-tz]
	k := int64(len(d))
	// value = d × 10^(e - len(frac) + tz); p is where the decimal point
	// goes relative to the start of d.
	p := k + e - int64(len(fracDigits)) + int64(tz)
	if neg {
		out = append(out, '-')
	}
	switch {
	case k <= p && p <= 21:
		out = append(out, d...)
		for range p - k {
			out = append(out, '0')
		}
	case 0 < p && p <= 21:
		out = append(out, d[:p]...)
		out = append(out, '.')
		out = append(out, d[p:]...)
	case -6 < p && p <= 0:
		out = append(out, '0', '.')
		for range -p {
			out = append(out, '0')
		}
		out = append(out, d...)
	default:
		out = append(out, d[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, d[1:]...)
		}
		out = append(out, 'e')
		if p-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, p-1, 10)
	}
	return out, next, ""
}
