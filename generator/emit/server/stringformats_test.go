package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// A key parameter of a format oapi-codegen's default type mapping makes a
// string type (email: openapi_types.Email; a format it does not map:
// string) is a string key (ir.KeyGoString), and the server wrapper built
// on it compiles. (The formats it maps to other types are key-param-go-type:
// testdata/contract/key-param-go-type.)
func TestStringFormatKeysCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	files, err := gentest.Generate(gentest.Case{Spec: compileCase(t, "string-formats"), Package: "api", Server: gentest.StrictStdHTTP, Emit: []string{server.Name}})
	require.NoError(t, err)
	var oapi string
	for _, d := range files {
		oapi += string(d)
	}
	require.Contains(t, oapi, "IdempotencyKey openapi_types.Email")
	m := gentest.NewModule(t, "example.com/stringformats")
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Go(t, "vet", "./...")
}
