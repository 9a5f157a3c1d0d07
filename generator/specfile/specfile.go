// Package specfile reads and writes OpenAPI documents (specs and overlays)
// as gopkg.in/yaml.v3 node trees, keeping the file's own formatting: YAML
// stays YAML and JSON stays JSON; key order, comments, scalar styles, the
// indentation, the sequence indentation, the line width and an explicit
// document start of YAML files are kept; JSON files keep their member order,
// indentation and layout (encoding/json's, or Jackson's as in many published
// specs). Both keep the file's line endings (LF, or CRLF).
//
// Detect learns the format from the file's bytes; Encode writes a node tree
// in that format. Parts of a tree that were not changed come out as they
// went in, up to the normalizations of the YAML emitter (trailing spaces,
// blank lines inside block scalars' indentation). The YAML emitter is
// go.yaml.in/yaml/v4's, which can write compact sequences and wrap lines as
// most YAML tools do; the tree is converted to its node type on the way out.
package specfile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml4 "go.yaml.in/yaml/v4"
	"gopkg.in/yaml.v3"
)

// JSONLayout is the layout of a JSON file.
type JSONLayout uint8

// JSON layouts.
const (
	// JSONStandard is encoding/json's MarshalIndent layout: `"k": v`, one
	// array element per line, `{}` and `[]` when empty.
	JSONStandard JSONLayout = iota
	// JSONJackson is the layout of Jackson's DefaultPrettyPrinter (used by
	// many generated specs): `"k" : v`, array elements on the array's line
	// (`[ "a", "b" ]`, `[ {` … `}, {` … `} ]`), indentation by object depth
	// only, `{ }` and `[ ]` when empty.
	JSONJackson
)

// Format is how a file is written.
type Format struct {
	JSON       bool
	JSONLayout JSONLayout
	// Indent is the number of spaces per level (YAML: 2..9).
	Indent int
	// CompactSeq: YAML block sequences start at their key's column
	// ("key:\n- a") instead of one level deeper ("key:\n  - a").
	CompactSeq bool
	// Width is the YAML emitter's preferred line width; -1 never wraps.
	Width int
	// ExplicitStart: the YAML document starts with "---".
	ExplicitStart bool
	// FinalNewline: the file ends with a newline. Without it, YAML still
	// ends with the line breaks of a block scalar written last, which are
	// its value's.
	FinalNewline bool
	// CRLF: lines end with CR LF (most of the file's line breaks do), not LF.
	CRLF bool
}

// DefaultYAML is the format of new YAML files: two spaces, sequences
// indented under their key, no wrapping.
var DefaultYAML = Format{Indent: 2, Width: -1, FinalNewline: true}

// Parse parses YAML or JSON into its document node (a DocumentNode whose
// only child is the root). An empty input is an error.
func Parse(src []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(LF(src), &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errors.New("the document is empty")
	}
	return &doc, nil
}

// LF returns src with its CR LF line breaks made LF, as the YAML parser
// should read them: gopkg.in/yaml.v3 reads a CR LF in a comment as two
// line breaks (a blank line that is not in the file). Lines and columns
// stay as they are. Parse calls it, and so must any other parser of a spec; Format.CRLF writes the
// CRs again.
func LF(src []byte) []byte {
	if !bytes.Contains(src, []byte("\r\n")) {
		return src
	}
	return bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
}

// IsJSON reports whether src is JSON rather than block YAML: its first
// character other than white space opens an object or array.
func IsJSON(src []byte) bool {
	s := bytes.TrimLeft(src, " \t\r\n\ufeff")
	return len(s) > 0 && (s[0] == '{' || s[0] == '[')
}

var (
	jacksonMember = regexp.MustCompile(`(?m)^\s*"(?:[^"\\]|\\.)*" : `)
	leadingSpaces = regexp.MustCompile(`(?m)^( +)\S`)
)

// Detect learns the format of src, whose parsed document is doc (as Parse
// returns it).
func Detect(src []byte, doc *yaml.Node) Format {
	f := Format{FinalNewline: len(src) == 0 || src[len(src)-1] == '\n', Width: -1, CRLF: isCRLF(src)}
	if IsJSON(src) {
		f.JSON = true
		f.Indent = 2
		if m := leadingSpaces.FindSubmatch(src); m != nil {
			f.Indent = len(m[1])
		}
		if jacksonMember.Match(src) {
			f.JSONLayout = JSONJackson
		}
		return f
	}
	f.Indent, f.CompactSeq = 2, false
	if indent, ok := findIndent(doc); ok {
		f.Indent = indent
	}
	if compact, ok := findSeqStyle(doc); ok {
		f.CompactSeq = compact
	}
	f.ExplicitStart = startsWithDirective(src)
	f.Width = pickWidth(src, doc, f)
	return f
}

