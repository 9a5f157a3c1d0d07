package fingerprint

import (
	"encoding/binary"
	"math/bits"
)

// MaxDepth is the deepest nesting of arrays and objects that a JSON body may
// have to be canonicalized; a deeper body is hashed as raw bytes.
const MaxDepth = 512

// slack is the room kept in the output buffer beyond the input still to
// read: the canonical form is never longer than the input, except for some
// numbers (which grow the buffer themselves), so writes of up to slack
// bytes past the current output end are always in bounds.
const slack = 32

// member is an object member or an element of an unordered array, in the
// order it arrived. Its canonical text is buf[start:next.start] (with a
// trailing comma). For an object member, its unescaped name is
// in[koff:koff+klen] or, if kesc, keys[koff:koff+klen], and pfx holds the
// name's first eight bytes, big-endian, zero-padded.
type member struct {
	start      int
	koff, klen int
	pfx        uint64
	kesc       bool
}

// frame is an open array or object.
type frame struct {
	open  int   // offset of '{' or '[' in buf
	mbase int   // len(mem) when opened
	kbase int   // len(keys) when opened
	node  *node // pointer automaton state of this container
	idx   int   // index of the current array element
	cur   int   // offset in buf where the current member or element starts
	slot  int   // object: shape cache slot, -1 before the first member
	obj   bool
	// record: an array whose elements are recorded (it is unordered).
	record bool
	// unsorted: object members arrived out of order.
	unsorted bool
	// shape: the members so far have the names of the cached shape.
	shape bool
	drop  bool // the current member or element is volatile
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

// push opens a container at depth.
func (s *state) push(depth, w int, nd *node, obj bool) *frame {
	if depth == len(s.frames) {
		s.frames = append(s.frames, frame{})
	}
	f := &s.frames[depth]
	*f = frame{open: w, mbase: len(s.mem), kbase: len(s.keys), node: nd, slot: -1, obj: obj,
		record: !obj && nd != nil && nd.unordered}
	return f
}

// nameKey returns the big-endian first eight bytes of a name of length l
// whose bytes start with the little-endian word x, zero-padded.
func nameKey(x uint64, l int) uint64 {
	x = bits.ReverseBytes64(x)
	if l < 8 {
		x &= ^uint64(0) << (64 - 8*uint(l))
	}
	return x
}

// canonJSON sets s.out to the canonical form (v1) of the JSON text in. On
// failure s.out is unspecified and s.err says why.
//
// It is one pass over the input that writes the canonical text as it goes,
// with an explicit stack (no recursion). Objects whose members arrive out
// of order, and unordered arrays, are reordered in place when they close
// (see sort.go).
func (s *state) canonJSON(in []byte, root *node) bool {
	n := len(in)
	buf := s.out[:cap(s.out)]
	if len(buf) < n+slack {
		buf = make([]byte, n+n/8+slack)
	}
	s.mem = s.mem[:0]
	s.keys = s.keys[:0]
	s.resetShapes()

	i, w := 0, 0
	depth := 0
	var f *frame // the innermost open container
	nd := root   // automaton state of the value about to be parsed
	var reason string
	var c byte

value:
	i = skipWS(in, i)
	if i >= n {
		reason = errEOF
		goto failed
	}
	switch c = in[i]; c {
	case '"':
		// Fast path: a string without escapes, control or non-ASCII
		// bytes, closed within the next eight bytes.
		if i+9 <= n {
			x := binary.LittleEndian.Uint64(in[i+1:])
			if m := special(x); m != 0 {
				if k := bits.TrailingZeros64(m) >> 3; in[i+1+k] == '"' {
					binary.LittleEndian.PutUint64(buf[w+1:], x)
					buf[w] = '"'
					buf[w+1+k] = '"'
					w += k + 2
					i += k + 2
					break
				}
			}
		}
		i, w, _, reason = copyString(buf, w, in, i)
		if reason != "" {
			goto failed
		}
	case '{':
		i = skipWS(in, i+1)
		if i < n && in[i] == '}' {
			buf[w], buf[w+1] = '{', '}'
			w += 2
			i++
			break
		}
		if depth == MaxDepth {
			reason = errDepth
			goto failed
		}
		f = s.push(depth, w, nd, true)
		depth++
		buf[w] = '{'
		w++
		goto key
	case '[':
		i = skipWS(in, i+1)
		if i < n && in[i] == ']' {
			buf[w], buf[w+1] = '[', ']'
			w += 2
			i++
			break
		}
		if depth == MaxDepth {
			reason = errDepth
			goto failed
		}
		f = s.push(depth, w, nd, false)
		depth++
		buf[w] = '['
		w++
		f.cur = w
		if nd != nil {
			nd = nd.elem(0)
			if nd != nil && nd.volatile {
				f.drop = true
			} else if f.record {
				s.mem = append(s.mem, member{start: w})
			}
		}
		goto value
	case 't':
		if i+4 > n || string(in[i:i+4]) != "true" {
			reason = errToken
			goto failed
		}
		*(*[4]byte)(buf[w:]) = [4]byte{'t', 'r', 'u', 'e'}
		w += 4
		i += 4
	case 'f':
		if i+5 > n || string(in[i:i+5]) != "false" {
			reason = errToken
			goto failed
		}
		*(*[5]byte)(buf[w:]) = [5]byte{'f', 'a', 'l', 's', 'e'}
		w += 5
		i += 5
	case 'n':
		if i+4 > n || string(in[i:i+4]) != "null" {
			reason = errToken
			goto failed
		}
		*(*[4]byte)(buf[w:]) = [4]byte{'n', 'u', 'l', 'l'}
		w += 4
		i += 4
	default:
		if c != '-' && !isDigit(c) {
			reason = errToken
			goto failed
		}
		buf, i, w, reason = s.number(buf, w, in, i)
		if reason != "" {
			goto failed
		}
	}

after:
	if depth == 0 {
		i = skipWS(in, i)
		if i != n {
			reason = errTrailer
			goto failed
		}
		s.out = buf[:w]
		return true
	}
	if f.drop {
		w = f.cur
		f.drop = false
	} else {
		buf[w] = ','
		w++
	}
	i = skipWS(in, i)
	if i >= n {
		reason = errEOF
		goto failed
	}
	c = in[i]
	i++
	if f.obj {
		if c == ',' {
			goto key
		}
		if c != '}' {
			i--
			reason = errToken
			goto failed
		}
		w = s.closeObject(buf, w, f, in)
	} else {
		if c == ',' {
			f.idx++
			f.cur = w
			nd = nil
			if f.node != nil {
				nd = f.node.elem(f.idx)
				if nd != nil && nd.volatile {
					f.drop = true
				} else if f.record {
					s.mem = append(s.mem, member{start: w})
				}
			}
			goto value
		}
		if c != ']' {
			i--
			reason = errToken
			goto failed
		}
		w = s.closeArray(buf, w, f)
	}
	depth--
	if depth > 0 {
		f = &s.frames[depth-1]
	}
	goto after

key:
	i = skipWS(in, i)
	if i >= n || in[i] != '"' {
		reason = errToken
		goto failed
	}
	{
		ks, kw := i+1, w
		m := member{start: kw, koff: ks}
		// Fast path as for values.
		if i+9 <= n {
			x := binary.LittleEndian.Uint64(in[i+1:])
			if mk := special(x); mk != 0 {
				if k := bits.TrailingZeros64(mk) >> 3; in[i+1+k] == '"' {
					binary.LittleEndian.PutUint64(buf[w+1:], x)
					buf[w] = '"'
					buf[w+1+k] = '"'
					w += k + 2
					i += k + 2
					m.klen = k
					m.pfx = nameKey(x, k)
					goto named
				}
			}
		}
		i, w, m.kesc, reason = copyString(buf, w, in, i)
		if reason != "" {
			goto failed
		}
		m.klen = i - 1 - ks
		if m.kesc {
			m.koff = len(s.keys)
			s.keys = appendUnescaped(s.keys, in[ks:i-1])
			m.klen = len(s.keys) - m.koff
			m.pfx = prefix(s.keys[m.koff:])
		} else {
			m.pfx = prefix(in[ks : i-1])
		}
	named:
		f.cur = kw
		nd = nil
		if f.node != nil {
			nd = f.node.child(s.name(&m, in))
		}
		if nd != nil && nd.volatile {
			f.drop = true
			w = kw
		} else {
			k := len(s.mem) - f.mbase // this member's index
			if k == 0 {
				f.slot = shapeSlot(m.pfx, m.klen)
				f.shape = s.shapes[f.slot].n > 0
			}
			if f.shape && !s.shapes[f.slot].has(k, &m, s.name(&m, in)) {
				f.shape = false
				f.unsorted = k > s.shapes[f.slot].sorted
			}
			if !f.shape && !f.unsorted && k > 0 {
				f.unsorted = s.less(&m, &s.mem[len(s.mem)-1], in)
			}
			s.mem = append(s.mem, m)
			buf[w] = ':'
			w++
		}
		i = skipWS(in, i)
		if i >= n || in[i] != ':' {
			reason = errToken
			goto failed
		}
		i++
	}
	goto value

failed:
	s.out = buf[:0]
	s.err = jsonError{i, reason}
	return false
}
