package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// Unbounded is what CheckBounded looks for in a package's files.
type Unbounded struct {
	// Files is the glob of the files to read, in the current directory;
	// Skip names files it leaves out.
	Files string
	Skip  []string
	// Calls are the calls that make a context without a deadline
	// ("context.Background", "t.Context", as pkg.Name or x.Name).
	Calls []string
	// Bounding are the calls whose first argument may be one of Calls
	// (context.WithTimeout: it bounds what it derives).
	Bounding []string
	// Allowed, if not nil, names more expressions a file may hold one of
	// Calls in (an argument the callee only keeps, say).
	Allowed func(n ast.Node) []ast.Expr
	// Hint ends each report: what to write instead.
	Hint string
}

// CheckBounded reports, as test errors, every call of u.Calls in u.Files
// that is neither the first argument of one of u.Bounding nor allowed: a
// test whose calls to a server are all bounded fails when the server
// hangs, instead of hanging its package.
func CheckBounded(t testing.TB, u Unbounded) {
	t.Helper()
	files, err := filepath.Glob(u.Files)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if slices.Contains(u.Skip, name) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		allowed := map[ast.Expr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && len(c.Args) > 0 && slices.Contains(u.Bounding, selector(c.Fun)) {
				allowed[c.Args[0]] = true
			}
			if u.Allowed != nil {
				for _, e := range u.Allowed(n) {
					allowed[e] = true
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && !allowed[c] {
				if fn := selector(c.Fun); slices.Contains(u.Calls, fn) {
					t.Errorf("%s: %s(): %s", fset.Position(c.Pos()), fn, u.Hint)
				}
			}
			return true
		})
	}
}

// selector returns e as x.Name, or "".
func selector(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		if id, ok := s.X.(*ast.Ident); ok {
			return id.Name + "." + s.Sel.Name
		}
	}
	return ""
}
