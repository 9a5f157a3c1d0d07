package diag_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
)

func at(line int) ir.Pos { return ir.Pos{File: "a.yaml", Line: line, Col: 1} }

func lines(l diag.List) []string {
	var out []string
	for _, d := range l {
		out = append(out, d.String())
	}
	return out
}

// TestSuppress: a warning is silenced by an ignore of its rule that names
// no operation, or by ignores that name each operation it is about; the
// ignores that silenced nothing are reported, unless their rule did not run
// or errors are left.
func TestSuppress(t *testing.T) {
	var l diag.List
	l.Warnf(at(1), "put-delete", "PUT /a")
	l[0].Ops = []string{"PUT /a"}
	l.Warnf(at(2), "put-delete", "DELETE /a")
	l[1].Ops = []string{"DELETE /a"}
	l.Warnf(at(3), "wait-longer-than-lease", "inherited by two")
	l[2].Ops = []string{"POST /a", "POST /b"}
	l.Warnf(at(4), "overlay-no-match", "no operation")
	l.Errorf(at(5), "wait-longer-than-lease", "-strict-like error of a warning rule")
	l[4].Ops = []string{"POST /c"}

	ig := func(rule string, line int, ops ...string) diag.Ignore {
		return diag.Ignore{Rule: rule, Ops: ops, Pos: ir.Pos{File: "idemgen.yaml", Line: line, Col: 3}, Name: "ignore: " + rule}
	}
	got := l.Suppress([]diag.Ignore{
		ig("put-delete", 1, "DELETE /a"),
		ig("wait-longer-than-lease", 2, "POST /a"), // not POST /b: kept, but the ignore is not stale
		ig("wait-longer-than-lease", 3, "POST /c"), // an error of a warning rule: silenced
		ig("wait-longer-than-lease", 4, "POST /d"),
	}, nil)
	assert.Equal(t, []string{
		"a.yaml:1:1: warning: PUT /a [put-delete]",
		"a.yaml:3:1: warning: inherited by two [wait-longer-than-lease]",
		"a.yaml:4:1: warning: no operation [overlay-no-match]",
		"idemgen.yaml:4:3: warning: ignore: wait-longer-than-lease silenced nothing: no wait-longer-than-lease warning about POST /d in this run; delete it [unused-ignore]",
	}, lines(got))

	got = l.Suppress([]diag.Ignore{
		ig("wait-longer-than-lease", 2, "POST /a"),
		ig("wait-longer-than-lease", 3, "POST /b"),
		ig("wait-longer-than-lease", 4, "POST /c"),
		ig("overlay-no-match", 5),
		ig("put-delete", 6), // every operation
		ig("put-delete", 7, "PUT /a"),
		ig("spec-not-augmented", 8),
	}, func(rule string) bool { return rule != "spec-not-augmented" })
	assert.Empty(t, lines(got), "all silenced, each ignore used, spec-not-augmented not checked")

	// With errors left, idemgen may have stopped early: no unused-ignore.
	var e diag.List
	e.Errorf(at(1), "bad-enum", "an error")
	got = e.Suppress([]diag.Ignore{ig("bad-enum", 1), ig("put-delete", 2)}, nil)
	assert.Equal(t, []string{"a.yaml:1:1: error: an error [bad-enum]"}, lines(got), "an error rule is never silenced")
}

