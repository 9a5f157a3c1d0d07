package compile_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/internal/gentest"
	"github.com/idemgen/idemgen/internal/testenv"
)

// sharedSpecs returns testdata/specs, the real public specs copied into the repo.
func sharedSpecs(t testing.TB) string {
	return testenv.SpecsDir(t)
}

var sharedCases = []struct {
	name, spec string
	ops        int
}{
	{"adyen", "adyen-transfers-v4.json", 6},
	{"modern-treasury", "modern-treasury.yaml", 69},
	{"petstore", "petstore-expanded.yaml", 1},
}

// TestSharedSpecs loads the three real specs, annotated through the
// overlays in testdata/overlays, and compares the diagnostics
// (<name>.want.txt) and the IR (<name>.ir.json) with golden files.
func TestSharedSpecs(t *testing.T) {
	specs := sharedSpecs(t)
	ovDir := filepath.Join("..", "..", "testdata", "overlays")
	for _, c := range sharedCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ov := filepath.Join(ovDir, c.name+".overlay.yaml")
			spec, diags := compile.Compile(filepath.Join(specs, c.spec), compile.Options{Overlays: []string{ov}})
			require.NotNil(t, spec)
			assert.False(t, diags.HasErrors(), "%v", diags)
			assert.Len(t, spec.Operations, c.ops)
			for _, op := range spec.Operations {
				assert.Contains(t, []string{"POST", "PATCH"}, op.Method)
				assert.NotEmpty(t, op.GoName)
				assert.NotZero(t, op.ContractPos.Line, "%s", op.Where())
			}

			clean := func(s string) string {
				s = strings.ReplaceAll(s, specs+string(filepath.Separator), "")
				return strings.ReplaceAll(s, ovDir+string(filepath.Separator), "")
			}
			var buf bytes.Buffer
			require.NoError(t, diags.WriteText(&buf))
			data, err := emitter.MarshalIR(spec)
			require.NoError(t, err)
			gentest.GoldenFile(t, filepath.Join(ovDir, c.name+".want.txt"), []byte(clean(buf.String())), *update)
			gentest.GoldenFile(t, filepath.Join(ovDir, c.name+".ir.json"), []byte(clean(string(data))), *update)
		})
	}
}

// TestSharedSpecsLoadPlain loads the specs as published, without overlays:
// no contract, no error, and only key-without-contract warnings.
func TestSharedSpecsLoadPlain(t *testing.T) {
	specs := sharedSpecs(t)
	for _, c := range sharedCases {
		spec, diags := compile.Compile(filepath.Join(specs, c.spec), compile.Options{})
		require.NotNil(t, spec, c.spec)
		assert.Empty(t, spec.Operations)
		for _, d := range diags {
			assert.Equal(t, "key-without-contract", d.Rule, "%s", d)
		}
		assert.NotEmpty(t, spec.OpenAPI)
	}
}
