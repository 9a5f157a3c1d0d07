package fingerprint_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

// goldenHashers are the option sets of TestGoldenBodies.
func goldenHashers(t testing.TB) []*fingerprint.Hasher {
	return []*fingerprint.Hasher{
		mustNew(t, fingerprint.Options{}),
		mustNew(t, fingerprint.Options{Volatile: fingerprinttest.SampleVolatile, Unordered: fingerprinttest.SampleUnordered}),
		mustNew(t, fingerprint.Options{Volatile: []string{"/a", "/*/b", "/items/1"}, Unordered: []string{"/*", "/*/*", "/*/*/*"}}),
	}
}

// goldenBodies are the bodies of TestGoldenBodies: the benchmark bodies,
// the worst cases, and random values in random spellings.
func goldenBodies() [][]byte {
	var out [][]byte
	for _, n := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10} {
		out = append(out, fingerprinttest.SampleBody(n), fingerprinttest.DenseBody(n))
	}
	out = append(out, manyMembersBody(1<<10), manyMembersBody(64<<10), tinyElementsBody(1<<10), tinyElementsBody(64<<10))
	r := rand.New(rand.NewPCG(1, 2))
	// Names that share their first eight bytes or more, in objects of
	// every size up to 100, in arrays of objects of one shape.
	for n := range 100 {
		b := []byte("[")
		for e := range 3 {
			if e > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			for m := range n {
				if m > 0 {
					b = append(b, ',')
				}
				name := fmt.Sprintf("attribute_%x", r.IntN(1+n*(1+e%2)))
				if r.IntN(4) == 0 {
					name = name[:r.IntN(len(name))]
				}
				b = fmt.Appendf(b, "%q:%d", name, r.IntN(3))
			}
			b = append(b, '}')
		}
		out = append(out, append(b, ']'))
	}
	// Large objects and unordered arrays (sorted by radix) with long
	// names and texts that share their first bytes, and duplicates.
	for _, n := range []int{300, 3000} {
		b := []byte("{")
		for m := range n {
			if m > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `"attribute_%x":%d`, r.IntN(n), r.IntN(3))
		}
		b = append(b, `,"items":[`...)
		for m := range n {
			if m > 0 {
				b = append(b, ',')
			}
			switch r.IntN(4) {
			case 0:
				b = fmt.Appendf(b, `"item_prefix_%x"`, r.IntN(n))
			case 1:
				b = fmt.Appendf(b, `{"k":%d}`, r.IntN(5))
			case 2:
				b = fmt.Appendf(b, `[%d]`, r.IntN(5))
			default:
				b = fmt.Appendf(b, `%d`, r.IntN(n))
			}
		}
		out = append(out, append(b, "]}"...))
	}
	for k := range 10000 {
		v := randValue(r, 2+k%5)
		out = append(out, spell(r, v, k%3 != 0))
	}
	return out
}

// The canonical forms and fingerprints of many bodies are pinned: an
// optimization must not change a single byte of them (fingerprints are
// persisted). Each digest covers, for one option set, every body's
// fingerprint and canonical form (or error).
func TestGoldenBodies(t *testing.T) {
	want := []string{
		"f1b946638fb8dda3ed4877ea9554d7ba268d3b75f8043e2f3909e9583945685f",
		"4bba048237aa68bc5f5c483098d53ce7ab240823b1749f903e7d21d48e42f034",
		"27b0ec1db0a9e549d2fc90cf5518bf7e53489ca0d2f97f8b586de7bfa318c238",
	}
	bodies := goldenBodies()
	for k, h := range goldenHashers(t) {
		d := sha256.New()
		for _, b := range bodies {
			// Version 1: these digests pin it (Version 2 adds the path
			// only: TestSumDocumentedStream, TestSumMatchesCanonical).
			f, _ := h.SumVersion(jsonInput(b), 1)
			d.Write(f[:])
			c, err := h.Canonical(nil, b)
			fmt.Fprintf(d, "%d:%v:", len(c), err)
			d.Write(c)
		}
		if got := hex.EncodeToString(d.Sum(nil)); got != want[k] {
			t.Errorf("option set %d: digest %s, want %s", k, got, want[k])
		}
	}
}
