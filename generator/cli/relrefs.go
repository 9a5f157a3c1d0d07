package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// relativeRefs returns the $ref values of spec (YAML or JSON text) that
// name another file by a relative path ("paths/orders.yaml#/post",
// "../common.yaml"), in document order, each once: they resolve against
// the directory of the file that holds them, so the spec written into
// another directory would no longer find them. Local ("#/…") and absolute
// references (a URL with a scheme, an absolute path) are left out, and so
// are values that are no references, as the loader does not follow them:
// those under example, default, const and enum, a schema's examples
// array, an Example object's value and extensions (x-…).
func relativeRefs(spec []byte) []string {
	var doc yaml.Node
	if yaml.Unmarshal(spec, &doc) != nil {
		return nil
	}
	var refs []string
	seen := map[string]bool{}
	add := func(n *yaml.Node) {
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "$ref" && v.Kind == yaml.ScalarNode && relativeRef(v.Value) && !seen[v.Value] {
				seen[v.Value] = true
				refs = append(refs, v.Value)
			}
		}
	}
	var walk func(n *yaml.Node, ctx refContext)
	walk = func(n *yaml.Node, ctx refContext) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, refObject)
			}
			return
		case yaml.MappingNode:
		default:
			return
		}
		if ctx == refExamples {
			// Example objects, or references to them: their value is
			// an example, no reference.
			for i := 1; i < len(n.Content); i += 2 {
				add(n.Content[i])
			}
			return
		}
		if ctx == refObject {
			add(n)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			switch {
			case ctx == refProperties:
				walk(v, refObject) // property names: any, x-… too
			case strings.HasPrefix(k, "x-"):
				// An extension: the loader follows no $ref in it.
			case ctx == refNames:
				walk(v, refObject)
			case k == "example" || k == "const" || k == "enum" || k == "default":
				// Values, not documents (a default response is under
				// responses, a map of names).
			case k == "examples" && v.Kind == yaml.MappingNode:
				walk(v, refExamples)
			case k == "examples":
				// A schema's examples: values.
			case k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions" || k == "dependentSchemas":
				walk(v, refProperties)
			case k == "components":
				for j := 0; v.Kind == yaml.MappingNode && j+1 < len(v.Content); j += 2 {
					if v.Content[j].Value == "examples" {
						walk(v.Content[j+1], refExamples)
					} else if !strings.HasPrefix(v.Content[j].Value, "x-") {
						walk(v.Content[j+1], refNames)
					}
				}
			case v.Kind == yaml.MappingNode && refNameMaps[k]:
				walk(v, refNames)
			default:
				walk(v, refObject)
			}
		}
	}
	walk(&doc, refObject)
	return refs
}

// refContext is what a mapping relativeRefs walks is.
type refContext int

const (
	refObject     refContext = iota // an object of OpenAPI or a schema
	refNames                        // a map of names (paths, responses, content) to objects
	refProperties                   // a schema's properties: names to schemas
	refExamples                     // a map of names to Example objects
)

// refNameMaps are the fields whose value, a mapping, maps names chosen
// by the spec (or status codes, media types) to objects.
var refNameMaps = map[string]bool{
	"paths": true, "webhooks": true, "callbacks": true, "responses": true,
	"headers": true, "content": true, "encoding": true, "links": true,
	"parameters": true, "variables": true, "mapping": true,
}

// relativeRef reports whether ref names another file by a relative path.
func relativeRef(ref string) bool {
	file, _, _ := strings.Cut(ref, "#")
	return file != "" && !strings.Contains(file, "://") && !filepath.IsAbs(file) && !strings.HasPrefix(file, "/")
}

// sameDir reports whether files a and b are in one directory.
func sameDir(a, b string) bool {
	da, err1 := filepath.Abs(filepath.Dir(a))
	db, err2 := filepath.Abs(filepath.Dir(b))
	return err1 == nil && err2 == nil && da == db
}

// refList names the first references of refs, and how many more there are.
func refList(refs []string) string {
	const most = 3
	if len(refs) <= most {
		return strings.Join(refs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(refs[:most], ", "), len(refs)-most)
}
