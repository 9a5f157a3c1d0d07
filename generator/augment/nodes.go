package augment

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/speakeasy-api/openapi/overlay"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/load"
)

// Node builders. Values are *yaml.Node, string, int, bool or []*yaml.Node.

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// quoted is a string scalar written in single quotes (status codes, whose
// plain form would read as a number).
func quoted(s string, style yaml.Style) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: style}
}

func literal(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.LiteralStyle}
}

func toNode(v any) *yaml.Node {
	switch v := v.(type) {
	case *yaml.Node:
		return v
	case string:
		return str(v)
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case []*yaml.Node:
		return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: v}
	case []string:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, s := range v {
			n.Content = append(n.Content, str(s))
		}
		return n
	}
	panic(fmt.Sprintf("augment: cannot build a node from %T", v))
}

// mapping builds a mapping from alternating keys and values.
func mapping(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		k, ok := kv[i].(*yaml.Node)
		if !ok {
			k = str(kv[i].(string))
		}
		n.Content = append(n.Content, k, toNode(kv[i+1]))
	}
	return n
}

func ref(target string) *yaml.Node { return mapping("$ref", target) }

// set puts key: v into mapping m, replacing an existing value.
func set(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, str(key), v)
}

// child returns the value of key in mapping m (following aliases and
// merge keys), or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	m = unalias(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	return unalias(yamlmerge.Value(m, key))
}

