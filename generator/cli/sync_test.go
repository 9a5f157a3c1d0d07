package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
	"github.com/idemgen/idemgen/generator/emit/docs"
	"github.com/idemgen/idemgen/generator/emitter"
)

var augmentDir = filepath.Join("..", "..", "testdata", "augment")

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	require.NoError(t, os.WriteFile(to, data, 0o644))
}

// generateCoupons writes testdata/augment/coupons/openapi.yaml and an
// idemgen.yaml that generates its server and client into gen/ to a
// temporary directory, runs generate -config and returns the directory
// and the config's path.
func generateCoupons(t *testing.T) (dir, cfg string) {
	t.Helper()
	dir = t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	cfg = filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true, client: true}\n"), 0o644))
	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	return dir, cfg
}

// generatedThenStale writes testdata/augment/coupons/augmented.yaml as
// openapi.yaml, the files (name to content) and idemgen.yaml (config) to
// a temporary directory, runs generate -config, then changes a contract
// of the spec (window: 10m to 20m): the spec is behind its contracts
// [spec-stale]. It returns the spec's and the config's paths.
func generatedThenStale(t *testing.T, config string, files map[string]string) (spec, cfg string) {
	t.Helper()
	dir := t.TempDir()
	spec = filepath.Join(dir, "openapi.yaml")
	copyFile(t, filepath.Join(augmentDir, "coupons", "augmented.yaml"), spec)
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	cfg = filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o644))
	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)

	src, err := os.ReadFile(spec)
	require.NoError(t, err)
	stale := strings.Replace(string(src), "window: 10m", "window: 20m", 1)
	require.NotEqual(t, string(src), stale)
	require.NoError(t, os.WriteFile(spec, []byte(stale), 0o644))
	return spec, cfg
}

// TestCheckGenerated: with the ir and docs emitters configured, missing,
// stale and fresh outputs are told apart, and only fresh ones pass.
func TestCheckGenerated(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	cfg := filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {ir: true, docs: true}\n"), 0o644))
	irPath := filepath.Join(dir, "gen", emitter.IRFile)
	docsPath := filepath.Join(dir, "gen", docs.FileName)

	// Missing: nothing generated yet.
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, irPath+": error: missing")
	assert.Contains(t, stderr, docsPath+": error: missing")
	assert.Contains(t, stderr, "2 of 2 generated files are stale or missing")

	// Fresh after generate.
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "2 generated files are up to date")

	// Stale: the contract changed, the outputs were not regenerated.
	src, err := os.ReadFile(filepath.Join(dir, "openapi.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "openapi.yaml"), []byte(strings.Replace(string(src), "window: 10m", "window: 20m", 1)), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, irPath+":")
	assert.Contains(t, stderr, ": stale")
	assert.Contains(t, stderr, "run: idemgen generate -config "+cfg)

	// Stale: a generated file edited by hand.
	code, _, _ = run("generate", "-config", cfg)
	require.Equal(t, 0, code)
	require.NoError(t, os.WriteFile(docsPath, []byte("# edited\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, docsPath+":1:1: error: stale")
	assert.NotContains(t, stderr, irPath+":")

	// A spec with errors cannot be compared.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "openapi.yaml"), []byte(strings.Replace(string(src), "semantics: strict", "semantics: strcit", 1)), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "[bad-enum]")
}

// TestCheckGeneratedVersion: check -generated compares with what generate
// writes in a build that knows its version (the server and client emitters
// put it in their headers), not with a "(devel)" header.
func TestCheckGeneratedVersion(t *testing.T) {
	cli.SetVersion(t, "v1.2.3")
	dir, cfg := generateCoupons(t)
	src, err := os.ReadFile(filepath.Join(dir, "gen", "idempotency.gen.go"))
	require.NoError(t, err)
	assert.Contains(t, string(src), "\n// idemgen version: v1.2.3\n")
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "2 generated files are up to date")
	code, stdout, _ := run("version")
	assert.Equal(t, 0, code)
	assert.Equal(t, "idemgen v1.2.3\n", stdout)
}

func TestSpecCommand(t *testing.T) {
	spec := filepath.Join(augmentDir, "coupons", "openapi.yaml")
	want, err := os.ReadFile(filepath.Join(augmentDir, "coupons", "augmented.yaml"))
	require.NoError(t, err)
	code, stdout, stderr := run("spec", spec)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, string(want), stdout)

	wantOv, err := os.ReadFile(filepath.Join(augmentDir, "coupons", "augment.overlay.yaml"))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "decl.overlay.yaml")
	code, _, stderr = run("spec", spec, "-as-overlay", "-o", out)
	require.Equal(t, 0, code, stderr)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, string(wantOv), string(got))
	assert.Contains(t, stderr, "7 changes")

	// In place, twice: the second run changes nothing.
	inPlace := filepath.Join(t.TempDir(), "openapi.yaml")
	copyFile(t, spec, inPlace)
	for i, changes := range []string{"7 changes", "0 changes"} {
		code, _, stderr = run("spec", "-o", inPlace, inPlace)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stderr, changes, "run %d", i+1)
	}
	got, err = os.ReadFile(inPlace)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

