package compile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
)

// TestBodyField: a body key gets the Go field of oapi-codegen's request
// body type when idemgen can tell it (a top-level string member of an
// object schema, application/json alone), else none (the strict middleware
// then reads the key from the body's bytes).
func TestBodyField(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	op := func(path, key, content string) string {
		return `
  ` + path + `:
    post:
      x-idempotency: {semantics: window, key: {` + key + `}}
      requestBody:
        content:
` + content + `
      responses: {'201': {description: ok}}`
	}
	json := func(schema string) string { return "          application/json: {schema: " + schema + "}" }
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: T, version: '1'}
paths:`+
		op("/ref", "body: /idempotency_key", json("{$ref: '#/components/schemas/Transfer'}"))+
		op("/required", "body: /idempotency_key, required: true", json("{type: object, required: [idempotency_key], properties: {idempotency_key: {type: string}}}"))+
		op("/goname", "body: /k", json("{type: object, properties: {k: {type: string, x-go-name: RequestKey}}}"))+
		op("/nested", "body: /meta/key", json("{type: object, properties: {meta: {type: object, properties: {key: {type: string}}}}}"))+
		op("/uuid", "body: /key, format: uuid", json("{type: object, properties: {key: {type: string, format: uuid}}}"))+
		op("/enum", "body: /key", json("{type: object, properties: {key: {type: string, enum: [a, b]}}}"))+
		op("/nullable", "body: /key", json("{type: object, properties: {key: {type: string, nullable: true}}}"))+
		op("/gotype", "body: /key", json("{type: object, properties: {key: {type: string, x-go-type: MyKey}}}"))+
		op("/allof", "body: /key", json("{allOf: [{type: object, properties: {key: {type: string}}}]}"))+
		op("/propref", "body: /key", json("{type: object, properties: {key: {$ref: '#/components/schemas/Key'}}}"))+
		op("/two", "body: /key", json("{type: object, properties: {key: {type: string}}}")+"\n          text/plain: {schema: {type: string}}")+`
components:
  schemas:
    Key: {type: string}
    Transfer:
      type: object
      properties:
        idempotency_key: {type: string}
        amount: {type: integer}
`), 0o644))
	s, diags := compile.Compile(spec, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	got := map[string]string{}
	for _, o := range s.Operations {
		got[o.Path] = o.Key.BodyField
	}
	assert.Equal(t, map[string]string{
		"/ref": "IdempotencyKey", "/required": "IdempotencyKey", "/goname": "RequestKey",
		"/nested": "", "/uuid": "", "/enum": "", "/nullable": "", "/gotype": "", "/allof": "", "/propref": "", "/two": "",
	}, got)
}
