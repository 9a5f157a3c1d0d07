package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
)

// twoServices writes two services, svc1 and svc2, each the coupons spec
// with an idemgen.yaml generating its server, client and docs into gen/,
// under a temporary directory, and returns their config paths.
func twoServices(t *testing.T) (svc1, svc2 string) {
	t.Helper()
	dir := t.TempDir()
	var cfgs []string
	for _, svc := range []string{"svc1", "svc2"} {
		copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, svc, "openapi.yaml"))
		cfg := filepath.Join(dir, svc, "idemgen.yaml")
		require.NoError(t, os.WriteFile(cfg, []byte("package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true, client: true, docs: true}\n"), 0o644))
		cfgs = append(cfgs, cfg)
	}
	return cfgs[0], cfgs[1]
}

// makeStale changes a contract of the spec beside cfg (window: 10m to 20m).
func makeStale(t *testing.T, cfg string) {
	t.Helper()
	spec := filepath.Join(filepath.Dir(cfg), "openapi.yaml")
	src, err := os.ReadFile(spec)
	require.NoError(t, err)
	stale := strings.Replace(string(src), "window: 10m", "window: 20m", 1)
	require.NotEqual(t, string(src), stale)
	require.NoError(t, os.WriteFile(spec, []byte(stale), 0o644))
}

// TestSeveralConfigs: generate and check -generated take -config more than
// once and handle each config in turn; a stale one fails the check
// whichever its place; the commands that read one config refuse a repeat
// rather than silently reading the last.
func TestSeveralConfigs(t *testing.T) {
	svc1, svc2 := twoServices(t)
	code, _, stderr := run("generate", "-config", svc1, "-config", svc2)
	require.Equal(t, 0, code, stderr)
	for _, cfg := range []string{svc1, svc2} {
		_, err := os.Stat(filepath.Join(filepath.Dir(cfg), "gen", "idempotency.gen.go"))
		require.NoError(t, err, "generated for %s", cfg)
	}
	code, _, stderr = run("check", "-generated", "-config", svc2, "-config", svc1)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "up to date ("+svc1+")")
	assert.Contains(t, stderr, "up to date ("+svc2+")")

	makeStale(t, svc2)
	for _, order := range [][]string{{svc2, svc1}, {svc1, svc2}} {
		code, _, stderr = run("check", "-generated", "-config", order[0], "-config", order[1])
		assert.Equal(t, 1, code, stderr)
		assert.Contains(t, stderr, "run: idemgen generate -config "+svc2)
		assert.Contains(t, stderr, "up to date ("+svc1+")")
	}
	// JSON: one array for all the configs.
	code, stdout, stderr := run("check", "-generated", "-format", "json", "-config", svc1, "-config", svc2)
	assert.Equal(t, 1, code, stderr)
	assert.Equal(t, 1, strings.Count(stdout, "\n]"), stdout)

	// A usage error is the worst.
	code, _, stderr = run("check", "-generated", "-config", svc1, "-config", filepath.Join(filepath.Dir(svc1), "nothere.yaml"))
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "up to date ("+svc1+")")

	// SPEC, -overlay, -o belong to one config.
	code, _, stderr = run("check", "-generated", "-config", svc1, "-config", svc2, "openapi.yaml")
	assert.Equal(t, 2, code, stderr)
	code, _, stderr = run("generate", "-config", svc1, "-config", svc2, "-o", t.TempDir())
	assert.Equal(t, 2, code, stderr)

	// check (without -generated) and spec read one config.
	spec := filepath.Join(filepath.Dir(svc1), "openapi.yaml")
	for _, cmd := range []string{"check", "spec"} {
		code, _, stderr = run(cmd, "-config", svc2, "-config", svc1, spec)
		assert.Equal(t, 2, code, cmd+": "+stderr)
		assert.Contains(t, stderr, "-config given 2 times", cmd)
	}
}

// toCRLF rewrites the file path with CRLF line endings, as a checkout with
// core.autocrlf=true does.
func toCRLF(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "\n", "\r\n")), 0o644))
}

