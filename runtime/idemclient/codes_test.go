package idemclient

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// problemCodes returns the IDEMPOTENCY_* string constants named Code* of
// the non-test Go files of dir, by name.
func problemCodes(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !strings.HasPrefix(name.Name, "Code") {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					if strings.HasPrefix(v, "IDEMPOTENCY_") {
						out[name.Name] = v
					}
				}
			}
		}
	}
	return out
}

// The client exports every problem code the server (runtime/idem) writes,
// under the same name. (Before, 7 of 14: no CodeHandlerFailed.)
func TestProblemCodesMatchServer(t *testing.T) {
	server := problemCodes(t, "../idem")
	client := problemCodes(t, ".")
	require.NotEmpty(t, server)
	assert.Equal(t, slices.Sorted(maps.Keys(server)), slices.Sorted(maps.Keys(client)))
	assert.Equal(t, server, client)
}
