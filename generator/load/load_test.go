package load_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/load"
)

func write(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	return p
}

func TestLookupFollowsRefs(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /a:
    $ref: 'paths.yaml#/a'
components:
  parameters:
    Key: {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
`)
	write(t, dir, "paths.yaml", `a:
  post:
    parameters:
      - $ref: 'openapi.yaml#/components/parameters/Key'
    responses:
      '200': {description: ok}
`)
	doc, diags := load.Load(spec, load.Options{})
	require.Empty(t, diags)
	require.NotNil(t, doc.T.Paths.Find("/a").Post)

	n := doc.Lookup("/paths/~1a/post/parameters/0/required")
	require.NotNil(t, n.Node)
	assert.Equal(t, "true", n.Value)
	assert.Equal(t, filepath.Join(dir, "openapi.yaml"), n.File)
	assert.Equal(t, "/components/parameters/Key/required", n.Pointer)
	pos := doc.NodePos(n)
	assert.Equal(t, 8, pos.Line)

	assert.Nil(t, doc.Lookup("/paths/~1a/get").Node)
	assert.Nil(t, doc.Lookup("/paths/~1nowhere").Node)
}

func TestOverlayPositions(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "openapi.json", `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
 "paths": {"/a": {"post": {"responses": {"200": {"description": "ok"}}}}}}
`)
	ov := write(t, dir, "o.overlay.yaml", `overlay: 1.0.0
info: {title: o, version: "1"}
actions:
  - target: $.paths.*.post
    update:
      x-idempotency:
        semantics: strict
`)
	doc, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
	require.Empty(t, diags)
	n := doc.Lookup("/paths/~1a/post/x-idempotency/semantics")
	require.NotNil(t, n.Node)
	pos := doc.NodePos(n)
	assert.Equal(t, ov, pos.File)
	assert.Equal(t, 7, pos.Line)
	assert.Equal(t, 20, pos.Col)
	assert.Equal(t, "/actions/0/update/x-idempotency/semantics", pos.Pointer)
	assert.Equal(t, "strict", doc.T.Paths.Find("/a").Post.Extensions["x-idempotency"].(map[string]any)["semantics"])
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, diags := load.Load(filepath.Join(dir, "missing.yaml"), load.Options{})
	require.Len(t, diags, 1)
	assert.Equal(t, "load-error", diags[0].Rule)

	spec := write(t, dir, "s.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n")
	_, diags = load.Load(spec, load.Options{Overlays: []string{filepath.Join(dir, "nope.yaml")}})
	require.Len(t, diags, 1)
	assert.Equal(t, "overlay-error", diags[0].Rule)

	list := write(t, dir, "list.yaml", "- a\n- b\n")
	doc, diags := load.Load(list, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1)
	assert.Equal(t, 1, diags[0].Pos.Line)
}

// TestUnknownAnchorPosition: yaml.v3 names no line for an unknown anchor;
// the diagnostic points at the alias.
func TestUnknownAnchorPosition(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "s.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n      x-idempotency: *missing\n")
	doc, diags := load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1)
	assert.Equal(t, "load-error", diags[0].Rule)
	assert.Equal(t, 6, diags[0].Pos.Line)
	assert.Equal(t, 22, diags[0].Pos.Col)
	assert.Contains(t, diags[0].Message, "unknown anchor 'missing'")

	ok := write(t, dir, "ok.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n")
	ov := write(t, dir, "ov.yaml", "overlay: 1.0.0\ninfo: {title: o, version: '1'}\nactions:\n  - target: $.info\n    update: *nope\n")
	_, diags = load.Load(ok, load.Options{Overlays: []string{ov}})
	require.Len(t, diags, 1)
	assert.Equal(t, "overlay-error", diags[0].Rule)
	assert.Equal(t, 5, diags[0].Pos.Line)
	assert.Equal(t, 13, diags[0].Pos.Col)
}

// TestOverlayWarningOneLine: the overlay library's multi-line warning (an
// invalid RFC 9535 path, with the path echoed and a caret under it) is one
// diagnostic line, without the library's "update action (1 / 1)" prefix.
func TestOverlayWarningOneLine(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "s.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n      responses: {'201': {description: ok}}\n")
	ov := write(t, dir, "ov.yaml", "overlay: 1.0.0\ninfo: {title: o, version: '1'}\nactions:\n  - target: $.paths./a.post\n    update: {summary: s}\n")
	_, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
	require.Len(t, diags, 1)
	d := diags[0]
	assert.Equal(t, "overlay-warning", d.Rule)
	assert.Equal(t, 4, d.Pos.Line)
	assert.NotContains(t, d.Message, "\n")
	assert.NotContains(t, d.Message, "update action (1 / 1)")
	assert.NotContains(t, d.Message, "^")
	assert.Contains(t, d.Message, "invalid rfc9535 jsonpath $.paths./a.post: Error at line 1, column 8: unexpected token; This will be treated as an error")
	assert.Equal(t, 1, strings.Count(d.String(), "\n")+1)
}

// TestOverlayNoMatchSuggests: a target that names no path or operation of
// the spec gets the nearest one that exists, in the target's own quotes:
// the nearest path when the path is unknown (compared alone, so a long
// one too), one of the path's methods a contract may target when the
// method is not there (never a safe one); none when nothing is close, and
// never the target itself (when the path and method exist and a deeper
// part does not).
func TestOverlayNoMatchSuggests(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /pets:
    get: {responses: {'200': {description: ok}}}
    post: {responses: {'201': {description: ok}}}
  /pets/{id}:
    get: {responses: {'200': {description: ok}}}
    delete: {responses: {'204': {description: ok}}}
  /orders:
    get: {responses: {'200': {description: ok}}}
  /stock:
    get: {responses: {'200': {description: ok}}}
    patch: {responses: {'200': {description: ok}}}
  /v1/organizations/{organizationId}/payment-intents/{paymentIntentId}/capture:
    post: {responses: {'201': {description: ok}}}
`)
	for target, want := range map[string]string{
		`$.paths['/pet'].post`:                 ` (did you mean $.paths['/pets'].post?)`,
		`$.paths["/pet"].post`:                 ` (did you mean $.paths["/pets"].post?)`,
		`$.paths['/pets'].put`:                 ` (did you mean $.paths['/pets'].post?)`,
		`$.paths['/pets/{id}'].delet`:          ` (did you mean $.paths['/pets/{id}'].delete?)`,
		`$.paths['/pets/{id}'].put`:            ` (did you mean $.paths['/pets/{id}'].delete?)`,
		`$.paths['/stock'].post`:               ` (did you mean $.paths['/stock'].patch?)`,
		`$.paths['/orders'].post`:              ``, // only get: a contract cannot target it
		`$.paths['/orders'].put`:               ``,
		`$.paths['/pet']`:                      ` (did you mean $.paths['/pets']?)`,
		`$.paths['/pet'].post.responses`:       ` (did you mean $.paths['/pets'].post.responses?)`,
		`$.paths['/customers'].post`:           ``,
		`$.paths['/pets'].post.requestBody`:    ``, // the path and method exist
		`$.paths['/pets'].parameters`:          ``,
		`$.paths['/pets']['x-note']`:           ``,
		`$.paths['/pets/{id}'].get.parameters`: ``,
		`$.paths['/v1/organizations/{organizationId}/payment-intent/{paymentIntentId}/capture'].post`: ` (did you mean $.paths['/v1/organizations/{organizationId}/payment-intents/{paymentIntentId}/capture'].post?)`,
	} {
		ov := write(t, dir, "a.overlay.yaml", "overlay: 1.0.0\ninfo: {title: o, version: '1'}\nactions:\n  - target: "+strings.ReplaceAll(strings.ReplaceAll(target, `'`, `''`), "$", "'$")+"'\n    update: {x-idempotency: {semantics: strict}}\n")
		_, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
		require.Len(t, diags, 1, "%s: %v", target, diags)
		assert.Equal(t, "overlay-no-match", diags[0].Rule)
		assert.Equal(t, "overlay target "+target+" matches nothing in the spec"+want, diags[0].Message)
	}
}

