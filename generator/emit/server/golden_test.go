package server_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

var update = flag.Bool("update", false, "rewrite the golden files (the generated packages under internal/e2e)")

// goldenCases are compiled and run: each is a package under internal/e2e
// holding oapi-codegen's output for the spec (api.gen.go), the server
// emitter's (idempotency.gen.go, the golden), and hand-written handlers and
// tests that drive both over HTTP.
var goldenCases = []struct {
	name     string // the package, internal/e2e/<name>
	spec     string // relative to the repository root
	overlays []string
	server   gentest.Server
	params   map[string]string
}{
	{name: "strictapi", spec: "testdata/server/coupons/openapi.yaml", server: gentest.StrictStdHTTP},
	{name: "plainapi", spec: "testdata/server/coupons/openapi.yaml", server: gentest.StdHTTP, params: map[string]string{"server.strict": "false"}},
	{name: "routesapi", spec: "testdata/server/routes/openapi.yaml", server: gentest.StdHTTP, params: map[string]string{"server.strict": "false"}},
	{name: "petstore", spec: "testdata/specs/petstore-expanded.yaml", overlays: []string{"testdata/overlays/petstore.overlay.yaml"}, server: gentest.StrictStdHTTP},
}

// TestGolden regenerates every golden case and compares both generated
// files byte for byte with the committed package (go test -update
// rewrites them).
func TestGolden(t *testing.T) {
	root := gentest.RepoRoot(t)
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var overlays []string
			for _, o := range c.overlays {
				overlays = append(overlays, filepath.Join(root, o))
			}
			out := filepath.Join(root, "internal", "e2e", c.name)
			files, err := gentest.Generate(gentest.Case{
				Spec: filepath.Join(root, c.spec), Overlays: overlays, Package: c.name, Output: out,
				Server: c.server, Emit: []string{server.Name}, Params: c.params,
			})
			require.NoError(t, err)
			require.Contains(t, files, server.DefaultFile)
			gentest.Golden(t, out, files, *update)
		})
	}
}
