package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOapiCodegenOverlayNotListed: an overlay that oapi-codegen's
// configuration applies (output-options.overlay.path) and idemgen.yaml's
// overlays: does not list is warned about by check, check -generated and
// generate; listed, it is not.
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
	want := cfg + ": warning: " + oapi + " applies the overlay fix.overlay.yaml (output-options.overlay.path), which overlays: does not list"

	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, want)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, want)
	code, _, stderr = run("check", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, want)
	code, _, stderr = run("check", filepath.Join(dir, "openapi.yaml")) // the idemgen.yaml beside it
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, want)

	// Listed in overlays: no warning.
	require.NoError(t, os.WriteFile(cfg, []byte(base+"overlays: [fix.overlay.yaml]\n"), 0o644))
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "output-options.overlay.path")
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "output-options.overlay.path")
}
