package redisstore

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestContract(t *testing.T) {
	runContract(t, func(t *testing.T) idem.Store {
		s, _ := newTestStore(t, Options{})
		return s
	})
}
