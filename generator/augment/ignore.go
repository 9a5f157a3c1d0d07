package augment

import (
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
)

// IgnoreMark starts a comment that silences warnings of an operation:
//
//	# idemgen:ignore RULE[,RULE...] -- REASON
//
// written on or inside the operation's x-idempotency block.
const IgnoreMark = "idemgen:ignore"

// Ignores returns the ignores written as IgnoreMark comments in the
// x-idempotency blocks of d's operations, each for its operation, and an
// error [bad-ignore] for each that names a rule it may not (an error rule,
// an unknown one), names none, gives no reason, or is written in the
// document root's block (the config file's ignore: silences a rule for the
// whole spec).
func Ignores(d *load.Document) ([]diag.Ignore, diag.List) {
	var ignores []diag.Ignore
	var diags diag.List
	src := sources{}
	eachBlock(d, func(key *yaml.Node, block load.Node, op string) {
		eachComment(key, block.Node, func(n *yaml.Node, line string) {
			text := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
			rest, ok := strings.CutPrefix(text, IgnoreMark)
			if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
				return
			}
			at := d.Pos(n, block.File, block.Pointer)
			lineText, at := src.commentLine(at, text)
			from := max(strings.Index(lineText, IgnoreMark), 0)
			pos := func(s string) ir.Pos { // of s, the mark or a rule, in the line
				p := at
				if i := strings.Index(lineText[from:], s); i >= 0 && p.Line > 0 {
					p.Col = utf8.RuneCountInString(lineText[:from+i]) + 1
				}
				return p
			}
			markPos := pos(IgnoreMark)
			if op == "" {
				diags.Errorf(markPos, diag.RuleBadIgnore, "# %s in the document root's x-idempotency block: write it in an operation's block, or list the rule under ignore: in idemgen.yaml to ignore it for the whole spec", IgnoreMark)
				return
			}
			rules, reason, _ := strings.Cut(rest, "--")
			names := strings.FieldsFunc(rules, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
			if len(names) == 0 {
				diags.Errorf(markPos, diag.RuleBadIgnore, "# %s names no rule: write # %s RULE -- REASON", IgnoreMark, IgnoreMark)
				return
			}
			if strings.TrimSpace(reason) == "" {
				diags.Errorf(markPos, diag.RuleBadIgnore, "# %s %s gives no reason: write # %s %s -- REASON (why the warning does not apply to %s)", IgnoreMark, strings.Join(names, ","), IgnoreMark, strings.Join(names, ","), op)
				return
			}
			for _, r := range names {
				p := pos(r)
				if msg := diag.CheckIgnoreRule(r); msg != "" {
					diags.Errorf(p, diag.RuleBadIgnore, "# %s: %s", IgnoreMark, msg)
					continue
				}
				ignores = append(ignores, diag.Ignore{Rule: r, Ops: []string{op}, Pos: p, Name: "# " + IgnoreMark + " " + r})
			}
		})
	})
	return ignores, diags
}

// eachComment calls f for each line of the comments of key and of every
// node below block (block included) that holds IgnoreMark.
func eachComment(key, block *yaml.Node, f func(n *yaml.Node, line string)) {
	lines := func(n *yaml.Node, at *yaml.Node) {
		for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
			if !strings.Contains(c, IgnoreMark) {
				continue
			}
			for _, l := range strings.Split(c, "\n") {
				if strings.Contains(l, IgnoreMark) {
					f(at, l)
				}
			}
		}
	}
	if key != nil {
		lines(key, key)
	}
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || depth > 64 {
			return
		}
		lines(n, n)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(block, 0)
}

// commentLine finds the line of the file at pos that holds the comment
// text (without its #), nearest to pos's line (a head comment is above its
// node, a foot comment below): it returns that line and its position
// (column 1), or "" and pos when the file does not have it.
func (s sources) commentLine(pos ir.Pos, text string) (string, ir.Pos) {
	if pos.Line <= 0 {
		return "", pos
	}
	lines := strings.Split(string(s.read(pos.File)), "\n")
	match := func(l int) bool {
		if l < 1 || l > len(lines) {
			return false
		}
		i := strings.Index(lines[l-1], "#")
		for i >= 0 {
			if strings.TrimSpace(strings.TrimLeft(lines[l-1][i:], "#")) == text {
				return true
			}
			j := strings.Index(lines[l-1][i+1:], "#")
			if j < 0 {
				break
			}
			i += 1 + j
		}
		return false
	}
	for dist := 0; dist <= len(lines); dist++ {
		for _, l := range []int{pos.Line - dist, pos.Line + dist} {
			if match(l) {
				pos.Line, pos.Col = l, 1
				return strings.TrimRight(lines[l-1], "\r"), pos
			}
		}
	}
	return "", pos
}

// Silence applies the ignores to diags, the diagnostics of the spec d,
// compiled to spec (nil when it has errors), in one place for every
// command: those written as comments in d (Ignores) and the given ones
// (the config file's and the command line's, checked by
// diag.CheckIgnoreRule already). A given ignore that names an operation
// spec does not have is an error [bad-ignore]. ran tells the rules the
// command checks: an ignore of another rule is not reported as unused.
func Silence(d *load.Document, spec *ir.Spec, diags diag.List, given []diag.Ignore, ran func(rule string) bool) diag.List {
	var ignores []diag.Ignore
	var bad diag.List
	if d != nil {
		ignores, bad = Ignores(d)
	}
	if spec != nil {
		ops := map[string]bool{}
		for _, r := range spec.Routes {
			ops[r.Where()] = true
		}
		for _, ig := range given {
			if len(ig.Ops) == 1 && !ops[ig.Ops[0]] {
				bad.Errorf(ig.Pos, diag.RuleBadIgnore, "%s: the spec has no operation %s (name it METHOD /path, as diagnostics do)", ig.Name, ig.Ops[0])
				continue
			}
			ignores = append(ignores, ig)
		}
	} else {
		ignores = append(ignores, given...)
	}
	if len(ignores) == 0 && len(bad) == 0 {
		return diags
	}
	return append(diags, bad...).Suppress(ignores, ran)
}