// TestCheckGeneratedCRLF: a CRLF checkout of up-to-date files passes, saying
// that only the line endings differ and how to check out LF; a stale CRLF
// file is stale from its first real difference, not from line 1.
func TestCheckGeneratedCRLF(t *testing.T) {
	dir, cfg := generateCoupons(t)
	server := filepath.Join(dir, "gen", "idempotency.gen.go")
	toCRLF(t, server)
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, server+": up to date but for its line endings")
	// Outside a repository: for a .gitattributes beside the files, never
	// a pattern for every file.
	assert.Contains(t, stderr, "add to the .gitattributes in "+filepath.Join(dir, "gen")+":\n\t/*.gen.go text eol=lf\n")
	assert.NotContains(t, stderr, "* text eol=lf")
	assert.Contains(t, stderr, "2 generated files are up to date")

	// In a repository, relative to its root, whatever the current
	// directory; the docs page by its name.
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".git"), 0o755))
	docs := filepath.Join(dir, "gen", "IDEMPOTENCY.md")
	require.NoError(t, os.WriteFile(cfg, []byte("package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true, client: true, docs: true}\n"), 0o644))
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	toCRLF(t, server)
	toCRLF(t, filepath.Join(dir, "gen", "idempotency_client.gen.go"))
	toCRLF(t, docs)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "add to the .gitattributes in the repository's root, "+dir+":\n\tgen/*.gen.go text eol=lf\n\tgen/IDEMPOTENCY.md text eol=lf\n", stderr)
	assert.NotContains(t, stderr, "* text eol=lf")
	require.NoError(t, os.Remove(filepath.Join(dir, ".git")))

	makeStale(t, cfg)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, server+":")
	assert.NotContains(t, stderr, server+":1:1: error: stale")
	assert.NotContains(t, stderr, "line endings")
}

// TestCheckGeneratedOrphans: files idemgen generated that the config no
// longer produces (an emitter turned off, output: moved) are errors
// [generated-orphaned]; the files of another config writing to the same
// directory are not, only warnings.
func TestCheckGeneratedOrphans(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	cfg := filepath.Join(dir, "idemgen.yaml")
	write := func(path, content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	write(cfg, "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true, client: true, docs: true, ir: true}\n")
	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "orphaned")

	// docs: false, ir: false leave IDEMPOTENCY.md and idemgen.ir.json.
	write(cfg, "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true, client: true, docs: false}\n")
	code, stdout, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, filepath.Join(dir, "gen", "IDEMPOTENCY.md")+":1:1: error: orphaned")
	assert.Contains(t, stderr, filepath.Join(dir, "gen", "idemgen.ir.json")+":1:1: error: orphaned")
	assert.Contains(t, stderr, "delete it or generate it again [generated-orphaned]")
	assert.Contains(t, stderr, "2 generated files are up to date, but 2 generated files no config produces now")
	require.NoError(t, os.Remove(filepath.Join(dir, "gen", "IDEMPOTENCY.md")))
	require.NoError(t, os.Remove(filepath.Join(dir, "gen", "idemgen.ir.json")))

	// output: moved leaves the Go files in gen/ (found as the directory of
	// oapi-codegen's output).
	write(filepath.Join(dir, "oapi-codegen.yaml"), "package: api\noutput: gen/api.gen.go\ngenerate: {models: true, client: true}\n")
	write(cfg, "package: api\noutput: gen2\nspec: openapi.yaml\ngenerate: {server: true, client: true}\n")
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, filepath.Join(dir, "gen", "idempotency.gen.go")+":1:1: error: orphaned")
	assert.Contains(t, stderr, filepath.Join(dir, "gen", "idempotency_client.gen.go")+":1:1: error: orphaned")
	assert.NotContains(t, stderr, "gen2/idempotency")

	// Moved back, and a second config writing the docs to the same
	// directory under another name: not an orphan of the first, and the
	// first's files not of the second.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "gen2")))
	write(cfg, "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true, client: true}\n")
	admin := filepath.Join(dir, "admin.idemgen.yaml")
	write(admin, "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true}\noptions: {server.file: admin.gen.go, server.type: AdminIdempotency}\n")
	code, _, stderr = run("generate", "-config", cfg, "-config", admin)
	require.Equal(t, 0, code, stderr)
	for _, c := range []string{cfg, admin} {
		code, _, stderr = run("check", "-generated", "-config", c)
		assert.Equal(t, 0, code, stderr)
		assert.NotContains(t, stderr, "error: orphaned", c)
	}
	assert.Contains(t, stderr, "warning: generated by idemgen, but not by "+admin)
	code, _, stderr = run("check", "-generated", "-config", cfg, "-config", admin)
	assert.Equal(t, 0, code, stderr)
	// Together, each config's files are the run's: not another config's
	// output to warn about (3 warnings on what the other one produces).
	assert.NotContains(t, stderr, "generated-orphaned", stderr)
}

