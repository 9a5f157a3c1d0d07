package fingerprint

import "strconv"

// maxExp bounds the magnitude of a number's exponent (as written); a
// larger exponent on a non-zero number makes the body be hashed raw.
const maxExp = 1_000_000_000_000_000

// maxPlainDigits is where the canonical layout of numbers switches to
// exponent notation, as in ECMAScript's Number::toString.
const maxPlainDigits = 21

func leadingZeros(b []byte) int {
	k := 0
	for k < len(b) && b[k] == '0' {
		k++
	}
	return k
}

// verbatimNumber returns the end of the number at in[i] if it is written
// in canonical form already and has no exponent, else -1 (for the general
// path to decide): an integer of at most 21 digits, or a fraction without
// trailing zeros and, for |x| < 1, fewer than 6 leading zeros.
func verbatimNumber(in []byte, i int) int {
	n := len(in)
	neg := in[i] == '-'
	if neg {
		i++
	}
	start := i
	if i >= n || !isDigit(in[i]) {
		return -1
	}
	if in[i] == '0' {
		i++
	} else {
		for i < n && isDigit(in[i]) {
			i++
		}
		if i-start > maxPlainDigits {
			return -1
		}
	}
	if i < n && in[i] == '.' {
		i++
		fs := i
		for i < n && isDigit(in[i]) {
			i++
		}
		if i == fs || in[i-1] == '0' || (in[start] == '0' && leadingZeros(in[fs:i]) >= 6) {
			return -1
		}
	} else if in[start] == '0' && neg {
		return -1 // "-0"
	}
	if i < n && (in[i]|0x20 == 'e' || isDigit(in[i])) {
		return -1
	}
	return i
}

// nonDigit flags, in the high bit of each byte, the bytes of x that are
// not ASCII digits. As in special, the lowest flagged byte is exact (the
// borrows and carries of the bytes below it are flagged themselves).
func nonDigit(x uint64) uint64 {
	return ((x + 0x46*lsb) | (x - 0x30*lsb) | x) & msb
}

// number writes the canonical form of the JSON number at in[i] to buf[w:]
// and returns buf (which it grows when the canonical form is longer than
// the input) and the indexes after the number in in and buf. If lazy and
// the number is already canonical (verbatim), it writes nothing. See the
// package documentation for the form.
func (s *state) number(buf []byte, w int, in []byte, i int, lazy bool) ([]byte, int, int, bool, string) {
	n := len(in)
	start := i
	if in[i] == '-' {
		i++
	}
	if i >= n {
		return buf, i, w, false, errNumber
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
		return buf, i, w, false, errNumber
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
			return buf, i, w, false, errNumber
		}
		fracEnd = i
	}
	var e int64
	if i < n && in[i]|0x20 == 'e' {
		ep := i
		i++
		neg := false
		if i < n && (in[i] == '+' || in[i] == '-') {
			neg = in[i] == '-'
			i++
		}
		es := i
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
			return buf, i, w, false, errNumber
		}
		if neg {
			e = -e
		}
		if big || e >= maxExp || e <= -maxExp {
			if leadingZeros(in[intStart:intEnd]) == intEnd-intStart && leadingZeros(in[fracStart:fracEnd]) == fracEnd-fracStart {
				buf[w] = '0' // zero with any exponent is zero
				return buf, i, w + 1, false, ""
			}
			return buf, start, w, false, errExp
		}
		// Fast path: the number is in canonical exponent form already
		// (see numberSlow): one non-zero integer digit, a fraction
		// without trailing zeros, and "e+" or "e-" with an exponent
		// without leading zeros, of a number that is written so.
		if intEnd-intStart == 1 && in[intStart] != '0' && in[fracEnd-1] != '0' && in[ep] == 'e' && in[es] != '0' &&
			(e >= maxPlainDigits && in[ep+1] == '+' || e <= -7 && in[ep+1] == '-') {
			if lazy {
				return buf, i, w, true, ""
			}
			w += copy(buf[w:], in[start:i])
			return buf, i, w, false, ""
		}
	} else {
		// Fast path, no exponent: the canonical form is the input less
		// the trailing zeros of the fraction, unless the number is large
		// or has many leading fraction zeros.
		fe := fracEnd
		for fe > fracStart && in[fe-1] == '0' {
			fe--
		}
		end := -1 // the canonical form is in[start:end]
		if in[intStart] != '0' {
			if intEnd-intStart <= maxPlainDigits {
				end = intEnd
				if fe > fracStart {
					end = fe
				}
			}
		} else {
			if fe == fracStart {
				if lazy && i-start == 1 {
					return buf, i, w, true, "" // "0"
				}
				buf[w] = '0'
				return buf, i, w + 1, false, ""
			}
			if leadingZeros(in[fracStart:fe]) < 6 {
				end = fe
			}
		}
		if end >= 0 {
			if lazy && end == i {
				return buf, i, w, true, ""
			}
			if l := end - start; l <= 16 && start+16 <= n {
				*(*[16]byte)(buf[w:]) = *(*[16]byte)(in[start:])
				return buf, i, w + l, false, ""
			}
			w += copy(buf[w:], in[start:end])
			return buf, i, w, false, ""
		}
	}
	buf, w = s.numberSlow(buf, w, in[start] == '-', in[intStart:intEnd], in[fracStart:fracEnd], e, len(in)-i)
	return buf, i, w, false, ""
}

