package compile

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/internal/editdist"
	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/load"
)

// RuleExtensionMisspelled: a key at the document root, on a path item or
// on an operation is close to x-idempotency but not it (x-Idempotency,
// x_idempotency, x-idempotancy): idemgen reads no contract there, so the
// contract its authors meant silently disappears. A warning.
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
		if kv[i].Kind != yaml.ScalarNode || !misspelledExtension(k) {
			continue
		}
		pos := c.doc.Pos(kv[i], m.File, m.Pointer+"/"+load.Escape(k))
		c.diags.Warnf(pos, RuleExtensionMisspelled, "%s %s is not x-idempotency, and idemgen reads no contract from it: write x-idempotency (lower case, with a hyphen)", k, where)
		c.diags[len(c.diags)-1].Ops = ops
	}
}

// misspelledExtension reports whether key is not x-idempotency but equals
// it ignoring case and '_' for '-', or is within edit distance 2 of it.
func misspelledExtension(key string) bool {
	const want = "x-idempotency"
	if key == want || len(key) > len(want)+2 || len(key) < len(want)-2 {
		return false
	}
	k := strings.ReplaceAll(strings.ToLower(key), "_", "-")
	return k == want || editdist.Distance(k, want) <= 2
}
