package docs_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/emit/docs"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/internal/gentest"
	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// cases are the specs whose documentation is kept as a golden file in
// testdata/docs/<name>.md.
func cases(t *testing.T) []struct{ name, spec, overlay string } {
	specs := testenv.SpecsDir(t)
	root := filepath.Join("..", "..", "..", "testdata")
	return []struct{ name, spec, overlay string }{
		{"petstore", filepath.Join(specs, "petstore-expanded.yaml"), filepath.Join(root, "overlays", "petstore.overlay.yaml")},
		{"adyen", filepath.Join(specs, "adyen-transfers-v4.json"), filepath.Join(root, "overlays", "adyen.overlay.yaml")},
		{"clean-full", filepath.Join(root, "contract", "clean-full", "openapi.yaml"), ""},
		{"coupons", filepath.Join(root, "augment", "coupons", "openapi.yaml"), ""},
		{"none", filepath.Join(specs, "petstore-expanded.yaml"), ""},
	}
}

func compileCase(t *testing.T, spec, overlay string) *ir.Spec {
	t.Helper()
	var ovs []string
	if overlay != "" {
		ovs = []string{overlay}
	}
	s, diags := compile.Compile(spec, compile.Options{Overlays: ovs})
	require.NotNil(t, s)
	require.False(t, diags.HasErrors(), "%v", diags)
	return s
}

func TestGolden(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			spec := compileCase(t, c.spec, c.overlay)
			got, err := docs.Render(spec)
			require.NoError(t, err)
			again, err := docs.Render(spec)
			require.NoError(t, err)
			assert.Equal(t, string(got), string(again), "deterministic")
			gentest.GoldenFile(t, filepath.Join("..", "..", "..", "testdata", "docs", c.name+".md"), got, *update)
		})
	}
}

func TestEmitterRegistered(t *testing.T) {
	f, ok := emitter.Lookup("docs")
	require.True(t, ok)
	files, err := f(&ir.Spec{Title: "T", Operations: []*ir.Operation{}}, emitter.Options{})
	require.NoError(t, err)
	require.Len(t, files, 1)
	assert.Equal(t, docs.FileName, files[0].Path)
}

// The example problem quotes the detail the engine writes for a request
// still in flight, taken from the runtime, not a paraphrase of it.
func TestInFlightExampleIsTheRuntimes(t *testing.T) {
	c := cases(t)[2] // clean-full
	out, err := docs.Render(compileCase(t, c.spec, c.overlay))
	require.NoError(t, err)
	assert.Contains(t, string(out), `"detail": "`+idem.DetailKeyInUse+`",`)
}

// Header names are printed as the spec spells them, not canonicalized
// (WWW-Authenticate, not Www-Authenticate); the runtime canonicalizes them
// itself.
func TestHeaderSpelling(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: H, version: '1'}
paths:
  /a:
    post:
      operationId: a
      x-idempotency:
        semantics: strict
        fingerprint-headers: [WWW-Authenticate, x-tenant-ID]
        response: {headers: [ETag]}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
      responses: {'200': {description: ok}}
`), 0o644))
	out, err := docs.Render(compileCase(t, spec, ""))
	require.NoError(t, err)
	assert.Contains(t, string(out), "headers `WWW-Authenticate`, `x-tenant-ID` and JSON body")
	assert.Contains(t, string(out), "`Content-Type`, `Content-Encoding`, `ETag`;")
	assert.NotContains(t, string(out), "Www-Authenticate")
}

// "The same request" is worded by the body's content type, as the
// fingerprint compares it: JSON as data, a form field by field, anything
// else byte for byte (a multipart body with its boundary).
func TestBodyComparison(t *testing.T) {
	c := filepath.Join("..", "..", "..", "testdata", "contract", "raw-body-strict", "openapi.yaml")
	out, err := docs.Render(compileCase(t, c, ""))
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, "and body, by its content type: a JSON body (`application/json`) is compared as data: member order, white space and number spelling do not matter; any other body (`multipart/form-data`) is compared byte for byte, with the parameters of its `Content-Type` (such as `charset`); a multipart body's boundary is among those bytes and parameters, so a retry must resend the same bytes and `Content-Type`, boundary included.")
	assert.Contains(t, s, "and body (`multipart/mixed`), compared byte for byte, with the parameters of its `Content-Type` (such as `charset`); a multipart body's boundary is among those bytes and parameters")
	assert.Contains(t, s, "and form body, compared field by field: fields in any order (the values of one field in theirs), `+` and `%20` alike.")
	assert.Equal(t, 0, strings.Count(s, "JSON body, compared as data"), "no operation of this spec has a JSON-only body")
}
