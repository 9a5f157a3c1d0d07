package idem_test

import (
	"slices"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestPolicySpecShares: a Policy is immutable: neither the Spec it was
// compiled from nor the one Spec returns shares a slice with it, so
// writing theirs does not change what Spec returns later.
func TestPolicySpecShares(t *testing.T) {
	s := idem.Spec{Operation: "op", Semantics: idem.Strict, Volatile: []string{"/a"}, Unordered: []string{"/b"}, FingerprintHeaders: []string{"X-A"}, Response: idem.ResponseSpec{Headers: []string{"Location"}},
		CompatibleFingerprints: []idem.FingerprintSpec{{Volatile: []string{"/c"}}}}
	p := idem.MustCompile(s)
	s.Volatile[0], s.Unordered[0], s.FingerprintHeaders[0], s.CompatibleFingerprints[0].Volatile[0] = "/x", "/x", "X-X", "/x"
	got := p.Spec()
	got.Volatile[0], got.Unordered[0], got.FingerprintHeaders[0], got.Response.Headers[0] = "/y", "/y", "X-Y", "X-Y"
	got.CompatibleFingerprints[0].Volatile[0] = "/y"
	again := p.Spec()
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"Volatile", again.Volatile, []string{"/a"}},
		{"Unordered", again.Unordered, []string{"/b"}},
		{"FingerprintHeaders", again.FingerprintHeaders, []string{"X-A"}},
		{"Response.Headers", again.Response.Headers, []string{"Location"}},
		{"CompatibleFingerprints[0].Volatile", again.CompatibleFingerprints[0].Volatile, []string{"/c"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("Spec().%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