// TestCheckGeneratedOrphansOapiConfig: the orphan scan looks in the
// directory of oapi-codegen's output only for the oapi-codegen
// configuration the config read (or, beside it, one of its package): not
// for an oapi-codegen.yaml beside it of another package, which the config
// does not read, nor for one beside it when oapi-codegen-config: names
// another file (their directories' idemgen files were orphan errors).
func TestCheckGeneratedOrphansOapiConfig(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	write := func(path, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	// idemgen files of another package in other/, from the same spec,
	// their config gone (its directory's go generate, say).
	tmp := filepath.Join(dir, "tmp.yaml")
	write(tmp, "package: other\noutput: other\nspec: openapi.yaml\ngenerate: {server: true, client: true}\n")
	code, _, stderr := run("generate", "-config", tmp)
	require.Equal(t, 0, code, stderr)
	require.NoError(t, os.Remove(tmp))
	cfg := filepath.Join(dir, "idemgen.yaml")
	write(cfg, "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true}\n")
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)

	// Beside, of package other: not read, not scanned.
	write(filepath.Join(dir, "oapi-codegen.yaml"), "package: other\noutput: other/api.gen.go\ngenerate: {models: true, client: true}\n")
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "orphaned", stderr)

	// Beside, of package api, but oapi-codegen-config: names another
	// file: that one is read, its output directory scanned.
	write(filepath.Join(dir, "oapi-codegen.yaml"), "package: api\noutput: other/api.gen.go\ngenerate: {models: true, client: true}\n")
	write(filepath.Join(dir, "oapi", "gen.yaml"), "package: api\noutput: gen/api.gen.go\ngenerate: {models: true, client: true}\n")
	write(cfg, "package: api\noutput: gen\nspec: openapi.yaml\noapi-codegen-config: oapi/gen.yaml\ngenerate: {server: true}\n")
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "orphaned", stderr)

	// Without oapi-codegen-config:, the beside one of package api whose
	// output is elsewhere (idemgen's output: moved) is scanned still.
	write(cfg, "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true}\n")
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, filepath.Join(dir, "other", "idempotency.gen.go")+":1:1: error: orphaned")
}

