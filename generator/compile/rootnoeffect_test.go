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

// TestRootSettingInForceSomewhere: a root setting (conflict-status,
// volatile, unordered, fingerprint-headers) that some operation inheriting
// it uses (one whose fingerprint decides: strict here) is not warned as
// having no effect at the root, though the loose operations that also
// inherit it ignore it; with no such operation it still is.
func TestRootSettingInForceSomewhere(t *testing.T) {
	src := rootNoEffectSpec
	for _, tt := range []struct {
		name, strict string
		want         int
	}{
		{"one strict", "semantics: strict", 0},
		{"none strict", "semantics: loose", 4},
	} {
		spec := filepath.Join(t.TempDir(), "openapi.yaml")
		require.NoError(t, os.WriteFile(spec, []byte(strings.Replace(src, "semantics: strict", tt.strict, 1)), 0o644))
		s, diags := compile.Compile(spec, compile.Options{})
		require.NotNil(t, s, "%v", diags)
		n := 0
		for _, d := range diags {
			if strings.HasSuffix(d.Rule, "-no-effect") {
				n++
				if tt.want == 0 {
					t.Errorf("%s: %s", tt.name, d)
				}
			}
		}
		assert.Equal(t, tt.want, n, tt.name)
	}
}

const rootNoEffectSpec = `openapi: 3.0.3
info: {title: t, version: 1.0.0}
x-idempotency:
  semantics: loose
  conflict-status: 409
  volatile: [/client_time]
  unordered: [/tags]
  fingerprint-headers: [X-Tenant]
paths:
  /a:
    post:
      operationId: a
      x-idempotency: {semantics: strict}
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {client_time: {type: string}, tags: {type: array, items: {type: string}}}}
      responses:
        '201': {description: created}
  /b:
    post:
      operationId: b
      x-idempotency: true
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {client_time: {type: string}, tags: {type: array, items: {type: string}}}}
      responses:
        '201': {description: created}
  /c:
    post:
      operationId: c
      x-idempotency: true
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {client_time: {type: string}, tags: {type: array, items: {type: string}}}}
      responses:
        '201': {description: created}
`
