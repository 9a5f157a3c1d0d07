package server_test

import (
	"flag"
	"testing"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

var update = flag.Bool("update", false, "rewrite the golden files (the generated packages under internal/e2e)")

// goldenCases are compiled and run: each is a package under internal/e2e
// holding oapi-codegen's output for the spec (api.gen.go), the server
// emitter's (idempotency.gen.go, the golden), and hand-written handlers and
// tests that drive both over HTTP.
var goldenCases = []gentest.GoldenCase{
	{Name: "strictapi", Spec: "testdata/server/coupons/openapi.yaml", Server: gentest.StrictStdHTTP},
	{Name: "plainapi", Spec: "testdata/server/coupons/openapi.yaml", Server: gentest.StdHTTP, Params: map[string]string{"server.strict": "false"}},
	{Name: "routesapi", Spec: "testdata/server/routes/openapi.yaml", Server: gentest.StdHTTP, Params: map[string]string{"server.strict": "false"}},
	{Name: "compatfpapi", Spec: "testdata/server/compatible-fingerprints/openapi.yaml", Server: gentest.StrictStdHTTP},
	{Name: "petstore", Spec: "testdata/specs/petstore-expanded.yaml", Overlays: []string{"testdata/overlays/petstore.overlay.yaml"}, Server: gentest.StrictStdHTTP},
}

// TestGolden regenerates every golden case and compares both generated
// files byte for byte with the committed package (go test -update
// rewrites them).
func TestGolden(t *testing.T) {
	gentest.RunGolden(t, goldenCases, []string{server.Name}, server.DefaultFile, *update)
}
