package compile_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// TestRootArrayUnordered: unordered: [""] declares a body that is an
// array a multiset, end to end: the contract compiles (an object body is
// refused as not an array), the nested sets are still candidates, and the
// fingerprint of the reordered array is the same.
func TestRootArrayUnordered(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: Root array, version: 1.0.0}
paths:
  /batch:
    post:
      operationId: batch
      x-idempotency: {semantics: strict, unordered: [""]}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string, maxLength: 255}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: array
              items:
                type: object
                properties:
                  tags: {type: array, uniqueItems: true, items: {type: string}}
      responses: {'201': {description: ok}}
  /obj:
    post:
      operationId: obj
      x-idempotency: {semantics: strict, unordered: [""]}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string, maxLength: 255}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, properties: {a: {type: string}}}
      responses: {'201': {description: ok}}
`), 0o644))
	s, diags := compile.Compile(spec, compile.Options{})
	require.NotNil(t, s, "%v", diags)
	rules := map[string]string{}
	for _, d := range diags {
		rules[d.Rule] = d.Message
	}
	assert.NotContains(t, rules, "bad-pointer")
	assert.Contains(t, rules["unordered-not-array"], `unordered: "" names an object`)
	assert.Contains(t, rules["unordered-candidate"], "/*/tags")

	var unordered []string
	for _, op := range s.Operations {
		if op.Path == "/batch" {
			for _, p := range op.Policy.Unordered {
				unordered = append(unordered, p.Pointer)
			}
		}
	}
	require.Equal(t, []string{""}, unordered)
	h, err := fingerprint.New(fingerprint.Options{Unordered: unordered})
	require.NoError(t, err)
	sum := func(body string) fingerprint.Fingerprint {
		return h.Sum(&fingerprint.Input{Method: http.MethodPost, Operation: "batch", Path: "/batch", ContentType: "application/json", Body: []byte(body)})
	}
	assert.Equal(t, sum(`[{"tags":["a","b"]},{"tags":["c"]}]`), sum(`[{"tags":["c"]},{"tags":["a","b"]}]`))
	assert.NotEqual(t, sum(`[{"tags":["a","b"]},{"tags":["c"]}]`), sum(`[{"tags":["b","a"]},{"tags":["c"]}]`), "the items' own arrays keep their order")
}
