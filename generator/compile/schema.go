package compile

import (
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/load"
)

// A match is one schema member a pointer names: its path with "*" for array
// items and names for object members, and its schema (nil when the body
// schema leaves that place open, so anything may be there).
type match struct {
	path   string
	schema *openapi3.Schema
}

const maxSchemaDepth = 64

// branches returns s and, recursively, the schemas its allOf, oneOf and
// anyOf combine: a member of any of them is a member of s.
func branches(s *openapi3.Schema) []*openapi3.Schema {
	var out []*openapi3.Schema
	seen := map[*openapi3.Schema]bool{}
	var walk func(s *openapi3.Schema, depth int)
	walk = func(s *openapi3.Schema, depth int) {
		if s == nil || seen[s] || depth > maxSchemaDepth {
			return
		}
		seen[s] = true
		out = append(out, s)
		for _, group := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
			for _, r := range group {
				if r != nil {
					walk(r.Value, depth+1)
				}
			}
		}
	}
	walk(s, 0)
	return out
}

func isArray(s *openapi3.Schema) bool {
	return (s.Type != nil && s.Type.Includes("array")) || s.Items != nil || len(s.PrefixItems) > 0
}

// typed reports whether s says anything about its shape.
func typed(s *openapi3.Schema) bool {
	return (s.Type != nil && len(s.Type.Slice()) > 0) || len(s.Properties) > 0 || s.Items != nil ||
		s.AdditionalProperties.Schema != nil || len(s.PrefixItems) > 0
}

// open reports whether a schema accepts members it does not name, for the
// purpose of checking pointers: one of its branches is a free-form object
// (no named properties, items or additionalProperties schema; a type that
// allows objects, or none; additionalProperties not false). A union of an
// array and a free-form object is open: its object branch takes any name.
func open(bs []*openapi3.Schema) bool {
	if len(bs) == 0 {
		return true // no schema: nothing to check against
	}
	for _, s := range bs {
		if len(s.Properties) > 0 || s.Items != nil || len(s.PrefixItems) > 0 || s.AdditionalProperties.Schema != nil {
			continue
		}
		if s.Type != nil && len(s.Type.Slice()) > 0 && !s.Type.Includes("object") {
			continue // a string, a number or an array names no members
		}
		if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
			continue
		}
		return true
	}
	return false
}

// resolve returns the members of the schema root that the JSON pointer
// tokens name.
func resolve(root *openapi3.Schema, toks []string) []match {
	cur := []match{{path: "", schema: root}}
	for _, tok := range toks {
		var next []match
		for _, m := range cur {
			if m.schema == nil {
				next = append(next, match{path: m.path + "/" + tok})
				continue
			}
			next = append(next, step(m, tok)...)
		}
		cur = dedup(next)
		if len(cur) == 0 {
			return nil
		}
	}
	return cur
}

func step(m match, tok string) []match {
	bs := branches(m.schema)
	var out []match
	for _, s := range bs {
		if isArray(s) {
			if tok == "*" || isIndex(tok) {
				if s.Items != nil && s.Items.Value != nil {
					out = append(out, match{m.path + "/*", s.Items.Value})
				} else if s.Items == nil && len(s.PrefixItems) == 0 {
					out = append(out, match{path: m.path + "/*"})
				}
				for i, p := range s.PrefixItems {
					if p != nil && p.Value != nil && (tok == "*" || tok == strconv.Itoa(i)) {
						out = append(out, match{m.path + "/*", p.Value})
					}
				}
			}
		}
		if tok == "*" {
			for _, name := range sortedKeys(s.Properties) {
				if r := s.Properties[name]; r != nil && r.Value != nil {
					out = append(out, match{m.path + "/" + load.Escape(name), r.Value})
				}
			}
			if r := s.AdditionalProperties.Schema; r != nil && r.Value != nil {
				out = append(out, match{m.path + "/*", r.Value})
			}
			continue
		}
		if r, ok := s.Properties[tok]; ok && r != nil && r.Value != nil {
			out = append(out, match{m.path + "/" + load.Escape(tok), r.Value})
			continue
		}
		if r := s.AdditionalProperties.Schema; r != nil && r.Value != nil {
			out = append(out, match{m.path + "/" + load.Escape(tok), r.Value})
		}
	}
	if len(out) == 0 && open(bs) {
		out = append(out, match{path: m.path + "/" + load.Escape(tok)})
	}
	return out
}

