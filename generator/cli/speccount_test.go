package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// TestSpecCountWithOverlay: idemgen spec -overlay -o says the overlays
// were applied besides counting idemgen's own changes, so a spec that
// already declares everything is not "0 changes" although the overlay's
// change was written; -as-overlay writes idemgen's changes only.
func TestSpecCountWithOverlay(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), spec)
	code, _, stderr := run("spec", "-o", spec, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	fix := filepath.Join(dir, "fix.overlay.yaml")
	require.NoError(t, os.WriteFile(fix, []byte("overlay: 1.0.0\ninfo: {title: fix, version: 1.0.0}\nactions:\n  - target: $.info\n    update: {description: fixed by the overlay}\n"), 0o644))
	out := filepath.Join(dir, "api.yaml")

	code, _, stderr = run("spec", "-overlay", fix, "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, out+": the spec with the overlay applied ("+fix+"), and 0 changes to declare what the contracts imply\n")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(data), "fixed by the overlay")

	code, _, stderr = run("spec", "-as-overlay", "-overlay", fix, "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, out+": 0 changes\n")
	code, _, stderr = run("spec", "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, out+": 0 changes\n")
}

// TestCheckGeneratedSpecStaleOverlay: with overlays: (here a fix for
// oapi-codegen, the contracts in the spec), the [spec-stale] hint gives
// the command that rewrites the spec in place, and says what to run when
// an overlay holds the contracts instead.
func TestCheckGeneratedSpecStaleOverlay(t *testing.T) {
	spec, cfg := generatedThenStale(t, "output: gen\nspec: openapi.yaml\noverlays: [fix.overlay.yaml]\ngenerate: {ir: true}\n",
		map[string]string{"fix.overlay.yaml": "overlay: 1.0.0\ninfo: {title: fix, version: 1.0.0}\nactions:\n  - target: $.info\n    update: {description: fixed}\n"})
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, cli.ExitError, code, stderr)
	assert.Contains(t, stderr, "run: idemgen spec -o "+spec+" "+spec+" (when the contracts are in "+spec+"; the overlays: then apply as before; when an overlay holds them, idemgen spec -as-overlay with the overlays, as you ran it), then oapi-codegen, then idemgen generate -config "+cfg)
}
