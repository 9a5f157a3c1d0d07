// Command idemgen reads the x-idempotency contracts of an OpenAPI 3 spec,
// checks them, and generates server wrappers, client retry helpers, docs and
// an augmented spec from them. All logic lives in package generator/cli.
package main

import (
	"os"

	"github.com/idemgen/idemgen/generator/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
