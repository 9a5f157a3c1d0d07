package fingerprint_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

// The benchmark bodies: "order" is fingerprinttest.SampleBody (a realistic
// order, about one token per fifteen bytes), "dense" is DenseBody (short
// names and values, about one token per seven bytes: the hard case).
type benchBody struct {
	name string
	data []byte
}

func benchBodies() []benchBody {
	var out []benchBody
	for _, n := range []int{1 << 10, 16 << 10, 256 << 10} {
		out = append(out, benchBody{fmt.Sprintf("order/%dKB", n>>10), fingerprinttest.SampleBody(n)})
	}
	for _, n := range []int{1 << 10, 16 << 10, 256 << 10} {
		out = append(out, benchBody{fmt.Sprintf("dense/%dKB", n>>10), fingerprinttest.DenseBody(n)})
	}
	return out
}

// BenchmarkSHA256 is the yardstick: SHA-256 over the same bytes.
func BenchmarkSHA256(b *testing.B) {
	for _, bd := range benchBodies() {
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				sha256.Sum256(bd.data)
			}
		})
	}
}

func benchSum(b *testing.B, opts fingerprint.Options) {
	h, err := fingerprint.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, bd := range benchBodies() {
		in := &fingerprint.Input{Method: "POST", Operation: "createOrder", RawQuery: "dry_run=false&lang=en",
			ContentType: "application/json", Body: bd.data}
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				h.Sum(in)
			}
		})
	}
}

// BenchmarkSum fingerprints a JSON request without pointers.
func BenchmarkSum(b *testing.B) { benchSum(b, fingerprint.Options{}) }

// BenchmarkSumPointers fingerprints the same requests with volatile and
// unordered pointers active (including the array of line items as a
// multiset) and a named header.
func BenchmarkSumPointers(b *testing.B) {
	benchSum(b, fingerprint.Options{
		Volatile:  fingerprinttest.SampleVolatile,
		Unordered: fingerprinttest.SampleUnordered,
		Headers:   []string{"X-Tenant"},
	})
}

// BenchmarkCanonical measures canonicalization alone.
func BenchmarkCanonical(b *testing.B) {
	for _, bd := range benchBodies() {
		buf := make([]byte, 0, 2*len(bd.data))
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = fingerprint.Canonical(buf[:0], bd.data)
			}
		})
	}
}
