package pgstore

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// TestConformance runs the shared store conformance suite against a real
// PostgreSQL, each subtest in a schema of its own.
func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) idem.Store { return newTestStore(t, Options{}) })
}

// TestContract runs this package's own contract tests (contract_test.go),
// which add cases the suite leaves out.
func TestContract(t *testing.T) {
	runContract(t, func(t *testing.T) idem.Store { return newTestStore(t, Options{}) })
}
