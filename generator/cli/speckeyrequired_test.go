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

// TestSpecKeyOptionalContractRequired pins what idemgen spec does when
// the spec declares the key parameter optional while the contract
// requires the key (here by default: the root's key sets no required):
// it does not choose between the two fixes the error offers (making the
// parameter required changes oapi-codegen's <Op>Params field from
// *openapi_types.UUID to openapi_types.UUID, the public client's and the
// strict handlers' API; the contract may be the one that is wrong). It
// refuses with [key-declared-differently] and writes nothing; the overlay
// action the error suggests, given with -overlay, makes it go through.
func TestSpecKeyOptionalContractRequired(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(augmentDir, "coupons", "openapi.yaml"))
	require.NoError(t, err)
	const declared = "        - name: Idempotency-Key\n          in: header\n          required: true\n"
	require.Contains(t, string(data), declared)
	spec := filepath.Join(dir, "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(strings.Replace(string(data), declared, strings.Replace(declared, "true", "false", 1), 1)), 0o644))
	out := filepath.Join(dir, "api.yaml")

	code, _, stderr := run("spec", "-o", out, spec)
	assert.Equal(t, cli.ExitError, code, stderr)
	const action = `{target: "$.paths['/coupons/{couponId}'].patch.parameters[?(@.name=='Idempotency-Key')]", update: {required: true}}`
	assert.Contains(t, stderr, "PATCH /coupons/{couponId}: the key is required by the contract (key.required: true) but the spec declares the header parameter Idempotency-Key")
	assert.Contains(t, stderr, "with an overlay action: "+action+") [key-declared-differently]")
	_, err = os.Stat(out)
	assert.True(t, os.IsNotExist(err), "spec wrote %s", out)

	fix := filepath.Join(dir, "fix.overlay.yaml")
	require.NoError(t, os.WriteFile(fix, []byte("overlay: 1.0.0\ninfo: {title: fix, version: 1.0.0}\nactions:\n  - "+action+"\n"), 0o644))
	code, _, stderr = run("spec", "-overlay", fix, "-o", out, spec)
	require.Equal(t, cli.ExitOK, code, stderr)
	code, _, stderr = run("check", out)
	assert.Equal(t, cli.ExitOK, code, stderr)
	assert.NotContains(t, stderr, "key-declared-differently")
}
