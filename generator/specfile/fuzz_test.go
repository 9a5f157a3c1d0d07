package specfile_test

import (
	"encoding/json"
	"fmt"
	"strings"
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

// FuzzKeepUntouched: whatever text of src KeepUntouched puts back into
// the encoding of a changed src, the result holds the same data and the
// same comments as that encoding.
func FuzzKeepUntouched(f *testing.F) {
	f.Add([]byte("a:\n  b: 1     # c\n\n  d:\n      - x   # y\n"), uint8(0))
	f.Add([]byte("# head\na: 'q\n  r'\nb: {c: 1}   # d\n# foot\n"), uint8(1))
	f.Add([]byte("a:\n  # lead\n  b: 1\n\n  # between\n  c: [1,  2]  # e\n"), uint8(2))
	f.Fuzz(func(t *testing.T, src []byte, at uint8) {
		src = specfile.LF(src)
		doc, err := specfile.Parse(src)
		if err != nil || len(doc.Content) == 0 || hasAnchor(doc) {
			return
		}
		// The change: a new entry in the first block mapping found from the
		// root along the at-th values.
		m := doc.Content[0]
		for i := 0; m.Kind == yaml.MappingNode && i < int(at%4) && len(m.Content) > 1 && m.Content[1].Kind == yaml.MappingNode; i++ {
			m = m.Content[1]
		}
		if m.Kind == yaml.MappingNode && at&4 == 0 {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "zz-added"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"})
		}
		out, err := specfile.Encode(doc, specfile.Detect(src, doc))
		if err != nil {
			return
		}
		var want yaml.Node
		if yaml.Unmarshal(out, &want) != nil {
			return // an input the emitter cannot write back faithfully
		}
		got := specfile.KeepUntouched(src, out)
		var have yaml.Node
		require.NoError(t, yaml.Unmarshal(got, &have), "%s", got)
		require.Equal(t, dump(&want), dump(&have), "%s\n---\n%s", out, got)
		require.Equal(t, specfile.Comments(&want), specfile.Comments(&have), "%s\n---\n%s", out, got)
	})
}

// dump writes the data of a tree, not its comments, positions or styles.
func dump(n *yaml.Node) string {
	var b strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		fmt.Fprintf(&b, "%*s%d %s %q\n", depth, "", n.Kind, n.ShortTag(), n.Value)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}
