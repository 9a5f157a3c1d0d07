package compile

import (
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/contract"
	"github.com/idemgen/idemgen/generator/internal/editdist"
	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/load"
)

// RuleExtensionMisspelled: a key at the document root, on a path item or
// on an operation is x-idempotency but for its case or a '_' for the '-'
// (x-Idempotency, x_idempotency), or is a near miss (x-idempotancy,
// x-idempotenc) whose value reads as a contract (a mapping with a field
// of x-idempotency): idemgen reads no contract there, so the contract its
// authors meant silently disappears. A warning. Near misses whose value
// is no contract (x-idempotent: true, x-idempotence-… of other tools) are
// other extensions, left alone.
const RuleExtensionMisspelled = "extension-misspelled"

// misspelled warns about each key of mapping m (the document root, a path
// item or an operation; where names it) that looks like a misspelled
// x-idempotency; ops are the operations the warning is about, for the
// ignores that name them.
func (c *compiler) misspelled(m load.Node, where string, ops []string) {
	m = c.doc.Deref(m)
	if m.Node == nil || m.Kind != yaml.MappingNode {
		return
	}
	kv := yamlmerge.Pairs(m.Node)
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].Value
		if kv[i].Kind != yaml.ScalarNode || !misspelledExtension(k, c.doc.Deref(load.Node{Node: kv[i+1], File: m.File}).Node) {
			continue
		}
		pos := c.doc.Pos(kv[i], m.File, m.Pointer+"/"+load.Escape(k))
		c.diags.Warnf(pos, RuleExtensionMisspelled, "%s %s is not x-idempotency, and idemgen reads no contract from it: write x-idempotency (lower case, with a hyphen)", k, where)
		c.diags[len(c.diags)-1].Ops = ops
	}
}

// misspelledExtension reports whether key, whose value is v, is not
// x-idempotency but equals it ignoring case and '_' for '-', or is within
// edit distance 2 of it (so folded) with a value that looks like a
// contract: a mapping with at least one field of x-idempotency. A near
// miss with another value is another extension (x-idempotent: true).
func misspelledExtension(key string, v *yaml.Node) bool {
	const want = "x-idempotency"
	if key == want || len(key) > len(want)+2 || len(key) < len(want)-2 {
		return false
	}
	k := strings.ReplaceAll(strings.ToLower(key), "_", "-")
	if k == want {
		return true
	}
	return editdist.Distance(k, want) <= 2 && looksLikeContract(v)
}

// contractFields are the names of the fields of an x-idempotency block.
var contractFields = contract.Fields()

// looksLikeContract reports whether v is a mapping with at least one field
// of an x-idempotency block (merge keys followed).
func looksLikeContract(v *yaml.Node) bool {
	for v != nil && v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v == nil || v.Kind != yaml.MappingNode {
		return false
	}
	kv := yamlmerge.Pairs(v)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i].Kind == yaml.ScalarNode && slices.Contains(contractFields, kv[i].Value) {
			return true
		}
	}
	return false
}
