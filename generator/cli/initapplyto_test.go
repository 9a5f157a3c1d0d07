package cli_test

import (
	"os"
	"path/filepath"
	"strings"
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

// TestInitUnkeyedWithCandidates: an unsafe operation that declares no key
// is named, where it is written, with the action that opts it in, also when
// other operations get a proposed contract (it used to be mentioned only
// when none did); the action, added to the overlay init wrote, gives it a
// contract.
func TestInitUnkeyedWithCandidates(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	src := oneKeyedOperation + `  /cashouts:
    post:
      operationId: createCashout
      responses:
        '201': {description: created}
    put:
      responses:
        '200': {description: ok}
`
	require.NoError(t, os.WriteFile(spec, []byte(src), 0o644))
	ov := filepath.Join(dir, "idempotency.overlay.yaml")
	code, _, stderr := run("init", "-o", ov, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, "proposed a contract for 1 operation")
	assert.Contains(t, stderr, spec+":17:5: note: POST /cashouts declares no idempotency key, so no contract is proposed for it")
	assert.NotContains(t, stderr, "PUT /cashouts", "PUT is idempotent by HTTP semantics")
	action := "  - target: $.paths['/cashouts'].post\n    update: {x-idempotency: true}\n"
	assert.Contains(t, stderr, "add to the actions of "+ov+":\n"+action)
	assert.Contains(t, stderr, "idemgen spec -overlay "+ov+" "+spec+" then declares the Idempotency-Key header it takes")

	data, err := os.ReadFile(ov)
	require.NoError(t, err)
	// The team confirms the proposals (deletes the marks) and adds the action.
	var confirmed strings.Builder
	for line := range strings.Lines(string(data)) {
		if before, _, ok := strings.Cut(line, " # TODO(idemgen)"); ok {
			line = before + "\n"
		}
		confirmed.WriteString(line)
	}
	require.NoError(t, os.WriteFile(ov, []byte(confirmed.String()+action), 0o644))
	code, stdout, stderr := run("spec", "-overlay", ov, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	_, cashouts, ok := strings.Cut(stdout, "/cashouts:")
	require.True(t, ok, stdout)
	cashouts, _, _ = strings.Cut(cashouts, "    put:")
	assert.Contains(t, cashouts, "x-idempotency: true")
	assert.Contains(t, cashouts, "$ref: '#/components/parameters/IdempotencyKey'", "spec declares the key of the operation opted in")
}
