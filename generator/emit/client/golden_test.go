package client_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

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
var goldenCases = []struct {
	name     string // the package, internal/e2e/<name>
	spec     string // relative to the repository root
	overlays []string
	params   map[string]string
}{
	{name: "clientapi", spec: "testdata/client/shop/openapi.yaml"},
}

// TestGolden regenerates every golden case and compares the generated files
// byte for byte with the committed package (go test -update rewrites them).
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
				Server: gentest.StrictStdHTTP, Client: true, Emit: []string{server.Name, client.Name}, Params: c.params,
			})
			require.NoError(t, err)
			require.Contains(t, files, client.DefaultFile)
			gentest.Golden(t, out, files, *update)
		})
	}
}
