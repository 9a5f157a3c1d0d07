package server

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/generator/emit/internal/gogen"
	"github.com/idemgen/idemgen/generator/ir"
)

func TestSegMatches(t *testing.T) {
	s := gogen.Segment{Prefix: "v", Suffix: ".json", Param: true}
	assert.True(t, segMatches(s, "v1.json"))
	assert.False(t, segMatches(s, "v.json"), "a parameter is never empty")
	assert.False(t, segMatches(s, "w1.json"))
	assert.False(t, segMatches(gogen.Segment{Param: true}, ""))
	assert.True(t, segMatches(gogen.Segment{Prefix: "a"}, "a"))
}

func TestOverlapsAndOrder(t *testing.T) {
	p := gogen.ParseTemplate
	assert.True(t, overlaps(p("/a/b"), p("/a/{x}")))
	assert.True(t, overlaps(p("/{y}/b"), p("/a/{x}")))
	assert.False(t, overlaps(p("/a/b"), p("/a/{x}/c")))
	assert.False(t, overlaps(p("/a/b"), p("/c/{x}")))
	assert.True(t, overlaps(p("/f/v1.json"), p("/f/v{n}.json")))
	assert.False(t, overlaps(p("/f/v1.xml"), p("/f/v{n}.json")))

	r := func(path string) route { return route{path: path, segs: p(path)} }
	assert.Negative(t, before(r("/a/b"), r("/a/{x}")))
	assert.Negative(t, before(r("/a/{x}"), r("/{y}/b")), "the first segment decides")
	assert.Negative(t, before(r("/f/v{n}.json"), r("/f/{name}")), "literal text around a parameter is more specific")
	assert.Positive(t, before(r("/a/{x}"), r("/a/b")))
}

// routes keeps the idempotent operations and only the other routes of the
// same method that take precedence over one of them.
func TestRoutesTable(t *testing.T) {
	spec := &ir.Spec{
		Operations: []*ir.Operation{
			{Method: "POST", Path: "/a/{x}", GoName: "PostAX"},
			{Method: "PATCH", Path: "/a/{x}", GoName: "PatchAX"},
		},
		Routes: []ir.Route{
			{Method: "POST", Path: "/a/b"},   // shadows POST /a/{x} for /a/b
			{Method: "POST", Path: "/{y}/z"}, // overlaps, less specific: irrelevant
			{Method: "GET", Path: "/a/b"},    // another method
			{Method: "POST", Path: "/a/b/c"}, // no overlap
			{Method: "POST", Path: "/a/{x}", Idempotent: true},
			{Method: "PATCH", Path: "/a/{x}", Idempotent: true},
		},
	}
	g := &gen{spec: spec}
	got := map[string][]string{}
	for m, rs := range g.routes() {
		for _, r := range rs {
			got[m] = append(got[m], r.path)
		}
	}
	assert.Equal(t, map[string][]string{"POST": {"/a/b", "/a/{x}"}, "PATCH": {"/a/{x}"}}, got)
}

// For gorilla/mux the first registered route serves: oapi-codegen registers
// them in the order the spec declares its paths.
func TestRoutesTableGorilla(t *testing.T) {
	spec := &ir.Spec{
		Source:     "s.yaml",
		Operations: []*ir.Operation{{Method: "POST", Path: "/a/{x}", GoName: "PostAX"}},
		Routes: []ir.Route{
			{Method: "POST", Path: "/a/b", Pos: ir.Pos{File: "s.yaml", Line: 20}}, // after: never serves /a/b
			{Method: "POST", Path: "/a/{x}", Idempotent: true, Pos: ir.Pos{File: "s.yaml", Line: 10}},
			{Method: "POST", Path: "/{y}/b", Pos: ir.Pos{File: "s.yaml", Line: 5}}, // before: serves /a/b
		},
	}
	paths := func(router string) []string {
		g := &gen{spec: spec, cfg: Config{Router: router}}
		var out []string
		for _, r := range g.routes()["POST"] {
			out = append(out, r.path)
		}
		return out
	}
	assert.Equal(t, []string{"/{y}/b", "/a/{x}"}, paths("gorilla"))
	assert.Equal(t, []string{"/a/b", "/a/{x}"}, paths("chi"))
}

// TestGinPath: the paths gin reports (FullPath) for the routes oapi-codegen
// v2.8 registers (SwaggerUriToGinUri, joined to the root as gin joins them).
func TestGinPath(t *testing.T) {
	for in, want := range map[string]string{
		"/orders":                    "/orders",
		"/coupons/{couponId}/claims": "/coupons/:couponId/claims",
		"/items/{id*}":               "/items/:id",
		"/files/{.ext}":              "/files/:ext",
		"/a:b/{x}":                   `/a\:b/:x`,
		"/trailing/":                 "/trailing/",
		"/double//slash":             "/double/slash",
	} {
		assert.Equal(t, want, ginPath(in), in)
	}
}
