package cli_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/gentest"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ignore and testdata/check")

// TestIgnoreCases runs every case under testdata/ignore as checkCases does.
func TestIgnoreCases(t *testing.T) {
	assert.GreaterOrEqual(t, checkCases(t, filepath.Join("..", "..", "testdata", "ignore")), 6)
}

// TestCheckCases runs every case under testdata/check as checkCases does:
// the emitters' checks that check runs (go-name-collision, and with a
// config that enables emitters, all that generate would report).
func TestCheckCases(t *testing.T) {
	assert.GreaterOrEqual(t, checkCases(t, filepath.Join("..", "..", "testdata", "check")), 4)
}

// checkCases runs every case under root and returns how many: each
// directory holds openapi.yaml (or openapi.json), maybe an idemgen.yaml
// beside it (which check reads, as beside any spec), maybe args (more
// flags of idemgen check, one a line; one that starts with ./ is a path
// in the case directory), and want.txt: the exit status, then
// exactly what idemgen check prints on stderr, with paths relative to the
// case directory.
func checkCases(t *testing.T, root string) int {
	t.Helper()
	return gentest.SpecCases(t, root, func(t *testing.T, dir, spec string) {
		args := []string{"check"}
		if data, err := os.ReadFile(filepath.Join(dir, "args")); err == nil {
			for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				if l = strings.TrimSpace(l); strings.HasPrefix(l, "./") {
					args = append(args, filepath.Join(dir, l))
				} else if l != "" {
					args = append(args, l)
				}
			}
		}
		code, _, stderr := run(append(args, spec)...)
		got := "exit " + strconv.Itoa(code) + "\n" + strings.ReplaceAll(stderr, dir+string(filepath.Separator), "")
		gentest.GoldenFile(t, filepath.Join(dir, "want.txt"), []byte(got), *update)
	})
}

// ignoreCase copies testdata/ignore/<name> to a temporary directory and
// returns it.
func ignoreCase(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "ignore", name)
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		copyFile(t, filepath.Join(src, e.Name()), filepath.Join(dir, e.Name()))
	}
	return dir
}

// TestIgnoreGenerate: generate -config and check -generated silence what
// the config's ignore: silences (and -ignore adds to it); the JSON
// diagnostics leave out what is silenced and name each one's operations.
func TestIgnoreGenerate(t *testing.T) {
	dir := ignoreCase(t, "config")
	cfg := filepath.Join(dir, "idemgen.yaml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("package: api\noutput: gen\ngenerate: {ir: true}\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	code, stdout, stderr := run("generate", "-config", cfg, "-format", "json")
	require.Equal(t, 0, code, stderr)
	var diags []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &diags), stdout)
	require.Len(t, diags, 1, stdout)
	assert.Equal(t, "put-delete", diags[0]["rule"])
	assert.Equal(t, []any{"PUT /payments/{id}"}, diags[0]["operations"])

	code, stdout, stderr = run("generate", "-config", cfg, "-format", "json", "-ignore", "put-delete:PUT /payments/{id}")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "[]\n", stdout)

	code, _, stderr = run("check", "-generated", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "warning:"), stderr)
	assert.Contains(t, stderr, "PUT is idempotent")
	assert.NotContains(t, stderr, "DELETE is idempotent")
	assert.NotContains(t, stderr, "[key-param-missing]")

	// generate reads a config given with -config only: without, nothing
	// is silenced.
	code, _, stderr = run("generate", "-emit", "ir", "-o", t.TempDir(), filepath.Join(dir, "openapi.yaml"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "DELETE is idempotent")
	assert.Contains(t, stderr, "[key-param-missing]")
}

// TestIgnoreCheckConfigFlag: check -config reads the ignore: of the named
// file, as it reads the one beside the spec.
func TestIgnoreCheckConfigFlag(t *testing.T) {
	dir := ignoreCase(t, "config")
	require.NoError(t, os.Rename(filepath.Join(dir, "idemgen.yaml"), filepath.Join(dir, "ci.yaml")))
	spec := filepath.Join(dir, "openapi.yaml")
	code, _, stderr := run("check", spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "DELETE is idempotent", "no config beside the spec any more")
	code, _, stderr = run("check", "-config", filepath.Join(dir, "ci.yaml"), spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "DELETE is idempotent")
	// put-delete for PUT, and operation-id-missing for both operations.
	assert.Contains(t, stderr, "2 idempotent operations, 3 warnings")
}