// childFold is child with a case-insensitive key (header names).
func childFold(m *yaml.Node, key string) *yaml.Node {
	m = unalias(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	kv := yamlmerge.Pairs(m)
	for i := 0; i+1 < len(kv); i += 2 {
		if strings.EqualFold(kv[i].Value, key) {
			return unalias(kv[i+1])
		}
	}
	return nil
}

// ensure returns the mapping under key in m, creating it.
func ensure(m *yaml.Node, key string) *yaml.Node {
	if c := child(m, key); c != nil && c.Kind == yaml.MappingNode {
		return c
	}
	c := mapping()
	set(m, key, c)
	return c
}

// unalias is yamlmerge.Unalias, or nil when an alias does not resolve.
func unalias(n *yaml.Node) *yaml.Node {
	n = yamlmerge.Unalias(n)
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func isMapping(n *yaml.Node) bool { return n != nil && n.Kind == yaml.MappingNode }

// equal reports whether two trees hold the same data: scalars by resolved
// tag and value, mappings by their set of keys, sequences in order; styles,
// positions and comments do not matter.
func equal(a, b *yaml.Node) bool { return equalDepth(a, b, 0) }

func equalDepth(a, b *yaml.Node, depth int) bool {
	a, b = unalias(a), unalias(b)
	if a == nil || b == nil || depth > 200 {
		return a == b
	}
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case yaml.ScalarNode:
		return a.Value == b.Value && a.ShortTag() == b.ShortTag()
	case yaml.SequenceNode:
		if len(a.Content) != len(b.Content) {
			return false
		}
		for i := range a.Content {
			if !equalDepth(a.Content[i], b.Content[i], depth+1) {
				return false
			}
		}
		return true
	case yaml.MappingNode:
		if len(a.Content) != len(b.Content) {
			return false
		}
		for i := 0; i+1 < len(a.Content); i += 2 {
			bv := child(b, a.Content[i].Value)
			if bv == nil || !equalDepth(a.Content[i+1], bv, depth+1) {
				return false
			}
		}
		return true
	}
	return true
}

// refTarget returns the local JSON pointer of a {$ref: "#/..."} mapping,
// "" when n is no such mapping, and external = true for a $ref to another
// document.
func refTarget(n *yaml.Node) (ptr string, external bool) {
	r := child(n, "$ref")
	if r == nil || r.Kind != yaml.ScalarNode {
		return "", false
	}
	if !strings.HasPrefix(r.Value, "#") {
		return "", true
	}
	return strings.TrimPrefix(r.Value, "#"), false
}

// resolve follows local $refs from n; it returns nil for a $ref it cannot
// follow (another document, a dangling pointer, a cycle).
func resolve(root, n *yaml.Node) *yaml.Node {
	for i := 0; i < 32; i++ {
		n = unalias(n)
		ptr, external := refTarget(n)
		if external {
			return nil
		}
		if ptr == "" && child(n, "$ref") == nil {
			return n
		}
		n = lookup(root, ptr)
	}
	return nil
}

// lookup finds the node at a JSON pointer below root, without following $refs.
func lookup(root *yaml.Node, ptr string) *yaml.Node {
	n := unalias(root)
	if ptr == "" {
		return n
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = load.Unescape(tok)
		switch {
		case n == nil:
			return nil
		case n.Kind == yaml.MappingNode:
			n = child(n, tok)
		case n.Kind == yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = unalias(n.Content[i])
		default:
			return nil
		}
	}
	return n
}

// parents indexes a tree: for each node, the step from its parent.
type parents map[*yaml.Node]step

type step struct {
	parent *yaml.Node
	key    string // mapping key
	index  int    // sequence index, -1 for a mapping member
}

func indexParents(root *yaml.Node) parents {
	p := parents{}
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || depth > 10000 {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				v := n.Content[i+1]
				if _, seen := p[v]; seen || v == root {
					continue
				}
				p[v] = step{parent: n, key: n.Content[i].Value, index: -1}
				walk(v, depth+1)
			}
		case yaml.SequenceNode:
			for i, v := range n.Content {
				if _, seen := p[v]; seen || v == root {
					continue
				}
				p[v] = step{parent: n, index: i}
				walk(v, depth+1)
			}
		}
	}
	walk(root, 0)
	return p
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jsonPath returns the JSONPath of n below root ("$" for root itself), and
// false when n is not in the tree.
func (p parents) jsonPath(root, n *yaml.Node) (string, bool) {
	var parts []string
	for n != root {
		s, ok := p[n]
		if !ok {
			return "", false
		}
		switch {
		case s.index >= 0:
			parts = append(parts, "["+strconv.Itoa(s.index)+"]")
		case plainName.MatchString(s.key):
			parts = append(parts, "."+s.key)
		default:
			parts = append(parts, "['"+strings.ReplaceAll(strings.ReplaceAll(s.key, `\`, `\\`), `'`, `\'`)+"']")
		}
		n = s.parent
	}
	var b strings.Builder
	b.WriteString("$")
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
	}
	return b.String(), true
}

// applyOverlay applies actions to root, keeping what the aliases of the
// anchored nodes under ops stand for. The overlay merges into a node in
// place, so an update of an operation (one of ops) that writes into an
// anchored node the operation has itself (`'201': &ok`) would reach every
// alias of it too (`'200': *ok` of an operation the update is not for).
// Such an alias, when the node changed, is written out in full as the node
// was before. (Anchors above an operation, `<<: *base` merging the whole
// operation in, are where the operation is written: changing them is the
// point. A consumer of the overlay document reads aliases as copies.)
func applyOverlay(root *yaml.Node, actions []overlay.Action, ops []*yaml.Node) error {
	anchored := map[*yaml.Node]bool{}
	for _, op := range ops {
		eachNode(op, func(n *yaml.Node) {
			if n.Anchor != "" {
				anchored[n] = true
			}
		})
	}
	before := map[*yaml.Node]*yaml.Node{}
	eachNode(root, func(a *yaml.Node) {
		if t := unalias(a); a.Kind == yaml.AliasNode && anchored[t] && before[t] == nil {
			before[t] = expand(t, 0)
		}
	})
	ov := overlay.Overlay{Version: "1.0.0", Actions: actions}
	if err := ov.ApplyTo(root); err != nil {
		return err
	}
	eachNode(root, func(a *yaml.Node) {
		if a.Kind != yaml.AliasNode {
			return
		}
		t := unalias(a)
		if was := before[t]; was != nil && !equal(t, was) {
			c := expand(was, 0)
			c.HeadComment, c.LineComment, c.FootComment = a.HeadComment, a.LineComment, a.FootComment
			*a = *c
		}
	})
	return nil
}

// eachNode calls f with n and every node below it, in document order; it
// does not follow aliases.
func eachNode(n *yaml.Node, f func(n *yaml.Node)) {
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || depth > 10000 {
			return
		}
		f(n)
		if n.Kind == yaml.AliasNode {
			return
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
}

// complete returns upd, an overlay update of mapping n, made to add to
// what n has only through a merge key (`<<: *op`): the overlay would write
// such a key as n's own entry, which overrides the merged one, so the
// merged content is written in full before the additions. A key n has
// itself whose value is an alias (`'200': *ok`) is written out in full
// too: the overlay would replace the alias with the additions alone, and
// merging into the anchored node instead would change every other user
// of it (an anchored value n has itself is merged into: applyOverlay
// keeps its other users as they were). Other keys n has itself are merged into by the overlay as usual
// (and completed below).
func complete(n, upd *yaml.Node) *yaml.Node {
	n = unalias(n)
	if !isMapping(n) || !isMapping(upd) {
		return upd
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: upd.Style}
	for i := 0; i+1 < len(upd.Content); i += 2 {
		k, v := upd.Content[i], upd.Content[i+1]
		switch cur, own := child(n, k.Value), yamlmerge.OwnValue(n, k.Value); {
		case cur == nil:
		case own != nil && own.Kind != yaml.AliasNode:
			v = complete(cur, v)
		default:
			v = withMerged(cur, v, 0)
		}
		out.Content = append(out.Content, k, v)
	}
	return out
}

// withMerged returns the explicit value that is cur (merged, aliases
// resolved) with add merged in as the overlay merges: mappings key by key,
// sequences appended, anything else replaced by add.
func withMerged(cur, add *yaml.Node, depth int) *yaml.Node {
	cur = unalias(cur)
	switch {
	case cur == nil || cur.Kind != add.Kind || depth > maxCopyDepth:
		return add
	case cur.Kind == yaml.SequenceNode:
		out := expand(cur, depth)
		out.Content = append(out.Content, add.Content...)
		return out
	case cur.Kind != yaml.MappingNode:
		return add
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: cur.Style}
	done := map[string]bool{}
	kv := yamlmerge.Pairs(cur)
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i]
		if a := yamlmerge.OwnValue(add, k.Value); a != nil && !done[k.Value] {
			done[k.Value] = true
			out.Content = append(out.Content, expand(k, depth), withMerged(kv[i+1], a, depth+1))
			continue
		}
		out.Content = append(out.Content, expand(k, depth), expand(kv[i+1], depth+1))
	}
	for i := 0; i+1 < len(add.Content); i += 2 {
		if !done[add.Content[i].Value] {
			out.Content = append(out.Content, add.Content[i], add.Content[i+1])
		}
	}
	return out
}

// maxCopyDepth bounds the nesting expand copies.
const maxCopyDepth = 64

// expand returns a copy of n that stands alone: aliases replaced by what
// they stand for, merge keys expanded, no anchors (the copy goes into an
// update, which is also written as an overlay document of its own).
func expand(n *yaml.Node, depth int) *yaml.Node {
	n = unalias(n)
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
	c := *n
	c.Anchor = ""
	c.Content = nil
	if depth > maxCopyDepth {
		return &c
	}
	kids := n.Content
	if n.Kind == yaml.MappingNode {
		kids = yamlmerge.Pairs(n)
	}
	for _, k := range kids {
		c.Content = append(c.Content, expand(k, depth+1))
	}
	return &c
}
