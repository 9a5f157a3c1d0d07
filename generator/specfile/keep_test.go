package specfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/specfile"
	"github.com/idemgen/idemgen/internal/testenv"
)

// TestKeepUntouchedEntries: when components.schemas of petstore gains an
// entry (as `idemgen spec` adds IdempotencyProblem) and an operation a
// response, every line of the file but those added stays byte for byte:
// the blank lines between schemas, the trailing spaces of Pet and NewPet,
// the deeper indentation of Pet's `- id`.
func TestKeepUntouchedEntries(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.SpecsDir(t), "petstore-expanded.yaml"))
	require.NoError(t, err)
	src = specfile.LF(src)
	doc, err := specfile.Parse(src)
	require.NoError(t, err)
	f := specfile.Detect(src, doc)

	get := func(n *yaml.Node, key string) *yaml.Node {
		v := yamlmerge.OwnValue(n, key)
		require.NotNil(t, v, "no %s", key)
		return v
	}
	add := func(m *yaml.Node, key string, value string) {
		var v yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(value), &v))
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v.Content[0])
	}
	root := doc.Content[0]
	add(get(get(root, "components"), "schemas"), "Zebra", "type: object\n")
	add(get(get(get(get(root, "paths"), "/pets"), "post"), "responses"), "409", "description: conflict\n")
	out, err := specfile.Encode(doc, f)
	require.NoError(t, err)

	got := string(specfile.KeepUntouched(src, out))
	for _, added := range []string{"    Zebra:\n      type: object\n", "        \"409\":\n          description: conflict\n"} {
		require.Contains(t, got, added)
		got = strings.Replace(got, added, "", 1)
	}
	assert.Equal(t, string(src), got, "the file but for the added lines")
	assert.Contains(t, string(src), "\n          - id\n", "the spec still has what the test is about")
	assert.Contains(t, string(src), "name  \n")
}

// TestKeepUntouchedLineComments: untouched entries with line comments
// below them keep their text too (the spaces before a comment, blank
// lines, a sequence's indentation), not only those without comments.
func TestKeepUntouchedLineComments(t *testing.T) {
	src := []byte(`openapi: 3.0.3
info:
  title: T5     # title comment
  version: "1"   # v

  x-list:
      - a
      - b    # b
paths:
  /a:
    get:   # get
      responses:
        '200': {description: ok}   # ok
`)
	doc, err := specfile.Parse(src)
	require.NoError(t, err)
	f := specfile.Detect(src, doc)
	root := doc.Content[0]
	var v yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("schemas: {}\n"), &v))
	root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "components"}, v.Content[0])
	out, err := specfile.Encode(doc, f)
	require.NoError(t, err)
	require.NotContains(t, string(out), "T5     #", "the encoder alone changes the spacing")

	got := string(specfile.KeepUntouched(src, out))
	added := "components:\n  schemas: {}\n"
	require.Contains(t, got, added)
	assert.Equal(t, string(src), strings.Replace(got, added, "", 1), "the file but for the added lines")
}