// numberSlow writes ±(intDigits.fracDigits)×10^e in the canonical layout;
// rest is how much input follows, for the slack buf must keep.
func (s *state) numberSlow(buf []byte, w int, neg bool, intDigits, fracDigits []byte, e int64, rest int) ([]byte, int) {
	num := append(append(s.num[:0], intDigits...), fracDigits...)
	s.num = num
	lz := leadingZeros(num)
	if lz == len(num) {
		buf[w] = '0'
		return buf, w + 1
	}
	tz := 0
	for num[len(num)-1-tz] == '0' {
		tz++
	}
	d := num[lz : len(num)-tz]
	k := int64(len(d))
	// value = d × 10^(e - len(frac) + tz); p is where the decimal point
	// goes, counted from the start of d.
	p := k + e - int64(len(fracDigits)) + int64(tz)
	// The longest form: sign, d, 21 zeros or "0." and 6 zeros, or a
	// point and "e+" with up to 17 exponent digits.
	if need := w + int(k) + 32 + rest + slack; need > len(buf) {
		buf = growBuf(buf, w, need)
	}
	if neg {
		buf[w] = '-'
		w++
	}
	switch {
	case k <= p && p <= maxPlainDigits:
		w += copy(buf[w:], d)
		for range p - k {
			buf[w] = '0'
			w++
		}
	case 0 < p && p <= maxPlainDigits:
		w += copy(buf[w:], d[:p])
		buf[w] = '.'
		w++
		w += copy(buf[w:], d[p:])
	case -6 < p && p <= 0:
		buf[w], buf[w+1] = '0', '.'
		w += 2
		for range -p {
			buf[w] = '0'
			w++
		}
		w += copy(buf[w:], d)
	default:
		buf[w] = d[0]
		w++
		if k > 1 {
			buf[w] = '.'
			w++
			w += copy(buf[w:], d[1:])
		}
		buf[w] = 'e'
		w++
		if p-1 >= 0 {
			buf[w] = '+'
			w++
		}
		var tmp [24]byte
		w += copy(buf[w:], strconv.AppendInt(tmp[:0], p-1, 10))
	}
	return buf, w
}

// growBuf returns a buffer of length at least need holding buf[:w].
func growBuf(buf []byte, w, need int) []byte {
	nb := make([]byte, max(need, 2*len(buf)))
	copy(nb, buf[:w])
	return nb
}