func dedup(ms []match) []match {
	slices.SortStableFunc(ms, func(a, b match) int { return strings.Compare(a.path, b.path) })
	return slices.CompactFunc(ms, func(a, b match) bool { return a.path == b.path && a.schema == b.schema })
}

// isIndex reports whether tok is an RFC 6901 array index: "0" or a decimal
// without leading zeros (as the runtime's fingerprint matches them; "01"
// names a member "01" only).
func isIndex(tok string) bool {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return false
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// leadingZeroIndex returns the first token of toks that is a decimal with
// a leading zero ("01") where the schema says the parent may be an array,
// and the pointer to that parent.
func leadingZeroIndex(root *openapi3.Schema, toks []string) (parent, tok string, ok bool) {
	for i, t := range toks {
		if len(t) < 2 || t[0] != '0' || strings.Trim(t, "0123456789") != "" {
			continue
		}
		for _, m := range resolve(root, toks[:i]) {
			if m.schema == nil {
				continue
			}
			for _, br := range branches(m.schema) {
				if isArray(br) {
					return "/" + strings.Join(load.EscapeAll(toks[:i]), "/"), t, true
				}
			}
		}
	}
	return "", "", false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// member is one member of a body schema found by walk.
type member struct {
	path   string // "*" for array items
	name   string // the member's own name ("" for array items)
	schema *openapi3.Schema
	parent *openapi3.Schema // the object schema that declares it
}

// walk lists the members of a body schema, depth first, to a bounded depth.
func walk(root *openapi3.Schema, maxDepth int) []member {
	var out []member
	var visit func(s *openapi3.Schema, path string, depth int, stack map[*openapi3.Schema]bool)
	visit = func(s *openapi3.Schema, path string, depth int, stack map[*openapi3.Schema]bool) {
		if s == nil || depth > maxDepth || stack[s] || len(out) > 10000 {
			return
		}
		stack[s] = true
		defer delete(stack, s)
		for _, b := range branches(s) {
			for _, name := range sortedKeys(b.Properties) {
				r := b.Properties[name]
				if r == nil || r.Value == nil {
					continue
				}
				p := path + "/" + load.Escape(name)
				out = append(out, member{path: p, name: name, schema: r.Value, parent: b})
				visit(r.Value, p, depth+1, stack)
			}
			if b.Items != nil && b.Items.Value != nil {
				visit(b.Items.Value, path+"/*", depth+1, stack)
			}
		}
	}
	visit(root, "", 0, map[*openapi3.Schema]bool{})
	return out
}

// covers reports whether the declared pointer (with "*") covers the member
// path (array items as "*"), or one of its ancestors.
func covers(pointer, path string) bool {
	pt := strings.Split(pointer, "/")
	mt := strings.Split(path, "/")
	if len(pt) > len(mt) {
		return false
	}
	for i := range pt {
		if pt[i] == mt[i] || pt[i] == "*" || (mt[i] == "*" && isIndex(pt[i])) {
			continue
		}
		return false
	}
	return true
}

// didYouMean suggests, for a pointer that names no member of body, the
// pointer with its first unknown token replaced by the closest member name
// at that level (" (did you mean /client_time?)"), or "".
func didYouMean(body *openapi3.Schema, toks []string) string {
	for i := len(toks) - 1; i >= 0; i-- {
		parents := resolve(body, toks[:i])
		if len(parents) == 0 {
			continue
		}
		var names []string
		for _, m := range parents {
			if m.schema == nil {
				return "" // free-form: anything may be there
			}
			for _, b := range branches(m.schema) {
				names = append(names, sortedKeys(b.Properties)...)
			}
		}
		s := ""
		if toks[i] != "*" && !isIndex(toks[i]) {
			s = diag.Suggest(toks[i], names)
		}
		if s == "" {
			return ""
		}
		fixed := slices.Clone(toks)
		fixed[i] = s
		for j := range fixed {
			fixed[j] = load.Escape(fixed[j])
		}
		return " (did you mean /" + strings.Join(fixed, "/") + "?)"
	}
	return ""
}