func TestInitCommand(t *testing.T) {
	spec := filepath.Join("..", "..", "testdata", "init", "conventions", "openapi.yaml")
	want, err := os.ReadFile(filepath.Join("..", "..", "testdata", "init", "conventions", "init.overlay.yaml"))
	require.NoError(t, err)
	code, stdout, stderr := run("init", spec)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, string(want), stdout)
	assert.Contains(t, stderr, "note: GET /payments declares the key header Idempotency-Key")
	assert.Contains(t, stderr, "proposed contracts for 3 operations")

	out := filepath.Join(t.TempDir(), "idempotency.overlay.yaml")
	code, _, stderr = run("init", "-o", out, spec)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("init", "-o", out, spec)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "use -force")
	code, _, _ = run("init", "-force", "-o", out, spec)
	assert.Equal(t, 0, code)

	// The proposal fails check until confirmed.
	code, _, stderr = run("check", "-overlay", out, spec)
	assert.Equal(t, 1, code)
	assert.Equal(t, 6, strings.Count(stderr, "[unconfirmed]"), stderr) // semantics, window, failures, volatile, unordered, the optional key
}

// TestConfigDefaultOutput: a config file without output: makes generate and
// check -generated agree on its own directory, wherever idemgen runs.
func TestConfigDefaultOutput(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "sub", "openapi.yaml"))
	t.Chdir(dir)
	cfg := filepath.Join("sub", "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("spec: openapi.yaml\ngenerate: {ir: true, docs: true}\n"), 0o644))

	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	_, err := os.Stat(filepath.Join("sub", docs.FileName))
	assert.NoError(t, err, "generate writes next to the config file")
	_, err = os.Stat(docs.FileName)
	assert.ErrorIs(t, err, os.ErrNotExist, "generate writes nothing in the working directory")

	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "2 generated files are up to date")

	// -o still overrides the config's directory.
	code, _, stderr = run("generate", "-config", cfg, "-o", "elsewhere")
	require.Equal(t, 0, code, stderr)
	_, err = os.Stat(filepath.Join("elsewhere", docs.FileName))
	assert.NoError(t, err)
}

// TestGenerateWorkingDirectory: the files generated from a config do not
// depend on the directory idemgen runs from (the IR's source was the spec's
// path as given), so check -generated agrees from either directory.
func TestGenerateWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "sub", "openapi.yaml"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "idemgen.yaml"), []byte("spec: openapi.yaml\noutput: gen\ngenerate: {ir: true, docs: true}\n"), 0o644))

	read := func() map[string]string {
		files := map[string]string{}
		entries, err := os.ReadDir(filepath.Join(dir, "sub", "gen"))
		require.NoError(t, err)
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, "sub", "gen", e.Name()))
			require.NoError(t, err)
			files[e.Name()] = string(data)
		}
		return files
	}
	t.Chdir(dir)
	code, _, stderr := run("generate", "-config", filepath.Join("sub", "idemgen.yaml"))
	require.Equal(t, 0, code, stderr)
	fromRoot := read()
	assert.Contains(t, fromRoot[emitter.IRFile], `"source": "../openapi.yaml"`)

	t.Chdir(filepath.Join(dir, "sub"))
	code, _, stderr = run("check", "-generated", "-config", "idemgen.yaml")
	assert.Equal(t, 0, code, stderr)
	code, _, stderr = run("generate", "-config", "idemgen.yaml")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, fromRoot, read())
}

