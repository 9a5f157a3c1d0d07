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
