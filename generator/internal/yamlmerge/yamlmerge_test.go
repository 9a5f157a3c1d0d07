package yamlmerge_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
)

func parse(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(src), &doc))
	return doc.Content[0]
}

// entries renders Pairs as key=value@line:col.
func entries(n *yaml.Node) string {
	kv := yamlmerge.Pairs(n)
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		v := yamlmerge.Unalias(kv[i+1])
		out = append(out, fmt.Sprintf("%s=%s@%d:%d", kv[i].Value, v.Value, v.Line, v.Column))
	}
	return strings.Join(out, " ")
}

func TestPairs(t *testing.T) {
	root := parse(t, `
a: &a {x: 1, y: 2}
b: &b {y: 3, z: 4}
one: {<<: *a, y: 9}
seq: {<<: [*a, *b], w: 0}
`)
	for _, tc := range []struct{ key, want string }{
		{"a", "x=1@2:11 y=2@2:17"},
		// Explicit keys win over merged ones, wherever they are written.
		{"one", "x=1@2:11 y=9@4:18"},
		// A sequence's earlier mappings win.
		{"seq", "x=1@2:11 y=2@2:17 z=4@3:17 w=0@5:24"},
	} {
		assert.Equal(t, tc.want, entries(yamlmerge.Value(root, tc.key)), tc.key)
	}
	assert.Nil(t, yamlmerge.Value(yamlmerge.Value(root, "one"), "<<"))
	assert.Equal(t, "9", yamlmerge.Value(yamlmerge.Value(root, "one"), "y").Value)
}

func TestPairsNested(t *testing.T) {
	root := parse(t, "b: &b {y: 3, z: 4}\nc: &c {<<: *b, z: 5}\nd: {<<: *c}\n")
	assert.Equal(t, "y=3@1:11 z=5@2:19", entries(yamlmerge.Value(root, "d")))
}

// TestPairsNotMerges: a quoted "<<" is an ordinary key, and so is a merge
// key whose value cannot be merged; a mapping without merges is returned
// as written.
func TestPairsNotMerges(t *testing.T) {
	root := parse(t, "q: {'<<': {x: 1}}\nbad: {<<: 3}\nplain: {x: 1, x: 2}\n")
	assert.Equal(t, "<<=@1:11", entries(yamlmerge.Value(root, "q")))
	assert.Equal(t, "<<=3@2:11", entries(yamlmerge.Value(root, "bad")))
	plain := yamlmerge.Value(root, "plain")
	assert.Equal(t, plain.Content, yamlmerge.Pairs(plain))
	assert.Nil(t, yamlmerge.Pairs(parse(t, "[1]")))
}

func TestOwn(t *testing.T) {
	root := parse(t, `
a: &a {x: 1}
m: {<<: *a, y: 2}
`)
	m := yamlmerge.Value(root, "m")
	assert.True(t, yamlmerge.Own(m, "y"))
	assert.False(t, yamlmerge.Own(m, "x"), "merged only")
	assert.NotNil(t, yamlmerge.Value(m, "x"))
	assert.False(t, yamlmerge.Own(m, "z"))
	assert.False(t, yamlmerge.Own(m, "<<"))
	assert.False(t, yamlmerge.Own(nil, "x"))
	if v := yamlmerge.OwnValue(m, "y"); assert.NotNil(t, v) {
		assert.Equal(t, "2", v.Value)
	}
	assert.Nil(t, yamlmerge.OwnValue(m, "x"), "merged only")
	assert.Nil(t, yamlmerge.OwnValue(nil, "x"))
}
