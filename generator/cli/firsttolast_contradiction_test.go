package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFirstToLastContradiction: a server.middleware-first-to-last that
// contradicts oapi-codegen's compatibility option is a usage error, as a
// contradicting server.strict or server.router is (review of the perfix
// merge: "false" beside apply-chi-middleware-first-to-last: true generated
// the fallback outermost, before authentication, without a word); one that
// agrees is taken.
func TestFirstToLastContradiction(t *testing.T) {
	for _, tc := range []struct {
		option string
		ok     bool
	}{{`"false"`, false}, {`"true"`, true}} {
		dir := t.TempDir()
		copyFile(t, filepath.Join("..", "..", "testdata", "server", "untyped-path", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), []byte("package: api\noutput: api/api.gen.go\ngenerate: {chi-server: true}\ncompatibility: {apply-chi-middleware-first-to-last: true}\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "idemgen.yaml"), []byte("package: api\noutput: api\nspec: openapi.yaml\noapi-codegen-config: oapi-codegen.yaml\ngenerate: {server: true}\noptions:\n  server.middleware-first-to-last: "+tc.option+"\n"), 0o644))
		rc, _, stderr := run("generate", "-config", filepath.Join(dir, "idemgen.yaml"))
		if tc.ok {
			assert.Equal(t, 0, rc, stderr)
			continue
		}
		assert.Equal(t, 2, rc, stderr)
		assert.Contains(t, stderr, "server.middleware-first-to-last is false")
		assert.Contains(t, stderr, "apply-chi-middleware-first-to-last to true")
		assert.NoFileExists(t, filepath.Join(dir, "api", "idempotency.gen.go"))
	}
}
