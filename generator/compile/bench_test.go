package compile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
)

// bigSpec writes a synthetic spec with n operations (n/2 paths, each with a
// GET and an annotated POST whose body and key parameter are $refs).
func bigSpec(tb testing.TB, n int) (string, int64) {
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: big, version: '1'}\nx-idempotency: {semantics: strict, window: 24h}\npaths:\n")
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&b, `  /things%d/{id}:
    get:
      operationId: getThing%d
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        '200': {description: ok}
    post:
      operationId: createThing%d
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - $ref: '#/components/parameters/IdempotencyKey'
      x-idempotency:
        volatile: [/client_time, /items/*/note]
        unordered: [/tags]
        key: {required: false}
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Thing%d'}
      responses:
        '201': {description: created}
`, i, i, i, i%50)
	}
	b.WriteString("components:\n  parameters:\n    IdempotencyKey: {name: Idempotency-Key, in: header, required: false, schema: {type: string}}\n  schemas:\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, `    Thing%d:
      type: object
      properties:
        name: {type: string}
        client_time: {type: string, format: date-time}
        tags: {type: array, uniqueItems: true, items: {type: string}}
        items:
          type: array
          items: {type: object, properties: {sku: {type: string}, note: {type: string}}}
`, i)
	}
	path := filepath.Join(tb.TempDir(), "big.yaml")
	require.NoError(tb, os.WriteFile(path, []byte(b.String()), 0o644))
	return path, int64(b.Len())
}

func TestBigSpec(t *testing.T) {
	path, _ := bigSpec(t, 5000)
	spec, diags := compile.Compile(path, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags[:min(len(diags), 5)])
	assert.Len(t, spec.Operations, 2500)
	assert.Equal(t, []string{"/client_time", "/items/*/note"}, []string{spec.Operations[0].Policy.Volatile[0].Matches[0], spec.Operations[0].Policy.Volatile[1].Matches[0]})
}

// BenchmarkCompile5000 loads and checks a spec with 5000 operations (2500
// of them annotated).
func BenchmarkCompile5000(b *testing.B) {
	path, size := bigSpec(b, 5000)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		_, diags := compile.Compile(path, compile.Options{})
		if diags.HasErrors() {
			b.Fatal(diags[0])
		}
	}
}

// BenchmarkCompileModernTreasury compiles the largest shared spec (181
// operations, 700 KB) through its overlay.
func BenchmarkCompileModernTreasury(b *testing.B) {
	specs := sharedSpecs(b)
	path := filepath.Join(specs, "modern-treasury.yaml")
	st, err := os.Stat(path)
	require.NoError(b, err)
	b.SetBytes(st.Size())
	b.ReportAllocs()
	ov := []string{filepath.Join("..", "..", "testdata", "overlays", "modern-treasury.overlay.yaml")}
	for b.Loop() {
		if _, diags := compile.Compile(path, compile.Options{Overlays: ov}); diags.HasErrors() {
			b.Fatal(diags[0])
		}
	}
}