// TestIgnoreSpecCommand: idemgen spec reads the spec's comments and
// -ignore; an ignore of a rule spec does not check (it declares what
// key-param-missing reports missing) is not reported as unused, one of a
// rule it checks is.
func TestIgnoreSpecCommand(t *testing.T) {
	spec := filepath.Join(ignoreCase(t, "comment"), "openapi.yaml")
	code, _, stderr := run("spec", "-warnings", "-o", filepath.Join(t.TempDir(), "out.yaml"), spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "x-idempotency on PUT /payments/{id}")
	assert.NotContains(t, stderr, "DELETE /payments/{id}: DELETE is idempotent")
	assert.NotContains(t, stderr, "body member /client_time of POST /payments ")
	assert.Contains(t, stderr, "body member /client_time of POST /refunds ")

	code, _, stderr = run("spec", "-warnings", "-ignore", "key-param-missing", "-ignore", "business-key", "-o", filepath.Join(t.TempDir(), "out.yaml"), spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "-ignore key-param-missing")
	assert.Contains(t, stderr, "command line: warning: -ignore business-key silenced nothing: no business-key warning in this run; delete it [unused-ignore]")
}

// TestIgnoreSpecConfig: idemgen spec reads the idemgen.yaml beside SPEC
// (or -config) for replayed-header, and so applies its ignore: too, with
// -ignore on top; a bad ignore (the config's, or a flag's operation the
// spec does not have) is an error, as for check: exit status 1, nothing
// written.
func TestIgnoreSpecConfig(t *testing.T) {
	dir := ignoreCase(t, "config")
	spec := filepath.Join(dir, "openapi.yaml")
	out := filepath.Join(t.TempDir(), "out.yaml")
	code, _, stderr := run("spec", "-warnings", "-o", out, spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "PUT is idempotent")
	assert.NotContains(t, stderr, "DELETE is idempotent", "the config's ignore: for DELETE /payments/{id}")
	assert.NotContains(t, stderr, "unused-ignore", "key-param-missing and problem-response-missing are check's")
	code, _, stderr = run("spec", "-warnings", "-ignore", "put-delete:PUT /payments/{id}", "-o", out, spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "is idempotent")

	require.NoError(t, os.Rename(filepath.Join(dir, "idemgen.yaml"), filepath.Join(dir, "ci.yaml")))
	code, _, stderr = run("spec", "-warnings", "-o", out, spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "DELETE is idempotent", "no config beside the spec any more")
	code, _, stderr = run("spec", "-warnings", "-config", filepath.Join(dir, "ci.yaml"), "-o", out, spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "DELETE is idempotent")

	for _, args := range [][]string{
		{"spec", "-o", out, filepath.Join(ignoreCase(t, "bad-config"), "openapi.yaml")},
		{"spec", "-ignore", "put-delete:GET /nope", "-o", out, spec},
	} {
		require.NoError(t, os.RemoveAll(out))
		code, stdout, stderr := run(args...)
		assert.Equal(t, 1, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "[bad-ignore]", args)
		assert.NotContains(t, stderr, "unused-ignore", args)
		assert.Empty(t, stdout, args)
		assert.NoFileExists(t, out, args)
	}
}

// TestIgnoreFlagErrors: -ignore of an error rule, of an unknown rule, of
// unused-ignore, or with an operation not written METHOD /path is a usage
// error.
func TestIgnoreFlagErrors(t *testing.T) {
	spec := filepath.Join("..", "..", "testdata", "ignore", "config", "openapi.yaml")
	for _, tc := range []struct{ arg, want string }{
		{"safe-method", "safe-method is an error, and only warnings can be ignored"},
		{"put-delet", "put-delet is no rule idemgen reports (did you mean put-delete?)"},
		{"unused-ignore", "unused-ignore cannot be ignored"},
		{"put-delete:/payments/{id}", "want RULE or RULE:METHOD /path"},
	} {
		for _, cmd := range [][]string{{"check"}, {"generate", "-emit", "ir", "-o", "-"}, {"spec"}} {
			args := append(append(cmd, "-ignore", tc.arg), spec)
			code, stdout, stderr := run(args...)
			assert.Equal(t, 2, code, "%v: %s", args, stderr)
			assert.Contains(t, stderr, tc.want, args)
			assert.Empty(t, stdout, args)
		}
	}
}

// TestIgnoreConfigShape: an ignore: entry of the wrong shape is a config
// error (exit status 2) naming its line, as an unknown field is.
func TestIgnoreConfigShape(t *testing.T) {
	dir := ignoreCase(t, "config")
	for _, tc := range []struct{ cfg, want string }{
		{"ignore:\n  - rule: put-delete\n    resaon: typo\n", "line 3: ignore: unknown field resaon"},
		{"ignore:\n  - put-delete\n", "line 2: ignore: want entries such as"},
		{"ignore:\n  - rule: [put-delete]\n    reason: r\n", "line 2: ignore: rule must be a string"},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "idemgen.yaml"), []byte(tc.cfg), 0o644))
		code, _, stderr := run("check", filepath.Join(dir, "openapi.yaml"))
		assert.Equal(t, 2, code, stderr)
		assert.Contains(t, stderr, tc.want)
	}
}
