package augment_test

import (
	"testing"

	"github.com/idemgen/idemgen/generator/augment"
)

// BenchmarkAugment: idemgen spec's whole work (load, compile, plan, apply,
// encode the spec and the overlay) on the petstore and on Adyen's
// transfers API (250 KB of JSON), each through its contract overlay.
func BenchmarkAugment(b *testing.B) {
	for _, c := range cases(b) {
		if c.name != "petstore" && c.name != "adyen" {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res, diags := augment.Augment(c.spec, augment.Options{Overlays: c.overlays}); res == nil {
					b.Fatal(diags)
				}
			}
		})
	}
}
