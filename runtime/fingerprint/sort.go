package fingerprint

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Reordering. An object whose members arrived out of order is sorted when
// it closes: its members' canonical texts (each with its trailing comma)
// are gathered in sorted order into a scratch buffer and copied back over
// the object. Sorting permutes indexes; most comparisons compare the
// names' first eight bytes as integers. An object with names equal under
// case folding is not sorted (foldCollide, in order: the only place that
// computes an order, which the shape cache and the fast paths reuse).
//
// Requests repeat shapes: the objects of an array mostly have the same
// member names in the same order. A small cache remembers, per slot chosen
// by the first two member names, the names of the last object closed there and
// their sorted order; an object whose names match it, as they arrive,
// reuses that order without sorting. The cache lives in the pooled scratch
// state, so it carries over from one request to the next (an API's bodies
// repeat their shapes too); it holds copies of names, never references to
// a body. It is an optimization only: every hit is checked against the
// full names, and a miss or a collision just sorts.

func prefix(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b)
	}
	var x uint64
	for i := range b {
		x |= uint64(b[i]) << (56 - 8*i)
	}
	return x
}

// name returns the unescaped name of the object member m.
func (s *state) name(m *member, in []byte) []byte {
	if m.kesc {
		return s.keys[m.koff : m.koff+m.klen]
	}
	return in[m.ks+1 : m.ks+1+m.klen]
}

// cmpNames orders object members by unescaped name (not by arrival).
func (s *state) cmpNames(a, b *member, in []byte) int {
	if a.pfx != b.pfx {
		if a.pfx < b.pfx {
			return -1
		}
		return 1
	}
	if a.klen <= 8 || b.klen <= 8 {
		// Equal first eight bytes: the shorter name is a prefix of
		// the other (the bytes past it are zeros, escaped NULs).
		return a.klen - b.klen
	}
	return bytes.Compare(s.name(a, in)[8:], s.name(b, in)[8:])
}

// sortKey is what a sort by name (or by canonical text) compares first:
// the first eight bytes, big-endian, zero-padded, and the length, up to 9
// (all longer ones compare their bytes past the first eight), with the
// index of the member or element, for ties and to find its bytes.
type sortKey struct {
	pfx uint64
	n   int32
	idx int32
}

// sortByKey sorts keys by name, then index; rest(k) returns the bytes
// past the first eight of the name of index k (at least nine long). tmp
// is scratch as long as keys.
// Comparisons touch the keys only, which are contiguous, unless two long
// names share their first eight bytes.
func sortByKey(keys, tmp []sortKey, rest func(int32) []byte) {
	cmp := func(a, b sortKey) int {
		if a.pfx != b.pfx {
			if a.pfx < b.pfx {
				return -1
			}
			return 1
		}
		if a.n != b.n || a.n <= 8 {
			if a.n != b.n {
				return int(a.n - b.n)
			}
			return int(a.idx - b.idx)
		}
		if c := bytes.Compare(rest(a.idx), rest(b.idx)); c != 0 {
			return c
		}
		return int(a.idx - b.idx)
	}
	if len(keys) > radixMin {
		// A stable radix sort by (pfx, n) leaves ties in index order;
		// then the runs of long names with equal first bytes sort by
		// their other bytes.
		radixSort(keys, tmp)
		for a := 0; a < len(keys); {
			b := a + 1
			for b < len(keys) && keys[b].pfx == keys[a].pfx && keys[b].n == keys[a].n {
				b++
			}
			if b-a > 1 && keys[a].n > 8 {
				slices.SortFunc(keys[a:b], cmp)
			}
			a = b
		}
		return
	}
	if len(keys) > 16 {
		slices.SortFunc(keys, cmp)
		return
	}
	for a := 1; a < len(keys); a++ {
		for b := a; b > 0 && cmp(keys[b-1], keys[b]) > 0; b-- {
			keys[b-1], keys[b] = keys[b], keys[b-1]
		}
	}
}

// keysFor returns s.sortKeys emptied, with room for n keys, and scratch
// for sortByKey of length n.
func (s *state) keysFor(n int) ([]sortKey, []sortKey) {
	if cap(s.sortKeys) < 2*n {
		s.sortKeys = make([]sortKey, 0, 2*n)
	}
	return s.sortKeys[:0:n], s.sortKeys[n : 2*n]
}

