package client_test

import (
	"flag"
	"testing"

	"github.com/idemgen/idemgen/generator/emit/client"
	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

var update = flag.Bool("update", false, "rewrite the golden files (the generated packages under internal/e2e)")

// goldenCases are compiled and run: each is a package under internal/e2e
// holding oapi-codegen's output for the spec (api.gen.go: models, strict
// std-http server and client), the server emitter's (idempotency.gen.go)
// and the client emitter's (idempotency_client.gen.go, the golden), and
// hand-written tests that drive the generated client against the generated
// server through faultnet.
var goldenCases = []gentest.GoldenCase{
	{Name: "clientapi", Spec: "testdata/client/shop/openapi.yaml", Server: gentest.StrictStdHTTP, Client: true},
	{Name: "keytypesapi", Spec: "testdata/client/key-types/openapi.yaml", Server: gentest.StrictStdHTTP, Client: true},
}

// TestGolden regenerates every golden case and compares the generated files
// byte for byte with the committed package (go test -update rewrites them).
func TestGolden(t *testing.T) {
	gentest.RunGolden(t, goldenCases, []string{server.Name, client.Name}, client.DefaultFile, *update)
}
