package specfile

import (
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// KeepUntouched returns out, the YAML encoding of a document parsed from src
// and then changed, with the original text of src back in place of every
// flow scalar (a plain or quoted value) that spans lines in src or in out
// and that the change left as it was: the encoder writes a value broken
// over lines (a long description) on one line, or wraps at its own width a
// long line src did not wrap, either of which would
// change the layout of parts of the file nothing touched. A scalar is
// restored when it is a block mapping's value whose key stands at the same
// column in both documents, with the same value and style. Anything it
// cannot match exactly is left as encoded. Both src and out are LF text.
//
// It then puts back the text of src for every block mapping entry the
// change left as it was (keepEntries): its lines, from its key to the next
// line indented no deeper than its key, blank lines before that next line
// included, so an untouched schema keeps its blank lines, trailing spaces
// and sequence indentation when a sibling is added.
func KeepUntouched(src, out []byte) []byte {
	var s, o yaml.Node
	if yaml.Unmarshal(src, &s) != nil || yaml.Unmarshal(out, &o) != nil {
		return out
	}
	out, op := keepScalars(src, &s, out, &o)
	return keepEntries(src, &s, out, op)
}

// keepScalars returns out with the scalars KeepUntouched restores put back,
// and the tree of what it returns. s is the tree of src, o that of out.
func keepScalars(src []byte, s *yaml.Node, out []byte, o *yaml.Node) ([]byte, *yaml.Node) {
	srcLines, outLines := strings.Split(string(src), "\n"), strings.Split(string(out), "\n")
	type repl struct {
		from, to int // byte offsets in out
		text     string
	}
	var rs []repl
	walkEntries(s, o, func(ma, ka, va, mb, kb, vb *yaml.Node) bool {
		if va.Kind != yaml.ScalarNode || vb.Kind != yaml.ScalarNode {
			return true
		}
		if r, ok := restorable(ma, ka, va, mb, kb, vb, srcLines, outLines); ok {
			from, to := offset(outLines, r.oStart), offset(outLines, r.oEnd)
			if from >= 0 && to >= from {
				rs = append(rs, repl{from, to, r.text})
			}
		}
		return false
	})
	if len(rs) == 0 {
		return out, o
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].from > rs[j].from })
	res := string(out)
	last := len(res) + 1
	for _, r := range rs {
		if r.to > last { // overlapping: keep the encoding
			continue
		}
		res = res[:r.from] + r.text + res[r.to:]
		last = r.from
	}
	// The result must still read as the same document.
	var check yaml.Node
	if yaml.Unmarshal([]byte(res), &check) != nil || !sameTree(o, &check) {
		return out, o
	}
	return []byte(res), &check
}

