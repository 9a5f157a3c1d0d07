package initspec_test

import (
	"fmt"
	"path/filepath"

	"github.com/idemgen/idemgen/generator/initspec"
)

func ExamplePropose() {
	p, _ := initspec.Propose(filepath.Join("..", "..", "testdata", "init", "conventions", "openapi.yaml"), initspec.Options{})
	for _, c := range p.Candidates {
		fmt.Println(c.Method, c.Path, c.Key.Carrier, c.Key.Name, c.Volatile)
	}
	for _, n := range p.Notes {
		fmt.Println("note:", n.Method, n.Path)
	}
	// Output:
	// POST /orders header PayPal-Request-Id []
	// POST /payments header Idempotency-Key [/client_time]
	// POST /refunds body /idempotency_key []
	// note: GET /payments
}
