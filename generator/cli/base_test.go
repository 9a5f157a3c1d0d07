package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckBaseFlags: -base takes no -generated, -base-overlay and
// -base-config need -base (and a -base-config that can be read), a base spec with errors fails the check, and a rollout warning is
// silenced as any warning.
func TestCheckBaseFlags(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "check", "base-scope-key")
	spec, base := filepath.Join(dir, "openapi.yaml"), filepath.Join(dir, "base.yaml")

	code, _, stderr := run("check", "-generated", "-base", base, spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "-base compares two specs: not with -generated")
	code, _, stderr = run("check", "-base-overlay", base, spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "-base-overlay applies to the spec -base names")
	code, _, stderr = run("check", "-base-config", base, spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "-base-config names the Go identifiers of the spec -base names")
	code, _, stderr = run("check", "-base", base, "-base-config", filepath.Join(dir, "missing.yaml"), spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "idemgen check: -base-config ")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths:\n  /a:\n    post:\n      x-idempotency: {semantics: nope}\n      responses: {'200': {description: ok}}\n"), 0o644))
	code, _, stderr = run("check", "-base", bad, spec)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "idemgen check: -base "+bad+": "+bad+":6:34: error: semantics")

	code, _, stderr = run("check", "-base", base, spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "[rollout-scope]")
	code, _, stderr = run("check", "-base", base, "-ignore", "rollout-scope:POST /payments", spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "[rollout-scope]")
	assert.Contains(t, stderr, "[rollout-key-moved]")

	// A spec compared with itself: nothing.
	code, _, stderr = run("check", "-base", spec, spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "[rollout-")
}