// walkEntries walks the trees a (of src) and b (of out) in parallel:
// documents' roots, sequences' items at the same index, and the entries of
// mappings ma (in a) and mb (in b) whose keys ka and kb are scalars of the
// same value (for each entry of ma, the first such of mb), which it passes
// to visit with their values va and vb; visit returns whether to walk on
// into va and vb. Nodes of different kinds are not looked into.
func walkEntries(a, b *yaml.Node, visit func(ma, ka, va, mb, kb, vb *yaml.Node) bool) {
	if a == nil || b == nil || a.Kind != b.Kind {
		return
	}
	switch a.Kind {
	case yaml.DocumentNode:
		if len(a.Content) > 0 && len(b.Content) > 0 {
			walkEntries(a.Content[0], b.Content[0], visit)
		}
	case yaml.SequenceNode:
		for i := range min(len(a.Content), len(b.Content)) {
			walkEntries(a.Content[i], b.Content[i], visit)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(a.Content); i += 2 {
			ka, va := a.Content[i], a.Content[i+1]
			for j := 0; j+1 < len(b.Content); j += 2 {
				kb, vb := b.Content[j], b.Content[j+1]
				if kb.Kind != yaml.ScalarNode || ka.Kind != yaml.ScalarNode || kb.Value != ka.Value {
					continue
				}
				if visit(a, ka, va, b, kb, vb) {
					walkEntries(va, vb, visit)
				}
				break
			}
		}
	}
}

type pos struct{ line, col int } // 0-based line, rune column

type restoration struct {
	oStart, oEnd pos
	text         string
}

func restorable(ma, ka, va, mb, kb, vb *yaml.Node, srcLines, outLines []string) (restoration, bool) {
	if ma.Style&yaml.FlowStyle != 0 || mb.Style&yaml.FlowStyle != 0 || va.Value != vb.Value || va.Tag != vb.Tag ||
		va.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || va.Style&yaml.FlowStyle != 0 ||
		ka.Column != kb.Column || ka.Line != va.Line || kb.Line != vb.Line || (va.Style == 0 && strings.Contains(va.Value, "\n")) {
		return restoration{}, false
	}
	sStart := pos{va.Line - 1, va.Column - 1}
	sEnd, ok := scalarEnd(srcLines, sStart, va.Style, ka.Column-1)
	if !ok || va.Column != vb.Column {
		return restoration{}, false
	}
	oStart := pos{vb.Line - 1, vb.Column - 1}
	oEnd, ok := scalarEnd(outLines, oStart, vb.Style, kb.Column-1)
	if !ok || (sEnd.line == sStart.line && oEnd.line == oStart.line) {
		return restoration{}, false // on one line in both: as the encoder wrote it
	}
	text, ok := slice(srcLines, sStart, sEnd)
	if !ok {
		return restoration{}, false
	}
	return restoration{oStart, oEnd, text}, true
}

// scalarEnd finds where the flow scalar starting at p ends (exclusive):
// the closing quote of a quoted one, the end of the last continuation line
// (indented deeper than the key at column keyCol) of a plain one.
func scalarEnd(lines []string, p pos, style yaml.Style, keyCol int) (pos, bool) {
	if p.line >= len(lines) {
		return pos{}, false
	}
	switch {
	case style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0:
		q := '\''
		if style&yaml.DoubleQuotedStyle != 0 {
			q = '"'
		}
		col := p.col + 1
		for l := p.line; l < len(lines); l++ {
			r := []rune(lines[l])
			if col > len(r) {
				return pos{}, false
			}
			for c := col; c < len(r); c++ {
				switch {
				case q == '"' && r[c] == '\\':
					c++
				case r[c] == q && q == '\'' && c+1 < len(r) && r[c+1] == '\'':
					c++
				case r[c] == q:
					return pos{l, c + 1}, true
				}
			}
			col = 0
		}
		return pos{}, false
	case style == 0:
		r := []rune(lines[p.line])
		if p.col > len(r) || strings.Contains(string(r[p.col:]), " #") {
			return pos{}, false
		}
		end := pos{p.line, len([]rune(strings.TrimRight(lines[p.line], " \t")))}
		for l := p.line + 1; l < len(lines); l++ {
			t := strings.TrimLeft(lines[l], " ")
			ind := len(lines[l]) - len(t)
			if strings.TrimSpace(t) == "" || ind <= keyCol || strings.HasPrefix(t, "#") {
				break
			}
			if strings.Contains(t, " #") || strings.Contains(t, ": ") || strings.HasPrefix(t, "- ") {
				return pos{}, false
			}
			end = pos{l, len([]rune(strings.TrimRight(lines[l], " \t")))}
		}
		return end, true
	}
	return pos{}, false
}

func slice(lines []string, a, b pos) (string, bool) {
	var sb strings.Builder
	for l := a.line; l <= b.line; l++ {
		r := []rune(lines[l])
		from, to := 0, len(r)
		if l == a.line {
			from = a.col
		}
		if l == b.line {
			to = b.col
		}
		if from > to || to > len(r) {
			return "", false
		}
		sb.WriteString(string(r[from:to]))
		if l < b.line {
			sb.WriteByte('\n')
		}
	}
	return sb.String(), true
}

// offset is the byte offset of p in the text of lines, -1 when outside.
func offset(lines []string, p pos) int {
	if p.line >= len(lines) {
		return -1
	}
	n := 0
	for l := range p.line {
		n += len(lines[l]) + 1
	}
	r := []rune(lines[p.line])
	if p.col > len(r) {
		return -1
	}
	return n + len(string(r[:p.col]))
}

// sameTree reports whether a and b hold the same data (kinds, tags and
// values; not positions or styles).
func sameTree(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Value != b.Value || len(a.Content) != len(b.Content) {
		return false
	}
	if a.Kind == yaml.ScalarNode && a.ShortTag() != b.ShortTag() {
		return false
	}
	for i := range a.Content {
		if !sameTree(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// keepEntries returns out with the lines of src back in place of each
// block mapping entry whose key stands first on its line at the same
// column in both, whose key and value hold the same data and the same
// comments in both (a line comment keeps its spacing), and whose lines in
// src and out hold no comment line (a whole-line comment's place is the
// encoder's to decide). Entries that differ are looked into, so an
// untouched entry is kept however deep it is. Anything it cannot match
// exactly is left as encoded, and the result must read as out does, its
// comments included. s is the tree of src, o that of out.
func keepEntries(src []byte, s *yaml.Node, out []byte, o *yaml.Node) []byte {
	srcLines, outLines := strings.Split(string(src), "\n"), strings.Split(string(out), "\n")
	type span struct{ from, to int } // lines [from, to)
	type repl struct{ o, s span }
	var rs []repl
	walkEntries(s, o, func(ma, ka, va, mb, kb, vb *yaml.Node) bool {
		flow := ma.Style&yaml.FlowStyle != 0 || mb.Style&yaml.FlowStyle != 0
		if !flow && ka.Column == kb.Column && sameTree(va, vb) && sameComments(ka, kb) && sameComments(va, vb) {
			sa, oka := entryLines(srcLines, ka, va)
			sb, okb := entryLines(outLines, kb, vb)
			if oka && okb {
				rs = append(rs, repl{span(sb), span(sa)})
				return false
			}
		}
		return true
	})
	if len(rs) == 0 {
		return out
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].o.from > rs[j].o.from })
	res := outLines
	last := len(outLines) + 1
	for _, r := range rs {
		if r.o.to > last { // overlapping: keep the encoding
			continue
		}
		res = append(append(append([]string{}, res[:r.o.from]...), srcLines[r.s.from:r.s.to]...), res[r.o.to:]...)
		last = r.o.from
	}
	joined := []byte(strings.Join(res, "\n"))
	var check yaml.Node
	if yaml.Unmarshal(joined, &check) != nil || !sameTree(o, &check) || !slices.Equal(Comments(o), Comments(&check)) {
		return out
	}
	return joined
}

// entryLines returns the lines [from, to) of the block mapping entry whose
// key is k and value v: from k's line, which k must start, to the first
// line after it that is not blank and is indented no deeper than k (but
// for the items of a block sequence v at k's column), the blank lines
// before that line included when it is a sibling's key. false when a
// comment line is among them.
func entryLines(lines []string, k, v *yaml.Node) (struct{ from, to int }, bool) {
	var sp struct{ from, to int }
	l := k.Line - 1
	if l < 0 || l >= len(lines) || k.Column < 1 {
		return sp, false
	}
	if lead := lines[l][:min(len(lines[l]), k.Column-1)]; len(lead) != k.Column-1 || strings.Trim(lead, " ") != "" {
		return sp, false
	}
	// A block sequence may stand at its key's column ("key:\n- item").
	seq := v.Kind == yaml.SequenceNode && v.Style&yaml.FlowStyle == 0 && v.Line > k.Line
	end := l + 1
	for ; end < len(lines); end++ {
		t := strings.TrimLeft(lines[end], " ")
		if strings.TrimSpace(t) == "" {
			continue
		}
		indent := len(lines[end]) - len(t)
		if indent < k.Column-1 || indent == k.Column-1 && !(seq && (t == "-" || strings.HasPrefix(t, "- "))) {
			break
		}
	}
	// Blank lines before a sibling are the entry's; before the end of the
	// mapping (a shallower line, a comment, the end of the file) they are
	// an enclosing entry's.
	if end == len(lines) || len(lines[end])-len(strings.TrimLeft(lines[end], " ")) != k.Column-1 || strings.HasPrefix(strings.TrimSpace(lines[end]), "#") {
		for end > l+1 && strings.TrimSpace(lines[end-1]) == "" {
			end--
		}
	}
	for i := l; i < end; i++ {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "#") {
			return sp, false
		}
	}
	return struct{ from, to int }{l, end}, true
}

// sameComments reports whether a and b, trees of the same shape, carry
// the same comments on the same nodes.
func sameComments(a, b *yaml.Node) bool {
	if a.HeadComment != b.HeadComment || a.LineComment != b.LineComment || a.FootComment != b.FootComment || len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		if !sameComments(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// Comments returns the comment lines of a tree, trimmed and sorted: what
// a text holds of comments, whichever nodes a parser attaches them to.
func Comments(n *yaml.Node) []string {
	var out []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
			for _, l := range strings.Split(c, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					out = append(out, l)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	sort.Strings(out)
	return out
}
