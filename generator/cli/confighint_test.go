package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// TestConfigOptionsHint: an emitter setting written outside options: (as
// the nested "server: {router: chi}" or the dotted key at the top level)
// is an unknown field whose error says to write it under options:.
func TestConfigOptionsHint(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	cfg := filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("package: api\nspec: openapi.yaml\ngenerate: {server: true}\nserver: {router: chi}\nclient.type: Retrier\n"), 0o644))
	for _, args := range [][]string{{"generate", "-config", cfg}, {"check", "-generated", "-config", cfg}, {"check", "-config", cfg}} {
		code, _, stderr := run(args...)
		assert.Equal(t, cli.ExitUsage, code, args)
		assert.Contains(t, stderr, "line 4: field server not found", args)
		assert.Contains(t, stderr, "line 4: server: emitter settings are dotted keys of options:; did you mean options: {server.router: chi}?", args)
		assert.Contains(t, stderr, "line 5: client.type: emitter settings are dotted keys of options:; did you mean options: {client.type: Retrier}?", args)
	}

	// Another unknown field gets no hint.
	require.NoError(t, os.WriteFile(cfg, []byte("package: api\nspec: openapi.yaml\ngenerate: {server: true}\noutptu: gen\n"), 0o644))
	code, _, stderr := run("generate", "-config", cfg)
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "field outptu not found")
	assert.NotContains(t, stderr, "options:")
}
