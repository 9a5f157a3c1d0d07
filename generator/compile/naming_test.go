package compile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/naming"
)

// TestCollisionUnderNormalizer: operations createUserById and
// createUserByID are CreateUserById and CreateUserByID under oapi-codegen's
// default normalizer, and both CreateUserByID under
// ToCamelCaseWithInitialisms: the collision check uses the configured names.
func TestCollisionUnderNormalizer(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: t, version: 1.0.0}
paths:
  /a:
    post:
      operationId: createUserById
      x-idempotency: {semantics: strict}
      responses: {'201': {description: ok}}
  /b:
    post:
      operationId: createUserByID
      x-idempotency: {semantics: strict}
      responses: {'201': {description: ok}}
`), 0o644))
	_, diags := compile.Compile(spec, compile.Options{})
	assert.False(t, diags.HasErrors(), "%v", diags)
	n, err := naming.New("ToCamelCaseWithInitialisms", nil)
	require.NoError(t, err)
	_, diags = compile.Compile(spec, compile.Options{Naming: n})
	require.True(t, diags.HasErrors())
	assert.Equal(t, "go-name-collision", diags[0].Rule)
	assert.Contains(t, diags[0].Message, "CreateUserByID")
}
