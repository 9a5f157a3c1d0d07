package fingerprint

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCopyStringUnicodeEscapes checks copyString's inline \uXXXX path
// against decodeEscape and putCanonicalRune, for every code unit, in lower
// and upper case, alone and with a second escape after it.
func TestCopyStringUnicodeEscapes(t *testing.T) {
	buf := make([]byte, 64)
	want := make([]byte, 64)
	for u := range 0x10000 {
		for _, f := range []string{`"\u%04x"`, `"\u%04X"`, `"a\u%04xb\u0041"`, `"\u%04x\udc00"`} {
			in := []byte(fmt.Sprintf(f, u))
			i, w, changed, reason := copyString(buf, 0, in, 0)
			// The reference: escapes decoded one by one.
			ref, j, ok := []byte{'"'}, 1, true
			for j < len(in)-1 {
				if in[j] != '\\' {
					ref = append(ref, in[j])
					j++
					continue
				}
				r, size, good := decodeEscape(in, j)
				if !good {
					ok = false
					break
				}
				n := putCanonicalRune(want, 0, r)
				ref = append(ref, want[:n]...)
				j += size
			}
			ref = append(ref, '"')
			if !ok {
				if reason == "" {
					t.Fatalf("%s: accepted, as %q", in, buf[:w])
				}
				continue
			}
			if reason != "" || i != len(in) || string(buf[:w]) != string(ref) || !changed {
				t.Fatalf("%s: got %q %d %v %q, want %q", in, buf[:w], i, changed, reason, ref)
			}
		}
	}
}

// TestNumberExponentFastPath checks number's fast path for numbers in
// canonical exponent form against numberSlow, lazy or not.
func TestNumberExponentFastPath(t *testing.T) {
	s := getState()
	defer putState(s)
	ints := []string{"0", "1", "9", "12", "-1", "-0", "-7"}
	fracs := []string{"", ".0", ".5", ".50", ".123", ".05"}
	exps := []string{"e", "E", "e+", "e-", "E-", "E+"}
	digits := []string{"0", "5", "6", "7", "8", "07", "20", "21", "22", "021", "99", "100", "308", "999999"}
	for _, ip := range ints {
		for _, fp := range fracs {
			for _, ep := range exps {
				for _, d := range digits {
					num := ip + fp + ep + d
					in := []byte(num + ",")
					buf := make([]byte, 128)
					// The oracle: numberSlow on the parts.
					neg := ip[0] == '-'
					intDigits := []byte(ip)
					if neg {
						intDigits = intDigits[1:]
					}
					var frac []byte
					if fp != "" {
						frac = []byte(fp[1:])
					}
					var e int64
					e, _ = strconv.ParseInt(d, 10, 64)
					if ep[len(ep)-1] == '-' {
						e = -e
					}
					ref := make([]byte, 128)
					ref, rw := s.numberSlow(ref, 0, neg, intDigits, frac, e, 1)
					want := string(ref[:rw])

					_, i, w, verbatim, reason := s.number(buf, 0, in, 0, false)
					if reason != "" || i != len(num) || verbatim || string(buf[:w]) != want {
						t.Fatalf("%s: got %q %d %v %q, want %q", num, buf[:w], i, verbatim, reason, want)
					}
					_, i, w, verbatim, reason = s.number(buf, 0, in, 0, true)
					got := string(buf[:w])
					if verbatim {
						got = num
					}
					if reason != "" || i != len(num) || got != want {
						t.Fatalf("%s lazy: got %q %d %v %q, want %q", num, got, i, verbatim, reason, want)
					}
				}
			}
		}
	}
}

// TestCopyStringSolidus checks the inline \/ case of copyString.
func TestCopyStringSolidus(t *testing.T) {
	buf := make([]byte, 64)
	for _, tt := range []struct{ in, want string }{
		{`"\/"`, `"/"`}, {`"a\/b\/"`, `"a/b/"`}, {`"spring\/2024 \u003cB\u003e"`, `"spring/2024 <B>"`}, {`"\\/"`, `"\\/"`},
	} {
		i, w, changed, reason := copyString(buf, 0, []byte(tt.in), 0)
		if reason != "" || i != len(tt.in) || string(buf[:w]) != tt.want || changed != (tt.in != tt.want) {
			t.Errorf("%s: got %q %d %v %q, want %q", tt.in, buf[:w], i, changed, reason, tt.want)
		}
	}
}

// isSpecial is the definition of the bytes that special flags.
func isSpecial(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }

// TestSpecial checks special against isSpecial, byte at a time: no byte
// flagged if none is special, else the lowest flagged byte is the first
// special one. The words: every byte value at every position, over
// backgrounds of the bytes around the tests' thresholds (which borrow or
// not), and with a second byte of those values above it; and random words.
func TestSpecial(t *testing.T) {
	check := func(x uint64) {
		t.Helper()
		first := 8
		for k := range 8 {
			if isSpecial(byte(x >> (8 * k))) {
				first = k
				break
			}
		}
		m := special(x)
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != first || m&^msb != 0 {
			t.Fatalf("special(%#016x) = %#016x: first flagged byte %d, want %d", x, m, got, first)
		}
	}
	edges := []byte{0x00, 0x01, 0x02, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0x80, 0xA1, 0xDC, 0xFE, 0xFF, 'a'}
	for _, bg := range edges {
		for pos := range 8 {
			for c := range 256 {
				x := uint64(bg) * lsb
				x = x&^(0xFF<<(8*pos)) | uint64(c)<<(8*pos)
				check(x)
				for hi := pos + 1; hi < 8; hi++ {
					for _, e := range edges {
						check(x&^(0xFF<<(8*hi)) | uint64(e)<<(8*hi))
					}
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 5))
	for range 1 << 20 {
		x := r.Uint64()
		check(x)
		check(x &^ msb) // ASCII only
	}
}

// TestPlainStringLong checks plainString's 32-byte steps against a scan
// of sixteen bytes at a time only (what plainStringFrom did before them):
// plain runs of every length up to 100, then each kind of byte that ends
// or breaks a plain string, then input of every length up to 48 after it.
func TestPlainStringLong(t *testing.T) {
	sixteen := func(in []byte, i int) int {
		j := i
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
				j += k + 2
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
	for n := range 101 {
		for _, stop := range []string{`"`, `\`, "\x1f", "\x80", "é\"", "€\"", "\xed\xa0\x80\""} {
			for tail := range 49 {
				in := []byte(`"` + strings.Repeat("a", n) + stop + strings.Repeat(" ", tail))
				if got, want := plainString(in, 1), sixteen(in, 1); got != want {
					t.Fatalf("plainString(%q) = %d, want %d", in, got, want)
				}
			}
		}
	}
}
