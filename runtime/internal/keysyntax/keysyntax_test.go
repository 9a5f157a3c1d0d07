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
