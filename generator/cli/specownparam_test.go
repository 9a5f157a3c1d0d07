package cli_test

import (
	"os"
	"path/filepath"
	"slices"
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

// TestSpecOwnKeyParamShared: operations share idemgen's key parameter
// component; when one's contract changes, that one gets a component of its
// own ([spec-stale] in check, naming it), the others keep it as it is,
// whichever operation sorts first: no operation is left with a declaration
// its contract does not enforce. When every operation's changes, the
// declaration most of them want (the first in path order on a tie) keeps
// the name, replaced in place.
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
  /zoos:
    post:
      operationId: addZoo
      x-idempotency: {}
      responses:
        '201': {description: ok}
`
	const (
		optional = "{key: {required: false}}"
		longer   = "{key: {max-length: 80}}"
	)
	for _, tc := range []struct {
		name    string
		changes map[string]string // operationId: its new x-idempotency
		own     []string          // the operations that get IdempotencyKey2
		stale   []string          // the operations check names
		keep    string            // in the final IdempotencyKey
	}{
		{"last", map[string]string{"addZoo": optional}, []string{"POST /zoos"}, []string{"POST /zoos"}, "required: true"},
		{"first", map[string]string{"addPet": optional}, []string{"POST /pets"}, []string{"POST /pets"}, "required: true"},
		{"middle", map[string]string{"addToy": longer}, []string{"POST /toys"}, []string{"POST /toys"}, "maxLength: 255"},
		{"all the same", map[string]string{"addPet": optional, "addToy": optional, "addZoo": optional}, nil, nil, "required: false"},
		{"most", map[string]string{"addPet": longer, "addToy": optional, "addZoo": optional}, []string{"POST /pets"}, []string{"POST /pets"}, "required: false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "openapi.yaml")
			require.NoError(t, os.WriteFile(src, []byte(spec), 0o644))
			first := filepath.Join(dir, "first.yaml")
			code, _, stderr := run("spec", "-o", first, src)
			require.Equal(t, cli.ExitOK, code, stderr)
			data, err := os.ReadFile(first)
			require.NoError(t, err)
			require.Equal(t, 3, strings.Count(string(data), "$ref: '#/components/parameters/IdempotencyKey'"), string(data))

			text := string(data)
			for id, x := range tc.changes {
				old := "operationId: " + id + "\n      x-idempotency: {}"
				require.Contains(t, text, old)
				text = strings.Replace(text, old, "operationId: "+id+"\n      x-idempotency: "+x, 1)
			}
			changed := filepath.Join(dir, "changed.yaml")
			require.NoError(t, os.WriteFile(changed, []byte(text), 0o644))
			code, _, stderr = run("check", changed)
			assert.Equal(t, cli.ExitOK, code, stderr)
			for _, op := range []string{"POST /pets", "POST /toys", "POST /zoos"} {
				msg := "the key parameter of " + op + " is idemgen's component parameters IdempotencyKey, which other operations use"
				if slices.Contains(tc.stale, op) {
					assert.Contains(t, stderr, msg)
				} else {
					assert.NotContains(t, stderr, msg)
				}
			}
			assert.NotContains(t, stderr, "key-declared-differently")

			second := filepath.Join(dir, "second.yaml")
			code, _, stderr = run("spec", "-o", second, changed)
			require.Equal(t, cli.ExitOK, code, stderr)
			code, _, stderr = run("check", "-strict", "-ignore", "key-optional", second)
			assert.Equal(t, cli.ExitOK, code, stderr)
			out, err := os.ReadFile(second)
			require.NoError(t, err)
			for _, path := range []string{"/pets", "/toys", "/zoos"} {
				want := "IdempotencyKey'"
				if slices.Contains(tc.own, "POST "+path) {
					want = "IdempotencyKey2'"
				}
				item := pathItem(string(out), path)
				assert.Contains(t, item, "$ref: '#/components/parameters/"+want, "%s in:\n%s", path, out)
			}
			comp := string(out)[strings.Index(string(out), "    IdempotencyKey:\n"):]
			comp = comp[:strings.Index(comp, "x-generated-by")]
			assert.Contains(t, comp, tc.keep, string(out))
			assert.Equal(t, len(tc.own) > 0, strings.Contains(string(out), "IdempotencyKey2:"), string(out))
			third := filepath.Join(dir, "third.yaml")
			code, _, stderr = run("spec", "-o", third, second)
			require.Equal(t, cli.ExitOK, code, stderr)
			again, err := os.ReadFile(third)
			require.NoError(t, err)
			assert.Equal(t, string(out), string(again), "a second run changed the spec")
		})
	}
}

// pathItem returns the lines of the path item path in the YAML spec, "" when
// there is none.
func pathItem(spec, path string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.SplitAfter(spec, "\n") {
		switch {
		case l == "  "+path+":\n":
			in = true
		case in && !strings.HasPrefix(l, "   "):
			return b.String()
		}
		if in {
			b.WriteString(l)
		}
	}
	return b.String()
}
