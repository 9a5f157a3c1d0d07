package fingerprint_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// BenchmarkSumAfterDecode is the fingerprint of a first request in the
// conditions of bench/middleware's first rows, without the rest of the
// engine: between two sums the handler's work runs (encoding/json decodes
// the body into workload.Body), which evicts much of the fingerprint's
// code and data from the first-level caches, and the bodies rotate over
// workload.FirstBodies distinct ones. decode-only is that work alone: the
// fingerprint's cost in context is decode minus decode-only.
func BenchmarkSumAfterDecode(b *testing.B) {
	h, err := fingerprint.New(fingerprint.Options{Volatile: []string{"/sent_at"}})
	if err != nil {
		b.Fatal(err)
	}
	bodies := workload.Bodies(workload.FirstBodies)
	for _, mode := range []string{"decode", "decode-only"} {
		sum := mode == "decode"
		b.Run(mode, func(b *testing.B) {
			in := &fingerprint.Input{Method: "POST", Operation: "createOrder", Path: workload.Path,
				ContentType: "application/json"}
			b.SetBytes(workload.PayloadSize)
			b.ReportAllocs()
			var r bytes.Reader
			i := 0
			var sink byte
			for b.Loop() {
				in.Body = bodies[i%len(bodies)]
				i++
				if sum {
					fp, _ := h.SumVersion(in, fingerprint.Version)
					sink ^= fp[1]
				}
				var v workload.Body
				r.Reset(in.Body)
				if err := json.NewDecoder(&r).Decode(&v); err != nil {
					b.Fatal(err)
				}
			}
			_ = sink
		})
	}
}
