package compile_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/ir"
)

// The key parameter's Go kind tells the client helper how to write the key
// into it: a string type (string, an enum, a named type of x-go-type) or a
// UUID (format: uuid, or x-go-type uuid.UUID from github.com/google/uuid).
// The refused shapes are in testdata/contract/key-param-go-type/want.txt.
func TestKeyGoKind(t *testing.T) {
	spec := filepath.Join("..", "..", "testdata", "contract", "key-param-go-type", "openapi.yaml")
	s, _ := compile.Compile(spec, compile.Options{})
	require.NotNil(t, s)
	got := map[string]string{}
	for _, op := range s.Operations {
		require.NotNil(t, op.Key.Param, op.Path)
		got[op.Path] = op.Key.GoKind
	}
	assert.Equal(t, map[string]string{
		"/int-key":          "",
		"/slice-key":        "",
		"/binary-key":       "",
		"/content-key":      "",
		"/json-key":         "",
		"/duration-key":     "",
		"/date-key":         "",
		"/date-time-key":    "",
		"/byte-key":         "",
		"/enum-date-key":    "",
		"/uuid-date-key":    "",
		"/email-key":        ir.KeyGoString,
		"/other-format-key": ir.KeyGoString,
		"/named-key":        ir.KeyGoString,
		"/string-key":       ir.KeyGoString,
		"/enum-key":         ir.KeyGoString,
		"/uuid-key":         ir.KeyGoUUID,
		"/google-uuid-key":  ir.KeyGoUUID,
	}, got)
}