// TestIdempotentMethod: PUT and DELETE, in any case (compile's put-delete
// warning and init's apply-to proposal both ask it); no other method.
func TestIdempotentMethod(t *testing.T) {
	for _, m := range []string{"PUT", "put", "DELETE", "delete"} {
		if !load.IdempotentMethod(m) {
			t.Errorf("IdempotentMethod(%q) = false", m)
		}
	}
	for _, m := range []string{"POST", "patch", "GET", "connect", ""} {
		if load.IdempotentMethod(m) {
			t.Errorf("IdempotentMethod(%q) = true", m)
		}
	}
}

// TestLoadAgainAfterEdit: a spec loaded again in the same process after an
// edit, and a document it refers to, are read again (kin-openapi's default
// reader cached every document for the life of the process, so the second
// load returned the first's title and schema).
func TestLoadAgainAfterEdit(t *testing.T) {
	dir := t.TempDir()
	spec, schemas := filepath.Join(dir, "openapi.yaml"), filepath.Join(dir, "schemas.yaml")
	write := func(title, prop string) {
		t.Helper()
		require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: `+title+`, version: 1.0.0}
paths:
  /orders:
    post:
      requestBody:
        content:
          application/json:
            schema: {$ref: 'schemas.yaml#/Order'}
      responses:
        '201': {description: created}
`), 0o644))
		require.NoError(t, os.WriteFile(schemas, []byte("Order:\n  type: object\n  properties:\n    "+prop+": {type: string}\n"), 0o644))
	}
	for _, v := range []struct{ title, prop string }{{"first", "a"}, {"second", "b"}} {
		write(v.title, v.prop)
		doc, diags := load.Load(spec, load.Options{})
		require.False(t, diags.HasErrors(), "%v", diags)
		assert.Equal(t, v.title, doc.T.Info.Title)
		schema := doc.T.Paths.Find("/orders").Post.RequestBody.Value.Content["application/json"].Schema.Value
		assert.Contains(t, schema.Properties, v.prop, "the referred document as it is now")
	}
}

// TestRefParseErrorPosition: a YAML error in a document a $ref reaches is
// reported in that document, at its line, not in the spec at that line.
func TestRefParseErrorPosition(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    $ref: 'paths.yaml#/a'\n")
	paths := write(t, dir, "paths.yaml", "a:\n  post:\n    responses:\n      '201': {description: ok}: x\n")
	doc, diags := load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, "load-error", diags[0].Rule)
	assert.Equal(t, paths, diags[0].Pos.File)
	assert.Equal(t, 4, diags[0].Pos.Line)
	assert.Contains(t, diags[0].Message, "cannot parse this document")

	write(t, dir, "paths.yaml", "a:\n  post:\n    responses: {'201': {description: ok}}\n    responses: {'200': {description: ok}}\n")
	doc, diags = load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, paths, diags[0].Pos.File)
	assert.Equal(t, 4, diags[0].Pos.Line)
	assert.Equal(t, 5, diags[0].Pos.Col)
	assert.Contains(t, diags[0].Message, `mapping key "responses" already defined at line 3`)
}

// TestVersion: a spec that is no OpenAPI 3.0 or 3.1 document is refused at
// its version field (the root without one); 3.2 and later 3.x minor
// versions as not supported yet.
func TestVersion(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		head        string
		line, col   int
		unsupported bool
		msg         string // "" when the spec loads
	}{
		{"openapi: 3.0.3", 0, 0, false, ""},
		{"openapi: 3.1.0", 0, 0, false, ""},
		{"openapi: 3.1.1-rc1", 0, 0, false, ""},
		{"openapi: '3.0'", 0, 0, false, ""},
		{`swagger: "2.0"`, 1, 10, false, "Swagger 2.0 is not supported: convert it to OpenAPI 3 (e.g. with swagger2openapi)"},
		{"x-note: none", 1, 1, false, "the spec has no openapi field"},
		{"openapi: 2.0.0", 1, 10, false, `openapi: "2.0.0" is no OpenAPI 3 version`},
		{"openapi: 4.0.0", 1, 10, false, `openapi: "4.0.0" is no OpenAPI 3 version`},
		{"openapi: {v: 3}", 1, 10, false, "openapi: not a version string is no OpenAPI 3 version"},
		{"openapi: 3.1", 1, 10, false, "openapi: 3.1 is read as a number: quote it (openapi: '3.1.0')"},
		{"openapi: 3.0", 1, 10, false, "openapi: 3.0 is read as a number: quote it (openapi: '3.0.0')"},
		{"openapi: 3", 1, 10, false, "openapi: 3 is read as a number: quote it (openapi: '3.1.0')"},
		{"openapi: !!str 3.1", 0, 0, false, ""},
		{"openapi: true", 1, 10, false, `openapi: "true" is no OpenAPI 3 version`},
		{"openapi: 3.2.0", 1, 10, true, "OpenAPI 3.2.0: idemgen reads OpenAPI 3.0 and 3.1 only"},
		{"openapi: 3.10.0", 1, 10, true, "OpenAPI 3.10.0: idemgen reads OpenAPI 3.0 and 3.1 only"},
	} {
		spec := write(t, dir, "s.yaml", c.head+"\ninfo: {title: t, version: '1'}\npaths: {}\n")
		doc, diags := load.Load(spec, load.Options{})
		if c.msg == "" {
			assert.Empty(t, diags, c.head)
			assert.NotNil(t, doc, c.head)
			continue
		}
		assert.Nil(t, doc, c.head)
		require.Len(t, diags, 1, c.head)
		assert.Equal(t, "load-error", diags[0].Rule, c.head)
		assert.Equal(t, c.unsupported, diags[0].Kind == diag.Unsupported, c.head)
		assert.Equal(t, c.line, diags[0].Pos.Line, c.head)
		assert.Equal(t, c.col, diags[0].Pos.Col, c.head)
		assert.Contains(t, diags[0].Message, c.msg, c.head)
	}
}

// TestRemoteRefTimeout: a remote document a $ref names, on a server that
// never answers, fails the load after Options.RemoteTimeout (it hung
// forever with http.DefaultClient).
func TestRemoteRefTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    $ref: '"+srv.URL+"/paths.yaml#/a'\n")
	done := make(chan diag.List, 1)
	go func() {
		_, diags := load.Load(spec, load.Options{RemoteTimeout: 200 * time.Millisecond})
		done <- diags
	}()
	select {
	case diags := <-done:
		require.Len(t, diags, 1, "%v", diags)
		assert.Equal(t, "load-error", diags[0].Rule)
		assert.Contains(t, diags[0].Message, "/paths.yaml not read within 200ms: timeout")
	case <-time.After(10 * time.Second):
		t.Fatal("Load still waits for the remote document after 10s")
	}
}

// TestDuplicateKeyAcrossTags: 200 and '200' are different YAML keys but
// one member of the JSON object kin-openapi reads, which kept one of the
// two responses silently.
func TestDuplicateKeyAcrossTags(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n      responses:\n        200: {description: a}\n        '200': {description: b}\n")
	doc, diags := load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, "load-error", diags[0].Rule)
	assert.Equal(t, 8, diags[0].Pos.Line)
	assert.Equal(t, 9, diags[0].Pos.Col)
	assert.Equal(t, `mapping key "200" already defined at line 7`, diags[0].Message)
}

// TestRemoteRefMaxBytes: a remote document larger than
// Options.RemoteMaxBytes fails the load (it was read whole, however large),
// and one of exactly that size loads.
func TestRemoteRefMaxBytes(t *testing.T) {
	paths := "a:\n  post:\n    responses:\n      '201': {description: created}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, paths)
	}))
	defer srv.Close()
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    $ref: '"+srv.URL+"/paths.yaml#/a'\n")

	_, diags := load.Load(spec, load.Options{RemoteMaxBytes: len(paths) - 1})
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, "load-error", diags[0].Rule)
	assert.Contains(t, diags[0].Message, "larger than")

	doc, diags := load.Load(spec, load.Options{RemoteMaxBytes: len(paths)})
	require.Empty(t, diags)
	require.NotNil(t, doc)
}

// TestKinErrorInRefFile: an error kin-openapi reports about a document a
// $ref reaches, which names no file, is reported in that document: at the
// node a pointer it names reaches, at the $ref when the pointer reaches
// none, at the line of an unmarshal error.
func TestKinErrorInRefFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "paths"), 0o755))
	spec := func(ref string) string {
		return write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /orders:\n    $ref: "+ref+"\n")
	}
	orders := write(t, dir, "paths/orders.yaml", "x: 1\na: 5\n")
	for _, tc := range []struct {
		ref, file, msg string
		line, col      int
	}{
		{"./paths/orders.yaml#/a", orders, `bad data in "#/a"`, 2, 4},
		{"./paths/orders.yaml#/zz", "openapi.yaml", `failed to resolve "zz"`, 5, 11},
		{"./paths/seq.yaml", filepath.Join(dir, "paths", "seq.yaml"), "cannot construct !!seq", 2, 1},
	} {
		write(t, dir, "paths/seq.yaml", "# a list\n- 1\n")
		p := spec(tc.ref)
		if tc.file == "openapi.yaml" {
			tc.file = p
		}
		doc, diags := load.Load(p, load.Options{})
		assert.Nil(t, doc)
		require.Len(t, diags, 1, "%v", diags)
		d := diags[0]
		assert.Equal(t, "load-error", d.Rule, tc.ref)
		assert.Contains(t, d.Message, tc.msg, tc.ref)
		assert.Equal(t, tc.file, d.Pos.File, tc.ref)
		assert.Equal(t, tc.line, d.Pos.Line, tc.ref)
		assert.Equal(t, tc.col, d.Pos.Col, tc.ref)
	}
}

// TestKinErrorInRemoteDocument: the line of an unmarshal error about a
// remote document a $ref reaches is one of that document (its URL).
func TestKinErrorInRemoteDocument(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "# a list\n- 1\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    $ref: '"+srv.URL+"/item.yaml'\n")
	doc, diags := load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1, "%v", diags)
	assert.Contains(t, diags[0].Message, "cannot construct !!seq")
	assert.Equal(t, srv.URL+"/item.yaml", diags[0].Pos.File)
	assert.Equal(t, 2, diags[0].Pos.Line)
}

// TestMissingRefFile: a $ref to a file that does not exist is reported at
// the $ref (it was at the root spec, without a line).
func TestMissingRefFile(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    $ref: 'paths/missing.yaml#/a'\n")
	doc, diags := load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, "load-error", diags[0].Rule)
	assert.Equal(t, spec, diags[0].Pos.File)
	assert.Equal(t, 5, diags[0].Pos.Line)
	assert.Equal(t, 11, diags[0].Pos.Col)
	assert.Contains(t, diags[0].Message, "paths/missing.yaml")
}

// TestJSONSyntaxErrorPosition: a JSON document's syntax error is reported
// at the offending character (line, and column in characters), with
// encoding/json's message, in the spec and in a document a $ref reaches;
// a byte order mark is no column; a truncated document is reported at its
// end.
func TestJSONSyntaxErrorPosition(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"comma.json", "{\"openapi\": \"3.0.3\",\n \"info\": {\"title\": \"été\", \"v\": 1,,\n}}", 2, 34, "invalid character ',' looking for beginning of object key string"},
		{"bom.json", "\ufeff{,}", 1, 2, "invalid character ',' looking for beginning of object key string"},
		{"truncated", "{\"openapi\": \"3.0.3\",\n \"info\": {", 2, 11, "unexpected end of JSON input"},
	} {
		spec := write(t, dir, tt.name, tt.src)
		doc, diags := load.Load(spec, load.Options{})
		assert.Nil(t, doc)
		requireOneDiagAt(t, diags, "load-error", "", tt.line, tt.col, tt.name)
		assert.Equal(t, "cannot parse the spec: JSON: "+tt.msg, diags[0].Message, tt.name)
	}

	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    $ref: 'paths.json#/a'\n")
	paths := write(t, dir, "paths.json", "{\"a\": {\"post\": {\n  \"responses\": {\"201\": {\"description\": \"ok\"}}}}]\n")
	doc, diags := load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, paths, diags[0].Pos.File)
	assert.Equal(t, [2]int{2, 48}, [2]int{diags[0].Pos.Line, diags[0].Pos.Col})
	assert.Equal(t, "cannot parse this document, which a $ref reaches: JSON: invalid character ']' after object key:value pair", diags[0].Message)
}

// TestJSONOverlaySyntaxErrorPosition: an overlay in JSON with a syntax
// error is reported (overlay-error) as a JSON spec is: at the offending
// character's line and column, with encoding/json's message (it was a line
// early, with the YAML parser's message about nodes); a YAML overlay keeps
// the YAML parser's.
func TestJSONOverlaySyntaxErrorPosition(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n")
	for _, tt := range []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"comma.overlay.json", "{\"overlay\": \"1.0.0\",\n \"info\": {\"title\": \"o\", \"version\": \"1\"},\n \"actions\": [{\"target\": \"$.info\",,\n \"update\": {}}]}", 3, 34, "invalid character ',' looking for beginning of object key string"},
		{"truncated.json", "{\"overlay\": \"1.0.0\",\n \"actions\": [", 2, 14, "unexpected end of JSON input"},
		{"ext", "{\"overlay\": \"1.0.0\" \"info\": {}}", 1, 21, "invalid character '\"' after object key:value pair"},
	} {
		ov := write(t, dir, tt.name, tt.src)
		_, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
		requireOneDiagAt(t, diags, "overlay-error", ov, tt.line, tt.col, tt.name)
		assert.Equal(t, "cannot parse the overlay: JSON: "+tt.msg, diags[0].Message, tt.name)
	}

	ov := write(t, dir, "bad.overlay.yaml", "overlay: 1.0.0\nactions: [\n")
	_, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, "overlay-error", diags[0].Rule)
	assert.NotContains(t, diags[0].Message, "JSON")
}

// TestYAMLFlowSyntaxErrorPosition: a YAML document that starts with { (flow
// style: unquoted keys), or YAML in a file named .json, is reported at the
// YAML parser's mistake (line and column), not at encoding/json's first
// refusal (1:2, an unquoted key), in a spec and in an overlay.
func TestYAMLFlowSyntaxErrorPosition(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, src string
		line, col int
	}{
		{"flow.yaml", "{openapi: 3.0.3, info: {title: t, version: 1.0.0},\n paths: {},\n x: [1,,2]}\n", 3, 8},
		{"block.json", "openapi: 3.0.3\ninfo: {title: t, version: 1.0.0}\npaths: {}\nx: [1,,2]\n", 4, 7},
	} {
		spec := write(t, dir, tt.name, tt.src)
		doc, diags := load.Load(spec, load.Options{})
		assert.Nil(t, doc)
		requireOneDiagAt(t, diags, "load-error", "", tt.line, tt.col, tt.name)
		assert.NotContains(t, diags[0].Message, "JSON", tt.name)
		assert.Contains(t, diags[0].Message, "line "+strconv.Itoa(tt.line)+": did not find expected node content", tt.name)
	}
	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n")
	ov := write(t, dir, "flow.overlay.yaml", "{overlay: 1.0.0, info: {title: o, version: 1},\n # a comment\n actions: [{target: $.info,, update: {}}]}\n")
	_, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, "overlay-error", diags[0].Rule)
	assert.Equal(t, 3, diags[0].Pos.Line)
	assert.NotContains(t, diags[0].Message, "JSON")
}

// TestTrailingContent: content after a file's document (anything after a
// JSON value, a second YAML document) is an error where it starts, in a
// spec (load-error), a document a $ref reaches and an overlay
// (overlay-error). The YAML parser read the first document only: the rest
// was dropped silently, and a JSON spec with a stray } got kin-openapi's
// message at 1:1.
func TestTrailingContent(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"extra.json", "{\"openapi\": \"3.0.3\"}}", 1, 21, "JSON: invalid character '}' after top-level value"},
		{"extra2.json", "{\"openapi\": \"3.0.3\", \"info\": {\"title\": \"t\", \"version\": \"1\"}, \"paths\": {}}\n}\n", 2, 1, "JSON: invalid character '}' after top-level value"},
		{"flow.yaml", "{openapi: 3.0.3, info: {title: t, version: '1'}, paths: {}}}", 1, 60, "content after the document: did not find expected <document start>"},
		{"two.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n---\nx: 1\n", 4, 1, "a second document starts here: a file holds one document"},
	} {
		spec := write(t, dir, tt.name, tt.src)
		doc, diags := load.Load(spec, load.Options{})
		assert.Nil(t, doc, tt.name)
		requireOneDiagAt(t, diags, "load-error", "", tt.line, tt.col, tt.name)
		assert.Equal(t, "cannot parse the spec: "+tt.msg, diags[0].Message, tt.name)
	}

	spec := write(t, dir, "openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n")
	for _, tt := range []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"ov.json", "{\"overlay\": \"1.0.0\", \"info\": {\"title\": \"o\", \"version\": \"1\"},\n \"actions\": [{\"target\": \"$.info\", \"update\": {\"x-a\": 1}}]}\n}\n", 3, 1, "JSON: invalid character '}' after top-level value"},
		{"ov.yaml", "overlay: 1.0.0\ninfo: {title: o, version: '1'}\nactions:\n  - target: $.info\n    update: {x-a: 1}\n---\nactions: []\n", 6, 1, "a second document starts here: a file holds one document"},
	} {
		ov := write(t, dir, tt.name, tt.src)
		_, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
		requireOneDiagAt(t, diags, "overlay-error", ov, tt.line, tt.col, tt.name)
		assert.Equal(t, "cannot parse the overlay: "+tt.msg, diags[0].Message, tt.name)
	}

	spec = write(t, dir, "ref.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    $ref: 'more.yaml#/a'\n")
	more := write(t, dir, "more.yaml", "a:\n  post:\n    responses: {'201': {description: ok}}\n---\nb: 1\n")
	doc, diags := load.Load(spec, load.Options{})
	assert.Nil(t, doc)
	require.NotEmpty(t, diags)
	assert.Equal(t, more, diags[0].Pos.File)
	assert.Equal(t, [2]int{4, 1}, [2]int{diags[0].Pos.Line, diags[0].Pos.Col})
	assert.Equal(t, "cannot parse this document, which a $ref reaches: a second document starts here: a file holds one document", diags[0].Message)
}

// requireOneDiagAt requires diags to be one diagnostic of rule at line:col
// (in file, unless file is ""); name names the case.
func requireOneDiagAt(t *testing.T, diags []diag.Diagnostic, rule, file string, line, col int, name string) {
	t.Helper()
	require.Len(t, diags, 1, "%s: %v", name, diags)
	assert.Equal(t, rule, diags[0].Rule, name)
	if file != "" {
		assert.Equal(t, file, diags[0].Pos.File, name)
	}
	assert.Equal(t, [2]int{line, col}, [2]int{diags[0].Pos.Line, diags[0].Pos.Col}, name)
}

// TestOverlayLegacyFilter: a filter expression in an overlay: 1.0.0
// document without x-speakeasy-jsonpath: rfc9535 (the overlay library's
// legacy JSONPath, as in oapi-codegen) is applied without a warning when
// RFC 9535 selects the same nodes (a parameter by its name, the form of a
// fix overlay for a vendor's spec); when the two differ, the warning says
// how many nodes each selects and what to do, at the action's target.
func TestOverlayLegacyFilter(t *testing.T) {
	dir := t.TempDir()
	spec := write(t, dir, "s.yaml", `openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /a:
    post:
      operationId: x
      parameters:
        - {name: q, in: query, schema: {type: string}}
        - {name: Idempotency-Key, in: header, schema: {type: string}}
      responses: {'201': {description: ok}}
`)
	const head = "overlay: 1.0.0\ninfo: {title: o, version: '1'}\n"
	byName := "actions:\n  - target: \"$.paths['/a'].post.parameters[?(@.name=='Idempotency-Key')]\"\n    update: {required: true}\n"
	for _, ext := range []string{"", "x-speakeasy-jsonpath: rfc9535\n"} {
		ov := write(t, dir, "name.yaml", head+ext+byName)
		doc, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
		require.Empty(t, diags, "extension %q", ext)
		assert.True(t, doc.T.Paths.Find("/a").Post.Parameters[1].Value.Required)
	}

	// Legacy JSONPath selects the operation here, RFC 9535 nothing.
	ov := write(t, dir, "differ.yaml", head+"actions:\n  - target: \"$.paths.*.*[?(@.operationId=='x')]\"\n    update: {summary: s}\n")
	_, diags := load.Load(spec, load.Options{Overlays: []string{ov}})
	requireOneDiagAt(t, diags, "overlay-warning", ov, 4, 13, "differ")
	assert.Contains(t, diags[0].Message, "selects 1 node with the legacy JSONPath implementation that an overlay: 1.0.0 document gets without `x-speakeasy-jsonpath: rfc9535` (the action changed those, as oapi-codegen's overlay does) and 0 with RFC 9535's")
}
