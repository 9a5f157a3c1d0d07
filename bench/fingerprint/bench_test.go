package fingerprint_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

var sizes = []int{1 << 10, 16 << 10, 256 << 10}

type body struct {
	name string
	data []byte
}

func bodies() []body {
	var out []body
	for _, n := range sizes {
		out = append(out, body{fmt.Sprintf("order/%dKB", n>>10), fingerprinttest.SampleBody(n)})
	}
	for _, n := range sizes {
		out = append(out, body{fmt.Sprintf("dense/%dKB", n>>10), fingerprinttest.DenseBody(n)})
	}
	return out
}

// BenchmarkSHA256 is the yardstick: SHA-256 over the raw body.
func BenchmarkSHA256(b *testing.B) {
	for _, bd := range bodies() {
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				sha256.Sum256(bd.data)
			}
		})
	}
}

// BenchmarkFingerprint is runtime/fingerprint's Hasher.Sum on a JSON
// request (no pointers).
func BenchmarkFingerprint(b *testing.B) {
	h, err := fingerprint.New(fingerprint.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bd := range bodies() {
		in := &fingerprint.Input{Method: "POST", Operation: "createOrder", ContentType: "application/json", Body: bd.data}
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				h.Sum(in)
			}
		})
	}
}

// BenchmarkJSONTextCanonicalize is the peer: copy the body (Canonicalize
// works in place), jsontext.Value.Canonicalize, then SHA-256.
func BenchmarkJSONTextCanonicalize(b *testing.B) {
	for _, bd := range bodies() {
		buf := make(jsontext.Value, 0, len(bd.data))
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				buf = append(buf[:0], bd.data...)
				if err := buf.Canonicalize(); err != nil {
					b.Fatal(err)
				}
				sha256.Sum256(buf)
			}
		})
	}
}

// The peer and runtime/fingerprint agree that the bodies are JSON, and
// both give one digest for a re-ordered body.
func TestPeersAgree(t *testing.T) {
	h, err := fingerprint.New(fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bd := range bodies() {
		v := append(jsontext.Value{}, bd.data...)
		if err := v.Canonicalize(); err != nil {
			t.Fatalf("%s: jsontext: %v", bd.name, err)
		}
		if _, err := h.Canonical(nil, bd.data); err != nil {
			t.Fatalf("%s: fingerprint: %v", bd.name, err)
		}
		// The peer's canonical text (RFC 8785, re-ordered, numbers
		// through float64) denotes the same request for this body.
		a := h.Sum(&fingerprint.Input{ContentType: "application/json", Body: bd.data})
		c := h.Sum(&fingerprint.Input{ContentType: "application/json", Body: v})
		if a != c {
			t.Errorf("%s: the RFC 8785 form of the body has another fingerprint", bd.name)
		}
	}
}
