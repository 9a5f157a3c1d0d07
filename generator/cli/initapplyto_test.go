package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// TestInitApplyToFile: init's apply-to proposal writes to -o when given,
// never to a file that exists or that init read with -overlay (its
// "cat >" would overwrite confirmed contracts), and its check command
// applies the overlays init read first.
func TestInitApplyToFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	spec := "openapi.yaml"
	src := oneKeyedOperation + `  /refunds:
    post:
      operationId: createRefund
      responses:
        '201': {description: created}
`
	require.NoError(t, os.WriteFile(spec, []byte(src), 0o644))
	contracts := "idempotency.overlay.yaml"
	require.NoError(t, os.WriteFile(contracts, []byte("overlay: 1.0.0\ninfo: {title: c, version: 1.0.0}\nactions:\n  - target: $.paths['/orders'].post\n    update: {x-idempotency: {semantics: strict, window: 24h}}\n"), 0o644))

	// The contracts overlay is the default name, and init read it.
	code, _, stderr := run("init", "-overlay", contracts, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, "nothing to propose")
	assert.NotContains(t, stderr, "cat > "+contracts)
	assert.Contains(t, stderr, "cat > apply-to.overlay.yaml <<'EOF'")
	assert.Contains(t, stderr, "idemgen check -overlay "+contracts+" -overlay apply-to.overlay.yaml "+spec)

	// apply-to.overlay.yaml taken too.
	require.NoError(t, os.WriteFile("apply-to.overlay.yaml", nil, 0o644))
	code, _, stderr = run("init", "-overlay", contracts, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, "cat > apply-to.2.overlay.yaml <<'EOF'")

	// -o names the file.
	out := filepath.Join("api", "optin.overlay.yaml")
	code, _, stderr = run("init", "-overlay", contracts, "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, "cat > "+out+" <<'EOF'")
	assert.Contains(t, stderr, "idemgen spec -overlay "+contracts+" -overlay "+out+" "+spec)
}

// TestInitNoteLine: init's notes say where the operation is written.
func TestInitNoteLine(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	src := oneKeyedOperation + "  /lookups:\n    get:\n      parameters:\n        - {name: Idempotency-Key, in: header, schema: {type: string}}\n      responses: {'200': {description: ok}}\n"
	require.NoError(t, os.WriteFile(spec, []byte(src), 0o644))
	code, _, stderr := run("init", spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, spec+":17:5: note: GET /lookups declares the key header Idempotency-Key, but GET is safe")
}
