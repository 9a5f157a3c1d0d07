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