// TestCheckGeneratedJSON: with -format json, the drift itself (stale,
// missing and orphaned files) is in the JSON array on stdout, as
// diagnostics at the first differing line; in text, the same diagnostics
// on stderr.
func TestCheckGeneratedJSON(t *testing.T) {
	dir, cfg := generateCoupons(t)
	server := filepath.Join(dir, "gen", "idempotency.gen.go")
	client := filepath.Join(dir, "gen", "idempotency_client.gen.go")
	data, err := os.ReadFile(server)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	lines[9] += " // edited"
	require.NoError(t, os.WriteFile(server, []byte(strings.Join(lines, "\n")), 0o644))
	require.NoError(t, os.Remove(client))
	orphan := filepath.Join(dir, "gen", "IDEMPOTENCY.md")
	require.NoError(t, os.WriteFile(orphan, []byte("# Idempotency: Coupons\n\n<!-- Generated by idemgen from openapi.yaml. DO NOT EDIT: change the x-idempotency contracts and run idemgen generate. -->\n"), 0o644))

	code, stdout, stderr := run("check", "-generated", "-format", "json", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	var got []struct {
		File, Severity, Rule string
		Line, Col            int
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	type d struct {
		file, rule string
		line       int
	}
	var ds []d
	for _, g := range got {
		if strings.HasPrefix(g.Rule, "generated-") {
			assert.Equal(t, "error", g.Severity, g.File)
			ds = append(ds, d{g.File, g.Rule, g.Line})
		}
	}
	assert.ElementsMatch(t, []d{{server, "generated-stale", 10}, {client, "generated-missing", 0}, {orphan, "generated-orphaned", 1}}, ds, stdout)
	assert.NotContains(t, stderr, server)

	code, stdout, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, server+":10:1: error: stale (differs from what idemgen generates from line 10 on")
	assert.Contains(t, stderr, "[generated-stale]")
	assert.Contains(t, stderr, client+": error: missing (emitter output not generated) [generated-missing]")
}

// TestCheckGeneratedAdviceOapiCodegen: when an oapi-codegen configuration
// is known, stale files are fixed by go generate (oapi-codegen, then
// idemgen generate), not by idemgen generate alone, which would leave
// oapi-codegen's types behind (a new operation's params type undefined).
func TestCheckGeneratedAdviceOapiCodegen(t *testing.T) {
	dir, cfg := generateCoupons(t)
	makeStale(t, cfg)
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "run: idemgen generate -config "+cfg+"\n")

	oapi := filepath.Join(dir, "oapi-codegen.yaml")
	require.NoError(t, os.WriteFile(oapi, []byte("package: api\noutput: gen/api.gen.go\ngenerate: {models: true, client: true}\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "run: go generate (oapi-codegen -config "+oapi+", then idemgen generate -config "+cfg+")")
}

// TestCheckGeneratedStaleLine: the stale message quotes the first
// differing line as the file has it and as idemgen generates it (cut to
// 120 characters), and for a Go file whose generated header is intact
// asks whether it was edited by hand.
func TestCheckGeneratedStaleLine(t *testing.T) {
	dir, cfg := generateCoupons(t)
	server := filepath.Join(dir, "gen", "idempotency.gen.go")
	data, err := os.ReadFile(server)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	orig := lines[9] // an import
	require.True(t, strings.HasPrefix(orig, "\t\"") && strings.HasSuffix(orig, "\""), orig)
	lines[9] = orig + " // " + strings.Repeat("x", 200)
	require.NoError(t, os.WriteFile(server, []byte(strings.Join(lines, "\n")), 0o644))
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	has := strconv.Quote(lines[9][:120])
	assert.Contains(t, stderr, server+`:10:1: error: stale (differs from what idemgen generates from line 10 on: the file has `+has[:len(has)-1]+`…", idemgen generates `+strconv.Quote(orig)+`; its generated header is intact: edited by hand? (or generated before the contracts changed)) [generated-stale]`)

	// A header that differs: no hint; a file cut short: "nothing".
	require.NoError(t, os.WriteFile(server, []byte("// Code generated by someone else.\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, server+`:1:1: error: stale (differs from what idemgen generates from line 1 on: the file has "// Code generated by someone else.", idemgen generates "// Code generated by idemgen. DO NOT EDIT.") [generated-stale]`)
	lines = strings.Split(string(data), "\n")
	require.NoError(t, os.WriteFile(server, []byte(strings.Join(lines[:20], "\n")+"\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, server+`:21:1: error: stale (differs from what idemgen generates from line 21 on: the file has nothing (end of file), idemgen generates `)
	assert.Contains(t, stderr, "edited by hand?")

	// The spec behind its contracts [spec-stale] says why: no hint.
	spec, cfg2 := generatedThenStale(t, "package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true}\n", nil)
	code, _, stderr = run("check", "-generated", "-config", cfg2)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "[spec-stale]")
	assert.Contains(t, stderr, filepath.Join(filepath.Dir(spec), "gen", "idempotency.gen.go"))
	assert.NotContains(t, stderr, "edited by hand?")
}

// TestOapiCodegenBesideSkipped: an oapi-codegen.yaml beside idemgen.yaml
// that configures another package or output directory is not read, and
// check, check -generated and generate say so and why, rather than leave
// go build to fail later ("found packages api and apiv2").
func TestOapiCodegenBesideSkipped(t *testing.T) {
	dir, cfg := generateCoupons(t)
	oapi := filepath.Join(dir, "oapi-codegen.yaml")
	require.NoError(t, os.WriteFile(oapi, []byte("package: api\noutput: gen/api.gen.go\ngenerate: {models: true, client: true}\n"), 0o644))
	code, _, stderr := run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "not read")

	require.NoError(t, os.WriteFile(cfg, []byte("package: apiv2\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true, client: true}\n"), 0o644))
	for _, args := range [][]string{{"check", "-generated", "-config", cfg}, {"generate", "-config", cfg}, {"check", "-config", cfg}} {
		_, _, stderr = run(args...)
		assert.Contains(t, stderr, oapi+": warning: not read: its package: api is not package: apiv2 of idemgen's config", args)
	}

	require.NoError(t, os.WriteFile(cfg, []byte("package: api\noutput: gen2\nspec: openapi.yaml\ngenerate: {server: true, client: true}\n"), 0o644))
	_, _, stderr = run("generate", "-config", cfg)
	assert.Contains(t, stderr, oapi+": warning: not read: its output: gen/api.gen.go is not in idemgen's output directory "+filepath.Join(dir, "gen2"))
}

// TestLineTexts: a long line is quoted from a little before where it
// differs, so that the difference shows.
func TestLineTexts(t *testing.T) {
	long := strings.Repeat("a", 200)
	h, w := cli.LineTexts([]byte("x\n"+long+" edited\n"), []byte("x\n"+long+"\n"), 2)
	assert.Equal(t, `"…`+strings.Repeat("a", 30)+` edited"`, h)
	assert.Equal(t, `"…`+strings.Repeat("a", 30)+`"`, w)
	h, w = cli.LineTexts([]byte("b"+long+"\n"), []byte("c"+long+"\n"), 1)
	assert.Equal(t, `"b`+strings.Repeat("a", 119)+`…"`, h)
	assert.Equal(t, `"c`+strings.Repeat("a", 119)+`…"`, w)
	h, w = cli.LineTexts([]byte("x\n"), []byte("x\ny\n"), 2)
	assert.Equal(t, "nothing (end of file)", h)
	assert.Equal(t, `"y"`, w)
}

// TestCheckGeneratedQuotedMarker: a hand-written Markdown file that quotes
// the docs page's marker (in its text, in a code block, or without DO NOT
// EDIT in the same comment) is no generated file, so no orphan (it was an
// error [generated-orphaned] that could not be ignored); the page itself,
// its marker where the docs emitter writes it, still is.
func TestCheckGeneratedQuotedMarker(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	cfg := filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("package: api\noutput: gen\nspec: openapi.yaml\ngenerate: {server: true}\n"), 0o644))
	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	notes := map[string]string{
		"NOTES.md":  "# Notes\n\nIDEMPOTENCY.md starts with <!-- Generated by idemgen from openapi.yaml. DO NOT EDIT: ... -->, so leave it alone.\n",
		"BLOCK.md":  "# Notes\n\nThe docs page:\n\n```\n# Idempotency\n\n<!-- Generated by idemgen from openapi.yaml. DO NOT EDIT: change the contracts. -->\n```\n",
		"SPLIT.md":  "# Notes\n<!-- Generated by idemgen from openapi.yaml, or so it says -->\n\nDO NOT EDIT the generated files.\n",
		"README.md": "<!-- Generated by idemgen from openapi.yaml\n\nDO NOT EDIT -->\n",
	}
	for name, text := range notes {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "gen", name), []byte(text), 0o644))
	}
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "orphaned")

	// The page as the docs emitter writes it is still found.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gen", "OLD.md"), []byte("# Idempotency: Coupons 1.0.0\n\n<!-- Generated by idemgen from openapi.yaml. DO NOT EDIT: change the x-idempotency contracts and run idemgen generate. -->\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, filepath.Join(dir, "gen", "OLD.md")+":1:1: error: orphaned")
	for name := range notes {
		assert.NotContains(t, stderr, name)
	}
}

// TestCheckGeneratedOrphansMovedOutput: output: moved into a subdirectory
// of where it was (or out of one) leaves idemgen's files of the old
// output, from the same spec, in the directory above (or below) the new
// one: orphan errors. Below the output and above it (up to the config's
// directory), what is not idemgen's from this spec is not reported: other
// generators' files, the user's, another config's output, testdata.
func TestCheckGeneratedOrphansMovedOutput(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(augmentDir, "coupons", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	cfg := filepath.Join(dir, "idemgen.yaml")
	write := func(path, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	write(cfg, "package: api\noutput: api\nspec: openapi.yaml\ngenerate: {server: true, client: true, ir: true}\n")
	code, _, stderr := run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)

	// Into a subdirectory: the old files are in its parent.
	write(cfg, "package: server\noutput: api/server\nspec: openapi.yaml\ngenerate: {server: true, client: true, ir: true}\n")
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	for _, f := range []string{"idempotency.gen.go", "idempotency_client.gen.go", "idemgen.ir.json"} {
		assert.Contains(t, stderr, filepath.Join(dir, "api", f)+":1:1: error: orphaned")
		require.NoError(t, os.Remove(filepath.Join(dir, "api", f)))
	}
	assert.NotContains(t, stderr, filepath.Join(dir, "api", "server")+string(filepath.Separator))

	// Out of it again: the old files are below the output.
	write(cfg, "package: api\noutput: api\nspec: openapi.yaml\ngenerate: {server: true, client: true}\n")
	code, _, stderr = run("generate", "-config", cfg)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 1, code, stderr)
	for _, f := range []string{"idempotency.gen.go", "idempotency_client.gen.go", "idemgen.ir.json"} {
		assert.Contains(t, stderr, filepath.Join(dir, "api", "server", f)+":1:1: error: orphaned")
	}
	// The IR, whose emitter the config no longer enables, is an error
	// there too (a run without a config may have written it: it says so).
	assert.Contains(t, stderr, filepath.Join(dir, "api", "server", "idemgen.ir.json")+":1:1: error: orphaned: generated by idemgen from openapi.yaml by an emitter "+cfg+" does not enable")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "api", "server")))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	require.Equal(t, 0, code, stderr)

	// Not orphans: another generator's file and a user's file below the
	// output; the output of another config (from the same spec) below it;
	// idemgen's files in testdata; a hidden directory.
	write(filepath.Join(dir, "api", "models", "models.gen.go"), "// Code generated by github.com/oapi-codegen/oapi-codegen/v2 version v2.4.1 DO NOT EDIT.\npackage models\n")
	write(filepath.Join(dir, "api", "util", "util.go"), "// Code generated by hand, of idemgen.\npackage util\n")
	admin := filepath.Join(dir, "api", "admin", "idemgen.yaml")
	write(admin, "package: admin\noutput: .\nspec: ../../openapi.yaml\ngenerate: {server: true}\n")
	code, _, stderr = run("generate", "-config", admin)
	require.Equal(t, 0, code, stderr)
	for _, d := range []string{"testdata", ".cache"} {
		data, err := os.ReadFile(filepath.Join(dir, "api", "idempotency.gen.go"))
		require.NoError(t, err)
		write(filepath.Join(dir, "api", d, "idempotency.gen.go"), strings.Replace(string(data), "// Source: ../openapi.yaml", "// Source: ../../openapi.yaml", 1))
	}
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "orphaned", stderr)

	// A client generated without a config (docs/client.md) into a
	// subdirectory of the output, from the same spec: not the old output
	// (the server's file is not beside it), so at most a warning, and none
	// when the config does not generate a client.
	clientDir := filepath.Join(dir, "api", "client")
	code, _, stderr = run("generate", "-emit", "client", "-package", "client", "-o", clientDir, filepath.Join(dir, "openapi.yaml"))
	require.Equal(t, 0, code, stderr)
	clientFile := filepath.Join(clientDir, "idempotency_client.gen.go")
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, clientFile+":1:1: warning: ", stderr)
	assert.NotContains(t, stderr, ": error: ", stderr)
	write(cfg, "package: api\noutput: api\nspec: openapi.yaml\ngenerate: {server: true}\n")
	require.NoError(t, os.Remove(filepath.Join(dir, "api", "idempotency_client.gen.go")))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "orphaned", stderr)
}