// isCRLF reports whether most of src's line breaks are CR LF.
func isCRLF(src []byte) bool {
	crlf := bytes.Count(src, []byte("\r\n"))
	return crlf > 0 && crlf >= bytes.Count(src, []byte("\n"))-crlf
}

func startsWithDirective(src []byte) bool {
	for _, line := range strings.Split(string(src), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		return t == "---" || strings.HasPrefix(t, "--- ")
	}
	return false
}

// findIndent returns the column step of the first block mapping nested in
// a block mapping.
func findIndent(n *yaml.Node) (int, bool) {
	if n == nil {
		return 0, false
	}
	if n.Kind == yaml.MappingNode && n.Style&yaml.FlowStyle == 0 {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 && v.Line > k.Line {
				if d := v.Content[0].Column - k.Column; d >= 2 && d <= 9 {
					return d, true
				}
			}
		}
	}
	for _, c := range n.Content {
		if d, ok := findIndent(c); ok {
			return d, true
		}
	}
	return 0, false
}

// findSeqStyle reports whether the first block sequence under a mapping key
// starts at the key's column.
func findSeqStyle(n *yaml.Node) (compact, ok bool) {
	if n == nil {
		return false, false
	}
	if n.Kind == yaml.MappingNode && n.Style&yaml.FlowStyle == 0 {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.SequenceNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 && v.Line > k.Line {
				return v.Column == k.Column, true
			}
		}
	}
	for _, c := range n.Content {
		if compact, ok := findSeqStyle(c); ok {
			return compact, true
		}
	}
	return false, false
}

// pickWidth encodes the unchanged document with and without line wrapping
// at 80 columns and keeps the width that reproduces more of src's lines.
func pickWidth(src []byte, doc *yaml.Node, f Format) int {
	if !hasLongLines(src) && !wrapped(doc) {
		return -1
	}
	best, bestScore := -1, -1
	for _, w := range []int{-1, 80} {
		f.Width = w
		out, err := Encode(doc, f)
		if err != nil {
			continue
		}
		if s := sameLines(src, out); s > bestScore {
			best, bestScore = w, s
		}
	}
	return best
}

func hasLongLines(src []byte) bool {
	for _, l := range bytes.Split(src, []byte("\n")) {
		if utf8.RuneCount(bytes.TrimSuffix(l, []byte("\r"))) > 80 {
			return true
		}
	}
	return false
}

// wrapped reports whether some plain or quoted scalar spans lines
// (a wrapped long line), judged by the line of the next key.
func wrapped(n *yaml.Node) bool {
	if n == nil {
		return false
	}
	if n.Kind == yaml.MappingNode && n.Style&yaml.FlowStyle == 0 {
		for i := 1; i+2 < len(n.Content); i += 2 {
			v, next := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 &&
				!strings.Contains(v.Value, "\n") && next.Line > v.Line+1 && v.LineComment == "" && next.HeadComment == "" && v.FootComment == "" {
				return true
			}
		}
	}
	for _, c := range n.Content {
		if wrapped(c) {
			return true
		}
	}
	return false
}

func sameLines(a, b []byte) int {
	count := map[string]int{}
	for _, l := range strings.Split(string(a), "\n") {
		count[l]++
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if count[l] > 0 {
			count[l]--
			n++
		}
	}
	return n
}

// Encode writes n (a document node or its root) in format f.
func Encode(n *yaml.Node, f Format) ([]byte, error) {
	out, err := encode(n, f)
	if err != nil || !f.CRLF {
		return out, err
	}
	// Every LF either writer puts out ends a line of the file: JSON escapes
	// the line breaks of strings, and YAML's block scalars break lines as
	// the file does.
	return bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n")), nil
}

func encode(n *yaml.Node, f Format) (out []byte, err error) {
	if n == nil {
		return nil, errors.New("specfile: nothing to encode")
	}
	if f.JSON {
		return encodeJSON(n, f)
	}
	defer func() {
		if r := recover(); r != nil { // the emitter panics on trees it cannot write
			out, err = nil, fmt.Errorf("specfile: cannot encode the document as YAML: %v", r)
		}
	}()
	indent := f.Indent
	if indent < 2 || indent > 9 {
		indent = 2
	}
	var buf bytes.Buffer
	d, err := yaml4.NewDumper(&buf,
		yaml4.WithIndent(indent),
		yaml4.WithCompactSeqIndent(f.CompactSeq),
		yaml4.WithLineWidth(f.Width),
		yaml4.WithQuotePreference(yaml4.QuoteLegacy),
		yaml4.WithUnicode(true),
		yaml4.WithExplicitStart(f.ExplicitStart),
	)
	if err != nil {
		return nil, err
	}
	if err := d.Dump(toV4(n, map[*yaml.Node]*yaml4.Node{}, false)); err != nil {
		return nil, fmt.Errorf("specfile: cannot encode the document as YAML: %w", err)
	}
	if err := d.Close(); err != nil {
		return nil, err
	}
	out = buf.Bytes()
	if !f.FinalNewline {
		out = trimFinalNewline(out, n)
	}
	return out, nil
}

