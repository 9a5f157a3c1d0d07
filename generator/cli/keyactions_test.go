package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// keyOptionalSpec writes a spec whose root contract requires the key and
// whose n POST operations declare it optional, each at another index of
// its parameters (0, 1, 2, 0, ...: a query parameter or two before it),
// as in modern-treasury, where the key is parameters[1] of some
// operations and parameters[0] of others; at index 2, after a query
// parameter of the same name.
func keyOptionalSpec(t *testing.T, n int) string {
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: Ledgers, version: \"1\"}\n")
	b.WriteString("x-idempotency: {semantics: strict, window: 24h, apply-to: [post], key: {header: Idempotency-Key, required: true}}\npaths:\n")
	for i := range n {
		fmt.Fprintf(&b, "  /r%d:\n    post:\n      operationId: create%d\n      parameters:\n", i, i)
		for j := range i % 3 {
			name := fmt.Sprintf("q%d", j)
			if j == 1 {
				name = "Idempotency-Key" // a query parameter of the key's name
			}
			fmt.Fprintf(&b, "        - {name: %s, in: query, schema: {type: string}}\n", name)
		}
		b.WriteString("        - {name: Idempotency-Key, in: header, required: false, schema: {type: string, maxLength: 255}}\n")
		b.WriteString("      responses:\n        '201': {description: created}\n")
	}
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(b.String()), 0o644))
	return spec
}

var actionRE = regexp.MustCompile(`\{target: "([^"]*)", update: \{required: (true|false)\}\}`)

// TestKeyDeclaredDifferentlyActions: the [key-declared-differently] hint
// gives every declaration's own overlay action (the key is parameters[0]
// of one operation and parameters[1] of another: one action "such as"
// the first, copied for the others, changed the wrong parameter), its
// target a filter on the parameter's name (an index only when another
// parameter of the list has that name), all of them in the message when
// few, else the first few and -format json's overlay-actions, all of
// them; pasted into an overlay (overlay: 1.0.0, no extension), they fix
// it, without an [overlay-warning].
func TestKeyDeclaredDifferentlyActions(t *testing.T) {
	for _, n := range []int{4, 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			spec := keyOptionalSpec(t, n)
			code, _, text := run("check", spec)
			require.Equal(t, cli.ExitError, code, text)
			require.Contains(t, text, "[key-declared-differently]")
			listed := actionRE.FindAllStringSubmatch(text, -1)
			want := []string{}
			for i := range n {
				target := fmt.Sprintf("$.paths['/r%d'].post.parameters[?(@.name=='Idempotency-Key')]", i)
				if i%3 == 2 {
					target = fmt.Sprintf("$.paths['/r%d'].post.parameters[2]", i) // the name is not the key's alone
				}
				want = append(want, target)
			}
			var got []string
			for _, m := range listed {
				assert.Equal(t, "true", m[2])
				got = append(got, m[1])
			}
			assert.ElementsMatch(t, want[:min(n, 5)], got, "the actions the message gives")

			code, stdout, stderr := run("check", "-format", "json", spec)
			require.Equal(t, cli.ExitError, code, stderr)
			var diags []struct {
				Rule    string
				Actions []map[string]any `json:"overlay-actions"`
			}
			require.NoError(t, json.Unmarshal([]byte(stdout), &diags))
			var actions []map[string]any
			for _, d := range diags {
				if d.Rule == "key-declared-differently" {
					actions = append(actions, d.Actions...)
				}
			}
			got = nil
			for _, a := range actions {
				got = append(got, a["target"].(string))
				assert.Equal(t, map[string]any{"required": true}, a["update"])
			}
			assert.ElementsMatch(t, want, got, "-format json's overlay-actions")

			// The message's actions, pasted into an overlay (all of them
			// when it lists them all), and the JSON's, fix the spec.
			dir := filepath.Dir(spec)
			if n <= 5 {
				var b strings.Builder
				b.WriteString("overlay: 1.0.0\ninfo: {title: fix, version: 1.0.0}\nactions:\n")
				for _, m := range listed {
					b.WriteString("  - " + m[0] + "\n")
				}
				fix := filepath.Join(dir, "text.overlay.yaml")
				require.NoError(t, os.WriteFile(fix, []byte(b.String()), 0o644))
				code, _, stderr = run("check", "-overlay", fix, spec)
				assert.Equal(t, cli.ExitOK, code, stderr)
				assert.NotContains(t, stderr, "key-declared-differently")
				assert.NotContains(t, stderr, "overlay-warning")
			} else {
				assert.Contains(t, text, fmt.Sprintf("and %d more, which -format json lists, all %d, in the diagnostic's overlay-actions", n-5, n))
			}
			ov, err := json.Marshal(map[string]any{"overlay": "1.0.0", "info": map[string]any{"title": "fix", "version": "1.0.0"}, "actions": actions})
			require.NoError(t, err)
			fix := filepath.Join(dir, "json.overlay.json")
			require.NoError(t, os.WriteFile(fix, ov, 0o644))
			code, _, stderr = run("check", "-overlay", fix, spec)
			assert.Equal(t, cli.ExitOK, code, stderr)
			assert.NotContains(t, stderr, "key-declared-differently")
			assert.NotContains(t, stderr, "overlay-warning")
		})
	}
}
