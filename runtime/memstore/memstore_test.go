package memstore_test

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
	"github.com/idemgen/idemgen/runtime/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
		s := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
