package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
)

// The plain wiring protects an operation whose path parameter's Go type
// idemgen cannot tell by path (review of the perop merge, MEDIUM 2):
// generate says so, at the parameter, for each such operation, and takes
// from oapi-codegen's configuration whether it applies options.Middlewares
// first to last (compatibility.apply-chi-middleware-first-to-last for
// std-http and chi, apply-gorilla-middleware-first-to-last for gorilla),
// where the fallback middleware then goes last, to stay the innermost.
func TestPathFallback(t *testing.T) {
	setup := func(t *testing.T, oapi string) string {
		t.Helper()
		dir := t.TempDir()
		copyFile(t, filepath.Join("..", "..", "testdata", "server", "untyped-path", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), []byte(oapi), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "idemgen.yaml"), []byte("package: api\noutput: api\nspec: openapi.yaml\ngenerate: {server: true}\n"), 0o644))
		return dir
	}
	generate := func(t *testing.T, dir string) (code, stderr string) {
		t.Helper()
		rc, _, stderr := run("generate", "-config", filepath.Join(dir, "idemgen.yaml"))
		require.Equal(t, 0, rc, stderr)
		data, err := os.ReadFile(filepath.Join(dir, "api", "idempotency.gen.go"))
		require.NoError(t, err)
		return string(data), stderr
	}
	const last = "options.Middlewares = append(options.Middlewares[:len(options.Middlewares):len(options.Middlewares)], x.byPath(options.BaseURL))"
	const first = "options.Middlewares = append([]MiddlewareFunc{x.byPath(options.BaseURL)}, options.Middlewares...)"
	warning := regexp.MustCompile(`openapi\.yaml:\d+:\d+: warning: POST /accounts/\{accountId\}/orders is protected by path, not by operation, in the plain server's one-line wiring \((x\.Handler|x\.RegisterHandlers)\): idemgen cannot tell the Go type of its path parameter accountId .*\[path-fallback\]`)
	// The warning says how the wiring protects such operations as the
	// generated documentation does: one text, server.FallbackWiring.
	wrapped := regexp.MustCompile(`\n//\s*`)
	for _, c := range []struct {
		name, oapi, want string
		router           string
		firstToLast      bool
	}{
		{"std-http", "package: api\noutput: api/api.gen.go\ngenerate: {std-http-server: true}\n", first, "std-http", false},
		{"std-http, first to last", "package: api\noutput: api/api.gen.go\ngenerate: {std-http-server: true}\ncompatibility: {apply-chi-middleware-first-to-last: true}\n", last, "std-http", true},
		{"chi, first to last", "package: api\noutput: api/api.gen.go\ngenerate: {chi-server: true}\ncompatibility: {apply-chi-middleware-first-to-last: true}\n", last, "chi", true},
		{"gorilla, first to last", "package: api\noutput: api/api.gen.go\ngenerate: {gorilla-server: true}\ncompatibility: {apply-gorilla-middleware-first-to-last: true}\n", last, "gorilla", true},
		{"gorilla, chi's option", "package: api\noutput: api/api.gen.go\ngenerate: {gorilla-server: true}\ncompatibility: {apply-chi-middleware-first-to-last: true}\n", first, "gorilla", false},
		{"gin", "package: api\noutput: api/api.gen.go\ngenerate: {gin-server: true}\n", "options.Middlewares = append(options.Middlewares[:len(options.Middlewares):len(options.Middlewares)], x.ginFallback)", "gin", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stderr := generate(t, setup(t, c.oapi))
			assert.Contains(t, code, c.want)
			assert.Len(t, warning.FindAllString(stderr, -1), 1, stderr)
			w := server.FallbackWiring(c.router, c.firstToLast)
			doc := wrapped.ReplaceAllString(code, " ")
			for _, text := range []string{w.How, w.Caveat} {
				assert.Contains(t, doc, text)
				assert.Contains(t, stderr, text)
			}
			assert.Contains(t, stderr, "one-line wiring ("+w.Call+")")
			assert.Contains(t, stderr, w.Hint)
			assert.Equal(t, c.router != "gin" && !c.firstToLast, w.Hint != "", w.Hint)
			assert.NotContains(t, stderr, "POST /accounts/{accountId}/refunds/{refundId} is protected by path")
		})
	}
	// The strict server protects every operation by operation: no warning.
	_, stderr := generate(t, setup(t, "package: api\noutput: api/api.gen.go\ngenerate: {chi-server: true, strict-server: true}\n"))
	assert.False(t, strings.Contains(stderr, "path-fallback"), stderr)
}
