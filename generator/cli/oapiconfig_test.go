package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerSettingsFromOapiCodegen: the server emitter takes strict-server
// and the router from oapi-codegen's configuration (oapi-codegen-config:,
// or the oapi-codegen.yaml beside idemgen.yaml for the same package and
// directory), so a package without strict-server gets the plain wrapper
// instead of one that does not compile; idemgen settings that contradict
// it are a usage error, not a compile error later.
func TestServerSettingsFromOapiCodegen(t *testing.T) {
	const oapiPlain = "package: api\noutput: api/api.gen.go\ngenerate:\n  models: true\n  std-http-server: true\n"
	const oapiChiStrict = "package: api\noutput: api/api.gen.go\ngenerate:\n  models: true\n  chi-server: true\n  strict-server: true\n"
	setup := func(t *testing.T, oapi, idemgen string) string {
		t.Helper()
		dir := t.TempDir()
		copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), []byte(oapi), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "idemgen.yaml"), []byte("package: api\noutput: api\nspec: openapi.yaml\ngenerate: {server: true}\n"+idemgen), 0o644))
		return dir
	}
	generated := func(t *testing.T, dir string, args ...string) string {
		t.Helper()
		code, _, stderr := run(append([]string{"generate", "-config", filepath.Join(dir, "idemgen.yaml")}, args...)...)
		require.Equal(t, 0, code, stderr)
		data, err := os.ReadFile(filepath.Join(dir, "api", "idempotency.gen.go"))
		require.NoError(t, err)
		return string(data)
	}
	// What the explicit settings generate.
	ref := setup(t, oapiPlain, "")
	require.NoError(t, os.Remove(filepath.Join(ref, "oapi-codegen.yaml")))
	plain := generated(t, ref, "-option", "server.strict=false")
	assert.NotContains(t, plain, "StrictHandlerFunc")
	chiStrict := generated(t, ref, "-option", "server.router=chi")
	assert.Contains(t, chiStrict, "StrictHandlerFunc")
	assert.Contains(t, chiStrict, "ChiServerOptions")

	for _, c := range []struct {
		name, oapi, idemgen, want string
	}{
		{"plain, named", oapiPlain, "oapi-codegen-config: oapi-codegen.yaml\n", plain},
		{"plain, beside", oapiPlain, "", plain},
		{"chi strict, named", oapiChiStrict, "oapi-codegen-config: oapi-codegen.yaml\n", chiStrict},
		{"chi strict, beside", oapiChiStrict, "", chiStrict},
		{"agreeing settings", oapiChiStrict, "options: {server.strict: \"true\", server.router: chi}\n", chiStrict},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := setup(t, c.oapi, c.idemgen)
			assert.Equal(t, c.want, generated(t, dir))
			code, _, stderr := run("check", "-generated", "-config", filepath.Join(dir, "idemgen.yaml"))
			assert.Equal(t, 0, code, stderr)
		})
	}

	// Not the same package, or not the same directory: not read; no
	// server in it (the server in another configuration): nothing said.
	for _, oapi := range []string{
		"package: other\noutput: api/api.gen.go\ngenerate: {std-http-server: true}\n",
		"package: api\noutput: elsewhere/api.gen.go\ngenerate: {std-http-server: true}\n",
		"package: api\noutput: api/types.gen.go\ngenerate: {models: true, client: true}\n",
	} {
		dir := setup(t, oapi, "")
		assert.Contains(t, generated(t, dir), "StrictHandlerFunc", oapi)
	}

	for _, c := range []struct{ name, oapi, idemgen, want string }{
		{"strict without strict-server", oapiPlain, "options: {server.strict: \"true\"}\n", "oapi-codegen.yaml does not generate strict-server"},
		{"another router", oapiChiStrict, "options: {server.router: gin}\n", "server.router is gin, but "},
		{"unsupported server", "package: api\noutput: api/api.gen.go\ngenerate: {fiber-server: true}\n", "oapi-codegen-config: oapi-codegen.yaml\n", "generates fiber-server: idemgen's server wrapper supports"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := setup(t, c.oapi, c.idemgen)
			cfg := filepath.Join(dir, "idemgen.yaml")
			code, _, stderr := run("generate", "-config", cfg)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, c.want)
			code, _, stderr = run("check", "-generated", "-config", cfg)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, c.want)
		})
	}
	// Without generate:, oapi-codegen generates its default, a non-strict
	// echo server: the wrapper is for echo, not strict.
	dir0 := setup(t, "package: api\noutput: api/api.gen.go\n", "")
	echo := generated(t, dir0)
	assert.NotContains(t, echo, "StrictHandlerFunc")
	assert.Contains(t, echo, "labstack/echo")
	// -option contradicting it too.
	dir := setup(t, oapiPlain, "")
	code, _, stderr := run("generate", "-config", filepath.Join(dir, "idemgen.yaml"), "-option", "server.strict=true")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "does not generate strict-server")
}
