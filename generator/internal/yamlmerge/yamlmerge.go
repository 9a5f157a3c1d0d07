// Package yamlmerge reads YAML mappings with their merge keys expanded
// (`<<: *anchor`, `<<: [*a, *b]`, YAML 1.1's merge key type), as YAML
// decoders do: the nodes are those where the merged entries are written,
// so their positions stay true.
package yamlmerge

import "gopkg.in/yaml.v3"

// maxDepth bounds nested merges (an alias cannot refer to itself, but a
// hand-built tree could).
const maxDepth = 32

// Unalias follows alias nodes to what they stand for.
func Unalias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

// IsMergeKey reports whether k is a merge key (a plain <<).
func IsMergeKey(k *yaml.Node) bool {
	return k != nil && k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 && (k.Tag == "" || k.ShortTag() == "!!merge")
}

// sources returns the mappings a merge key's value v merges, in order of
// precedence (a sequence's earlier mappings win), or false when v is not
// a mapping or a sequence of mappings.
func sources(v *yaml.Node) ([]*yaml.Node, bool) {
	v = Unalias(v)
	switch {
	case v == nil:
		return nil, false
	case v.Kind == yaml.MappingNode:
		return []*yaml.Node{v}, true
	case v.Kind == yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(v.Content))
		for _, it := range v.Content {
			it = Unalias(it)
			if it == nil || it.Kind != yaml.MappingNode {
				return nil, false
			}
			out = append(out, it)
		}
		return out, true
	}
	return nil, false
}

// Pairs returns the entries of mapping n as alternating keys and values,
// with merge keys expanded: a merge key is replaced by the entries of the
// mappings it merges (expanded in turn) that neither n's own keys nor an
// earlier merged mapping define. n's own entries are returned as written,
// duplicates included. A merge key whose value is not a mapping or a
// sequence of mappings is returned as an ordinary entry. Pairs returns
// n.Content itself when n has no merge key, and nil when n is not a mapping.
func Pairs(n *yaml.Node) []*yaml.Node {
	return pairs(Unalias(n), 0)
}

func pairs(n *yaml.Node, depth int) []*yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	merges := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		if IsMergeKey(n.Content[i]) {
			if _, ok := sources(n.Content[i+1]); ok {
				merges = true
				break
			}
		}
	}
	if !merges || depth >= maxDepth {
		return n.Content
	}
	defined := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !IsMergeKey(k) {
			defined[k.Value] = true
		}
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		srcs, ok := sources(v)
		if !IsMergeKey(k) || !ok {
			out = append(out, k, v)
			continue
		}
		for _, src := range srcs {
			sp := pairs(src, depth+1)
			for j := 0; j+1 < len(sp); j += 2 {
				if defined[sp[j].Value] {
					continue
				}
				defined[sp[j].Value] = true
				out = append(out, sp[j], sp[j+1])
			}
		}
	}
	return out
}

// Value returns the value of key in mapping n, merge keys expanded (the
// first entry wins, as Pairs orders them), or nil.
func Value(n *yaml.Node, key string) *yaml.Node {
	kv := Pairs(n)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i].Value == key && !IsMergeKey(kv[i]) {
			return kv[i+1]
		}
	}
	return nil
}

// Own reports whether mapping n itself has an entry for key (not only
// through a merge key). Writing key into n overrides what a merge key
// gives it, rather than adding to it.
func Own(n *yaml.Node, key string) bool { return OwnValue(n, key) != nil }

// OwnValue returns the value of mapping n's own entry for key (not one
// given only through a merge key; the first entry wins), or nil.
func OwnValue(n *yaml.Node, key string) *yaml.Node {
	n = Unalias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Value == key && !IsMergeKey(k) {
			return n.Content[i+1]
		}
	}
	return nil
}
