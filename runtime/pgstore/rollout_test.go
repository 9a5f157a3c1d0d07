package pgstore

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/rollouttest"
)

// TestRollout: two Engines over one PostgreSQL store, with the fingerprint
// settings before and after a change (idem.Spec.CompatibleFingerprints).
func TestRollout(t *testing.T) {
	rollouttest.Run(t, func(t *testing.T) idem.Store { return newTestStore(t, Options{}) })
}
