package fingerprint

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth is the deepest nesting of arrays and objects that a JSON body may
// have to be canonicalized; a deeper body is hashed as raw bytes.
const MaxDepth = 512

// slack is the room kept in the output buffer past what is written: the
// canonical form is never longer than the input, except for some numbers
// (which grow the buffer themselves), so stores of up to slack bytes past
// the output end stay in bounds.
const slack = 32

// How canonJSON works.
//
// One pass over the input, with an explicit stack of open containers (no
// recursion). Arrays and top-level scalars are written to the output
// buffer as they are read. Objects are lazy: most members are already in
// canonical form in the input (a name without escapes, then a string
// without escapes, a canonical number or a literal), so for each member
// only the spans of its name and value are recorded; a name or value whose
// canonical text differs from the input (escapes, a number to normalize, a
// nested container) is written to the output buffer and its span recorded
// there. When the object closes, its members are written in canonical
// order, each copied once, from the input or from the buffer (where its
// text is first moved aside, since the object is written over it). Member
// order needs no sort when the members arrive sorted or have the same names
// as a recently closed object (see sort.go). While an object has a cached
// shape, fastMembers takes its members in a tight loop, an array of
// canonical scalars as one span, and flatObject a nested object of a
// cached shape without a frame (a member's value; flatElement an array
// element, and the elements of that shape that follow it in a loop of
// their own); near the end of the input they read a NUL-padded copy of
// its rest (flatShape). Sum's top-level object is not written out but
// hashed from its members' texts (hashObject).

// member is an object member. Its name's canonical text is in[ks:ke]
// (kesc: buf[ks:ke]), its value's in[vs:ve] (vbuf: buf[vs:ve]). The
// unescaped name is in[ks+1:ks+1+klen] (kesc, the name has escapes:
// keys[koff:koff+klen]; koff is set only then), and pfx holds its first
// eight bytes, big-endian, zero-padded.
type member struct {
	ks, ke     int
	vs, ve     int
	vbuf, kesc bool
	klen       int
	koff       int
	pfx        uint64
}

