package fingerprint

import (
	"fmt"
	"testing"
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
