package specfile_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/specfile"
	"github.com/idemgen/idemgen/internal/testenv"
)

// diffLines counts the lines of a that b does not have (as a multiset).
func diffLines(a, b string) int {
	count := map[string]int{}
	for _, l := range strings.Split(b, "\n") {
		count[l]++
	}
	n := 0
	for _, l := range strings.Split(a, "\n") {
		if count[l] > 0 {
			count[l]--
		} else {
			n++
		}
	}
	return n
}

// TestRoundTripRealSpecs: an unchanged spec comes out (nearly) as it went
// in; the allowance covers what the emitter normalizes (trailing spaces,
// blank lines), never reformatting.
func TestRoundTripRealSpecs(t *testing.T) {
	dir := testenv.SpecsDir(t)
	for _, c := range []struct {
		file    string
		json    bool
		maxDiff int
	}{
		{"petstore-expanded.yaml", false, 6},
		{"modern-treasury.yaml", false, 1},
		{"adyen-transfers-v4.json", true, 0},
	} {
		t.Run(c.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(dir, c.file))
			require.NoError(t, err)
			doc, err := specfile.Parse(src)
			require.NoError(t, err)
			f := specfile.Detect(src, doc)
			assert.Equal(t, c.json, f.JSON)
			out, err := specfile.Encode(doc, f)
			require.NoError(t, err)
			assert.LessOrEqual(t, diffLines(string(src), string(out)), c.maxDiff, "%+v", f)
			// Encoding is stable: the output, read and written again, is unchanged.
			doc2, err := specfile.Parse(out)
			require.NoError(t, err)
			out2, err := specfile.Encode(doc2, specfile.Detect(out, doc2))
			require.NoError(t, err)
			assert.Equal(t, string(out), string(out2))
			if c.json {
				var a, b any
				require.NoError(t, json.Unmarshal(src, &a))
				require.NoError(t, json.Unmarshal(out, &b))
				assert.Equal(t, a, b)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want specfile.Format
	}{
		{"yaml 2 indented seq", "a:\n  b: 1\n  c:\n    - x\n", specfile.Format{Indent: 2, Width: -1, FinalNewline: true}},
		{"yaml 4 indented seq", "a:\n    b: 1\n    c:\n        - x", specfile.Format{Indent: 4, Width: -1}},
		{"yaml 2 compact seq", "a:\n  b: 1\n  c:\n  - x", specfile.Format{Indent: 2, CompactSeq: true, Width: -1}},
		{"yaml explicit start", "---\n# c\na:\n  b: 1\n", specfile.Format{Indent: 2, ExplicitStart: true, Width: -1, FinalNewline: true}},
		{"json standard", "{\n    \"a\": [\n        1\n    ]\n}\n", specfile.Format{JSON: true, Indent: 4, Width: -1, FinalNewline: true}},
		{"json jackson", "{\n  \"a\" : [ 1 ]\n}", specfile.Format{JSON: true, JSONLayout: specfile.JSONJackson, Indent: 2, Width: -1}},
		// CR LF line ends stay, comments included (no blank line between them).
		{"yaml crlf", "# c\r\n# d\r\na:\r\n  b: |\r\n    x\r\n    y\r\n  c: 1 # e\r\n", specfile.Format{Indent: 2, Width: -1, FinalNewline: true, CRLF: true}},
		{"json crlf", "{\r\n  \"a\": [\r\n    \"x\\r\\ny\"\r\n  ]\r\n}\r\n", specfile.Format{JSON: true, Indent: 2, Width: -1, FinalNewline: true, CRLF: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := specfile.Parse([]byte(tt.src))
			require.NoError(t, err)
			assert.Equal(t, tt.want, specfile.Detect([]byte(tt.src), doc))
			out, err := specfile.Encode(doc, tt.want)
			require.NoError(t, err)
			assert.Equal(t, tt.src, string(out))
		})
	}
}

// TestNoFinalNewline: a YAML file without a final newline is written
// without one, unless its last value ends with line breaks, which a block
// scalar writes as the file's last ones ("a: |\n  x\n  " holds "x\n",
// "a: |\n  x" holds "x").
func TestNoFinalNewline(t *testing.T) {
	for _, c := range []struct {
		src, out string
	}{
		{"a: |\n  x\n  ", "a: |\n  x\n"},
		{"a: |+\n  x\n\n ", "a: |+\n  x\n\n"},
		{"a:\n  - b: 1\n    c: >\n      x\n    ", "a:\n  - b: 1\n    c: >\n      x\n"},
		{"a: |\n  x", "a: |-\n  x"},
		{"a: |\n  x\n# end", "a: |\n  x\n# end"},
		{"a: [\"x\\n\"]", "a: [\"x\\n\"]"},
		{"a: \"x\\n\"", "a: \"x\\n\""},
		{"a: |\n  x\nb: 1", "a: |\n  x\nb: 1"},
	} {
		doc, err := specfile.Parse([]byte(c.src))
		require.NoError(t, err)
		f := specfile.Detect([]byte(c.src), doc)
		require.False(t, f.FinalNewline, "%q", c.src)
		out, err := specfile.Encode(doc, f)
		require.NoError(t, err)
		assert.Equal(t, c.out, string(out), "%q", c.src)
		var a, b any
		require.NoError(t, yaml.Unmarshal([]byte(c.src), &a))
		require.NoError(t, yaml.Unmarshal(out, &b))
		assert.Equal(t, a, b, "%q", c.src)
	}
}

func TestJSONScalars(t *testing.T) {
	doc, err := specfile.Parse([]byte("a: 0x10\nb: 1_000\nc: .inf\nd: ~\ne: \"x\\u0001\\\"\"\nf: 1.50\ng: '12'\nh: [true, false]\ni: {}\n"))
	require.NoError(t, err)
	out, err := specfile.Encode(doc, specfile.Format{JSON: true, Indent: 2, FinalNewline: true})
	require.NoError(t, err)
	assert.Equal(t, `{
  "a": 16,
  "b": 1000,
  "c": ".inf",
  "d": null,
  "e": "x\u0001\"",
  "f": 1.50,
  "g": "12",
  "h": [
    true,
    false
  ],
  "i": {}
}
`, string(out))
	assert.True(t, json.Valid(out))
}

func TestParseErrors(t *testing.T) {
	_, err := specfile.Parse(nil)
	assert.Error(t, err)
	_, err = specfile.Parse([]byte("a: [\n"))
	assert.Error(t, err)
	_, err = specfile.Encode(nil, specfile.DefaultYAML)
	assert.Error(t, err)
	var n yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("? [a]\n: b\n"), &n))
	_, err = specfile.Encode(&n, specfile.Format{JSON: true})
	assert.Error(t, err)
}

func TestJSONAliasBomb(t *testing.T) {
	src := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		src += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	doc, err := specfile.Parse([]byte(src))
	require.NoError(t, err)
	_, err = specfile.Encode(doc, specfile.Format{JSON: true})
	assert.ErrorContains(t, err, "too many JSON values")
}
