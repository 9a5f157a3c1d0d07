package client_test

import (
	"testing"

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
var realSpecs = []gentest.RealSpec{
	{Pkg: "petstore", Spec: "petstore-expanded.yaml", Overlay: "petstore.overlay.yaml", Server: gentest.StrictStdHTTP, Client: true, Emit: []string{client.Name, server.Name}},
	{Pkg: "adyen", Spec: "adyen-transfers-v4.json", Overlay: "adyen.overlay.yaml", Server: gentest.StrictStdHTTP, Client: true, Emit: []string{client.Name, server.Name}},
	{
		Pkg: "moderntreasury", Spec: "modern-treasury.yaml", Overlay: "modern-treasury.overlay.yaml", Server: gentest.None, Client: true, Emit: []string{client.Name},
		Fix: gentest.ModernTreasuryFix, Exclude: gentest.ModernTreasuryExclude,
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
	gentest.BuildRealSpecs(t, "example.com/realclients", realSpecs, func(t *testing.T, s gentest.RealSpec, files map[string][]byte) {
		require.NotEmpty(t, files[client.DefaultFile], s.Pkg)
		assert.NotContains(t, string(files[client.DefaultFile]), "no typed helper", "%s: every operation has its helpers", s.Pkg)
	})
}