// trimFinalNewline returns out, the YAML encoding of n, without its final
// line breaks, unless they belong to the value of a block scalar written
// last ("a: |\n  x\n" holds "x\n", "a: |\n  x" holds "x"), which keeps
// them: a file without a final newline can end with such a value (its
// last line is white space, "a: |\n  x\n  "), and the file written must
// hold the same data.
func trimFinalNewline(out []byte, n *yaml.Node) []byte {
	trimmed := bytes.TrimRight(out, "\n")
	want, ok := lastScalar(n)
	if !ok || !strings.HasSuffix(want, "\n") {
		return trimmed
	}
	// Written as a block scalar, or quoted, or followed by a comment: the
	// parser tells. Trimming line breaks at the end of the file can only
	// change the value written last.
	var b yaml.Node
	if yaml.Unmarshal(trimmed, &b) != nil {
		return out
	}
	if got, ok := lastScalar(&b); !ok || got != want {
		return out
	}
	return trimmed
}

// lastScalar returns the value of the last node written of n (the last
// item or value of block collections, down to a scalar), and false when
// that node is not a scalar.
func lastScalar(n *yaml.Node) (string, bool) {
	for n != nil {
		switch {
		case n.Kind == yaml.ScalarNode:
			return n.Value, true
		case n.Kind == yaml.AliasNode || n.Style&yaml.FlowStyle != 0 || len(n.Content) == 0:
			return "", false // "*name", a flow collection's closing bracket, "{}" or "[]"
		}
		n = n.Content[len(n.Content)-1]
	}
	return "", false
}

// toV4 converts a yaml.v3 tree into a go.yaml.in/yaml/v4 tree, keeping
// aliases pointing at their converted anchors. flow: n is inside a flow
// collection, where a null written as nothing ("[a: ]", "{a: }") becomes
// null: the emitter would quote an empty plain scalar there, a string.
func toV4(n *yaml.Node, seen map[*yaml.Node]*yaml4.Node, flow bool) *yaml4.Node {
	if n == nil {
		return nil
	}
	if c, ok := seen[n]; ok {
		return c
	}
	value := n.Value
	if flow && n.Kind == yaml.ScalarNode && value == "" && n.ShortTag() == "!!null" {
		value = "null"
	}
	flow = flow || n.Style&yaml.FlowStyle != 0
	o := &yaml4.Node{
		Kind:        kind4(n.Kind),
		Style:       style4(n.Style),
		Tag:         n.Tag,
		Value:       value,
		Anchor:      n.Anchor,
		HeadComment: n.HeadComment,
		LineComment: n.LineComment,
		FootComment: n.FootComment,
		Line:        n.Line,
		Column:      n.Column,
	}
	seen[n] = o
	o.Alias = toV4(n.Alias, seen, flow)
	if len(n.Content) > 0 {
		o.Content = make([]*yaml4.Node, len(n.Content))
		for i, c := range n.Content {
			o.Content[i] = toV4(c, seen, flow)
		}
	}
	return o
}

func kind4(k yaml.Kind) yaml4.Kind {
	switch k {
	case yaml.DocumentNode:
		return yaml4.DocumentNode
	case yaml.SequenceNode:
		return yaml4.SequenceNode
	case yaml.MappingNode:
		return yaml4.MappingNode
	case yaml.ScalarNode:
		return yaml4.ScalarNode
	case yaml.AliasNode:
		return yaml4.AliasNode
	}
	return 0
}

func style4(s yaml.Style) yaml4.Style {
	var o yaml4.Style
	for _, p := range []struct {
		from yaml.Style
		to   yaml4.Style
	}{
		{yaml.TaggedStyle, yaml4.TaggedStyle},
		{yaml.DoubleQuotedStyle, yaml4.DoubleQuotedStyle},
		{yaml.SingleQuotedStyle, yaml4.SingleQuotedStyle},
		{yaml.LiteralStyle, yaml4.LiteralStyle},
		{yaml.FoldedStyle, yaml4.FoldedStyle},
		{yaml.FlowStyle, yaml4.FlowStyle},
	} {
		if s&p.from != 0 {
			o |= p.to
		}
	}
	return o
}