// TestCheckGeneratedSpecStale: when the spec itself is behind its contracts
// (spec-stale), check -generated says to run idemgen spec and oapi-codegen
// before generate, not generate alone.
func TestCheckGeneratedSpecStale(t *testing.T) {
	spec, cfg := generatedThenStale(t, "output: gen\nspec: openapi.yaml\ngenerate: {ir: true}\n", nil)
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "[spec-stale]")
	assert.Contains(t, stderr, "run: idemgen spec -o "+spec+" "+spec+", then oapi-codegen, then idemgen generate -config "+cfg)
}

// TestCheckGeneratedSeveralConfigsOneSpec: two configs that read one spec
// report a diagnostic of the spec (spec-stale) once, not once per config,
// in text and in JSON.
func TestCheckGeneratedSeveralConfigsOneSpec(t *testing.T) {
	spec, cfg := generatedThenStale(t, "output: gen\nspec: openapi.yaml\ngenerate: {ir: true}\n", map[string]string{
		"other.idemgen.yaml": "output: gen2\nspec: openapi.yaml\ngenerate: {ir: true}\n",
	})
	other := filepath.Join(filepath.Dir(spec), "other.idemgen.yaml")
	code, _, stderr := run("check", "-generated", "-config", cfg, "-config", other)
	assert.Equal(t, 1, code, stderr)
	lines := map[string]int{}
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasSuffix(l, "[spec-stale]") {
			lines[l]++
		}
	}
	require.NotEmpty(t, lines, stderr)
	for l, n := range lines {
		assert.Equal(t, 1, n, "reported %d times: %s", n, l)
	}

	code, stdout, stderr := run("check", "-generated", "-format", "json", "-config", cfg, "-config", other)
	assert.Equal(t, 1, code, stderr)
	var diags []struct {
		File, Rule, Message string
		Line, Col           int
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &diags), stdout)
	seen := map[string]bool{}
	for _, d := range diags {
		k := fmt.Sprint(d)
		assert.False(t, seen[k], "reported twice: %s", k)
		seen[k] = true
	}
	assert.Len(t, seen, len(diags))
}

// TestGenerateNoArgs: generate without a SPEC says whether an idemgen.yaml
// is there to name with -config.
func TestGenerateNoArgs(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, stderr := run("generate")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no -config given, and no idemgen.yaml in the current directory")
	require.NoError(t, os.WriteFile("idemgen.yaml", []byte("spec: openapi.yaml\ngenerate: {ir: true}\n"), 0o644))
	code, _, stderr = run("generate")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "run idemgen generate -config idemgen.yaml")
}

// TestSingular: a count of one is spelled in the singular ("1 warning",
// not "1 warnings") in what the commands print.
func TestSingular(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, contractCase("clean-minimal"), filepath.Join(dir, "openapi.yaml"))
	code, stdout, stderr := run("check", filepath.Join(dir, "openapi.yaml"))
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, ": 1 idempotent operation, 2 warnings")

	cfg := filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("output: gen\nspec: openapi.yaml\ngenerate: {ir: true}\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	require.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "1 of 1 generated file is stale or missing")
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "1 generated file is up to date")

	one := filepath.Join(dir, "one.yaml")
	require.NoError(t, os.WriteFile(one, []byte(oneKeyedOperation), 0o644))
	code, stdout, stderr = run("init", one)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "proposed a contract for 1 operation;")
	assert.Contains(t, stdout, "contract for the one operation\n# that declares an idempotency key")
}

// oneKeyedOperation declares a key on one operation, without a contract.
const oneKeyedOperation = `openapi: 3.0.3
info: {title: One, version: 1.0.0}
paths:
  /orders:
    post:
      operationId: createOrder
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object}
      responses:
        '201': {description: created}
`

// TestInitNothingToPropose: init on a spec whose unsafe operations declare
// no key says how to opt them in (apply-to, with a command to run), and
// points at the documentation by URL, not by a path in idemgen's repository.
func TestInitNothingToPropose(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(strings.Replace(oneKeyedOperation, "        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}\n", "", 1)), 0o644))
	code, stdout, stderr := run("init", spec)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "nothing to propose")
	assert.Contains(t, stderr, "update: {x-idempotency: {semantics: strict, window: 24h, apply-to: [post]}}")
	assert.Contains(t, stderr, "idemgen check -overlay idempotency.overlay.yaml "+spec)
	assert.Contains(t, stderr, "https://github.com/idemgen/idemgen/blob/main/docs/contract.md#where-a-block-may-be-written-and-how-blocks-merge")
	assert.NotContains(t, stderr, " docs/")
}

