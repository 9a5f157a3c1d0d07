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
		"0cd88879c0ec87a27fbfb455d97c90a9d2553a658758dc5295ba1e0dd5ba24a6",
		"5925c685211408378d33f41424c3d8510f2b69e0de253d81d683e84fc1a860e1",
		"e85bd6eb399f06a1fcc45495be5de48e664e5b480a42f46e444757b836a4f40a",
	}
	bodies := goldenBodies()
	for k, h := range goldenHashers(t) {
		d := sha256.New()
		for _, b := range bodies {
			f := h.Sum(jsonInput(b))
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
