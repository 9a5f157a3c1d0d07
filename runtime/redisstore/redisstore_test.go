package redisstore

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// TestConformance runs the shared store conformance suite against a real
// Redis: a standalone server, a Redis Cluster (three primaries) and a
// Sentinel setup (a failover client), all from scripts/services.
func TestConformance(t *testing.T) {
	t.Run("Standalone", func(t *testing.T) {
		storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
			s, _ := newTestStore(t, Options{})
			return s
		})
	})
	t.Run("Cluster", func(t *testing.T) {
		storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
			return newStoreOn(t, clusterClient(t, nil), Options{})
		})
	})
	t.Run("Sentinel", func(t *testing.T) {
		storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
			return newStoreOn(t, sentinelClient(t), Options{})
		})
	})
}
