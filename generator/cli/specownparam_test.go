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

// TestSpecOwnKeyParamStale: the key parameter idemgen spec declared (its
// own component, marked x-generated-by: idemgen) goes stale when the
// contract's key changes (required-ness, max-length). check reports it
// [spec-stale] with "run idemgen spec again", as for idemgen's other
// declarations, and idemgen spec replaces it with what the contract
// enforces: not the [key-declared-differently] error meant for the
// spec's own declarations, which made spec refuse what check told to run.
// A second run changes nothing.
func TestSpecOwnKeyParamStale(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: T, version: 1.0.0}
paths:
  /pets:
    post:
      operationId: addPet
      x-idempotency: {semantics: strict, window: 1h, key: {header: Idempotency-Key KEY}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, properties: {name: {type: string}}}
      responses:
        '201': {description: ok}
`
	for _, tc := range []struct {
		name, before, after string
		want                []string // in the final spec
	}{
		{"required", ", required: false", "", []string{"required: true"}},
		{"max-length", ", max-length: 100", ", max-length: 80", []string{"maxLength: 80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "openapi.yaml")
			require.NoError(t, os.WriteFile(src, []byte(strings.Replace(spec, "KEY", tc.before, 1)), 0o644))
			first := filepath.Join(dir, "first.yaml")
			code, _, stderr := run("spec", "-o", first, src)
			require.Equal(t, cli.ExitOK, code, stderr)
			data, err := os.ReadFile(first)
			require.NoError(t, err)
			require.Contains(t, string(data), "x-generated-by: idemgen")

			// The contract changes.
			changed := filepath.Join(dir, "changed.yaml")
			require.NoError(t, os.WriteFile(changed, []byte(strings.Replace(string(data), tc.before, tc.after, 1)), 0o644))
			code, _, stderr = run("check", changed)
			assert.Equal(t, cli.ExitOK, code, stderr)
			assert.Contains(t, stderr, "the component parameters IdempotencyKey that idemgen spec wrote is stale")
			assert.NotContains(t, stderr, "key-declared-differently")
			code, _, stderr = run("check", "-strict", changed)
			assert.Equal(t, cli.ExitError, code, stderr)

			second := filepath.Join(dir, "second.yaml")
			code, _, stderr = run("spec", "-o", second, changed)
			require.Equal(t, cli.ExitOK, code, stderr)
			out, err := os.ReadFile(second)
			require.NoError(t, err)
			for _, w := range tc.want {
				assert.Contains(t, string(out), w)
			}
			code, _, stderr = run("check", "-strict", second)
			assert.Equal(t, cli.ExitOK, code, stderr)
			third := filepath.Join(dir, "third.yaml")
			code, _, stderr = run("spec", "-o", third, second)
			require.Equal(t, cli.ExitOK, code, stderr)
			again, err := os.ReadFile(third)
			require.NoError(t, err)
			assert.Equal(t, string(out), string(again), "a second run changed the spec")
		})
	}
}

// TestSpecOwnKeyParamShared: two operations share idemgen's key parameter
// component; when one's contract changes, that one gets a component of its
// own ([spec-stale] in check), the other keeps it: no operation is left
// with a declaration its contract does not enforce.
func TestSpecOwnKeyParamShared(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: T, version: 1.0.0}
x-idempotency: {semantics: strict, window: 1h, key: {header: Idempotency-Key}}
paths:
  /pets:
    post:
      operationId: addPet
      x-idempotency: {}
      responses:
        '201': {description: ok}
  /toys:
    post:
      operationId: addToy
      x-idempotency: {}
      responses:
        '201': {description: ok}
`
	dir := t.TempDir()
	src := filepath.Join(dir, "openapi.yaml")
	require.NoError(t, os.WriteFile(src, []byte(spec), 0o644))
	first := filepath.Join(dir, "first.yaml")
	code, _, stderr := run("spec", "-o", first, src)
	require.Equal(t, cli.ExitOK, code, stderr)
	data, err := os.ReadFile(first)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(data), "$ref: '#/components/parameters/IdempotencyKey'"), string(data))

	changed := filepath.Join(dir, "changed.yaml")
	require.NoError(t, os.WriteFile(changed, []byte(strings.Replace(string(data), "operationId: addToy\n      x-idempotency: {}", "operationId: addToy\n      x-idempotency: {key: {required: false}}", 1)), 0o644))
	code, _, stderr = run("check", changed)
	assert.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, "the key parameter of POST /toys is idemgen's component parameters IdempotencyKey, which other operations use")
	assert.NotContains(t, stderr, "key-declared-differently")

	second := filepath.Join(dir, "second.yaml")
	code, _, stderr = run("spec", "-o", second, changed)
	require.Equal(t, cli.ExitOK, code, stderr)
	code, _, stderr = run("check", "-strict", "-ignore", "key-optional", second)
	assert.Equal(t, cli.ExitOK, code, stderr)
	out, err := os.ReadFile(second)
	require.NoError(t, err)
	assert.Contains(t, string(out), "$ref: '#/components/parameters/IdempotencyKey2'")
	third := filepath.Join(dir, "third.yaml")
	code, _, stderr = run("spec", "-o", third, second)
	require.Equal(t, cli.ExitOK, code, stderr)
	again, err := os.ReadFile(third)
	require.NoError(t, err)
	assert.Equal(t, string(out), string(again), "a second run changed the spec")
}
