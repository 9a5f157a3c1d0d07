package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpecOutRelativeRefs: idemgen spec -o into another directory refuses a
// spec whose relative $refs would not resolve from there (it wrote a spec
// that could not be loaded: "open out/schemas/order.yaml: no such file"),
// and still writes it beside the spec, where they resolve.
func TestSpecOutRelativeRefs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	write("openapi.yaml", `openapi: 3.0.3
info: {title: t, version: "1"}
x-idempotency:
  window: 10m
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotency: {semantics: strict}
      requestBody:
        content:
          application/json:
            schema: {$ref: "schemas/order.yaml"}
      responses:
        "201": {description: created}
`)
	write("schemas/order.yaml", "type: object\nproperties:\n  sku: {type: string}\n")
	spec := filepath.Join(dir, "openapi.yaml")

	var stdout, stderr bytes.Buffer
	out := filepath.Join(dir, "out", "aug.yaml")
	code := Main([]string{"spec", "-o", out, spec}, &stdout, &stderr)
	assert.Equal(t, ExitError, code, stderr.String())
	assert.Contains(t, stderr.String(), "schemas/order.yaml")
	assert.Contains(t, stderr.String(), "would not resolve")
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing written")

	stderr.Reset()
	beside := filepath.Join(dir, "aug.yaml")
	code = Main([]string{"spec", "-o", beside, spec}, &stdout, &stderr)
	require.Equal(t, ExitOK, code, stderr.String())
	stderr.Reset()
	code = Main([]string{"check", beside}, &stdout, &stderr)
	assert.NotEqual(t, ExitError, code, stderr.String())
}

func TestRelativeRefs(t *testing.T) {
	spec := []byte(`a: {$ref: "#/components/x"}
b: {$ref: "paths/orders.yaml#/post"}
c: {$ref: "https://example.com/s.yaml"}
d: {$ref: "/abs/s.yaml"}
e: [{$ref: "../common.yaml"}, {$ref: "paths/orders.yaml#/post"}]
`)
	assert.Equal(t, []string{"paths/orders.yaml#/post", "../common.yaml"}, relativeRefs(spec))
	assert.Equal(t, "a, b, c and 2 more", refList([]string{"a", "b", "c", "d", "e"}))
}

// TestRelativeRefsSkipValues: values that only look like references (under
// example, examples values, default, const, enum, extensions) are no
// relative $refs (spec -o out/r.json r.json refused a valid spec for
// "example": {"$ref": "not/a/ref.yaml"}); references where the loader
// follows them are, even under names that are also keywords (a property
// called example, the default response, an Example object by $ref).
func TestRelativeRefsSkipValues(t *testing.T) {
	spec := []byte(`openapi: 3.1.0
x-tool: {$ref: "x/root.yaml"}
paths:
  /a:
    x-meta: {$ref: "x/item.yaml"}
    post:
      parameters:
        - {$ref: "params/p.yaml"}
        - name: q
          in: query
          example: {$ref: "no/param-example.yaml"}
          schema: {type: object, default: {$ref: "no/default.yaml"}}
      requestBody:
        content:
          application/json:
            example: {$ref: "no/example.yaml"}
            examples:
              one: {$ref: "examples/one.yaml"}
              two: {value: {$ref: "no/value.yaml"}}
            schema:
              type: object
              const: {$ref: "no/const.yaml"}
              enum: [{$ref: "no/enum.yaml"}]
              examples: [{$ref: "no/schema-examples.yaml"}]
              properties:
                example: {$ref: "schemas/example-prop.yaml"}
                default: {$ref: "schemas/default-prop.yaml"}
                x-prop: {$ref: "schemas/x-prop.yaml"}
      responses:
        default: {$ref: "responses/default.yaml"}
        "200": {description: ok, x-idempotency-note: {$ref: "no/x.yaml"}}
components:
  examples:
    three: {value: {$ref: "no/component-value.yaml"}}
    four: {$ref: "examples/four.yaml"}
  schemas:
    example: {$ref: "schemas/named-example.yaml"}
`)
	assert.Equal(t, []string{
		"params/p.yaml", "examples/one.yaml", "schemas/example-prop.yaml", "schemas/default-prop.yaml", "schemas/x-prop.yaml",
		"responses/default.yaml", "examples/four.yaml", "schemas/named-example.yaml",
	}, relativeRefs(spec))

	// spec -o into another directory writes a spec whose only "$ref"
	// outside the document is an example's value.
	dir := t.TempDir()
	src := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(src, []byte(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
 "paths": {"/orders": {"post": {"operationId": "createOrder", "x-idempotency": {"semantics": "strict", "window": "10m"},
  "requestBody": {"content": {"application/json": {"schema": {"type": "object"}, "example": {"$ref": "not/a/ref.yaml"}}}},
  "responses": {"201": {"description": "created"}}}}}}
`), 0o644))
	var stdout, stderr bytes.Buffer
	out := filepath.Join(dir, "out", "r.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	code := Main([]string{"spec", "-o", out, src}, &stdout, &stderr)
	assert.Equal(t, ExitOK, code, stderr.String())
	assert.NotContains(t, stderr.String(), "would not resolve")
	_, err := os.Stat(out)
	assert.NoError(t, err)
}
