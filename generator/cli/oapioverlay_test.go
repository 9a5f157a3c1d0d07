package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// TestOapiCodegenOverlayNotListed: an overlay that oapi-codegen's
// configuration applies (output-options.overlay.path) and idemgen.yaml's
// overlays: does not list is a warning [oapi-overlay-unlisted] of check,
// check -generated and generate, at the overlay's path in oapi-codegen's
// configuration: in -format json too, a warning with -strict, silenced by
// ignore: (which spec, which does not check it, does not report unused);
// listed, there is none.
func TestOapiCodegenOverlayNotListed(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	fix := "overlay: 1.0.0\ninfo: {title: compile fix, version: 1.0.0}\nactions:\n  - target: $.info\n    update: {description: fixed}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fix.overlay.yaml"), []byte(fix), 0o644))
	oapi := filepath.Join(dir, "oapi-codegen.yaml")
	require.NoError(t, os.WriteFile(oapi, []byte("package: api\noutput: gen/api.gen.go\ngenerate: {models: true}\noutput-options:\n  overlay: {path: fix.overlay.yaml}\n"), 0o644))
	cfg := filepath.Join(dir, "idemgen.yaml")
	base := "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {ir: true, docs: true}\noapi-codegen-config: oapi-codegen.yaml\n"
	require.NoError(t, os.WriteFile(cfg, []byte(base), 0o644))
	want := oapi + ":5:19: warning: oapi-codegen applies the overlay fix.overlay.yaml (output-options.overlay.path), which the overlays: of " + cfg + " does not list: "
	const rule = "[oapi-overlay-unlisted]\n"

	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, want)
	assert.Contains(t, stderr, rule)
	for _, args := range [][]string{
		{"check", "-generated", "-config", cfg},
		{"check", "-config", cfg},
		{"check", "-strict", "-config", cfg},
		{"check", filepath.Join(dir, "openapi.yaml")}, // the idemgen.yaml beside it
	} {
		code, _, stderr = run(args...)
		wantCode := 0
		if args[1] == "-strict" {
			wantCode = 1 // the spec's consistency warnings, not this one
		}
		assert.Equal(t, wantCode, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, want, args)
		assert.Contains(t, stderr, rule, args)
		assert.NotContains(t, stderr, "error: oapi-codegen applies", args)
	}
	code, stdout, stderr := run("check", "-format", "json", "-config", cfg)
	require.Equal(t, cli.ExitOK, code, stderr)
	var diags []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &diags), stdout)
	i := slices.IndexFunc(diags, func(d map[string]any) bool { return d["rule"] == "oapi-overlay-unlisted" })
	require.GreaterOrEqual(t, i, 0, stdout)
	assert.Equal(t, map[string]any{"file": oapi, "line": 5.0, "col": 19.0, "severity": "warning", "kind": "warning", "rule": "oapi-overlay-unlisted",
		"message": want[len(oapi)+len(":5:19: warning: "):] + "oapi-codegen generates from another spec than idemgen, and check -generated cannot see what the overlay changes; add it to overlays: (after the contract overlays, if any)"}, diags[i])

	// Silenced by ignore:.
	require.NoError(t, os.WriteFile(cfg, []byte(base+"ignore: [{rule: oapi-overlay-unlisted, reason: the overlay only renames for oapi-codegen}]\n"), 0o644))
	for _, args := range [][]string{{"generate", "-config", cfg}, {"check", "-generated", "-config", cfg}, {"check", "-config", cfg}, {"spec", "-o", filepath.Join(dir, "api.yaml"), filepath.Join(dir, "openapi.yaml")}} {
		code, _, stderr = run(args...)
		assert.Equal(t, cli.ExitOK, code, "%v: %s", args, stderr)
		assert.NotContains(t, stderr, "output-options.overlay.path", args)
		assert.NotContains(t, stderr, "[unused-ignore]", args)
	}

	// Listed in overlays: no warning.
	require.NoError(t, os.WriteFile(cfg, []byte(base+"overlays: [fix.overlay.yaml]\n"), 0o644))
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.NotContains(t, stderr, "output-options.overlay.path")
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, cli.ExitOK, code, stderr)
	assert.NotContains(t, stderr, "output-options.overlay.path")
	assert.NotContains(t, stderr, "oapi-overlay-unlisted")
}
