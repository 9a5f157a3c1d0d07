package compile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
)

// TestBasePaths: the IR carries the paths of the spec's top-level servers,
// for the client's matcher: absolute URLs' paths, relative URLs resolved
// against "/", variables at their default values, escaped, without
// repeats; a URL with a variable the server does not declare, or that does
// not parse, is left out, and path-item servers are not read. The root path
// is no base path: a URL without a path, or whose path is or resolves to
// "/", is left out too.
func TestBasePaths(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: Servers, version: 1.0.0}
servers:
  - url: https://h/api/v1
  - url: https://h
  - url: /api/v1
  - url: ./v2
  - url: v3/
  - url: '{scheme}://h/{base}/v4'
    variables:
      scheme: {default: https}
      base: {default: caf%C3%A9}
  - url: https://h/{undeclared}/v5
  - url: 'http://h/%zz'
  - url: https://h/a%2Fb
  - url: https://h/
  - url: /
  - url: https://h/x/..
  - url: https://h/w/./v6/../v7
paths:
  /orders:
    servers: [{url: https://h/item}]
    post:
      operationId: createOrder
      x-idempotency: {semantics: strict}
      responses:
        '201': {description: created}
`), 0o644))
	ir, diags := compile.Compile(spec, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Equal(t, []string{"/api/v1", "/v2", "/v3/", "/caf%C3%A9/v4", "/a%2Fb", "/w/v7"}, ir.BasePaths)

	spec = filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: No servers, version: 1.0.0}
paths: {}
`), 0o644))
	ir, diags = compile.Compile(spec, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Empty(t, ir.BasePaths)
}