// encodeJSON writes n as JSON in layout f.JSONLayout.
func encodeJSON(n *yaml.Node, f Format) ([]byte, error) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, errors.New("specfile: empty document")
		}
		n = n.Content[0]
	}
	indent := f.Indent
	if indent <= 0 {
		indent = 2
	}
	w := &jsonWriter{indent: strings.Repeat(" ", indent), jackson: f.JSONLayout == JSONJackson, budget: maxJSONNodes}
	if err := w.value(n, 0, 0); err != nil {
		return nil, err
	}
	if f.FinalNewline {
		w.b.WriteByte('\n')
	}
	return w.b.Bytes(), nil
}

// maxJSONNodes bounds the nodes written as JSON, where aliases are
// expanded: a few aliases of aliases would otherwise write gigabytes.
const maxJSONNodes = 2_000_000

type jsonWriter struct {
	b       bytes.Buffer
	indent  string
	jackson bool
	budget  int
}

func (w *jsonWriter) newline(level int) {
	w.b.WriteByte('\n')
	for range level {
		w.b.WriteString(w.indent)
	}
}

// value writes n; level is the indentation level of its members; depth
// guards against alias cycles.
func (w *jsonWriter) value(n *yaml.Node, level, depth int) error {
	if depth > 10000 {
		return errors.New("specfile: the document nests too deeply (alias cycle?)")
	}
	if w.budget--; w.budget < 0 {
		return errors.New("specfile: the document expands to too many JSON values (aliases of aliases?)")
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return errors.New("specfile: an alias without its anchor")
		}
		return w.value(n.Alias, level, depth+1)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			w.b.WriteString("null")
			return nil
		}
		return w.value(n.Content[0], level, depth+1)
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			if w.jackson {
				w.b.WriteString("{ }")
			} else {
				w.b.WriteString("{}")
			}
			return nil
		}
		w.b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.newline(level + 1)
			k := n.Content[i]
			for k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("specfile: line %d: a mapping key that is not a scalar cannot be written as JSON", k.Line)
			}
			writeString(&w.b, k.Value)
			if w.jackson {
				w.b.WriteString(" : ")
			} else {
				w.b.WriteString(": ")
			}
			if err := w.value(n.Content[i+1], level+1, depth+1); err != nil {
				return err
			}
		}
		w.newline(level)
		w.b.WriteByte('}')
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			if w.jackson {
				w.b.WriteString("[ ]")
			} else {
				w.b.WriteString("[]")
			}
			return nil
		}
		w.b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				w.b.WriteByte(',')
			}
			if w.jackson {
				w.b.WriteByte(' ')
				if err := w.value(c, level, depth+1); err != nil {
					return err
				}
				continue
			}
			w.newline(level + 1)
			if err := w.value(c, level+1, depth+1); err != nil {
				return err
			}
		}
		if w.jackson {
			w.b.WriteString(" ]")
		} else {
			w.newline(level)
			w.b.WriteByte(']')
		}
	case yaml.ScalarNode:
		w.scalar(n)
	default:
		return fmt.Errorf("specfile: line %d: a node of kind %d cannot be written as JSON", n.Line, n.Kind)
	}
	return nil
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

func (w *jsonWriter) scalar(n *yaml.Node) {
	switch n.ShortTag() {
	case "!!null":
		w.b.WriteString("null")
		return
	case "!!bool":
		if v, err := strconv.ParseBool(n.Value); err == nil {
			w.b.WriteString(strconv.FormatBool(v))
			return
		}
		switch strings.ToLower(n.Value) {
		case "yes", "on", "y":
			w.b.WriteString("true")
			return
		case "no", "off", "n":
			w.b.WriteString("false")
			return
		}
	case "!!int", "!!float":
		if jsonNumber.MatchString(n.Value) {
			w.b.WriteString(n.Value)
			return
		}
		clean := strings.ReplaceAll(n.Value, "_", "")
		if i, err := strconv.ParseInt(clean, 0, 64); err == nil {
			w.b.WriteString(strconv.FormatInt(i, 10))
			return
		}
		if f, err := strconv.ParseFloat(clean, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			w.b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			return
		}
	}
	writeString(&w.b, n.Value) // strings, and what JSON has no number for (.inf, .nan)
}

const hex = "0123456789abcdef"

// writeString writes s as a JSON string: quotes, backslashes and control
// characters escaped, everything else (non-ASCII included) as is. Invalid
// UTF-8 becomes U+FFFD.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20 || c == 0x7f:
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			b.WriteString(`\u202`)
			b.WriteByte(hex[r&15])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}
