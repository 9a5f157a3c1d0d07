package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

var emitServer = []string{server.Name}

// realSpecs are the real public specs of testdata/specs, annotated through
// testdata/overlays; modern-treasury needs gentest.ModernTreasuryFix and
// ModernTreasuryExclude for oapi-codegen's sake (see docs/server.md).
var realSpecs = []gentest.RealSpec{
	{Pkg: "petstore", Spec: "petstore-expanded.yaml", Overlay: "petstore.overlay.yaml", Emit: emitServer},
	{Pkg: "adyen", Spec: "adyen-transfers-v4.json", Overlay: "adyen.overlay.yaml", Emit: emitServer},
	{Pkg: "adyenplain", Spec: "adyen-transfers-v4.json", Overlay: "adyen.overlay.yaml", Server: gentest.StdHTTP, Params: map[string]string{"server.strict": "false"}, Emit: emitServer},
	{Pkg: "moderntreasury", Spec: "modern-treasury.yaml", Overlay: "modern-treasury.overlay.yaml", Fix: gentest.ModernTreasuryFix, Exclude: gentest.ModernTreasuryExclude, Emit: emitServer},
}

// The plain servers (std-http, echo, gin) of each real spec: their
// one-line wiring hands oapi-codegen a wrapper of the ServerInterface
// with oapi-codegen's signatures, which must build.
func init() {
	for _, r := range []struct {
		name   string
		server gentest.Server
		router string
	}{{"stdplain", gentest.StdHTTP, "std-http"}, {"echoplain", gentest.Echo, "echo"}, {"ginplain", gentest.Gin, "gin"}} {
		p := map[string]string{"server.strict": "false", "server.router": r.router}
		if r.router != "std-http" {
			realSpecs = append(realSpecs, gentest.RealSpec{Pkg: "adyen" + r.name, Spec: "adyen-transfers-v4.json", Overlay: "adyen.overlay.yaml", Server: r.server, Params: p, Emit: emitServer})
		}
		realSpecs = append(realSpecs,
			gentest.RealSpec{Pkg: "petstore" + r.name, Spec: "petstore-expanded.yaml", Overlay: "petstore.overlay.yaml", Server: r.server, Params: p, Emit: emitServer},
			gentest.RealSpec{Pkg: "moderntreasury" + r.name, Spec: "modern-treasury.yaml", Overlay: "modern-treasury.overlay.yaml", Fix: gentest.ModernTreasuryFix, Exclude: gentest.ModernTreasuryExclude, Server: r.server, Params: p, Emit: emitServer},
		)
	}
}

// TestRealSpecsBuild generates oapi-codegen's strict std-http server (or
// plain std-http) and the server wrapper for each real spec and builds them
// together in a temporary module that replaces idemgen with this checkout.
// The build runs without -race (the generated code has no tests here);
// generating modern-treasury in process takes ~20 s under -race.
func TestRealSpecsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ~3 MB of generated code; run without -short")
	}
	gentest.BuildRealSpecs(t, "example.com/realspecs", realSpecs, func(t *testing.T, s gentest.RealSpec, files map[string][]byte) {
		require.NotEmpty(t, files[server.DefaultFile], s.Pkg)
	})
}
