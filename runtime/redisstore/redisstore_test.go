package redisstore

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// TestConformance runs the shared store conformance suite against a real Redis.
func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
		s, _ := newTestStore(t, Options{})
		return s
	})
}

// TestContract runs this package's own contract tests (contract_test.go),
// which add cases the suite leaves out.
func TestContract(t *testing.T) {
	runContract(t, func(t *testing.T) idem.Store {
		s, _ := newTestStore(t, Options{})
		return s
	})
}
