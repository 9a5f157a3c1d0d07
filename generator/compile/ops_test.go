package compile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
)

// TestDiagnosticOps: each diagnostic says which operations it is about
// ("METHOD /path"), for the ignores that name operations: those found
// compiling one operation name it, one reported once for the operations
// that inherit a root field names them all, the root block's own none.
func TestDiagnosticOps(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: T, version: '1'}
x-idempotency:
  semantics: strict
  in-flight: {lease: 10s, wait: 20s}
  windw: 1h
paths:
  /a/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: string}}]
    put:
      x-idempotency: {}
      responses: {'200': {description: ok}}
    delete:
      x-idempotency: {}
      responses: {'204': {description: ok}}
  /b:
    post:
      parameters: [{name: Idempotency-Key, in: header, schema: {type: string}}]
      responses: {'201': {description: ok}}
`), 0o644))
	_, diags := compile.Compile(spec, compile.Options{})
	got := map[string][]string{}
	n := map[string]int{}
	for _, d := range diags {
		got[d.Rule] = append(got[d.Rule], d.Ops...)
		n[d.Rule]++
	}
	assert.Equal(t, 1, n["wait-longer-than-lease"], "reported once: %v", diags)
	assert.ElementsMatch(t, []string{"PUT /a/{id}", "DELETE /a/{id}"}, got["put-delete"], "%v", diags)
	assert.ElementsMatch(t, []string{"DELETE /a/{id}", "PUT /a/{id}"}, got["wait-longer-than-lease"], "%v", diags)
	assert.Equal(t, []string{"POST /b"}, got["key-without-contract"], "%v", diags)
	assert.Contains(t, got, "unknown-field")
	assert.Empty(t, got["unknown-field"], "the root block's own diagnostic is about no operation")
}
