package augment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/ir"
)

// TestMarkerPos: the marker of a description's contract block is found in
// the file as written (a JSON string on one line, after non-ASCII text:
// columns count characters), the last one when the text holds two; when
// the file does not hold the value's markers as written (escaped), the
// description's own position stays.
func TestMarkerPos(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, src string
		want      ir.Pos
	}{
		{"json", `{"a": {"description": "Ünïcode.\n\n` + BeginMarker + `\nx\n` + EndMarker + `", "b": 1}}`, ir.Pos{Line: 1, Col: 36}},
		{"two blocks", "a:\n  description: |\n    " + BeginMarker + "\n    old\n    " + EndMarker + "\n    " + BeginMarker + "\n    x\n    " + EndMarker + "\n  b: 1\n", ir.Pos{Line: 6, Col: 5}},
		{"escaped", `{"a": {"description": "\u003c!-- idemgen:contract --\u003e\nx\n` + EndMarker + `", "b": 1}}`, ir.Pos{Line: 1, Col: 23}}, // the description's quote
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.src), 0o644))
			var doc yaml.Node
			require.NoError(t, yaml.Unmarshal([]byte(tc.src), &doc))
			root := doc.Content[0]
			desc, next := child(child(root, "a"), "description"), child(root, "a").Content[2]
			pos := ir.Pos{File: path, Line: desc.Line, Col: desc.Column}
			got := sources{}.markerPos(pos, desc, ir.Pos{File: path, Line: next.Line, Col: next.Column})
			tc.want.File = path
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFirstDifference(t *testing.T) {
	parse := func(s string) *yaml.Node {
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(s), &doc))
		return doc.Content[0]
	}
	want := parse("a: 1\nb: {c: [x, y], d: 2}\n")
	for src, line := range map[string]int{
		"a: 1\nb: {c: [x, y], d: 2}\n":         0,
		"a: 1\nb:\n  c: [x, z]\n  d: 2\n":      3, // the element z
		"a: 1\nb:\n  c: [x, y]\n  e: 2\n":      4, // the key e, which want has not
		"a: 1\nb:\n  c: [x, y]\n":              2, // b lacks d
		"a: 1\nb:\n  c: [x, y, z]\n  d: 2\n":   3,
		"a: 2\nb:\n  c: [x, y, z]\n  d: 2\n":   1,
		"a: '1'\nb:\n  c: [x, y, z]\n  d: 2\n": 1, // a string, not a number
	} {
		d := firstDifference(parse(src), want)
		if line == 0 {
			assert.Nil(t, d, src)
			continue
		}
		require.NotNil(t, d, src)
		assert.Equal(t, line, d.Line, src)
	}
}
