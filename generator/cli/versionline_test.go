package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// TestCheckGeneratedOnlyVersion: files another build of idemgen wrote
// (go install's "(devel)" against go tool's "v0.0.0") are stale, and
// check -generated says that only the version line differs; a file that
// differs in more says where it starts to, as before.
func TestCheckGeneratedOnlyVersion(t *testing.T) {
	cli.SetVersion(t, "v0.0.0")
	dir, cfg := generateCoupons(t)

	cli.SetVersion(t, "(devel)")
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, cli.ExitError, code, stderr)
	server := filepath.Join(dir, "gen", "idempotency.gen.go")
	assert.Contains(t, stderr, server+":3:1: error: stale, but only the idemgen version line differs (file v0.0.0, running (devel))")
	assert.Contains(t, stderr, "2 of 2 generated files are stale or missing")

	// More than the version line.
	src, err := os.ReadFile(server)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(server, append(src, "// edited\n"...), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, cli.ExitError, code, stderr)
	assert.Contains(t, stderr, server+`:3:1: error: stale (differs from what idemgen generates from line 3 on: the file has "// idemgen version: v0.0.0", idemgen generates "// idemgen version: (devel)")`)
}
