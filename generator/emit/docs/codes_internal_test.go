package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator/compile"
)

// runtimeCodes returns the problem codes runtime/idem declares (its
// exported constants Code*), read from its source: a code added there
// must be added to the docs' map and Errors table.
func runtimeCodes(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "runtime", "idem")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !n.IsExported() || !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out = append(out, v)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// The docs name every problem code the runtime answers with (M-4: the
// HANDLER_FAILED and HANDLER_PANICKED codes were missing), and the
// rendered Errors table has a row for each.
func TestCodesAreTheRuntimes(t *testing.T) {
	want := runtimeCodes(t)
	if len(want) < 10 {
		t.Fatalf("found only %d codes in runtime/idem: %v", len(want), want)
	}
	var got []string
	for _, c := range codes {
		got = append(got, c)
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the docs' codes\n%v\nare not runtime/idem's\n%v", got, want)
	}
	page := couponsPage(t)
	i := strings.Index(page, "\n## Errors\n")
	if i < 0 {
		t.Fatal("no Errors section")
	}
	table := page[i:]
	for _, c := range want {
		if !strings.Contains(table, "| `"+c+"` |") {
			t.Errorf("the Errors table has no row for %s", c)
		}
	}
}

// couponsPage is the page Render writes for testdata/augment/coupons.
func couponsPage(t *testing.T) string {
	t.Helper()
	spec, diags := compile.Compile(filepath.Join("..", "..", "..", "testdata", "augment", "coupons", "openapi.yaml"), compile.Options{})
	if spec == nil || diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	out, err := Render(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// M-3: the "Server errors" row of a failures: replay operation does not
// tell a consumer to send a replayed 5xx again with a new key (a second
// payment when the first took effect): its outcome is unknown, and the
// result is to be checked first. Nor does it speak of the server's wiring.
func TestReplayedFailureAdvice(t *testing.T) {
	page := couponsPage(t)
	if !strings.Contains(page, "Its outcome is unknown") || !strings.Contains(page, "Check the result") {
		t.Error("the replayed 5xx's advice does not say its outcome is unknown and to check the result")
	}
	for _, bad := range []string{"to try again, use a new key", "on a server that does not record it"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page still says %q", bad)
		}
	}
}

// The problem example's type shows idemgen's default prefix, which a
// server's Options.ProblemTypeBase replaces: the page says so, and tells
// clients to match on code.
func TestProblemTypeBaseNoted(t *testing.T) {
	page := couponsPage(t)
	if !strings.Contains(page, "under a prefix the server chooses") || !strings.Contains(page, "match on `code`, not on `type`") {
		t.Error("the problem example's type is given as if every server used idemgen's default prefix")
	}
}
