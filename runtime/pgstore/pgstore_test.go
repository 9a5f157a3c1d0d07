package pgstore

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestContract(t *testing.T) {
	runContract(t, func(t *testing.T) idem.Store { return newTestStore(t, Options{}) })
}
