package client_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/client"
	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// realSpecs are the real public specs of testdata/specs, annotated through
// testdata/overlays (modern-treasury as the server emitter's build test
// does: three GETs excluded and one schema fixed, for oapi-codegen's sake;
// see docs/server.md).
var realSpecs = []struct {
	pkg, spec, overlay string
	fix                []string
	exclude            []string
	server             gentest.Server
}{
	{pkg: "petstore", spec: "petstore-expanded.yaml", overlay: "petstore.overlay.yaml", server: gentest.StrictStdHTTP},
	{pkg: "adyen", spec: "adyen-transfers-v4.json", overlay: "adyen.overlay.yaml", server: gentest.StrictStdHTTP},
	{
		pkg: "moderntreasury", spec: "modern-treasury.yaml", overlay: "modern-treasury.overlay.yaml", server: gentest.None,
		fix:     []string{"testdata/server/modern-treasury.oapi-codegen.overlay.yaml"},
		exclude: []string{"listLedgerAccountCategories", "listLedgerEntries", "listLedgerTransactions"},
	},
}

// TestRealSpecsBuild generates oapi-codegen's client (with the strict
// std-http server for the two smaller specs, models and client alone for
// modern-treasury) and idemgen's client helpers (and server wrapper, in the
// same package, where there is a server) for each real spec, and builds them
// together in a temporary module that replaces idemgen with this checkout:
// every helper calls oapi-codegen's method with the path arguments, params
// and body types idemgen derived, so a wrong type does not compile.
func TestRealSpecsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ~3 MB of generated code; run without -short")
	}
	root := gentest.RepoRoot(t)
	m := gentest.NewModule(t, "example.com/realclients")
	for _, c := range realSpecs {
		start := time.Now()
		overlays := []string{filepath.Join(root, "testdata", "overlays", c.overlay)}
		for _, f := range c.fix {
			overlays = append(overlays, filepath.Join(root, f))
		}
		emit := []string{client.Name}
		if c.server != gentest.None {
			emit = append(emit, server.Name)
		}
		files, err := gentest.Generate(gentest.Case{
			Spec: filepath.Join(root, "testdata", "specs", c.spec), Overlays: overlays, Package: c.pkg, Output: filepath.Join(m.Dir, c.pkg),
			Server: c.server, Client: true, ExcludeOperations: c.exclude, Emit: emit,
		})
		require.NoError(t, err, c.pkg)
		require.NotEmpty(t, files[client.DefaultFile])
		assert.NotContains(t, string(files[client.DefaultFile]), "no typed helper", "%s: every operation has its helpers", c.pkg)
		for name, data := range files {
			m.Write(t, c.pkg+"/"+name, data)
		}
		t.Logf("%s: generated in %v", c.pkg, time.Since(start).Round(time.Millisecond))
	}
	start := time.Now()
	m.Go(t, "build", "./...")
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
}