// TestInitApplyToLeavesConnect: a CONNECT operation that declares no key
// is not proposed for apply-to (parse refuses apply-to: [connect]): the
// proposal names post only.
func TestInitApplyToLeavesConnect(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	src := strings.Replace(oneKeyedOperation, "        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}\n", "", 1)
	src += `  /tunnel:
    connect:
      operationId: openTunnel
      responses:
        '200': {description: connected}
`
	require.NoError(t, os.WriteFile(spec, []byte(src), 0o644))
	code, _, stderr := run("init", spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "apply-to: [post]}}")
	assert.NotContains(t, stderr, "connect")
	assert.NotContains(t, stderr, "CONNECT")
}

// TestInitApplyToLeavesPutDelete: init's apply-to proposal on a spec
// whose POST and DELETE declare no key names post only (a DELETE is
// idempotent by HTTP semantics; proposing it would make check warn
// [put-delete] on the proposal itself), says why DELETE is left out, and
// the proposed overlay checks without a put-delete warning.
func TestInitApplyToLeavesPutDelete(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	src := strings.Replace(oneKeyedOperation, "        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}\n", "", 1)
	src += `  /things/{id}:
    delete:
      operationId: deleteThing
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        '204': {description: deleted}
`
	require.NoError(t, os.WriteFile(spec, []byte(src), 0o644))
	code, _, stderr := run("init", spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "apply-to: [post]}}")
	assert.NotContains(t, stderr, "delete, post")
	assert.Contains(t, stderr, "The DELETE operations, which declare no key either, get no apply-to")

	// The overlay init shows, between cat > … <<'EOF' and EOF.
	_, body, ok := strings.Cut(stderr, "<<'EOF'\n")
	require.True(t, ok, stderr)
	body, _, ok = strings.Cut(body, "  EOF\n")
	require.True(t, ok, stderr)
	var ov strings.Builder
	for _, l := range strings.SplitAfter(body, "\n") {
		ov.WriteString(strings.TrimPrefix(l, "  "))
	}
	overlay := filepath.Join(dir, "idempotency.overlay.yaml")
	require.NoError(t, os.WriteFile(overlay, []byte(ov.String()), 0o644))
	code, _, stderr = run("check", "-overlay", overlay, spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "put-delete")
}

// TestReplayedHeaderOption: replayed-header: false in the idemgen.yaml
// beside the spec (or -replayed-header=false) makes spec leave the
// Idempotent-Replayed header out, and remove what an earlier run declared;
// check reads the same setting, so -strict passes on the spec spec wrote,
// either way.
func TestReplayedHeaderOption(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	copyFile(t, contractCase("clean-minimal"), spec)
	read := func() string {
		data, err := os.ReadFile(spec)
		require.NoError(t, err)
		return string(data)
	}
	code, _, stderr := run("spec", "-o", spec, spec)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, read(), "$ref: '#/components/headers/IdempotentReplayed'")
	code, _, stderr = run("check", "-strict", spec)
	require.Equal(t, 0, code, stderr)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "idemgen.yaml"), []byte("spec: openapi.yaml\nreplayed-header: false\n"), 0o644))
	code, _, stderr = run("check", "-strict", spec)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "declares the Idempotent-Replayed header that idemgen spec wrote, and replayed-header is false now")
	assert.Contains(t, stderr, "[spec-stale]")
	code, _, stderr = run("check", "-strict", "-replayed-header=true", spec)
	assert.Equal(t, 0, code, stderr)
	// check -generated tells to run spec with the config that sets it.
	cfg := filepath.Join(dir, "gen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("spec: openapi.yaml\noutput: gen\ngenerate: {ir: true}\nreplayed-header: false\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "run: idemgen spec -config "+cfg+" -o "+spec+" "+spec)
	require.NoError(t, os.WriteFile(cfg, []byte("spec: openapi.yaml\noutput: gen\ngenerate: {ir: true}\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-replayed-header=false", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "run: idemgen spec -replayed-header=false -o "+spec+" "+spec)

	code, _, stderr = run("spec", "-o", spec, spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, read(), "IdempotentReplayed")
	code, _, stderr = run("check", "-strict", spec)
	assert.Equal(t, 0, code, stderr)

	// The flag overrides the config.
	code, _, stderr = run("spec", "-replayed-header=true", "-o", spec, spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, read(), "$ref: '#/components/headers/IdempotentReplayed'")
	code, _, stderr = run("check", "-strict", "-replayed-header", spec)
	assert.Equal(t, 0, code, stderr)
}
