package fingerprint_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A random JSON value model for property tests: each value can be written
// in many equivalent spellings (member order, white space, number and
// string spelling), and any leaf can be changed.

type jv interface{ isJV() }

type (
	jnull struct{}
	jbool bool
	// jnum is (neg ? -1 : 1) × digits × 10^exp; digits has no leading or
	// trailing zeros, or is "0" for zero.
	jnum struct {
		neg    bool
		digits string
		exp    int
	}
	jstr string
	jarr []jv
	jobj []jmember // names are unique
)

type jmember struct {
	name string
	val  jv
}

// foldCollides reports whether two names of o are distinct but equal
// under case folding.
func (o jobj) foldCollides() bool {
	names := make([]string, len(o))
	for i := range o {
		names[i] = o[i].name
	}
	return foldCollides(names)
}

func (jnull) isJV() {}
func (jbool) isJV() {}
func (jnum) isJV()  {}
func (jstr) isJV()  {}
func (jarr) isJV()  {}
func (jobj) isJV()  {}

var shortEscapes = map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}

var nameAlphabet = []string{"a", "b", "id", "name", "x", "é", "\"", "\\", "/", "\n", "~", "日本", "😀", "A", "\x00", "\x7f"}

func randString(r *rand.Rand, max int) string {
	var b strings.Builder
	for range r.IntN(max + 1) {
		switch r.IntN(6) {
		case 0:
			b.WriteString(nameAlphabet[r.IntN(len(nameAlphabet))])
		case 1:
			b.WriteRune(rune(r.IntN(0x20))) // control
		case 2:
			b.WriteRune(rune(0x80 + r.IntN(0x800)))
		case 3:
			b.WriteRune(rune(0x10000 + r.IntN(0x1000)))
		default:
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func randNum(r *rand.Rand) jnum {
	if r.IntN(8) == 0 {
		return jnum{digits: "0"}
	}
	var d strings.Builder
	nd := 1 + r.IntN(25)
	d.WriteByte(byte('1' + r.IntN(9)))
	for k := 1; k < nd; k++ {
		d.WriteByte(byte('0' + r.IntN(10)))
	}
	digits := strings.TrimRight(d.String(), "0")
	return jnum{neg: r.IntN(3) == 0, digits: digits, exp: r.IntN(61) - 30}
}

func randValue(r *rand.Rand, depth int) jv {
	k := r.IntN(10)
	if depth <= 0 && k >= 7 {
		k = r.IntN(7)
	}
	switch k {
	case 0:
		return jnull{}
	case 1:
		return jbool(r.IntN(2) == 0)
	case 2, 3:
		return randNum(r)
	case 4, 5, 6:
		return jstr(randString(r, 8))
	case 7, 8:
		a := make(jarr, r.IntN(5))
		for i := range a {
			a[i] = randValue(r, depth-1)
		}
		return a
	}
	var o jobj
	seen := map[string]bool{}
	for range r.IntN(6) {
		name := randString(r, 4)
		if seen[name] {
			continue
		}
		seen[name] = true
		o = append(o, jmember{name, randValue(r, depth-1)})
	}
	return o
}

// withFoldVariants returns v with, in some of its objects, a member more
// whose name is a case variant of one before it (encoding/json gives a
// struct field the value of the last of them).
func withFoldVariants(r *rand.Rand, v jv) jv {
	switch v := v.(type) {
	case jarr:
		out := make(jarr, len(v))
		for i := range v {
			out[i] = withFoldVariants(r, v[i])
		}
		return out
	case jobj:
		out := make(jobj, 0, len(v)+1)
		for _, m := range v {
			out = append(out, jmember{m.name, withFoldVariants(r, m.val)})
		}
		if len(out) > 0 && r.IntN(3) == 0 {
			name := foldVariant(r, out[r.IntN(len(out))].name)
			if !slices.ContainsFunc(out, func(m jmember) bool { return m.name == name }) {
				at := r.IntN(len(out) + 1)
				out = slices.Insert(out, at, jmember{name, randValue(r, 1)})
			}
		}
		return out
	}
	return v
}

// foldVariant returns name with its case changed (ASCII and other
// letters; k as the Kelvin sign, s as the long s, at random), or name if
// it has no letters.
func foldVariant(r *rand.Rand, name string) string {
	var b strings.Builder
	for _, c := range name {
		switch {
		case (c == 'k' || c == 'K') && r.IntN(2) == 0:
			c = '\u212a'
		case (c == 's' || c == 'S') && r.IntN(2) == 0:
			c = '\u017f'
		case unicode.IsUpper(c):
			c = unicode.ToLower(c)
		default:
			c = unicode.ToUpper(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writer writes spellings of values.
type writer struct {
	r      *rand.Rand
	b      bytes.Buffer
	vary   bool // random spellings; else one plain spelling
	escape bool // escape characters at random
}

func (w *writer) ws() {
	if !w.vary {
		return
	}
	for range w.r.IntN(3) {
		if w.r.IntN(3) == 0 {
			w.b.WriteByte(" \t\n\r"[w.r.IntN(4)])
		}
	}
}

func (w *writer) value(v jv) {
	w.ws()
	switch v := v.(type) {
	case jnull:
		w.b.WriteString("null")
	case jbool:
		w.b.WriteString(strconv.FormatBool(bool(v)))
	case jnum:
		w.num(v)
	case jstr:
		w.str(string(v))
	case jarr:
		w.b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				w.ws()
				w.b.WriteByte(',')
			}
			w.value(e)
		}
		w.ws()
		w.b.WriteByte(']')
	case jobj:
		order := make([]int, len(v))
		for i := range order {
			order[i] = i
		}
		// Names equal under case folding keep their order in the
		// canonical form, and with them the whole object's.
		if w.vary && !v.foldCollides() {
			w.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		w.b.WriteByte('{')
		for k, i := range order {
			if k > 0 {
				w.ws()
				w.b.WriteByte(',')
			}
			w.ws()
			w.str(v[i].name)
			w.ws()
			w.b.WriteByte(':')
			w.value(v[i].val)
		}
		w.ws()
		w.b.WriteByte('}')
	}
	w.ws()
}

func (w *writer) str(s string) {
	w.b.WriteByte('"')
	for _, c := range s {
		esc := w.escape && w.r.IntN(4) == 0
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			esc = true
		case c == '/' && esc:
			w.b.WriteString(`\/`)
			continue
		}
		if !esc {
			w.b.WriteRune(c)
			continue
		}
		if e, ok := shortEscapes[c]; ok && (!w.vary || w.r.IntN(2) == 0) {
			w.b.WriteString(e)
			continue
		}
		hexf := "\\u%04x"
		if w.vary && w.r.IntN(2) == 0 {
			hexf = "\\u%04X"
		}
		if c >= 0x10000 {
			c -= 0x10000
			fmt.Fprintf(&w.b, hexf+hexf, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
			continue
		}
		fmt.Fprintf(&w.b, hexf, c)
	}
	w.b.WriteByte('"')
}

// num writes n as ±m.f×10^x for a random place of the point and padding.
func (w *writer) num(n jnum) {
	if n.neg {
		w.b.WriteByte('-')
	}
	if n.digits == "0" {
		w.b.WriteByte('0')
		if w.vary && w.r.IntN(2) == 0 {
			w.b.WriteString("." + strings.Repeat("0", 1+w.r.IntN(3)))
		}
		if w.vary && w.r.IntN(2) == 0 {
			fmt.Fprintf(&w.b, "e%d", w.r.IntN(40)-20)
		}
		return
	}
	digits, exp := n.digits, n.exp
	if w.vary {
		// Pad with trailing zeros (moving the exponent).
		pad := w.r.IntN(3)
		digits += strings.Repeat("0", pad)
		exp -= pad
	}
	// Place the point after p digits (0 <= p <= len), so the value is
	// 0.|int.frac|×10^(exp+len-p)... written as int "." frac "e" x.
	p := len(digits)
	if w.vary {
		p = w.r.IntN(len(digits) + 1)
	}
	intPart, frac := digits[:p], digits[p:]
	x := exp + len(frac)
	if intPart == "" {
		intPart = "0"
	}
	if !w.vary && x < 0 && -x <= len(digits) {
		// A plain spelling for the un-varied writer when possible.
		p = len(digits) + x
		intPart, frac = digits[:p], digits[p:]
		x = 0
		if intPart == "" {
			intPart = "0"
		}
	}
	if w.vary && x > 0 && x < 5 && frac == "" && w.r.IntN(2) == 0 {
		intPart += strings.Repeat("0", x)
		x = 0
	}
	w.b.WriteString(intPart)
	if frac != "" {
		w.b.WriteString("." + frac)
	}
	if x != 0 || (w.vary && w.r.IntN(4) == 0) {
		e := "e"
		if w.vary && w.r.IntN(2) == 0 {
			e = "E"
		}
		sign := ""
		if x >= 0 && w.vary && w.r.IntN(2) == 0 {
			sign = "+"
		}
		zeros := ""
		if w.vary && w.r.IntN(3) == 0 {
			zeros = "0"
		}
		if x < 0 {
			sign, x = "-", -x
		}
		fmt.Fprintf(&w.b, "%s%s%s%d", e, sign, zeros, x)
	}
}

func spell(r *rand.Rand, v jv, vary bool) []byte {
	w := &writer{r: r, vary: vary, escape: vary}
	w.value(v)
	return w.b.Bytes()
}

// leaves counts the leaves (scalars) of v.
func leaves(v jv) int {
	switch v := v.(type) {
	case jarr:
		n := 0
		for _, e := range v {
			n += leaves(e)
		}
		return n
	case jobj:
		n := 0
		for _, m := range v {
			n += leaves(m.val)
		}
		return n
	}
	return 1
}

// mutate returns v with leaf k changed to a different value, and the JSON
// pointer of that leaf.
func mutate(r *rand.Rand, v jv, k int, ptr string) (jv, string, int) {
	switch v := v.(type) {
	case jarr:
		out := slices.Clone(v)
		for i, e := range v {
			var p string
			out[i], p, k = mutate(r, e, k, ptr+"/"+strconv.Itoa(i))
			if k < 0 {
				return out, p, k
			}
		}
		return out, "", k
	case jobj:
		out := slices.Clone(v)
		for i, m := range v {
			var p string
			name := strings.NewReplacer("~", "~0", "/", "~1").Replace(m.name)
			out[i].val, p, k = mutate(r, m.val, k, ptr+"/"+name)
			if k < 0 {
				return out, p, k
			}
		}
		return out, "", k
	}
	if k > 0 {
		return v, "", k - 1
	}
	return changed(r, v), ptr, -1
}

func changed(r *rand.Rand, v jv) jv {
	switch v := v.(type) {
	case jnull:
		return jbool(false)
	case jbool:
		return !v
	case jnum:
		if v.digits == "0" {
			return jnum{digits: "1"}
		}
		switch r.IntN(3) {
		case 0:
			v.neg = !v.neg
		case 1:
			v.exp++
		default:
			v.digits += "1" // one more significant digit
		}
		return v
	case jstr:
		if len(v) > 0 && r.IntN(2) == 0 {
			_, size := utf8.DecodeLastRuneInString(string(v))
			return v[:len(v)-size]
		}
		return v + jstr(rune('a'+r.IntN(26)))
	}
	panic("not a leaf")
}

// oracleEqual decodes a and b with encoding/json (numbers as json.Number)
// and compares them, numbers by exact rational value.
func oracleEqual(a, b []byte) (bool, error) {
	va, err := decodeOracle(a)
	if err != nil {
		return false, err
	}
	vb, err := decodeOracle(b)
	if err != nil {
		return false, err
	}
	return oracleDeepEqual(va, vb), nil
}

// decodeOracle decodes b as encoding/json does into an any (objects as
// map[string]any, numbers as json.Number), except that an object with two
// distinct names equal under case folding is an oobj: the canonical form
// keeps the order of its members (a struct field gets the value of the
// last of them).
func decodeOracle(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data")
	}
	d = json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return decodeOrdered(d)
}

// oobj is an object with two distinct names equal under case folding
// (bytes.EqualFold, as encoding/json matches names to struct fields): its
// members in their order.
type oobj []okv

type okv struct {
	name string
	val  any
}

// decodeOrdered decodes the next value of d (valid JSON) as decodeOracle.
func decodeOrdered(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		a := []any{}
		for d.More() {
			v, err := decodeOrdered(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	case json.Delim('{'):
		var o oobj
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(d)
			if err != nil {
				return nil, err
			}
			o = append(o, okv{k.(string), v})
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		names := make([]string, len(o))
		for i := range o {
			names[i] = o[i].name
		}
		if foldCollides(names) {
			return o, nil
		}
		m := make(map[string]any, len(o))
		for _, kv := range o {
			m[kv.name] = kv.val // the last of equal names, as encoding/json
		}
		return m, nil
	}
	return tok, nil
}

// foldCollides reports whether two of names are distinct but equal under
// case folding (bytes.EqualFold, which encoding/json's foldName matches).
func foldCollides(names []string) bool {
	for i := range names {
		for j := range i {
			if names[i] != names[j] && bytes.EqualFold([]byte(names[i]), []byte(names[j])) {
				return true
			}
		}
	}
	return false
}

func oracleDeepEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, ok1 := new(big.Rat).SetString(string(a))
		rb, ok2 := new(big.Rat).SetString(string(b))
		return ok1 && ok2 && ra.Cmp(rb) == 0
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !oracleDeepEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case oobj:
		b, ok := b.(oobj)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i].name != b[i].name || !oracleDeepEqual(a[i].val, b[i].val) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !oracleDeepEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}
