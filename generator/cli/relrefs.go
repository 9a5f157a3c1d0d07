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
// references (a URL with a scheme, an absolute path) are left out.
func relativeRefs(spec []byte) []string {
	var doc yaml.Node
	if yaml.Unmarshal(spec, &doc) != nil {
		return nil
	}
	var refs []string
	seen := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "$ref" && v.Kind == yaml.ScalarNode && relativeRef(v.Value) && !seen[v.Value] {
					seen[v.Value] = true
					refs = append(refs, v.Value)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return refs
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
