package memstore_test

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/rollouttest"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestRollout: two Engines over one memstore, with the fingerprint
// settings before and after a change (idem.Spec.CompatibleFingerprints).
func TestRollout(t *testing.T) {
	rollouttest.Run(t, func(t *testing.T) idem.Store {
		s := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
