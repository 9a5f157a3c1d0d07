package augment

import (
	"os"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
)

// firstDifference returns the node of have (a definition in the spec)
// where it first differs, in its own order, from want, as equal compares
// them: a scalar with another value, an entry want has not (its key), or
// a mapping or sequence that lacks what want has (its key; have itself at
// the top). nil when they are equal.
func firstDifference(have, want *yaml.Node) *yaml.Node {
	return firstDifferenceDepth(have, want, 0)
}

func firstDifferenceDepth(have, want *yaml.Node, depth int) *yaml.Node {
	have, want = unalias(have), unalias(want)
	if equalDepth(have, want, depth) {
		return nil
	}
	if have == nil || want == nil || have.Kind != want.Kind || depth > 200 {
		return have
	}
	switch have.Kind {
	case yaml.MappingNode:
		kv := yamlmerge.Pairs(have)
		for i := 0; i+1 < len(kv); i += 2 {
			w := child(want, kv[i].Value)
			if w == nil {
				return kv[i]
			}
			if d := firstDifferenceDepth(kv[i+1], w, depth+1); d != nil {
				if d == unalias(kv[i+1]) && d.Kind != yaml.ScalarNode {
					return kv[i] // a mapping or sequence as a whole: at its key
				}
				return d
			}
		}
	case yaml.SequenceNode:
		for i := 0; i < len(have.Content) && i < len(want.Content); i++ {
			if d := firstDifferenceDepth(have.Content[i], want.Content[i], depth+1); d != nil {
				return d
			}
		}
		if len(have.Content) > len(want.Content) {
			return have.Content[len(want.Content)]
		}
	}
	return have
}

// nodeAfter returns the position in file of the node that follows n in
// the spec (the next entry of its mapping or sequence, or of an enclosing
// one's), or a zero Pos when there is none or it is in another file.
func (p *planner) nodeAfter(d *load.Document, n *yaml.Node, file string) ir.Pos {
	for range 10000 {
		s, ok := p.parents[n]
		if !ok {
			return ir.Pos{}
		}
		c := s.parent.Content
		for i := range c {
			if c[i] == n && i+1 < len(c) {
				if pos := d.Pos(c[i+1], d.Path, ""); pos.File == file {
					return pos
				}
				return ir.Pos{}
			}
		}
		n = s.parent
	}
	return ir.Pos{}
}

// sources are the files diagnostics point into, read once each.
type sources map[string][]byte

func (s sources) read(file string) []byte {
	data, ok := s[file]
	if !ok {
		data, _ = os.ReadFile(file)
		s[file] = data
	}
	return data
}

// markerPos returns the position of the BeginMarker of the contract block
// in text n, a scalar at pos: the last of the markers of its value, found
// in the file between pos and end (the position of the node after it; zero
// for the end of the file). The file must hold as many markers there as
// the value does (else a marker is escaped or broken across lines): pos
// otherwise.
func (s sources) markerPos(pos ir.Pos, n *yaml.Node, end ir.Pos) ir.Pos {
	data := string(s.read(pos.File))
	from := offset(data, pos.Line, pos.Col)
	to := len(data)
	if end.Line > 0 {
		to = offset(data, end.Line, end.Col)
	}
	want := strings.Count(n.Value, BeginMarker)
	if from < 0 || to < from || want == 0 || strings.Count(data[from:to], BeginMarker) != want {
		return pos
	}
	at := from + strings.LastIndex(data[from:to], BeginMarker)
	lineStart := strings.LastIndex(data[:at], "\n") + 1
	pos.Line += strings.Count(data[from:at], "\n")
	pos.Col = utf8.RuneCountInString(data[lineStart:at]) + 1
	return pos
}

// offset returns the byte offset of line:col (1-based, col in characters
// as the YAML parser counts them) in data, or -1.
func offset(data string, line, col int) int {
	at := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(data[at:], '\n')
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	for c := 1; c < col; c++ {
		if at >= len(data) || data[at] == '\n' {
			return -1
		}
		_, size := utf8.DecodeRuneInString(data[at:])
		at += size
	}
	return at
}
