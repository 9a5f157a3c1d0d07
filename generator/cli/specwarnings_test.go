package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// TestSpecWarningsCount: idemgen spec prints its errors in full and its
// warnings as a count by rule, with the check command (the same -config,
// -overlay, -ignore and -replayed-header, quoted for the shell) that
// lists them (a vendor's spec had 36 lines of key-without-contract above
// the line that says what spec wrote); -warnings prints them, and
// -format json has them all. The exit status is unchanged.
func TestSpecWarningsCount(t *testing.T) {
	spec := filepath.Join(ignoreCase(t, "comment"), "openapi.yaml")
	out := filepath.Join(t.TempDir(), "out.yaml")

	code, _, all := run("spec", "-warnings", "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, all)
	n := strings.Count(all, ": warning: ")
	require.Greater(t, n, 1, all)

	code, _, stderr := run("spec", "-ignore", "business-key", "-replayed-header=false", "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.NotContains(t, stderr, ": warning: ")
	assert.Contains(t, stderr, spec+": 4 warnings not shown (1 put-delete, 1 response-header-not-replayed, 1 unused-ignore, 1 volatile-candidate): idemgen check -ignore business-key -replayed-header=false "+spec+" lists them (or add -warnings)\n")
	assert.Contains(t, stderr, out+": ")

	code, _, stderr = run("spec", "-ignore", "put-delete:PUT /payments/{id}", "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, "idemgen check -ignore 'put-delete:PUT /payments/{id}' "+spec+" lists them")

	code, stdout, stderr := run("spec", "-format", "json", "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	var diags []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &diags))
	assert.Len(t, diags, n)
	assert.NotContains(t, stderr, "not shown")

	// Errors: in full, the warnings still counted, exit status 1.
	code, _, stderr = run("spec", "-o", out, contractCase("seed-pitfalls"))
	assert.Equal(t, cli.ExitError, code, stderr)
	assert.Contains(t, stderr, ": error: ")
	assert.NotContains(t, stderr, ": warning: ")
	assert.Contains(t, stderr, "not shown (")
}