// TestSuppressCites: a diagnostic that cites a rule is reported with its
// message Alone where the ignores silence that rule for its operations (a
// hint must not send the user to a warning they turned off), as it is
// elsewhere; an ignore it would match is not used by that.
func TestSuppressCites(t *testing.T) {
	var l diag.List
	for i, op := range []string{"POST /a", "POST /b"} {
		l.Warnf(at(i+1), "key-param-missing", "%s: as [key-convention-mismatch] says", op)
		l[i].Ops = []string{op}
		l.Cite("key-convention-mismatch", op+": alone")
	}
	ig := func(rule string, ops ...string) diag.Ignore {
		return diag.Ignore{Rule: rule, Ops: ops, Pos: ir.Pos{File: "idemgen.yaml", Line: 1, Col: 3}, Name: "ignore: " + rule}
	}
	assert.Equal(t, []string{
		"a.yaml:1:1: warning: POST /a: alone [key-param-missing]",
		"a.yaml:2:1: warning: POST /b: as [key-convention-mismatch] says [key-param-missing]",
		"idemgen.yaml:1:3: warning: ignore: key-convention-mismatch silenced nothing: no key-convention-mismatch warning about POST /a in this run; delete it [unused-ignore]",
	}, lines(l.Suppress([]diag.Ignore{ig("key-convention-mismatch", "POST /a")}, nil)))
	got := l.Suppress([]diag.Ignore{ig("key-convention-mismatch"), ig("put-delete")}, func(rule string) bool { return rule == "key-convention-mismatch" })
	assert.Equal(t, []string{
		"a.yaml:1:1: warning: POST /a: alone [key-param-missing]",
		"a.yaml:2:1: warning: POST /b: alone [key-param-missing]",
		"idemgen.yaml:1:3: warning: ignore: key-convention-mismatch silenced nothing: no key-convention-mismatch warning in this run; delete it [unused-ignore]",
	}, lines(got))
}

func TestCheckIgnoreRule(t *testing.T) {
	assert.Empty(t, diag.CheckIgnoreRule("put-delete"))
	assert.Empty(t, diag.CheckIgnoreRule("key-param-missing"))
	assert.Equal(t, "safe-method is an error, and only warnings can be ignored", diag.CheckIgnoreRule("safe-method"))
	assert.Equal(t, "put-delet is no rule idemgen reports (did you mean put-delete?)", diag.CheckIgnoreRule("put-delet"))
	assert.Contains(t, diag.CheckIgnoreRule("unused-ignore"), "cannot be ignored")
	assert.Contains(t, diag.CheckIgnoreRule("bad-ignore"), "is an error")
}

// TestRulesDocumented: the rules of the tables of docs/contract.md's
// "## Rules" are the rules diag knows: those under "Warnings" and "Spec
// consistency" the ones an ignore may name, the others errors.
func TestRulesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "contract.md"))
	require.NoError(t, err)
	_, rules, ok := strings.Cut(string(data), "\n## Rules\n")
	require.True(t, ok)
	rules, _, _ = strings.Cut(rules, "\n## ")
	row := regexp.MustCompile("(?m)^\\| (`[a-z-]+`(?:, `[a-z-]+`)*) \\|")
	name := regexp.MustCompile("`([a-z-]+)`")
	var warnings, errs []string
	section := ""
	for _, l := range strings.Split(rules, "\n") {
		if strings.HasPrefix(l, "### ") {
			section = l
			continue
		}
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			if strings.HasPrefix(section, "### Warnings") || strings.HasPrefix(section, "### Spec consistency") {
				warnings = append(warnings, n[1])
			} else {
				errs = append(errs, n[1])
			}
		}
	}
	slices.Sort(warnings)
	slices.Sort(errs)
	assert.Equal(t, diag.WarningRules(), warnings, "the Warnings and Spec consistency tables")
	assert.Equal(t, diag.ErrorRules(), errs, "the other tables of ## Rules")
}

// TestRulesInCode: every rule the generator reports with a literal rule id
// is known, as a warning when reported by Warnf, as an error by Errorf.
func TestRulesInCode(t *testing.T) {
	call := regexp.MustCompile(`\.(Warnf|warnf|Errorf|errorf|Unsupportedf)\([^"\n]*?"([a-z]+(?:-[a-z]+)+)"`)
	found := 0
	err := filepath.WalkDir(filepath.Join(".."), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(data), -1) {
			found++
			if strings.EqualFold(m[1], "warnf") {
				assert.Contains(t, diag.WarningRules(), m[2], "%s: %s", path, m[0])
			} else {
				assert.Contains(t, diag.ErrorRules(), m[2], "%s: %s", path, m[0])
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, found, 40)
}