// frame is an open array or object.
type frame struct {
	open  int   // offset in buf where the container's text starts
	in    int   // offset in the input after its '{' or '['
	mbase int   // len(mem) when opened
	ebase int   // len(elems) when opened
	kbase int   // len(keys) when opened
	node  *node // pointer automaton state of this container
	idx   int   // index of the current array element
	cur   int   // w when the current member or element started
	slot  int   // object: shape cache slot, -1 before the second member
	hint  int   // the slot of the last object closed inside this container, or -1
	// hinted: slot was taken from the parent's hint, before the names
	// could choose it.
	hinted bool
	gen    uint64 // generation of the slot's shape when the object chose it
	obj    bool
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

// plainString returns the length of the string content that starts at
// in[i] (after the opening quote) if it has no escapes or control bytes
// and is valid UTF-8, and its closing quote is at least sixteen bytes
// before the end of the input; else -1, for the general path to decide.
func plainString(in []byte, i int) int { return plainStringFrom(in, i, i) }

// plainStringFrom is plainString for a string whose bytes in[i:j] are known
// to be plain.
func plainStringFrom(in []byte, i, j int) int {
	// Long strings (a note, a description) first in 32-byte steps: one
	// test for four words.
	for j+48 <= len(in) {
		t := in[j : j+32]
		if special(binary.LittleEndian.Uint64(t))|special(binary.LittleEndian.Uint64(t[8:]))|
			special(binary.LittleEndian.Uint64(t[16:]))|special(binary.LittleEndian.Uint64(t[24:])) != 0 {
			break
		}
		j += 32
	}
	for j+16 <= len(in) {
		mx := special(binary.LittleEndian.Uint64(in[j:]))
		my := special(binary.LittleEndian.Uint64(in[j+8:]))
		if mx|my == 0 {
			j += 16
			continue
		}
		k := 8 + bits.TrailingZeros64(my)>>3
		if mx != 0 {
			k = bits.TrailingZeros64(mx) >> 3
		}
		switch c := in[j+k]; {
		case c == '"':
			return j + k - i
		case c-0xC2 < 0x1E && j+k+1 < len(in) && in[j+k+1]&0xC0 == 0x80:
			j += k + 2 // a two-byte sequence
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(in[j+k:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			j += k + size
		default:
			return -1
		}
	}
	return -1
}

// push opens a container at depth. (Fields are set one by one: building
// a composite literal and copying it makes the copy's wide loads wait for
// the narrow stores that built it.)
func (s *state) push(depth, w, i int, nd *node, obj bool) *frame {
	if depth == len(s.frames) {
		s.frames = append(s.frames, frame{})
	}
	f := &s.frames[depth]
	f.open, f.in, f.mbase, f.kbase, f.node, f.idx, f.cur, f.slot = w, i, len(s.mem), len(s.keys), nd, 0, w, -1
	f.obj, f.record, f.unsorted, f.shape, f.drop = obj, !obj && nd != nil && nd.unordered, false, false, false
	f.ebase = len(s.elems)
	f.hint, f.hinted = -1, false
	if obj {
		// Try the shape of the previous object in the same container
		// (the elements of an array of objects are alike) or, for the
		// value of an object member, the shape last seen under the
		// member's name (the objects of one object differ, but an
		// "address" looks like the last "address"); for the first
		// object in an array that is a member's value, the shape of
		// the last such object under the member's name; for the
		// top-level object, the shape of the last one (a service gets
		// many bodies alike).
		hint := int(s.rootHint) - 1
		if depth > 0 {
			p := &s.frames[depth-1]
			hint = p.hint
			if m := s.parentMember(p); m != nil {
				if h := s.hints[hintSlot(m.pfx, m.klen)]; h > 0 {
					hint = int(h) - 1
				}
			} else if !p.obj && hint < 0 && depth > 1 {
				if g := s.parentMember(&s.frames[depth-2]); g != nil {
					if h := s.hints[hintSlot(g.pfx^elemHint, g.klen)]; h > 0 {
						hint = int(h) - 1
					}
				}
			}
		}
		if hint >= 0 {
			sh := &s.shapes[hint]
			f.slot, f.gen, f.shape, f.hinted = hint, sh.gen, sh.n > 0, true
		}
	}
	return f
}

// parentMember returns the member of the object p whose value is being
// parsed (the last one recorded), or nil if p is an array or that member
// is volatile (not recorded).
func (s *state) parentMember(p *frame) *member {
	if !p.obj || p.drop || len(s.mem) <= p.mbase {
		return nil
	}
	return &s.mem[len(s.mem)-1]
}

// elemHint marks, in a hint's key, the objects in an array that is the
// value of a member, rather than the member's value itself.
const elemHint = 0x5BD1E9955BD1E995

// hintSlot is the slot in state.hints for a member name with prefix pfx
// and length n.
func hintSlot(pfx uint64, n int) int {
	return int((pfx ^ uint64(n)) * 0x9E3779B97F4A7C15 >> (64 - hintBits))
}

// shapeOK reports whether object f still matches the cached shape of its
// slot. A nested object may have replaced that shape meanwhile; then the
// object sorts its members when it closes.
func (s *state) shapeOK(f *frame) bool {
	if f.shape && s.shapes[f.slot].gen != f.gen {
		f.shape, f.unsorted = false, true
	}
	return f.shape
}

// newMember returns a new last slot of s.mem, with unspecified contents.
func (s *state) newMember() *member {
	if len(s.mem) == cap(s.mem) {
		s.growMem()
	}
	s.mem = s.mem[:len(s.mem)+1]
	return &s.mem[len(s.mem)-1]
}

// minMem is the capacity growMem gives an empty s.mem.
const minMem = 64

// growMem doubles the capacity of s.mem (append grows a large slice by a
// quarter at a time, which for an object of a hundred thousand members
// means dozens of copies into fresh memory).
func (s *state) growMem() {
	m := make([]member, len(s.mem), max(minMem, 2*cap(s.mem)))
	copy(m, s.mem)
	s.mem = m
}

// track updates the member order state of object f for its new last
// member m, whose unescaped name is name. The object's shape cache slot is
// chosen by its first two names (objects of different kinds often share a
// first name, such as "id").
func (s *state) track(f *frame, m *member, name, in []byte) {
	k := len(s.mem) - 1 - f.mbase // m's index
	if f.hinted && k <= 1 {
		if s.shapeOK(f) && s.shapes[f.slot].has(k, m, name) {
			return
		}
		f.hinted, f.shape = false, false
	}
	switch k {
	case 0:
	case 1:
		m0 := &s.mem[len(s.mem)-2]
		f.slot = shapeSlot(m0.pfx, m0.klen, m.pfx, m.klen)
		sh := &s.shapes[f.slot]
		f.gen = sh.gen
		f.shape = sh.has(0, m0, s.name(m0, in)) && sh.has(1, m, name)
		if !f.shape {
			f.unsorted = s.less(m, m0, in)
		}
	default:
		if s.shapeOK(f) && !s.shapes[f.slot].has(k, m, name) {
			f.shape = false
			f.unsorted = k > s.shapes[f.slot].sorted
		}
		if !f.shape && !f.unsorted {
			f.unsorted = s.less(m, &s.mem[len(s.mem)-2], in)
		}
	}
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
func (s *state) canonJSON(in []byte, root *node) bool {
	n := len(in)
	buf := s.buf[:cap(s.buf)]
	if len(buf) < 2*n+2*slack {
		buf = make([]byte, 2*n+n/4+2*slack)
	}
	s.mem = s.mem[:0]
	s.elems = s.elems[:0]
	s.keys = s.keys[:0]

	i, w := 0, 0
	depth := 0
	var f *frame  // the innermost open container
	nd := root    // automaton state of the value about to be parsed
	lazy := false // the value is an object member's: record its span only
	var vs, ve int
	vbuf := false // the value's text is buf[vs:ve], else in[vs:ve]
	var reason string
	var c byte
	notPlain := false // the string value at i is known not to be plain

value:
	i = skipWS(in, i)
	if i >= n {
		reason = errEOF
		goto failed
	}
	switch c = in[i]; c {
	case '"':
		if lazy {
			// Fast path: no escapes or control bytes, valid UTF-8 (and
			// not known to fail, from the member loop).
			if k := -1; notPlain {
				notPlain = false
			} else if k = plainString(in, i+1); k >= 0 {
				vs, ve, vbuf = i, i+k+2, false
				i += k + 2
				break
			}
			// Escapes (most likely): write the canonical text, unless
			// it is the input text (no escapes but \" \\ \b \f \n \r \t).
			start, changed := i, false
			vs, vbuf = w, true
			if i, w, changed, reason = copyString(buf, w, in, i); reason != "" {
				goto failed
			}
			ve = w
			if !changed {
				w = vs
				vs, ve, vbuf = start, i, false
			}
			break
		}
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
		if depth == MaxDepth {
			reason = errDepth
			goto failed
		}
		i = skipWS(in, i+1)
		if i < n && in[i] == '}' {
			i++
			if lazy {
				vs, ve, vbuf = i-2, i, false
				if in[i-2] != '{' {
					vs, vbuf = w, true
					buf[w], buf[w+1] = '{', '}'
					w += 2
					ve = w
				}
				break
			}
			buf[w], buf[w+1] = '{', '}'
			w += 2
			break
		}
		if !lazy && nd == nil && depth > 0 && !f.obj && depth+2 < MaxDepth {
			// An element of an array, of the shape of the one before
			// (an array of objects alike), is taken whole, without a
			// frame, if fastMembers takes it: written at buf[w:]
			// from the input, as closing it would. (Its own arrays
			// of scalars are spans, never containers that could
			// reach MaxDepth.)
			if j, wend := s.flatElement(in, i, buf, w, f, depth); j > 0 {
				i, w = j, wend
				goto after
			}
		}
		f = s.push(depth, w, i, nd, true)
		depth++
		goto key
	case '[':
		if depth == MaxDepth {
			reason = errDepth
			goto failed
		}
		i = skipWS(in, i+1)
		if i < n && in[i] == ']' {
			i++
			if lazy {
				vs, ve, vbuf = i-2, i, false
				if in[i-2] != '[' {
					vs, vbuf = w, true
					buf[w], buf[w+1] = '[', ']'
					w += 2
					ve = w
				}
				break
			}
			buf[w], buf[w+1] = '[', ']'
			w += 2
			break
		}
		f = s.push(depth, w, i, nd, false)
		depth++
		buf[w] = '['
		w++
		f.cur = w
		lazy = false
		if nd != nil {
			nd = nd.elem(0)
			if nd != nil && nd.volatile {
				f.drop = true
			} else if f.record {
				s.elems = append(s.elems, w)
			}
		}
		goto value
	case 't':
		if i+4 > n || string(in[i:i+4]) != "true" {
			reason = errToken
			goto failed
		}
		if lazy {
			vs, ve, vbuf = i, i+4, false
		} else {
			*(*[4]byte)(buf[w:]) = [4]byte{'t', 'r', 'u', 'e'}
			w += 4
		}
		i += 4
	case 'f':
		if i+5 > n || string(in[i:i+5]) != "false" {
			reason = errToken
			goto failed
		}
		if lazy {
			vs, ve, vbuf = i, i+5, false
		} else {
			*(*[5]byte)(buf[w:]) = [5]byte{'f', 'a', 'l', 's', 'e'}
			w += 5
		}
		i += 5
	case 'n':
		if i+4 > n || string(in[i:i+4]) != "null" {
			reason = errToken
			goto failed
		}
		if lazy {
			vs, ve, vbuf = i, i+4, false
		} else {
			*(*[4]byte)(buf[w:]) = [4]byte{'n', 'u', 'l', 'l'}
			w += 4
		}
		i += 4
	default:
		if c != '-' && !isDigit(c) {
			reason = errToken
			goto failed
		}
		start, wstart := i, w
		var verbatim bool
		buf, i, w, verbatim, reason = s.number(buf, w, in, i, lazy)
		if reason != "" {
			goto failed
		}
		if lazy {
			if verbatim {
				vs, ve, vbuf = start, i, false
			} else {
				vs, ve, vbuf = wstart, w, true
			}
		}
	}

after:
	if depth == 0 {
		i = skipWS(in, i)
		if i != n {
			reason = errTrailer
			goto failed
		}
		if vbuf {
			s.buf, s.out = buf, buf[vs:ve]
		} else {
			s.buf, s.out = buf, buf[:w]
		}
		return true
	}
	if f.obj {
		if f.drop {
			w = f.cur
			f.drop = false
		} else {
			m := &s.mem[len(s.mem)-1]
			m.vs, m.ve, m.vbuf = vs, ve, vbuf
		}
		i = skipWS(in, i)
		if i >= n {
			reason = errEOF
			goto failed
		}
		c = in[i]
		i++
		if c == ',' {
			goto key
		}
		if c != '}' {
			i--
			reason = errToken
			goto failed
		}
		goto closeObj
	} else {
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
		if c == ',' {
			f.idx++
			f.cur = w
			lazy = false
			nd = nil
			if f.node != nil {
				nd = f.node.elem(f.idx)
				if nd != nil && nd.volatile {
					f.drop = true
				} else if f.record {
					s.elems = append(s.elems, w)
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
		vs, ve = f.open, w
		goto popped
	}

closeObj:
	buf, vs, ve = s.closeObject(buf, w, f, in, i, depth == 1)
	w = ve
	if depth > 1 {
		p := &s.frames[depth-2]
		p.hint = f.slot
		if m := s.parentMember(p); m != nil && f.slot >= 0 {
			s.hints[hintSlot(m.pfx, m.klen)] = int16(f.slot + 1)
		} else if !p.obj && f.slot >= 0 && depth > 2 {
			if g := s.parentMember(&s.frames[depth-3]); g != nil {
				s.hints[hintSlot(g.pfx^elemHint, g.klen)] = int16(f.slot + 1)
			}
		}
	} else if f.slot >= 0 {
		s.rootHint = int16(f.slot + 1)
	}
	if depth == 1 {
		// The top-level object is written after the texts it reads
		// from, not over them.
		w = f.open
	}

popped:
	vbuf = true
	depth--
	if depth > 0 {
		f = &s.frames[depth-1]
	}
	goto after

key:
	{
		// Fast loop over members whose name and value are already
		// canonical and that no pointer reaches: "name":value followed
		// by ',' or '}', with white space allowed around the value and
		// before the name. A volatile member of that form is checked
		// and left out here too. Anything else goes to the general path
		// below, at a member boundary.
		//
		// While the names match the cached shape, a name is checked by
		// comparing its text `"name":` with the cached text, instead of
		// scanning it. names holds the shape's names while the object
		// matches it; the shape cannot change inside this loop except
		// through track, after which names is looked up again.
		// fastMembers takes such members first, as long as they match
		// the shape and no pointer reaches them: fast is names up to the
		// first one from idx that a pointer from the object reaches
		// (that member goes to the general path, and fast is looked up
		// again when this loop resumes); this loop takes the member
		// fastMembers stops at.
		node := f.node
		var names, fast []shapeName
		idx := len(s.mem) - f.mbase // index of the next member
		if s.shapeOK(f) {
			sh := &s.shapes[f.slot]
			names = sh.names[:sh.n]
			fast = names
			if node != nil {
				fast = sh.unreached(node, idx)
			}
		}
		for {
			// fastMembers takes an array of scalars as one span, which
			// an object at the deepest level allowed may not hold (the
			// general path refuses the '['): it does not run there, so
			// that whether a body nests too deep never depends on the
			// shapes cached from earlier bodies.
			if idx < len(fast) && depth < MaxDepth {
				j, l, fv, status := fastMembers(in, i, fast[idx:], s.mem, 1)
				s.mem = s.mem[:l]
				i, idx = j, l-f.mbase
				switch status {
				case fastClosed:
					goto closeObj
				case fastValue:
					// The name is fine but the value needs the general
					// path: record the member and go on with the value.
					// But first, an object that the member loop takes
					// whole, or an array of such objects, is written
					// here, without a frame.
					e := &names[idx]
					j, wend := 0, 0
					if c := in[fv]; c == '{' && depth+2 < MaxDepth {
						j, wend = s.flatObject(in, fv, buf, w, e.pfx, e.n)
					} else if c == '[' && in[fv+1] == '{' && depth+3 < MaxDepth {
						// (With the array's frame, depth+1 containers
						// would be open where flatElement tests its
						// depth+2 < MaxDepth.)
						j, wend = s.flatArray(in, fv, buf, w, e.pfx, e.n)
					}
					if j > 0 {
						m := s.newMember()
						m.ks, m.ke, m.vs, m.ve, m.klen = i, i+e.n+2, w, wend, e.n
						m.vbuf, m.kesc = true, false
						m.pfx = e.pfx
						w = wend
						idx++
						var sep byte
						if i, sep = memberEnd(in, j); sep == ',' {
							continue
						} else if sep == '}' {
							goto closeObj
						}
						reason = endReason(in, i)
						goto failed
					}
					f.cur = w
					m := s.newMember()
					m.ks, m.ke, m.vs, m.ve, m.klen = i, i+e.n+2, 0, 0, e.n
					m.vbuf, m.kesc = false, false
					m.pfx = e.pfx
					nd, lazy, i = nil, true, fv
					// A string fastMembers did not take is not plain
					// (or copyString finds it verbatim all the same).
					notPlain = in[fv] == '"'
					goto value
				}
			}
			if uint(i) >= uint(n) || in[i] != '"' {
				if i = skipWS(in, i); uint(i) >= uint(n) || in[i] != '"' {
					break
				}
			}
			var e *shapeName
			var k, ke int
			if idx < len(names) && i+24 <= n {
				e = &names[idx]
				t := in[i : i+24] // one bounds check for the three loads
				x0 := binary.LittleEndian.Uint64(t)
				x1 := binary.LittleEndian.Uint64(t[8:])
				x2 := binary.LittleEndian.Uint64(t[16:])
				if (x0^e.text[0])&e.tmask[0]|(x1^e.text[1])&e.tmask[1]|(x2^e.text[2])&e.tmask[2] == 0 {
					// The text includes the quotes and the colon.
					k = e.n
					ke = i + k + 2
				} else {
					e = nil
				}
			}
			if e == nil {
				if k = plainString(in, i+1); k < 0 {
					break
				}
				ke = i + k + 2
				if uint(ke+1) >= uint(n) || in[ke] != ':' {
					break
				}
			}
			drop := false // a volatile member: its value checked, left out
			if node != nil {
				if c := node.child(in[i+1 : i+1+k]); c != nil {
					if !c.volatile {
						break // a pointer reaches this member: the general path
					}
					drop = true
				}
			}
			vs := ke + 1
			if uint(vs) < uint(n) && in[vs] <= ' ' {
				vs = skipWS(in, vs)
			}
			if uint(vs) >= uint(n) {
				break
			}
			ve := -1
			switch c := in[vs]; {
			case c == '"':
				// The first sixteen bytes inline (most values are
				// short): where the first special byte is the closing
				// quote, plainString would return just that.
				// in[vs+1:from] is known to be plain.
				from := vs + 1
				if vs+17 <= n {
					t := in[vs+1 : vs+17]
					if m0 := special(binary.LittleEndian.Uint64(t)); m0 != 0 {
						if j := bits.TrailingZeros64(m0) >> 3; t[j] == '"' {
							ve = vs + 2 + j
							break
						}
					} else if m1 := special(binary.LittleEndian.Uint64(t[8:])); m1 != 0 {
						if j := 8 + bits.TrailingZeros64(m1)>>3; t[j&15] == '"' {
							ve = vs + 2 + j
							break
						}
					} else {
						from = vs + 17
					}
				}
				if k2 := plainStringFrom(in, vs+1, from); k2 >= 0 {
					ve = vs + k2 + 2
				} else {
					ve = verbatimString(in, vs)
				}
			case c == '-' || isDigit(c):
				// Inline, a short number in canonical form followed by
				// ',' or '}': an integer of at most fifteen digits, or at
				// most seven digits and a fraction of at most fifteen not
				// ending in zero; the general test in verbatimNumber.
				// fastMembers has the same test, written again: as a
				// function it costs 199 against the inliner's budget
				// of 80, and fastMembers must make no calls. Change
				// both together.
				if vs+17 <= n && c != '-' {
					t := in[vs : vs+17]
					k := 0 // the length of the number, or 0
					if c != '0' {
						m := nonDigit(binary.LittleEndian.Uint64(t))
						if m != 0 {
							k = bits.TrailingZeros64(m) >> 3
						} else if m = nonDigit(binary.LittleEndian.Uint64(t[8:])); m != 0 {
							k = 8 + bits.TrailingZeros64(m)>>3
						}
					} else {
						k = 1 // fewer than six leading zeros below
					}
					if e := t[k&15]; k > 0 && e != ',' && e != '}' {
						k2 := 0
						if k < 8 && e == '.' {
							j := 0 // the length of the fraction, or 0
							if m := nonDigit(binary.LittleEndian.Uint64(t[k+1:])); m != 0 {
								j = bits.TrailingZeros64(m) >> 3
							} else if vs+k+18 <= n {
								// Eight digits or more (a float's
								// shortest form often has fifteen).
								if m := nonDigit(binary.LittleEndian.Uint64(in[vs+k+9:])); m != 0 {
									j = 8 + bits.TrailingZeros64(m)>>3
								}
							}
							if end := vs + k + 1 + j; j > 0 && (c != '0' || j <= 6) && in[end-1] != '0' && (in[end] == ',' || in[end] == '}') {
								k2 = end - vs
							}
						}
						k = k2
					}
					if k > 0 {
						ve = vs + k
						break
					}
				}
				ve = verbatimNumber(in, vs)
			case c == 't':
				if vs+4 <= n && string(in[vs:vs+4]) == "true" {
					ve = vs + 4
				}
			case c == 'f':
				if vs+5 <= n && string(in[vs:vs+5]) == "false" {
					ve = vs + 5
				}
			case c == 'n':
				if vs+4 <= n && string(in[vs:vs+4]) == "null" {
					ve = vs + 4
				}
			}
			if ve < 0 {
				if drop {
					break
				}
				// The name is fine but the value needs the general
				// path: record the member and go on with the value.
				f.cur = w
				m := s.newMember()
				m.ks, m.ke, m.vs, m.ve, m.klen = i, ke, 0, 0, k
				m.vbuf, m.kesc = false, false
				if e != nil {
					m.pfx = e.pfx
				} else {
					m.pfx = nameKey(binary.LittleEndian.Uint64(in[i+1:]), k)
					s.track(f, m, in[i+1:i+1+k], in)
				}
				if in[vs] == '{' && depth+2 < MaxDepth {
					// An object that the member loop takes whole, as in
					// fastMembers's case (no pointer reaches it). (vs
					// and ve here are this loop's own.)
					if j, wend := s.flatObject(in, vs, buf, w, m.pfx, k); j > 0 {
						m = &s.mem[len(s.mem)-1] // flatObject may grow s.mem
						m.vs, m.ve, m.vbuf = w, wend, true
						w = wend
						var sep byte
						if i, sep = memberEnd(in, j); sep == ',' {
							goto key
						} else if sep == '}' {
							goto closeObj
						}
						reason = endReason(in, i)
						goto failed
					}
				}
				nd, lazy, i = nil, true, vs
				notPlain = in[vs] == '"'
				goto value
			}
			next := ve
			if uint(next) >= uint(n) || (in[next] != ',' && in[next] != '}') {
				if next = skipWS(in, ve); uint(next) >= uint(n) || (in[next] != ',' && in[next] != '}') {
					break
				}
			}
			if drop {
				i = next + 1
				if in[next] == '}' {
					goto closeObj
				}
				continue
			}
			m := s.newMember()
			m.ks, m.ke, m.vs, m.ve, m.klen = i, ke, vs, ve, k
			m.vbuf, m.kesc = false, false
			if e != nil {
				m.pfx = e.pfx // and the shape still matches
			} else {
				m.pfx = nameKey(binary.LittleEndian.Uint64(in[i+1:]), k)
				s.track(f, m, in[i+1:i+1+k], in)
				names, fast = nil, nil
				if f.shape {
					sh := &s.shapes[f.slot]
					names = sh.names[:sh.n]
					fast = names
					if node != nil {
						fast = sh.unreached(node, idx)
					}
				}
			}
			idx++
			i = next + 1
			if in[next] == '}' {
				goto closeObj
			}
		}
	}
	i = skipWS(in, i)
	if i >= n || in[i] != '"' {
		reason = errToken
		goto failed
	}
	{
		f.cur = w
		m := s.newMember()
		m.ks, m.vs, m.ve = i, 0, 0
		m.vbuf, m.kesc = false, false
		// Fast path as for values.
		if k := plainString(in, i+1); k >= 0 {
			i += k + 2
			m.ke, m.klen = i, k
			m.pfx = nameKey(binary.LittleEndian.Uint64(in[m.ks+1:]), k)
			goto named
		}
		{
			j, esc, r := scanString(in, i)
			if r != "" {
				i, reason = j, r
				goto failed
			}
			m.klen = j - i - 2
			if esc {
				m.kesc = true
				m.koff = len(s.keys)
				s.keys = appendUnescaped(s.keys, in[i+1:j-1])
				m.klen = len(s.keys) - m.koff
				m.ks = w
				_, w, _, _ = copyString(buf, w, in, i)
				m.ke = w
			} else {
				m.ke = j
			}
			i = j
			m.pfx = prefix(s.name(m, in))
		}
	named:
		nd = nil
		if f.node != nil {
			nd = f.node.child(s.name(m, in))
		}
		if nd != nil && nd.volatile {
			f.drop = true
			s.mem = s.mem[:len(s.mem)-1]
		} else {
			s.track(f, m, s.name(m, in), in)
		}
		i = skipWS(in, i)
		if i >= n || in[i] != ':' {
			reason = errToken
			goto failed
		}
		i++
		lazy = true
	}
	goto value

failed:
	s.buf, s.out = buf, nil
	s.err = jsonError{i, reason}
	return false
}

// memberEnd reads what ends a member that a member loop took whole, from
// in[j] past white space: a ',' or the '}' closing the object, returning
// the index after it and that byte; for anything else, the index where it
// is and 0 (endReason says why that fails).
func memberEnd(in []byte, j int) (int, byte) {
	i := skipWS(in, j)
	if i < len(in) && (in[i] == ',' || in[i] == '}') {
		return i + 1, in[i]
	}
	return i, 0
}

// endReason is why a value whose end memberEnd found at in[i] fails.
func endReason(in []byte, i int) string {
	if i >= len(in) {
		return errEOF
	}
	return errToken
}

// flatObject writes at buf[w:] the canonical text of the object that
// starts at in[i], the value of a member whose name has prefix pfx and
// length klen, if it is an object of the shape last seen as the value of such a
// member that fastMembers takes whole (names as cached, in that order,
// values it takes), and returns the index after it in the input and the
// end of its text in buf; else 0, 0. It records the members past the end
// of s.mem, as scratch. (This spares the object a frame, and its members
// a second move.)
func (s *state) flatObject(in []byte, i int, buf []byte, w int, pfx uint64, klen int) (int, int) {
	h := s.hints[hintSlot(pfx, klen)]
	if h <= 0 || i+1 >= len(in) || in[i+1] != '"' {
		return 0, 0
	}
	return s.flatShape(in, i+1, buf, w, &s.shapes[h-1])
}

// flatArray writes at buf[w:] the canonical text of the array that starts
// at in[i] = '[', the value of a member whose name has prefix pfx and
// length klen, if its elements are objects of the shape last seen in such
// an array, each right after the '[' or the comma before it, that
// flatShapes takes, and returns the index after it in the input and the
// end of its text in buf; else 0, 0. (flatElement would take them, in a
// frame of the array.)
func (s *state) flatArray(in []byte, i int, buf []byte, w int, pfx uint64, klen int) (int, int) {
	h := s.hints[hintSlot(pfx^elemHint, klen)]
	if h <= 0 || s.shapes[h-1].noFlat || i+2 >= len(in) || in[i+1] != '{' {
		return 0, 0
	}
	buf[w] = '['
	j, o, _, _ := s.flatShapes(in, i+2, buf, w+1, &s.shapes[h-1], true)
	if j <= 0 || j >= len(in) || in[j] != ']' {
		return 0, 0
	}
	buf[o] = ']'
	return j + 1, o + 1
}

// flatElement is flatObject for an element of the array f at depth
// (innermost) whose text starts at in[i-1] = '{', with the shape an element
// of f would be pushed with (see push): that of the last object closed in
// f or, for its first element, that of the last object in an array that
// was the value of a member of its name.
func (s *state) flatElement(in []byte, i int, buf []byte, w int, f *frame, depth int) (int, int) {
	hint := f.hint
	if hint < 0 && depth > 1 {
		g := s.parentMember(&s.frames[depth-2])
		if g == nil {
			return 0, 0
		}
		h := s.hints[hintSlot(g.pfx^elemHint, g.klen)]
		if h <= 0 {
			return 0, 0
		}
		hint = int(h) - 1
	}
	if hint < 0 {
		return 0, 0
	}
	// Where no pointer reaches the array, the elements that follow, while
	// each is such an object right after its comma, are taken in the same
	// loop: what the array's loop would do for each, without its round
	// trip.
	j, o, took, last := s.flatShapes(in, i, buf, w, &s.shapes[hint], f.node == nil)
	if took > 0 {
		f.hint = hint // as closing the element would
		f.idx += took - 1
		f.cur = last
	}
	return j, o
}

// flatShape is flatObject for the object of shape sh whose members start
// at in[i] (after its '{').
func (s *state) flatShape(in []byte, i int, buf []byte, w int, sh *shape) (int, int) {
	j, o, _, _ := s.flatShapes(in, i, buf, w, sh, false)
	return j, o
}

// flatShapes is flatShape and, with run, also for the objects of shape sh
// that follow that one in an array, each right after the comma of the one
// before (",{"), as long as it takes them: written at buf[w:] with their
// commas. It returns, besides the index after the last object it took and
// the end of their texts, how many it took and where the text of the last
// starts in buf. (One call for the elements of an array of objects alike,
// which would otherwise cost two calls of a dozen arguments or more each
// for a few members.)
func (s *state) flatShapes(in []byte, i int, buf []byte, w int, sh *shape, run bool) (int, int, int, int) {
	if sh.n == 0 || sh.noFlat {
		return 0, 0, 0, 0
	}
	names, perm := sh.names[:sh.n], sh.perm
	took, last := 0, w
	for {
		// Near the end of the input, where fastMembers's wide loads do
		// not fit, it reads a copy of the rest padded with NUL bytes:
		// every test it makes fails at a NUL (not white space, a
		// separator, a digit, part of a name's text, nor a byte a plain
		// string holds), so it takes the same members from the copy as
		// it would from a longer input, and none that reaches past the
		// end.
		src, off := in, 0
		if rest := len(in) - i; rest < tailMax {
			src, off = s.tail[:rest+tailPad], i
			copy(src, in[i:])
			clear(src[rest:])
		}
		// fastMembers stops when s.mem is full, and a failure for want
		// of room would mark the shape noFlat (for as long as it stays
		// cached, in this pooled state): room for the shape's members
		// first.
		if cap(s.mem)-len(s.mem) < sh.n {
			s.growMem()
		}
		base := len(s.mem)
		objs := 1 // with run, as many objects alike as s.mem has room for
		if run {
			objs = (cap(s.mem) - base) / len(names)
		}
		j, l, _, status := fastMembers(src, i-off, names, s.mem, objs)
		ms := s.mem[base:l]
		if nn := len(names); objs > 1 && (len(ms) > nn || (len(ms) == nn && status != fastClosed && src[skipWS(src, ms[nn-1].ve)] == '}')) {
			// fastMembers went on after the first object: it records
			// at most nn members per object, and an object with all
			// the names whose last member is followed by '}' ends its
			// call with fastClosed unless it goes on. The objects it
			// took whole are written; the one it stopped in, if any
			// (a member it did not take, fewer members or more), is
			// tried alone by the next round, from after the '}' before
			// it, as if it started the run.
			k := len(ms) % nn
			if k == 0 && status != fastClosed && src[skipWS(src, ms[len(ms)-1].ve)] != '}' {
				k = nn // the last object has all the names, but more
			}
			if k > 0 || status != fastClosed {
				ms = ms[:len(ms)-k]
				j = skipWS(src, ms[len(ms)-1].ve) + 1
				status = fastClosed
			}
		}
		j += off
		if status != fastClosed || (len(ms) < len(names) && len(perm) > 0) {
			if j+64 < len(in) {
				sh.noFlat = true // not for want of input past the value
			}
			if took == 0 {
				return 0, 0, 0, 0
			}
			return i - 2, w - 1, took, last // before the comma
		}
		// The members go in the cached order (a prefix of sorted names
		// is sorted); their texts are in the input (or its copy). ms
		// holds one object or, in a run, several with all the names.
		// The order: perm, or, for sorted names (or a prefix of them,
		// all that perm may not take), the order of arrival.
		order := perm
		if len(perm) == 0 {
			order = arrival[:len(names)]
		}
		for len(ms) > 0 {
			if len(ms) >= len(names) {
				// Whole objects, as many as putObjects takes (it
				// writes nothing of the others).
				k := 0
				if w, last, k = putObjects(buf, w, src, ms, order, last); k > 0 {
					ms = ms[k*len(names):]
					took += k
					if len(ms) == 0 {
						break
					}
					buf[w] = ','
					w++
				}
			}
			o := ms[:min(len(names), len(ms))]
			ms = ms[len(o):]
			last = w
			buf[w] = '{'
			w++
			order := order
			if len(o) < len(names) {
				order = arrival[:len(o)]
			}
			// fastMembers's members have their names verbatim (kesc
			// false) and their values in the input (vbuf false).
			for rest := order; ; {
				var k int
				if w, k = putShort(buf, w, src, o, rest); k == len(rest) {
					break
				}
				w = putMember(buf, w, src, src, 0, &o[rest[k]])
				rest = rest[k+1:]
			}
			buf[w-1] = '}'
			took++
			if len(ms) > 0 {
				buf[w] = ','
				w++
			}
		}
		i = j
		if !run || i+2 >= len(in) || in[i] != ',' || in[i+1] != '{' {
			return i, w, took, last
		}
		buf[w] = ','
		i += 2
		w++
	}
}

// putObjects writes at buf[w:] the objects ms holds, each of len(order)
// members, in the order order, separated by commas, as long as putShort
// would write all the members of each, and returns the index after them,
// where the text of the last starts (last if none) and how many it wrote.
// (One call for a run of objects alike, no calls in its loop.)
//
//go:noinline
func putObjects(buf []byte, w int, src []byte, ms []member, order []int32, last int) (int, int, int) {
	// The tests of each move are against these limits: a member reads
	// src[a:a+32] and writes buf[w:w+33]; an object's start writes
	// buf[w:w+2].
	amax, wmax := len(src)-32, len(buf)-33
	if amax < 0 || wmax < 2 || len(order) == 0 {
		return w, last, 0
	}
	bp, sp := unsafe.Pointer(unsafe.SliceData(buf)), unsafe.Pointer(unsafe.SliceData(src))
	took := 0
	for len(ms) >= len(order) {
		o := ms[:len(order)]
		if uint(w) > uint(wmax) {
			return w, last, took
		}
		if took > 0 {
			*(*byte)(unsafe.Add(bp, w)) = ','
			w++
		}
		brace := w
		*(*byte)(unsafe.Add(bp, w)) = '{'
		w++
		for _, p := range order {
			m := &o[p]
			a := m.ks
			l := uint(m.ve - a)
			if m.vs != m.ke+1 || l > 32 || uint(a) > uint(amax) || uint(w) > uint(wmax) {
				// The object not written: back to its start
				// (before its comma).
				return brace - min(took, 1), last, took
			}
			d, t := unsafe.Add(bp, w), unsafe.Add(sp, a)
			*(*[16]byte)(d) = *(*[16]byte)(t)
			*(*[16]byte)(unsafe.Add(d, 16)) = *(*[16]byte)(unsafe.Add(t, 16))
			*(*byte)(unsafe.Add(d, l)) = ','
			w += int(l) + 1
		}
		*(*byte)(unsafe.Add(bp, w-1)) = '}' // over the last member's comma
		last = brace
		took++
		ms = ms[len(order):]
	}
	return w, last, took
}

// arrival is the order of arrival of a shape's members, for putShort.
var arrival = func() (a [maxShape]int32) {
	for k := range a {
		a[k] = int32(k)
	}
	return a
}()

// putShort writes the members ms in the order perm at buf[w:], each
// followed by a comma, as long as each is a span of src of at most 32
// bytes ("name":value, its name verbatim, its value in src after the
// colon) that can be moved in two 16-byte moves, and returns the index
// after them in buf and how many it wrote. (No calls in its loop, so that
// its state stays in registers; flatShapes's own loop keeps too much
// live.)
//
//go:noinline
func putShort(buf []byte, w int, src []byte, ms []member, perm []int32) (int, int) {
	// The tests of each move are against these limits (the moves read
	// src[a:a+32] and write buf[w:w+33]).
	amax, wmax := len(src)-32, len(buf)-33
	if amax < 0 || wmax < 0 {
		return w, 0
	}
	bp, sp := unsafe.Pointer(unsafe.SliceData(buf)), unsafe.Pointer(unsafe.SliceData(src))
	for k, p := range perm {
		m := &ms[p]
		a := m.ks
		l := uint(m.ve - a)
		if m.vs != m.ke+1 || l > 32 || uint(a) > uint(amax) || uint(w) > uint(wmax) {
			return w, k
		}
		d, t := unsafe.Add(bp, w), unsafe.Add(sp, a)
		*(*[16]byte)(d) = *(*[16]byte)(t)
		*(*[16]byte)(unsafe.Add(d, 16)) = *(*[16]byte)(unsafe.Add(t, 16))
		*(*byte)(unsafe.Add(d, l)) = ','
		w += int(l) + 1
	}
	return w, len(perm)
}

// flatShape copies the last tailMax-1 bytes of the input or fewer, with
// tailPad bytes of padding: more than fastMembers reads past a position
// it reached (24 bytes).
const (
	tailMax = 256
	tailPad = 64
)

// What fastMembers stopped at.
const (
	fastStop   = iota // a member it does not take, at its start
	fastClosed        // the end of the object, after its '}'
	fastValue         // a member with the expected name and a value for the general path
)

// load64 returns the eight bytes at p+i, little-endian, without a bounds
// check: the caller has checked that they are in its slice.
func load64(p unsafe.Pointer, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, i))[:])
}

// fastMembers is the member loop's most common case, in a function of its
// own, without calls, so that its state stays in registers (the loop of
// canonJSON keeps most of its own in memory): from in[i], it appends to mem
// the members that have the names of the cached shape, names (from the
// next member's), in that order, and values already in canonical form
// that it checks inline (strings of ASCII, two- and three-byte UTF-8 and
// self-canonical escapes, short numbers, literals); any other value goes
// to the general path. It returns where it stopped, the new length of
// mem, and why: at the start of a member it does not take, or when mem is
// full (fastStop); after the '}' that closes the object (fastClosed); at
// the start of a member that has the expected name, not recorded, whose
// value starts at vs and needs the general path (fastValue).
//
// With objs > 1 (flatShapes, names all the shape's, mem with room for
// objs objects of it), after the '}' of an object that has all the names
// and is followed right by ",{", it goes on with the next object's
// members as with the first's, up to objs objects (saving flatShapes a
// call and its loop's round trip per object); what it returns is then
// about the last object it went into (see flatShapes).
func fastMembers(in []byte, i int, names []shapeName, mem []member, objs int) (int, int, int, int) {
	n := len(in)
	base := unsafe.Pointer(unsafe.SliceData(in))
	// No more names than mem has room for: the loop tests one length
	// (and keeps fewer values live).
	if room := cap(mem) - len(mem); len(names) > room {
		names = names[:room]
	}
	idx := 0
	for uint(idx) < uint(len(names)) {
		if uint(i) >= uint(n) || in[i] != '"' {
			if i = skipWS(in, i); uint(i) >= uint(n) || in[i] != '"' {
				break
			}
		}
		// (0 <= i < n, from the tests above.)
		if i+24 > n {
			break
		}
		e := &names[idx]
		x0, x1, x2 := load64(base, i), load64(base, i+8), load64(base, i+16)
		if (x0^e.text[0])&e.tmask[0]|(x1^e.text[1])&e.tmask[1]|(x2^e.text[2])&e.tmask[2] != 0 {
			break
		}
		// The text includes the quotes and the colon.
		k := e.n
		ke := i + k + 2
		vs := ke + 1
		// (White space only moves vs on: failing this test, the one
		// after it would fail.)
		if vs+17 > n {
			break
		}
		c := *(*byte)(unsafe.Add(base, vs)) // vs+17 <= n
		if c <= ' ' {
			if vs = skipWS(in, vs); vs+17 > n {
				break
			}
			c = in[vs]
		}
		// The value: a scalar, or an array of scalars without white
		// space (its text is then its canonical text, as is).
		ve := -1
		p := vs // the scalar, whose first byte is c
		arr := false
		if c == '[' {
			if in[vs+1] == ']' {
				ve = vs + 2
				goto scanned
			}
			arr = true
			p = vs + 1
			c = in[p]
		}
	scalar:
		switch {
		case c == '"':
			// ASCII, two- and three-byte UTF-8 sequences (but those
			// starting with E0 or ED, which need more checks) and the
			// escapes that are their own canonical form; anything
			// else goes to the general path.
			// Sixteen bytes at a time (and up to two past them for a
			// UTF-8 sequence), the closing quote tested first.
			// (0 < p and p+18 <= n: the loads need no bounds checks.)
			p++
			for p+18 <= n {
				m := special(load64(base, p))
				if m == 0 {
					if m = special(load64(base, p+8)); m == 0 {
						p += 16
						continue
					}
					p += 8
				}
				p += bits.TrailingZeros64(m) >> 3
				t := (*[3]byte)(unsafe.Add(base, p))
				if c := t[0]; c == '"' {
					ve = p + 1
					break
				} else if c-0xC2 < 0x1E && t[1]&0xC0 == 0x80 {
					p += 2
				} else if c-0xE1 < 0x0F && c != 0xED && t[1]&0xC0 == 0x80 && t[2]&0xC0 == 0x80 {
					p += 3
				} else if c == '\\' && (t[1] == '"' || t[1] == '\\' || t[1] == 'n' || t[1] == 't' || t[1] == 'r' || t[1] == 'b' || t[1] == 'f') {
					p += 2
				} else {
					break
				}
			}
		case c-'0' < 10:
			// The short-number test of canonJSON's member loop,
			// written again here because as a function it would not
			// be inlined (cost 199, budget 80); change both together.
			// Here a number may end an array too.
			// (0 < p and p+17 <= n: the loads from in[p:p+17]
			// need no bounds checks.)
			if p+17 > n {
				break
			}
			k := 0 // the length of the number, or 0
			if c != '0' {
				m := nonDigit(load64(base, p))
				if m != 0 {
					k = bits.TrailingZeros64(m) >> 3
				} else if m = nonDigit(load64(base, p+8)); m != 0 {
					k = 8 + bits.TrailingZeros64(m)>>3
				}
			} else {
				k = 1 // fewer than six leading zeros below
			}
			if e := *(*byte)(unsafe.Add(base, p+k&15)); k > 0 && e != ',' && e != '}' && e != ']' {
				k2 := 0
				if k < 8 && e == '.' {
					j := 0 // the length of the fraction, or 0
					if m := nonDigit(load64(base, p+k+1)); m != 0 {
						j = bits.TrailingZeros64(m) >> 3
					} else if p+k+18 <= n {
						// Eight digits or more (a float's shortest
						// form often has fifteen).
						if m := nonDigit(binary.LittleEndian.Uint64(in[p+k+9:])); m != 0 {
							j = 8 + bits.TrailingZeros64(m)>>3
						}
					}
					if end := p + k + 1 + j; j > 0 && (c != '0' || j <= 6) && in[end-1] != '0' && (in[end] == ',' || in[end] == '}' || in[end] == ']') {
						k2 = end - p
					}
				}
				k = k2
			}
			if k > 0 {
				ve = p + k
			}
		case c == 't':
			if p+4 <= n && string(in[p:p+4]) == "true" {
				ve = p + 4
			}
		case c == 'f':
			if p+5 <= n && string(in[p:p+5]) == "false" {
				ve = p + 5
			}
		case c == 'n':
			if p+4 <= n && string(in[p:p+4]) == "null" {
				ve = p + 4
			}
		}
		if arr && ve >= 0 {
			// The next element right after a comma, or the end.
			if ve+1 < n && in[ve] == ',' {
				p, ve = ve+1, -1
				c = in[p]
				goto scalar
			}
			if ve < n && in[ve] == ']' {
				ve++
			} else {
				ve = -1
			}
		}
	scanned:
		if ve < 0 {
			return i, len(mem), vs, fastValue
		}
		next := ve
		if uint(next) >= uint(n) || (in[next] != ',' && in[next] != '}') {
			if next = skipWS(in, ve); uint(next) >= uint(n) || (in[next] != ',' && in[next] != '}') {
				break
			}
		}
		mem = mem[:len(mem)+1]
		m := &mem[len(mem)-1]
		m.ks, m.ke, m.vs, m.ve, m.klen = i, ke, vs, ve, k
		m.vbuf, m.kesc = false, false
		m.pfx = e.pfx
		idx++
		i = next + 1
		if in[next] == '}' {
			if objs > 1 && idx == len(names) && next+2 < n && in[next+1] == ',' && in[next+2] == '{' {
				objs--
				idx = 0
				i = next + 3
				continue
			}
			return i, len(mem), 0, fastClosed
		}
	}
	return i, len(mem), 0, fastStop
}
