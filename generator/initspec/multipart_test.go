package initspec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMultipartAndJSON: an operation whose body is multipart or JSON is
// proposed loose semantics for the multipart clients, with a TODO that
// says what the JSON ones lose under loose; a multipart-only one says
// nothing of JSON. A note (a safe method that declares a key) carries
// where the operation is written.
func TestMultipartAndJSON(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	op := func(path, media string) string {
		s := "  " + path + ":\n    post:\n      parameters:\n        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}\n      requestBody:\n        content:\n"
		for _, m := range strings.Split(media, ",") {
			s += "          " + m + ":\n            schema: {type: object}\n"
		}
		return s + "      responses: {'201': {description: created}}\n"
	}
	src := "openapi: 3.0.3\ninfo: {title: T, version: 1.0.0}\npaths:\n" +
		op("/documents", "application/json,multipart/form-data") +
		op("/uploads", "multipart/form-data") +
		"  /lookups:\n    get:\n      parameters:\n        - {name: Idempotency-Key, in: header, schema: {type: string}}\n      responses: {'200': {description: ok}}\n"
	require.NoError(t, os.WriteFile(spec, []byte(src), 0o644))
	p, _ := propose(t, spec)
	require.Len(t, p.Candidates, 2)
	assert.Equal(t, "application/json", p.Candidates[0].AlsoJSON)
	assert.Empty(t, p.Candidates[1].AlsoJSON)
	ov := string(p.Overlay)
	assert.Equal(t, 2, strings.Count(ov, "semantics: loose # TODO(idemgen): confirm. loose, not strict: the body is multipart/form-data"))
	assert.Equal(t, 1, strings.Count(ov, "The body may also be application/json, which loses under loose the check that a reused key comes with the same request (422)"))

	require.Len(t, p.Notes, 1)
	assert.Equal(t, "GET /lookups", p.Notes[0].Where())
	assert.Equal(t, spec, p.Notes[0].Pos.File)
	assert.Equal(t, strings.Count(src[:strings.Index(src, "    get:")], "\n")+1, p.Notes[0].Pos.Line)
	assert.Equal(t, 5, p.Notes[0].Pos.Col)
}

// TestMultipartLooseNoFingerprintSettings: an operation proposed loose
// semantics (its body may be multipart) is proposed no volatile or
// unordered members, even those its JSON body's schema names like a clock
// or marks uniqueItems: under loose semantics they would have no effect,
// and check would say so (volatile-no-effect, unordered-no-effect). A JSON
// only operation still gets them.
func TestMultipartLooseNoFingerprintSettings(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	op := func(path, media string) string {
		s := "  " + path + ":\n    post:\n      parameters:\n        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}\n      requestBody:\n        content:\n"
		for _, m := range strings.Split(media, ",") {
			s += "          " + m + ":\n            schema: {$ref: '#/components/schemas/Doc'}\n"
		}
		return s + "      responses: {'201': {description: created}}\n"
	}
	src := "openapi: 3.0.3\ninfo: {title: T, version: 1.0.0}\npaths:\n" +
		op("/documents", "application/json,multipart/form-data") +
		op("/notes", "application/json") +
		"components:\n  schemas:\n    Doc:\n      type: object\n      properties:\n        client_time: {type: string}\n        tags: {type: array, uniqueItems: true, items: {type: string}}\n"
	require.NoError(t, os.WriteFile(spec, []byte(src), 0o644))
	p, ov := propose(t, spec)
	require.Len(t, p.Candidates, 2)
	assert.Empty(t, p.Candidates[0].Volatile, "POST /documents (loose)")
	assert.Empty(t, p.Candidates[0].Unordered, "POST /documents (loose)")
	assert.Equal(t, []string{"/client_time"}, p.Candidates[1].Volatile, "POST /notes (strict)")
	assert.Equal(t, []string{"/tags"}, p.Candidates[1].Unordered, "POST /notes (strict)")
	for _, d := range checkWith(t, spec, ov) {
		assert.NotContains(t, d.Rule, "no-effect", "%s", d)
	}
}
