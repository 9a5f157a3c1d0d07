package compile_test

import (
	"bytes"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/internal/gentest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestContractCases runs every case under testdata/contract: each directory
// holds openapi.yaml (or openapi.json), optional *.overlay.yaml files
// (applied in name order) and want.txt, the exact diagnostics idemgen check
// prints, with paths relative to the case directory.
func TestContractCases(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "contract")
	n := gentest.SpecCases(t, root, func(t *testing.T, dir, spec string) {
		overlays, _ := filepath.Glob(filepath.Join(dir, "*.overlay.yaml"))
		slices.Sort(overlays)
		_, diags := compile.Compile(spec, compile.Options{Overlays: overlays})
		var buf bytes.Buffer
		require.NoError(t, diags.WriteText(&buf))
		got := strings.ReplaceAll(buf.String(), dir+string(filepath.Separator), "")
		for _, d := range diags {
			assert.NotZero(t, d.Pos.Line, "diagnostic without a line: %s", d)
		}
		gentest.GoldenFile(t, filepath.Join(dir, "want.txt"), []byte(got), *update)
	})
	assert.Greater(t, n, 10)
}

// An operation without usable semantics (a bad value, here inherited from
// the root, or none) is checked like the others, so all its errors are
// reported at once, but left out of the IR: nothing is generated for it.
func TestUnusableSemanticsLeftOut(t *testing.T) {
	spec := filepath.Join("..", "..", "testdata", "contract", "semantics-bad-checks-rest", "openapi.yaml")
	s, diags := compile.Compile(spec, compile.Options{})
	require.NotNil(t, s)
	assert.True(t, diags.HasErrors())
	assert.Empty(t, s.Operations)
	rules := map[string]bool{}
	for _, d := range diags {
		rules[d.Rule] = true
	}
	for _, r := range []string{"volatile-unknown-member", "retry-on-client-error", "key-declared-differently", "in-flight-status-final", "unordered-not-array", "key-unknown-member"} {
		assert.True(t, rules[r], "%s is reported beside the bad semantics", r)
	}
	for _, r := range []string{"key-optional", "volatile-candidate", "raw-body-strict", "retry-on-conflict-status"} {
		assert.False(t, rules[r], "%s depends on the semantics: not reported under the placeholder", r)
	}
}
