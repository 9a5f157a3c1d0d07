package emitter_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/idemgen/idemgen/generator/emit/client" // their options, registered
	_ "github.com/idemgen/idemgen/generator/emit/docs"
	_ "github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/generator/emitter"
)

// TestOptionNamesDeclared: an emitter setting is read only through the
// emitter.Option NewOption made (and registered), never by its name: in
// the generator's code, a string that names a setting ("server.type", or
// any "<emitter>.<word>") is NewOption's argument and nothing else, and no
// emitter indexes Options.Params itself. A setting read by a name that was
// never registered would be silently unset forever, since CheckParams
// refuses it on the command line and in the config.
func TestOptionNamesDeclared(t *testing.T) {
	optionName := regexp.MustCompile(`^(` + strings.Join(emitter.Names(), "|") + `)\.[a-z][a-z0-9-]*$`)
	root := filepath.Join("..", "..")
	declared := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range []string{"generator", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			allowed := map[*ast.BasicLit]bool{}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if isNewOption(n.Fun) && len(n.Args) == 1 {
						if lit, ok := n.Args[0].(*ast.BasicLit); ok {
							allowed[lit] = true
							name, _ := strconv.Unquote(lit.Value)
							declared[name] = true
						} else {
							t.Errorf("%s: NewOption takes the setting's name as a string literal", fset.Position(n.Pos()))
						}
					}
				case *ast.IndexExpr:
					if isParams(n.X) && strings.Contains(filepath.ToSlash(path), "generator/emit/") {
						t.Errorf("%s: an emitter reads a setting with its emitter.Option's In, not by indexing Params", fset.Position(n.Pos()))
					}
				case *ast.BasicLit:
					if n.Kind != token.STRING || allowed[n] {
						return true
					}
					if s, err := strconv.Unquote(n.Value); err == nil && optionName.MatchString(s) {
						t.Errorf("%s: the setting %q is written by name: use the emitter.Option NewOption declared it with", fset.Position(n.Pos()), s)
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, declared)
	for name := range declared {
		assert.Contains(t, emitter.OptionNames(), name)
	}
	for _, name := range emitter.OptionNames() {
		if !strings.HasPrefix(name, "test.") {
			assert.True(t, declared[name], "%s is registered but declared by no NewOption call of the generator", name)
		}
	}
}

func isNewOption(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "NewOption" {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "emitter"
}

// isParams reports whether x is Options.Params (x.Params) or a variable
// named params, which the emitters' ParseConfig take.
func isParams(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "Params"
	case *ast.Ident:
		return x.Name == "params"
	}
	return false
}

func TestOptionIn(t *testing.T) {
	o := emitter.NewOption("test.in")
	assert.Equal(t, "test.in", o.String())
	v, ok := o.In(map[string]string{"test.in": "x"})
	assert.True(t, ok)
	assert.Equal(t, "x", v)
	_, ok = o.In(nil)
	assert.False(t, ok)
	assert.Panics(t, func() { _, _ = emitter.Option{}.In(nil) })
}
