package keysyntax_test

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/keysyntax"
)

// runtime/idem converts its Format to keysyntax's: the values must agree.
func TestFormatValues(t *testing.T) {
	for f, k := range map[idem.Format]keysyntax.Format{
		idem.FormatToken: keysyntax.Token, idem.FormatUUID: keysyntax.UUID,
		idem.FormatUUIDv4: keysyntax.UUIDv4, idem.FormatUUIDv7: keysyntax.UUIDv7,
	} {
		if keysyntax.Format(f) != k {
			t.Errorf("idem %v is keysyntax %d, want %d", f, f, k)
		}
	}
}

// A key is parsed on every request: a lower-case UUID, a token and an
// sf-string without escapes are parsed without allocating, through
// runtime/idem's ParseKey too.
func TestParseAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	for _, k := range []string{"3b241101-e2bb-4255-8caf-4136c566a962", "order-42-abcdefgh", `"order-42"`} {
		if n := testing.AllocsPerRun(100, func() { _, _ = keysyntax.Parse(k, keysyntax.Token, 255) }); n != 0 {
			t.Errorf("Parse(%q): %v allocations", k, n)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = idem.ParseKey(k, idem.FormatToken, 255) }); n != 0 {
			t.Errorf("idem.ParseKey(%q): %v allocations", k, n)
		}
	}
	u := "3b241101-e2bb-4255-8caf-4136c566a962"
	if n := testing.AllocsPerRun(100, func() { _, _ = idem.ParseKey(u, idem.FormatUUIDv4, 255) }); n != 0 {
		t.Errorf("idem.ParseKey(uuid): %v allocations", n)
	}
}

// BenchmarkParseUUID: the key of every request under a UUID format.
func BenchmarkParseUUID(b *testing.B) {
	for b.Loop() {
		if _, err := keysyntax.ParseUUID("0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70", keysyntax.UUIDv7); err != nil {
			b.Fatal(err)
		}
	}
}