// radixMin is the length from which sortByKey sorts by radix.
const radixMin = 256

// radixSort sorts keys by (pfx, n), stably, with tmp as scratch of the
// same length: a pass over the bytes of n then of pfx, from the least
// significant, skipping those that all keys share.
func radixSort(keys, tmp []sortKey) {
	var counts [9][256]int
	for _, k := range keys {
		counts[0][byte(k.n)]++
		for d := range 8 {
			counts[1+d][byte(k.pfx>>(8*d))]++
		}
	}
	src, dst := keys, tmp[:len(keys)]
	for d := range 9 {
		c := &counts[d]
		digit := func(k *sortKey) byte {
			if d == 0 {
				return byte(k.n)
			}
			return byte(k.pfx >> (8 * (d - 1)))
		}
		if c[digit(&src[0])] == len(src) {
			continue
		}
		sum := 0
		for b := range c {
			c[b], sum = sum, sum+c[b]
		}
		for k := range src {
			b := digit(&src[k])
			dst[c[b]] = src[k]
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// permFor returns s.perm emptied, with room for n indexes.
func (s *state) permFor(n int) []int32 {
	if cap(s.perm) < n {
		s.perm = make([]int32, 0, n)
	}
	return s.perm[:0]
}

// sortLen is the length of a name or text in a sortKey.
func sortLen(n int) int32 { return int32(min(n, 9)) }

// less reports whether member a's name sorts before b's.
func (s *state) less(a, b *member, in []byte) bool { return s.cmpNames(a, b, in) < 0 }

// shapeSlots is the size of the shape cache.
const (
	shapeBits  = 8
	shapeSlots = 1 << shapeBits
)

// hintBits sizes state.hints.
const hintBits = 8

// maxShape is the largest object whose shape is cached.
const maxShape = 64

// shape is a cached object shape.
type shape struct {
	n      int         // number of members; 0: empty slot
	gen    uint64      // incremented whenever the slot changes
	sorted int         // the names [0, sorted] are in order
	names  []shapeName // in arrival order
	rest   []byte      // name bytes past the first eight, concatenated
	perm   []int32     // sorted order; empty if the names are sorted
	// noFlat: flatObject failed on an object of this shape (a value for
	// the general path, say); it does not try again until the slot
	// changes.
	noFlat bool
	// reached has a bit set for each name (names[k]: bit k) that a
	// pointer from the automaton state reachedBy reaches (see
	// reachedNames); reachedBy is nil until it is computed.
	reachedBy *node
	reached   uint64
}

type shapeName struct {
	pfx       uint64
	n         int
	rest, end int // rest[rest:end] are the bytes past the first eight
	// text holds the member's input text `"name":` (little-endian, zero
	// padded) where it has no escapes and is at most 24 bytes long, and
	// tmask its bytes; otherwise text is zero and tmask[0] 0xFF, which no
	// member text matches (it starts with a quote).
	text, tmask [3]uint64
}

func shapeSlot(pfx0 uint64, n0 int, pfx1 uint64, n1 int) int {
	h := (pfx0^uint64(n0))*0x9E3779B97F4A7C15 + pfx1
	h = (h ^ h>>29 ^ uint64(n1)) * 0xC2B2AE3D27D4EB4F
	return int(h >> (64 - shapeBits))
}

// has reports whether name (with prefix m.pfx) is the k-th name of sh.
func (sh *shape) has(k int, m *member, name []byte) bool {
	if k >= sh.n {
		return false
	}
	e := &sh.names[k]
	if e.pfx != m.pfx || e.n != m.klen {
		return false
	}
	return m.klen <= 8 || string(sh.rest[e.rest:e.end]) == string(name[8:])
}

// reachedNames returns the mask of the names of sh that a pointer from
// the automaton state nd reaches, those for which nd.child is not nil (bit
// k: names[k]; all if nd has a wildcard), which the member loop leaves to
// the general path. (A shape has at most maxShape, 64, names.)
func (sh *shape) reachedNames(nd *node) uint64 {
	if sh.reachedBy == nd {
		return sh.reached
	}
	sh.reachedBy, sh.reached = nd, ^uint64(0)
	if nd.wild != nil {
		return sh.reached
	}
	var mask uint64
	for _, ed := range nd.edges {
		for k := range sh.names[:sh.n] {
			e := &sh.names[k]
			if e.n == len(ed.name) && e.pfx == prefix([]byte(ed.name)) &&
				(e.n <= 8 || string(sh.rest[e.rest:e.end]) == ed.name[8:]) {
				mask |= 1 << k
			}
		}
	}
	sh.reached = mask
	return mask
}

// unreached returns the names of sh up to the first from index idx that
// a pointer from nd reaches.
func (sh *shape) unreached(nd *node, idx int) []shapeName {
	names := sh.names[:sh.n]
	if idx >= len(names) {
		return nil
	}
	r := sh.reachedNames(nd) >> idx << idx
	return names[:min(len(names), bits.TrailingZeros64(r))]
}

func (s *state) remember(sh *shape, ms []member, perm []int32, sorted int, in []byte) {
	sh.gen++
	sh.noFlat, sh.reachedBy = false, nil
	sh.n = len(ms)
	sh.sorted = sorted
	sh.names = sh.names[:0]
	sh.rest = sh.rest[:0]
	for k := range ms {
		e := shapeName{pfx: ms[k].pfx, n: ms[k].klen, rest: len(sh.rest)}
		if ms[k].klen > 8 {
			sh.rest = append(sh.rest, s.name(&ms[k], in)[8:]...)
		}
		e.end = len(sh.rest)
		if m := &ms[k]; !m.kesc && m.klen <= 21 && in[m.ke] == ':' {
			var b [24]byte
			copy(b[:], in[m.ks:m.ke+1])
			e.text = [3]uint64{binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])}
			l := m.klen + 3
			for j := range l {
				e.tmask[j/8] |= 0xFF << (8 * (j % 8))
			}
		} else {
			e.tmask[0] = 0xFF
		}
		sh.names = append(sh.names, e)
	}
	sh.perm = append(sh.perm[:0], perm...)
}

// closeObject writes the object f in canonical form: over its own texts at
// buf[f.open:w] (moved aside first), or, for the top-level object (top),
// after them at buf[w:]. The object's input ends at in[i]. It returns buf
// (grown if need be) and where the object's text now is.
func (s *state) closeObject(buf []byte, w int, f *frame, in []byte, i int, top bool) ([]byte, int, int) {
	ms := s.mem[f.mbase:]
	s.mem = s.mem[:f.mbase]
	s.keys = s.keys[:f.kbase]
	var perm []int32
	if len(ms) > 1 {
		perm = s.order(f, ms, in)
	}
	if top && s.direct {
		s.hashObject(ms, perm, in, buf)
		return buf, 0, 0
	}
	// The object's text is at most its input plus the texts in buf.
	size := i - f.in + 1 + w - f.open

	// Texts in buf are read from src, at their offset less base.
	dst, src, base := f.open, buf, 0
	if top {
		dst = w
	} else if w > f.open {
		region := w - f.open
		if cap(s.tmp) < region+slack {
			s.tmp = make([]byte, 2*region+slack)
		}
		src, base = s.tmp[:cap(s.tmp)], f.open
		copy(src, buf[f.open:w])
	}
	if need := dst + size + len(in) - i + slack; need > len(buf) {
		// size counts twice the input of the texts in buf: the exact
		// size may fit.
		size = 2
		for k := range ms {
			size += ms[k].ke - ms[k].ks + ms[k].ve - ms[k].vs + 2
		}
		if need = dst + size + len(in) - i + slack; need > len(buf) {
			buf = growBuf(buf, w, need+need/4)
		}
		if top {
			src = buf
		}
	}

	o := dst
	buf[o] = '{'
	o++
	// A member whose name and value are verbatim and adjacent in the
	// input ("name":value) is one span; the others go through putMember.
	if perm == nil {
		for k := 0; k < len(ms); k++ {
			m := &ms[k]
			if m.kesc || m.vbuf || m.vs != m.ke+1 {
				o = putMember(buf, o, in, src, base, m)
				continue
			}
			// In a sorted object, the verbatim members that follow it
			// in the input are copied with it, as one span.
			a, end := m.ks, m.ve
			for k+1 < len(ms) {
				next := &ms[k+1]
				if next.ks != end+1 || next.kesc || next.vbuf || next.vs != next.ke+1 || in[end] != ',' {
					break
				}
				end = next.ve
				k++
			}
			o = put(buf, o, in, a, end)
			buf[o] = ','
			o++
		}
	} else {
		o = putPermuted(buf, o, in, src, base, ms, perm)
	}
	if len(ms) == 0 {
		o++
	}
	buf[o-1] = '}'
	return buf, dst, o
}

// hashObject is Sum's way to close the top-level object: it writes to the
// hash the stream's header (s.hdr, then the body's domain and length) and
// the object, members ms in the order perm, from where their texts are
// (buf or in), without writing it out first. Short pieces go through
// s.stage, so that the hash sees few writes.
func (s *state) hashObject(ms []member, perm []int32, in, buf []byte) {
	// stageShort reads up to 32 bytes from where a piece starts, within its
	// capacity: past the end of buf (scratch memory) is fine, past the end
	// of the caller's body is not.
	in = in[:len(in):len(in)]
	size := 2
	if len(ms) > 0 {
		size = 1
	}
	for k := range ms {
		size += ms[k].ke - ms[k].ks + ms[k].ve - ms[k].vs + 2
	}
	s.hdr = binary.AppendUvarint(append(s.hdr, domainJSON), uint64(size))
	s.flushed = false
	if cap(s.stage) < stageSize {
		s.stage = make([]byte, 0, stageSize)
	}
	st := s.stage[:0]
	if len(s.hdr) > stageSize/2 {
		s.flush(s.hdr)
	} else {
		st = append(st, s.hdr...)
	}
	st = append(st, '{')
	for k := range ms {
		m := &ms[k]
		if perm != nil {
			m = &ms[perm[k]]
		}
		var a, b []byte
		if m.kesc || m.vbuf || m.vs != m.ke+1 {
			a, b = in, in
			if m.kesc {
				a = buf
			}
			if m.vbuf {
				b = buf
			}
			a, b = a[m.ks:m.ke], b[m.vs:m.ve]
			if n, ok := stageShort(st, a); ok {
				st = n
			} else {
				st = s.stageWrite(st, a)
			}
			st = append(st, ':')
		} else {
			b = in[m.ks:m.ve]
		}
		if n, ok := stageShort(st, b); ok {
			st = n
		} else {
			st = s.stageWrite(st, b)
		}
		st = append(st, ',')
	}
	if len(ms) == 0 {
		st = append(st, '}')
	}
	st[len(st)-1] = '}'
	switch {
	case s.flushed:
		s.flush(st)
	case s.local:
		// The whole stream is in the stage: two maphash.Bytes (finish
		// takes s.sum). The SHA-256 midstate shortcuts below are not
		// for this digest.
		s.localSum(st)
	case s.hdrReused && s.hdrLen >= sha256.BlockSize:
		s.flush(st) // for a header reused, without its first blocks
	case len(st) >= 2*sha256.BlockSize && s.resumeBlock(st):
		s.d.Write(st[sha256.BlockSize:])
	default:
		// The whole stream is in the stage: one call, without the
		// digest's state (finish takes s.sum).
		s.sum = sha256.Sum256(st)
		s.summed = true
	}
	s.stage = st
	s.hashed = true
}

// resumeBlock sets s.d to its state after the first 64-byte block of the
// stream st and reports whether it did (if not, s.d is unspecified and the
// caller hashes st whole). The state is saved from the second stream in a
// row that starts with the block and restored for the streams that follow:
// the streams of one operation's requests mostly start with the same block
// (the header, up to the path and beyond). A stream whose first block is
// not the last stream's costs the copy of the block.
func (s *state) resumeBlock(st []byte) bool {
	blk := st[:sha256.BlockSize]
	if string(blk) != string(s.blk0[:]) {
		copy(s.blk0[:], blk)
		s.blk0Saved = false
		return false
	}
	if s.blk0Saved {
		u, ok := s.d.(encoding.BinaryUnmarshaler)
		return ok && u.UnmarshalBinary(s.blk0State) == nil
	}
	a, ok := s.d.(encoding.BinaryAppender)
	if !ok {
		return false
	}
	s.d.Reset()
	s.d.Write(blk)
	st0, err := a.AppendBinary(s.blk0State[:0])
	if err != nil {
		return false
	}
	s.blk0State, s.blk0Saved = st0, true
	return true
}

// flush writes p to the hash; if hashObject has not written to it yet, p
// is the start of the stream, and the hash starts afresh or, for a header
// reused, from its state after the header's whole blocks (resetDigest).
func (s *state) flush(p []byte) {
	if !s.flushed {
		p = p[s.resetDigest():]
		s.flushed = true
	}
	s.d.Write(p)
}

// stageSize is the size of state.stage; a piece of at least a quarter of
// it is written to the hash directly.
const stageSize = 2048

// stageShort appends a p of at most 32 bytes to the stage st when both
// have room for 32 (p's capacity, st's with two bytes to spare) and
// reports whether it did: two 16-byte moves (a 32-byte one calls
// memmove); the bytes past p are overwritten later. Small enough to be
// inlined in hashObject's member loop, where stageWrite is not.
func stageShort(st, p []byte) ([]byte, bool) {
	l := len(st)
	if len(p) > 32 || cap(p) < 32 || l+32+2 > cap(st) {
		return st, false
	}
	d, t := st[l:l+32], p[:32]
	*(*[16]byte)(d) = *(*[16]byte)(t)
	*(*[16]byte)(d[16:]) = *(*[16]byte)(t[16:])
	return st[:l+len(p)], true
}

// stageWrite appends p to the stage st, or writes the stage and p to the
// hash if p is long or the stage full, keeping room in st for two more
// bytes.
func (s *state) stageWrite(st, p []byte) []byte {
	if n, ok := stageShort(st, p); ok {
		return n
	}
	if len(st)+len(p)+2 > cap(st) {
		s.flush(st)
		st = st[:0]
		if len(p) >= stageSize/4 {
			s.d.Write(p)
			return st
		}
	}
	// A long piece that fits is staged too: copying it costs less than
	// the digest's state handling that writing it apart brings (a stream
	// that fits the stage is then hashed with one sha256.Sum256, or, for a
	// process-local fingerprint, two maphash.Bytes).
	return append(st, p...)
}

// putPermuted writes the members ms in the order perm at buf[o:], each
// followed by a comma, and returns the index after them. (A function of
// its own, so that its loop keeps its state in registers.)
func putPermuted(buf []byte, o int, in, src []byte, base int, ms []member, perm []int32) int {
	for _, p := range perm {
		m := &ms[p]
		if m.kesc || m.vbuf || m.vs != m.ke+1 {
			o = putMember(buf, o, in, src, base, m)
			continue
		}
		a, b := m.ks, m.ve
		if l := uint(b - a); l <= 32 && a+32 <= len(in) && o+33 <= len(buf) {
			// The member and its comma, most often, in two 16-byte
			// moves (a 32-byte array copy would call memmove).
			d := buf[o : o+33]
			t := in[a : a+32]
			*(*[16]byte)(d) = *(*[16]byte)(t)
			*(*[16]byte)(d[16:]) = *(*[16]byte)(t[16:])
			d[l] = ','
			o += int(l) + 1
			continue
		}
		o = put(buf, o, in, a, b)
		buf[o] = ','
		o++
	}
	return o
}

// putMember writes the member m, name ':' value ',', at buf[o:] and returns
// the index after it; its texts in buf are read from src, at their offset
// less base.
func putMember(buf []byte, o int, in, src []byte, base int, m *member) int {
	if m.kesc {
		o = put(buf, o, src, m.ks-base, m.ke-base)
	} else {
		o = put(buf, o, in, m.ks, m.ke)
	}
	buf[o] = ':'
	o++
	if m.vbuf {
		o = put(buf, o, src, m.vs-base, m.ve-base)
	} else {
		o = put(buf, o, in, m.vs, m.ve)
	}
	buf[o] = ','
	return o + 1
}

// put copies src[a:b] to dst[o:] and returns the index after it. A span
// of up to 32 bytes is copied as two 16-byte blocks where src has the
// bytes; dst always has the room (slack). (Small enough to be inlined.)
func put(dst []byte, o int, src []byte, a, b int) int {
	if l := b - a; l <= 32 && a+32 <= len(src) {
		d, t := dst[o:o+32], src[a:a+32]
		*(*[16]byte)(d) = *(*[16]byte)(t)
		*(*[16]byte)(d[16:]) = *(*[16]byte)(t[16:])
		return o + l
	}
	return o + copy(dst[o:], src[a:b])
}

// order returns the canonical order of the members ms of the object f, or
// nil if it is their order of arrival.
func (s *state) order(f *frame, ms []member, in []byte) []int32 {
	sh := &s.shapes[f.slot]
	if s.shapeOK(f) {
		if len(ms) == sh.n {
			if len(sh.perm) > 0 {
				return sh.perm
			}
			return nil
		}
		// A proper prefix of the cached shape.
		f.unsorted = len(ms)-1 > sh.sorted
	}
	if !f.unsorted {
		if len(ms) <= maxShape {
			s.remember(sh, ms, nil, len(ms)-1, in)
		}
		return nil
	}
	if s.foldCollide(ms, in) {
		// Names equal under case folding: the members keep their order
		// of arrival (see the package documentation), and so do the
		// objects of this shape (arrival as its permutation).
		if len(ms) <= maxShape {
			s.remember(sh, ms, arrival[:len(ms)], s.sortedPrefix(ms, in), in)
		}
		return nil
	}
	keys, tmp := s.keysFor(len(ms))
	for k := range ms {
		keys = append(keys, sortKey{ms[k].pfx, sortLen(ms[k].klen), int32(k)})
	}
	sortByKey(keys, tmp, func(k int32) []byte { return s.name(&ms[k], in)[8:] })
	perm := s.permFor(len(keys))
	for _, e := range keys {
		perm = append(perm, e.idx)
	}
	if len(ms) <= maxShape {
		s.remember(sh, ms, perm, s.sortedPrefix(ms, in), in)
		return sh.perm
	}
	return perm
}

// sortedPrefix returns the index of the last of the names of ms that are
// in order from the first.
func (s *state) sortedPrefix(ms []member, in []byte) int {
	sorted := 0
	for sorted+1 < len(ms) && s.cmpNames(&ms[sorted], &ms[sorted+1], in) <= 0 {
		sorted++
	}
	return sorted
}

// foldCollide reports whether two of the members ms have distinct names
// that are equal under case folding as encoding/json matches a member
// name to a struct field (its foldName: ASCII letters to upper case, any
// other rune to the smallest rune of its unicode.SimpleFold orbit, so "ſ"
// folds as "S" and "K", the Kelvin sign, as "K"), which bytes.EqualFold
// tells too.
//
// Names without an upper-case ASCII letter and without a byte from 0x80
// fold one to one (only a-z change, to A-Z, which they do not hold): two
// of them fold alike only if they are equal. So an object none of whose
// names has such a byte (the common case) is told by a scan of its names.
// Another folds its names, compares them pairwise if it has few, else
// finds equal folded names through a hash table (no quadratic work for a
// large object, whatever its names: the table's hash has a seed of the
// process, and holds one name per folded name, so duplicates cost nothing
// more; the answer never depends on the seed, every hit is compared).
func (s *state) foldCollide(ms []member, in []byte) bool {
	first := -1
	for k := range ms {
		for _, c := range s.name(&ms[k], in) {
			if c-'A' < 26 || c >= utf8.RuneSelf {
				first = k
				break
			}
		}
		if first >= 0 {
			break
		}
	}
	if first < 0 {
		return false
	}
	fold, ends := s.fold[:0], s.foldEnd[:0]
	for k := range ms {
		fold = appendFolded(fold, s.name(&ms[k], in))
		ends = append(ends, int32(len(fold)))
	}
	s.fold, s.foldEnd = fold, ends
	folded := func(k int) []byte {
		a := int32(0)
		if k > 0 {
			a = ends[k-1]
		}
		return fold[a:ends[k]]
	}
	// differ reports whether the names of members j and k differ.
	differ := func(j, k int) bool {
		return string(s.name(&ms[j], in)) != string(s.name(&ms[k], in))
	}
	if len(ms) <= 16 {
		for k := 1; k < len(ms); k++ {
			fk := folded(k)
			for j := range k {
				if string(folded(j)) == string(fk) && differ(j, k) {
					return true
				}
			}
		}
		return false
	}
	size := 1 << bits.Len(uint(2*len(ms)))
	if cap(s.foldTab) < size {
		s.foldTab = make([]foldEntry, size)
	}
	tab := s.foldTab[:size]
	clear(tab)
	mask := uint64(size - 1)
	for k := range ms {
		fk := folded(k)
		h := maphash.Bytes(foldSeed, fk)
		for p := h & mask; ; p = (p + 1) & mask {
			e := &tab[p]
			if e.idx == 0 {
				e.h, e.idx = h, int32(k+1)
				break
			}
			if e.h == h && string(folded(int(e.idx-1))) == string(fk) {
				if differ(int(e.idx-1), k) {
					return true
				}
				break // the same name again
			}
		}
	}
	return false
}

// foldEntry is an entry of foldCollide's hash table: the hash of a folded
// name and 1 + the index of its member (0: empty).
type foldEntry struct {
	h   uint64
	idx int32
}

// foldSeed is the seed of foldCollide's hash table.
var foldSeed = maphash.MakeSeed()

// appendFolded appends name folded as encoding/json's foldName does (for
// valid UTF-8, which names are here). A folded name is never longer than
// the name (the smallest rune of an orbit has the fewest bytes).
func appendFolded(out, name []byte) []byte {
	out = slices.Grow(out, len(name))
	o := len(out)
	out = out[:o+len(name)]
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if c-'a' < 26 {
				c -= 'a' - 'A'
			}
			out[o] = c
			o++
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		o += utf8.EncodeRune(out[o:], foldRune(r))
		i += n
	}
	return out[:o]
}

