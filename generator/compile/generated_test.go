package compile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
)

// TestGeneratedKeyParam: the key parameter that idemgen spec wrote (marked
// x-generated-by: idemgen) is not the spec's authors' declaration, so a
// contract changed since (max-length 128 where it wrote maxLength 64) is
// not [key-declared-differently] (augment reports it [spec-stale] and
// replaces it); the authors' own parameter is. The mark is read as augment
// reads it: through an alias too.
func TestGeneratedKeyParam(t *testing.T) {
	const src = `openapi: 3.0.3
info: {title: M, version: "1", x-mark: &gen idemgen}
paths:
  /a:
    post:
      operationId: createA
      x-idempotency: {semantics: strict, window: 1h, key: {header: Idempotency-Key, max-length: 128}}
      parameters:
        - $ref: '#/components/parameters/IdempotencyKey'
      responses:
        '201': {description: created}
components:
  parameters:
    IdempotencyKey:
      name: Idempotency-Key
      in: header
      required: true
      schema: {type: string, minLength: 1, maxLength: 64}
      MARK
`
	for _, tc := range []struct {
		name, mark string
		reported   bool
	}{
		{"authors", "x-other: 1", true},
		{"generated", "x-generated-by: idemgen", false},
		{"generated through an alias", "x-generated-by: *gen", false},
		{"another generator", "x-generated-by: other", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "openapi.yaml")
			require.NoError(t, os.WriteFile(path, []byte(strings.Replace(src, "MARK", tc.mark, 1)), 0o644))
			spec, diags := compile.Compile(path, compile.Options{})
			require.NotNil(t, spec, "%v", diags)
			reported := false
			for _, d := range diags {
				reported = reported || d.Rule == "key-declared-differently"
			}
			assert.Equal(t, tc.reported, reported, "%v", diags)
		})
	}
}
