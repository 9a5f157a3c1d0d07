// Package diag holds the diagnostics idemgen reports about a spec: each one a
// position, a severity, a message and a stable rule id, printed as
//
//	file:line:col: error|warning: message [rule-id]
package diag

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/ir"
)

// Severity of a diagnostic.
type Severity int

// Severities.
const (
	Warning Severity = iota // reported; generation goes on
	Error                   // generation refuses the spec
)

func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "warning"
}

// MarshalText encodes s as "error" or "warning".
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Kind tells an invalid spec from one idemgen cannot handle yet.
type Kind int

// Kinds.
const (
	Invalid     Kind = iota // the spec or its contract is wrong
	Unsupported             // the spec is fine, idemgen does not support it yet
)

// Diagnostic is one finding.
type Diagnostic struct {
	Pos      ir.Pos
	Severity Severity
	Kind     Kind
	Rule     string // stable, kebab-case
	Message  string
	// Ops are the operations the diagnostic is about, each named
	// "METHOD /path" as messages name them (none: the spec as a whole, the
	// root block, an overlay); an ignore for an operation matches by them.
	Ops []string
	// Cites is a warning rule the message sends the user to (as
	// "[key-convention-mismatch] says"), and Alone the message to report
	// instead when the ignores silence Cites for the operations Ops (List.
	// Suppress): a hint must not defer to a warning the user turned off.
	Cites, Alone string
	// Actions are the overlay actions that fix the diagnostic in a spec
	// one does not edit, when the message proposes some: -format json
	// lists them all (the message may give the first few only).
	Actions []OverlayAction
}

// OverlayAction is an OpenAPI Overlay 1.0 update action: Update is merged
// into the nodes Target (a JSONPath) selects.
type OverlayAction struct {
	Target string         `json:"target"`
	Update map[string]any `json:"update"`
}

// Cite records that the last diagnostic of l sends the user to the rule
// cites, and alone, the message to report instead when cites is silenced.
func (l List) Cite(cites, alone string) {
	d := &l[len(l)-1]
	d.Cites, d.Alone = cites, alone
}

// String formats d as file:line:col: severity: message [rule].
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Pos.File)
	if d.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", d.Pos.Line, d.Pos.Col)
	}
	b.WriteString(": ")
	b.WriteString(d.Severity.String())
	b.WriteString(": ")
	if d.Kind == Unsupported {
		b.WriteString("not supported yet: ")
	}
	b.WriteString(oneLine(d.Message))
	b.WriteString(" [")
	b.WriteString(d.Rule)
	b.WriteString("]")
	return b.String()
}

// List collects diagnostics.
type List []Diagnostic

// Errorf adds an error.
func (l *List) Errorf(pos ir.Pos, rule, format string, args ...any) {
	*l = append(*l, Diagnostic{Pos: pos, Severity: Error, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

// Warnf adds a warning.
func (l *List) Warnf(pos ir.Pos, rule, format string, args ...any) {
	*l = append(*l, Diagnostic{Pos: pos, Severity: Warning, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

// Unsupportedf adds an error of kind Unsupported.
func (l *List) Unsupportedf(pos ir.Pos, rule, format string, args ...any) {
	*l = append(*l, Diagnostic{Pos: pos, Severity: Error, Kind: Unsupported, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

// HasErrors reports whether l holds an error.
func (l List) HasErrors() bool {
	return slices.ContainsFunc(l, func(d Diagnostic) bool { return d.Severity == Error })
}

// Count returns the number of errors and warnings.
func (l List) Count() (errors, warnings int) {
	for _, d := range l {
		if d.Severity == Error {
			errors++
		} else {
			warnings++
		}
	}
	return
}

func compare(a, b Diagnostic) int {
	return cmp.Or(
		cmp.Compare(a.Pos.File, b.Pos.File),
		cmp.Compare(a.Pos.Line, b.Pos.Line),
		cmp.Compare(a.Pos.Col, b.Pos.Col),
		cmp.Compare(a.Rule, b.Rule),
		cmp.Compare(b.Severity, a.Severity),
		cmp.Compare(a.Message, b.Message),
	)
}

// Sorted returns l sorted by file, line, column and rule, without duplicates
// (same position, rule and message).
func (l List) Sorted() List {
	out := slices.Clone(l)
	slices.SortFunc(out, compare)
	return slices.CompactFunc(out, func(a, b Diagnostic) bool {
		return a.Pos.File == b.Pos.File && a.Pos.Line == b.Pos.Line && a.Pos.Col == b.Pos.Col &&
			a.Rule == b.Rule && a.Message == b.Message
	})
}

// WriteText writes one diagnostic a line.
func (l List) WriteText(w io.Writer) error {
	for _, d := range l {
		if _, err := fmt.Fprintln(w, d.String()); err != nil {
			return err
		}
	}
	return nil
}

type jsonDiag struct {
	File     string          `json:"file"`
	Line     int             `json:"line"`
	Col      int             `json:"col"`
	Pointer  string          `json:"pointer,omitempty"`
	Severity string          `json:"severity"`
	Kind     string          `json:"kind"`
	Rule     string          `json:"rule"`
	Message  string          `json:"message"`
	Ops      []string        `json:"operations,omitempty"`
	Actions  []OverlayAction `json:"overlay-actions,omitempty"`
}

// WriteJSON writes l as a JSON array of objects with file, line, col,
// pointer (the JSON pointer of the node in the file; omitted when none),
// severity, kind ("invalid" or "unsupported" for an error, "warning" for a
// warning), rule, message, operations (those it is about, as
// "METHOD /path"; omitted when none) and overlay-actions (the overlay
// actions, each a target and an update, that fix it in a spec one does not
// edit, when the message proposes some; omitted otherwise).
func (l List) WriteJSON(w io.Writer) error {
	out := make([]jsonDiag, 0, len(l))
	for _, d := range l {
		kind := "invalid"
		switch {
		case d.Kind == Unsupported:
			kind = "unsupported"
		case d.Severity == Warning:
			kind = "warning" // a heuristic: the spec is not invalid
		}
		out = append(out, jsonDiag{d.Pos.File, d.Pos.Line, d.Pos.Col, d.Pos.Pointer, d.Severity.String(), kind, d.Rule, d.Message, d.Ops, d.Actions})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// ErrorList is the error a List with errors turns into.
type ErrorList struct{ List List }

func (e *ErrorList) Error() string {
	n, _ := e.List.Count()
	for _, d := range e.List {
		if d.Severity == Error {
			if n == 1 {
				return d.String()
			}
			return fmt.Sprintf("%s (and %s)", d.String(), english.Count(n-1, "more error"))
		}
	}
	return "no errors"
}

// Unsupported reports whether every error of e is of kind Unsupported: the
// spec is valid but idemgen cannot handle it yet.
func (e *ErrorList) Unsupported() bool {
	found := false
	for _, d := range e.List {
		if d.Severity == Error {
			if d.Kind != Unsupported {
				return false
			}
			found = true
		}
	}
	return found
}

// Err returns an *ErrorList when l holds errors, nil otherwise.
func (l List) Err() error {
	if !l.HasErrors() {
		return nil
	}
	return &ErrorList{List: l.Sorted()}
}

var lineBreak = regexp.MustCompile(`\s*\n\s*`)

// oneLine joins the lines of a message (a library's error may span several)
// so that each diagnostic of the text format is one file:line:col: line.
func oneLine(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	return lineBreak.ReplaceAllString(strings.TrimSpace(msg), " ")
}
