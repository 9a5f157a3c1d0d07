package fingerprint_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

var benchSizes = []int{1 << 10, 16 << 10, 256 << 10}

func sizeName(n int) string { return fmt.Sprintf("%dKB", n>>10) }

// BenchmarkSHA256 is the yardstick: SHA-256 over the same bytes.
func BenchmarkSHA256(b *testing.B) {
	for _, n := range benchSizes {
		body := fingerprinttest.SampleBody(n)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				sha256.Sum256(body)
			}
		})
	}
}

func benchSum(b *testing.B, opts fingerprint.Options) {
	h, err := fingerprint.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range benchSizes {
		in := &fingerprint.Input{Method: "POST", Operation: "createOrder", RawQuery: "dry_run=false&lang=en",
			ContentType: "application/json", Body: fingerprinttest.SampleBody(n)}
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(len(in.Body)))
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
// unordered pointers active.
func BenchmarkSumPointers(b *testing.B) {
	benchSum(b, fingerprint.Options{
		Volatile:  fingerprinttest.SampleVolatile,
		Unordered: fingerprinttest.SampleUnordered,
		Headers:   []string{"X-Tenant"},
	})
}

// BenchmarkCanonical measures canonicalization alone.
func BenchmarkCanonical(b *testing.B) {
	for _, n := range benchSizes {
		body := fingerprinttest.SampleBody(n)
		buf := make([]byte, 0, 2*len(body))
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = fingerprint.Canonical(buf[:0], body)
			}
		})
	}
}