// foldRune returns the smallest rune of r's unicode.SimpleFold orbit (as
// encoding/json's foldRune).
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// closeArray closes the array f, whose last element's comma is buf[w-1],
// and returns the new end of the output.
func (s *state) closeArray(buf []byte, w int, f *frame) int {
	if f.record {
		ms := s.elems[f.ebase:]
		s.elems = s.elems[:f.ebase]
		if len(ms) > 1 {
			// Elements sort by their canonical text, each followed by
			// a comma in buf (buf has slack past w for the 8-byte
			// loads). A canonical text has no NUL byte, so the
			// zero-padded key orders it as its bytes do.
			keys, tmp := s.keysFor(len(ms))
			for k := range ms {
				a, end := ms[k], w
				if k+1 < len(ms) {
					end = ms[k+1]
				}
				l := end - 1 - a
				keys = append(keys, sortKey{nameKey(binary.LittleEndian.Uint64(buf[a:]), l), sortLen(l), int32(k)})
			}
			sortByKey(keys, tmp, func(k int32) []byte {
				end := w
				if int(k)+1 < len(ms) {
					end = ms[k+1]
				}
				return buf[ms[k]+8 : end-1]
			})
			perm := s.permFor(len(keys))
			for _, e := range keys {
				perm = append(perm, e.idx)
			}
			s.gather(buf, w, ms, perm, f.open+1)
		}
	}
	if w == f.open+1 {
		buf[w] = ']'
		return w + 1
	}
	buf[w-1] = ']'
	return w
}

// gather rewrites buf[body:w] with the spans that start at ms, in the
// order perm.
func (s *state) gather(buf []byte, w int, ms []int, perm []int32, body int) {
	size := w - body
	if cap(s.tmp) < size+16 {
		s.tmp = make([]byte, 0, 2*size+16)
	}
	tmp := s.tmp[:cap(s.tmp)]
	t := 0
	for _, p := range perm {
		a, end := ms[p], w
		if int(p)+1 < len(ms) {
			end = ms[p+1]
		}
		// Copy in 16-byte blocks: buf has slack after w, tmp after size.
		for ; a < end; a += 16 {
			*(*[16]byte)(tmp[t:]) = *(*[16]byte)(buf[a:])
			t += min(16, end-a)
		}
	}
	copy(buf[body:w], tmp[:size])
}
