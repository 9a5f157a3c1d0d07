package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/ir"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = cli.Main(args, &o, &e)
	return code, o.String(), e.String()
}

func contractCase(name string) string {
	return filepath.Join("..", "..", "testdata", "contract", name, "openapi.yaml")
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string // in stderr
	}{
		{"no args", nil, 2, "Usage:"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"check clean", []string{"check", filepath.Join("..", "..", "testdata", "augment", "coupons", "augmented.yaml")}, 0, "4 idempotent operations, 0 warnings"},
		{"check spec warnings", []string{"check", contractCase("clean-full")}, 0, "[problem-response-missing]"},
		{"check strict", []string{"check", "-strict", contractCase("clean-full")}, 1, "error: POST /coupons/{couponId}/claims does not declare the problem responses"},
		{"check missing config", []string{"check", "-config", "x.yaml", "a"}, 2, "open x.yaml"},
		{"check generated no config", []string{"check", "-generated", "-config", "no/such/idemgen.yaml"}, 2, "no such file"},
		{"spec no spec", []string{"spec"}, 2, "want exactly one SPEC"},
		{"spec errors", []string{"spec", contractCase("bad-enum")}, 1, "[bad-enum]"},
		{"init no spec", []string{"init"}, 2, "want exactly one SPEC"},
		{"init nothing to propose", []string{"init", contractCase("clean-full")}, 0, "nothing to propose"},
		{"check warnings only", []string{"check", contractCase("put-delete")}, 0, "[put-delete]"},
		{"check errors", []string{"check", contractCase("seed-pitfalls")}, 1, "[window-shorter-than-retry]"},
		{"check missing file", []string{"check", "no/such/file.yaml"}, 1, "[load-error]"},
		{"check no spec", []string{"check"}, 2, "want exactly one SPEC"},
		{"check two specs", []string{"check", "a", "b"}, 2, "want exactly one SPEC"},
		{"check bad flag", []string{"check", "-nope", "a"}, 2, "flag provided but not defined"},
		{"check bad format", []string{"check", "-format", "xml", "a"}, 2, "-format must be text or json"},
		{"spec bad format", []string{"spec", "-format", "xml", "a"}, 2, "idemgen spec: -format must be text or json"},
		{"generate bad format", []string{"generate", "-format", "xml", "-emit", "ir", "a"}, 2, "idemgen generate: -format must be text or json"},
		{"generate no emitter", []string{"generate", contractCase("clean-full")}, 2, "at least one emitter"},
		{"generate unknown emitter", []string{"generate", "-emit", "cobol", contractCase("clean-full")}, 2, `no emitter "cobol"`},
		{"generate errors", []string{"generate", "-emit", "ir", "-o", "-", contractCase("bad-enum")}, 1, "[bad-enum]"},
		{"version", []string{"version"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(tt.args...)
			assert.Equal(t, tt.code, code, stderr)
			assert.Contains(t, stderr, tt.out)
		})
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range [][]string{{"-h"}, {"check", "-h"}, {"generate", "-h"}, {"spec", "-h"}, {"init", "-h"}, {"version", "-h"}} {
		code, stdout, stderr := run(cmd...)
		assert.Equal(t, 0, code, cmd)
		assert.Contains(t, stdout, "Usage", cmd)
		assert.Equal(t, 1, strings.Count(stdout, "Usage:"), "once: %v", cmd)
		assert.Empty(t, stderr, "the usage on stdout only: %v", cmd)
		if len(cmd) > 1 {
			assert.Contains(t, stdout, "Examples:", cmd)
		}
		// The binary's users have no checkout of idemgen: documentation
		// by URL, not by a path in its repository.
		assert.NotRegexp(t, `(^|[^/])docs/[a-z-]+\.md`, stdout, cmd)
	}
}

// TestHelpCommand: idemgen help COMMAND prints what idemgen COMMAND -h
// does, on stdout, and exits 0.
func TestHelpCommand(t *testing.T) {
	for _, cmd := range cli.CommandNames() {
		code, stdout, stderr := run("help", cmd)
		assert.Equal(t, 0, code, "%s: %s", cmd, stderr)
		assert.Empty(t, stderr, cmd)
		_, want, _ := run(cmd, "-h")
		assert.Equal(t, want, stdout, cmd)
		assert.Contains(t, stdout, "Examples:", cmd)
	}
}

// TestSynopses: each command's -h, the package documentation and the
// command lists of docs/contract.md and README.md show the same synopses.
func TestSynopses(t *testing.T) {
	var help []string
	for _, cmd := range cli.CommandNames() {
		code, stdout, _ := run(cmd, "-h")
		require.Equal(t, 0, code, cmd)
		usage, _, ok := strings.Cut(stdout, "\n\nFlags:")
		require.True(t, ok, stdout)
		for _, l := range strings.Split(strings.TrimPrefix(usage, "Usage: "), "\n") {
			help = append(help, strings.TrimSpace(l))
		}
	}
	for _, doc := range []string{filepath.Join("docs", "contract.md"), "README.md"} {
		data, err := os.ReadFile(filepath.Join("..", "..", doc))
		require.NoError(t, err)
		_, list, ok := strings.Cut(string(data), "## Commands\n\n```\n")
		require.True(t, ok, "%s has a ## Commands block", doc)
		list, _, _ = strings.Cut(list, "```")
		assert.Equal(t, strings.Split(strings.TrimSpace(list), "\n"), help, doc)
	}

	src, err := os.ReadFile("cli.go")
	require.NoError(t, err)
	for _, l := range help {
		assert.Contains(t, string(src), "\n//\t"+l+"\n", "package documentation")
	}
}

func TestCheckFlagsAfterSpec(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "contract", "overlay-positions")
	code, _, stderr := run("check", filepath.Join(dir, "openapi.yaml"), "-overlay", filepath.Join(dir, "a.overlay.yaml"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "a.overlay.yaml:13:34: error: retry.on: 400")
}

func TestCheckJSON(t *testing.T) {
	code, stdout, _ := run("check", "-format", "json", contractCase("seed-pitfalls"))
	assert.Equal(t, 1, code)
	var diags []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &diags))
	require.NotEmpty(t, diags)
	rules := map[string]bool{}
	for _, d := range diags {
		rules[d["rule"].(string)] = true
		assert.NotZero(t, d["line"])
	}
	for _, r := range []string{"semantics-missing", "business-key", "volatile-candidate", "unordered-candidate", "window-shorter-than-retry", "retry-on-client-error", "safe-method", "put-delete"} {
		assert.True(t, rules[r], r)
	}
}

func TestGenerateIR(t *testing.T) {
	out := t.TempDir()
	code, _, stderr := run("generate", "-emit", "ir", "-o", out, contractCase("clean-full"))
	require.Equal(t, 0, code, stderr)
	data, err := os.ReadFile(filepath.Join(out, emitter.IRFile))
	require.NoError(t, err)
	var spec ir.Spec
	require.NoError(t, json.Unmarshal(data, &spec))
	require.Len(t, spec.Operations, 1)
	assert.Equal(t, "ClaimCoupon", spec.Operations[0].GoName)

	// Nothing is written when the spec has errors.
	out2 := t.TempDir()
	code, _, _ = run("generate", "-emit", "ir", "-o", out2, contractCase("bad-enum"))
	assert.Equal(t, 1, code)
	entries, _ := os.ReadDir(out2)
	assert.Empty(t, entries)
}

func TestGenerateConfig(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(contractCase("clean-full"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "openapi.yaml"), src, 0o644))
	cfg := "package: api\noutput: gen\nspec: openapi.yaml\ngenerate:\n  ir: true\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "idemgen.yaml"), []byte(cfg), 0o644))
	code, _, stderr := run("generate", "-config", filepath.Join(dir, "idemgen.yaml"))
	require.Equal(t, 0, code, stderr)
	_, err = os.Stat(filepath.Join(dir, "gen", emitter.IRFile))
	assert.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("pakage: api\n"), 0o644))
	code, _, stderr = run("generate", "-config", filepath.Join(dir, "bad.yaml"))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "pakage")
}

func TestGenerateStdout(t *testing.T) {
	code, stdout, stderr := run("generate", "-emit", "ir", "-o", "-", contractCase("clean-minimal"))
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "{"))
	assert.Contains(t, stdout, `"goName": "ClaimCoupon"`)
}

// TestGenerateStdoutOneEmitter: -o - with several emitters would
// concatenate Go, Markdown and JSON: a usage error.
func TestGenerateStdoutOneEmitter(t *testing.T) {
	code, stdout, stderr := run("generate", "-emit", "ir", "-emit", "docs", "-o", "-", contractCase("clean-minimal"))
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "-o - writes one output to stdout, and 2 emitters are selected (ir, docs)")

	dir := t.TempDir()
	spec, err := filepath.Abs(contractCase("clean-minimal"))
	require.NoError(t, err)
	cfg := filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("spec: "+spec+"\ngenerate: {ir: true, docs: true}\n"), 0o644))
	code, stdout, stderr = run("generate", "-config", cfg, "-o", "-")
	assert.Equal(t, 2, code, stderr)
	assert.Empty(t, stdout)
	code, stdout, stderr = run("generate", "-config", cfg, "-emit", "docs", "-o", "-")
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "#"), stdout[:min(len(stdout), 80)])
}

// TestGenerateRepeatedEmit: an emitter named twice runs once, to stdout
// as to a directory (it would otherwise produce its file twice).
func TestGenerateRepeatedEmit(t *testing.T) {
	spec := contractCase("clean-minimal")
	code, stdout, stderr := run("generate", "-emit", "ir", "-emit", "ir", "-o", "-", spec)
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "{"), stdout[:min(len(stdout), 80)])

	out := t.TempDir()
	code, _, stderr = run("generate", "-emit", "ir", "-emit", "ir", "-o", out, spec)
	require.Equal(t, 0, code, stderr)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, entries, 1)

	code, stdout, stderr = run("generate", "-emit", "ir", "-emit", "docs", "-emit", "ir", "-o", "-", spec)
	assert.Equal(t, 2, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "2 emitters are selected (ir, docs)")
}

func TestVersion(t *testing.T) {
	code, stdout, _ := run("version")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(stdout, "idemgen "), stdout)
	assert.NotEmpty(t, cli.Version())
}

// TestExtraArguments: arguments a command does not take are usage errors.
func TestExtraArguments(t *testing.T) {
	spec := contractCase("clean-minimal")
	for _, args := range [][]string{
		{"version", "extra"},
		{"help", "extra"},
		{"check", spec, "extra"},
		{"spec", spec, "extra"},
		{"init", spec, "extra"},
		{"generate", "-emit", "ir", "-o", "-", spec, "extra"},
	} {
		code, stdout, stderr := run(args...)
		assert.Equal(t, 2, code, "%v: %s", args, stderr)
		assert.Empty(t, stdout, "%v", args)
	}
}

func TestGenerateStdoutKeepsDiagnosticsOff(t *testing.T) {
	// With -o -, stdout is the generated output alone: warnings, in JSON
	// too, go to stderr.
	code, stdout, stderr := run("generate", "-emit", "ir", "-o", "-", "-format", "json", contractCase("business-key"))
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "{"), stdout)
	var ir map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &ir), "stdout is one JSON document")
	assert.Contains(t, stderr, `"severity": "warning"`)
}

// TestUnknownOptions: emitter settings no emitter reads, from -option or
// from options: in the config file, and -option without =, are usage
// errors naming the known settings, for generate and check -generated.
func TestUnknownOptions(t *testing.T) {
	spec := contractCase("clean-minimal")
	known := emitter.OptionNames()
	require.Contains(t, known, "server.strict")
	for _, tc := range []struct{ option, want string }{
		{"server.bogus=1", `unknown option "server.bogus" (known: ` + strings.Join(known, ", ") + ")"},
		{"docs.x=1", `unknown option "docs.x"`},
		{"noequals", "-option noequals: want NAME=VALUE"},
	} {
		out := t.TempDir()
		code, _, stderr := run("generate", "-emit", "ir", "-option", tc.option, "-o", out, spec)
		assert.Equal(t, 2, code, tc.option)
		assert.Contains(t, stderr, tc.want, tc.option)
		entries, _ := os.ReadDir(out)
		assert.Empty(t, entries, tc.option)
	}
	code, _, stderr := run("generate", "-emit", "server", "-option", "server.strict=false", "-o", t.TempDir(), spec)
	assert.Equal(t, 0, code, stderr)

	dir := t.TempDir()
	src, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "openapi.yaml"), src, 0o644))
	cfg := filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("spec: openapi.yaml\ngenerate: {server: true}\noptions: {server.stict: \"false\"}\n"), 0o644))
	for _, args := range [][]string{{"generate", "-config", cfg}, {"check", "-generated", "-config", cfg}} {
		code, _, stderr := run(args...)
		assert.Equal(t, 2, code, args)
		assert.Contains(t, stderr, `unknown option "server.stict"`, args)
	}
}

// TestBadPackage: a -package (or package:) that is not a Go identifier is
// a short usage error, not the unformatted file in a gofmt error.
func TestBadPackage(t *testing.T) {
	spec := contractCase("clean-minimal")
	for _, pkg := range []string{"1bad", "type", "my-pkg", "_"} {
		code, _, stderr := run("generate", "-emit", "server", "-package", pkg, "-o", t.TempDir(), spec)
		assert.Equal(t, 2, code, pkg)
		assert.Contains(t, stderr, "package \""+pkg+"\" is not a valid Go package name", pkg)
		assert.Less(t, len(stderr), 2000, "%s: %s", pkg, stderr)
	}
	code, _, stderr := run("generate", "-emit", "server", "-package", "api_v2", "-o", t.TempDir(), spec)
	assert.Equal(t, 0, code, stderr)

	dir := t.TempDir()
	src, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "openapi.yaml"), src, 0o644))
	cfg := filepath.Join(dir, "idemgen.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("package: my-pkg\nspec: openapi.yaml\ngenerate: {client: true}\n"), 0o644))
	code, _, stderr = run("check", "-generated", "-config", cfg)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, `package "my-pkg" is not a valid Go package name`)
}

// TestUsageErrorsAreShort: a usage error prints the error, the command's
// synopsis and how to get help, not the whole help that buries the error.
func TestUsageErrorsAreShort(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string // stderr, line by line
	}{
		{[]string{"check"}, []string{
			"idemgen check: want exactly one SPEC file (or a -config that names one)",
			"Usage: " + cli.CheckSynopsis,
			"       " + cli.CheckGeneratedSynopsis,
			"Run 'idemgen check -h' for help.",
		}},
		{[]string{"check", "-bogus", "x.yaml"}, []string{
			"idemgen check: flag provided but not defined: -bogus",
			"Usage: " + cli.CheckSynopsis,
			"       " + cli.CheckGeneratedSynopsis,
			"Run 'idemgen check -h' for help.",
		}},
		{[]string{"bogus"}, []string{
			`idemgen: unknown command "bogus"`,
			"Usage: idemgen COMMAND [flags] [SPEC] (commands: init, check, spec, generate, version)",
			"Run 'idemgen -h' for help.",
		}},
		{[]string{"help", "bogus"}, []string{
			`idemgen help: unknown command "bogus"`,
			"Usage: idemgen help [COMMAND] (commands: init, check, spec, generate, version)",
			"Run 'idemgen -h' for help.",
		}},
		{[]string{"help", "check", "extra"}, []string{
			`idemgen help: takes one COMMAND, got ["check" "extra"]`,
			"Usage: idemgen help [COMMAND] (commands: init, check, spec, generate, version)",
			"Run 'idemgen -h' for help.",
		}},
		{[]string{"version", "extra"}, []string{
			`idemgen version: takes no arguments, got ["extra"]`,
			"Usage: " + cli.VersionSynopsis,
			"Run 'idemgen version -h' for help.",
		}},
		{[]string{"spec"}, []string{"idemgen spec: want exactly one SPEC file", "Usage: " + cli.SpecSynopsis, "Run 'idemgen spec -h' for help."}},
		{[]string{"init", "-x"}, []string{"idemgen init: flag provided but not defined: -x", "Usage: " + cli.InitSynopsis, "Run 'idemgen init -h' for help."}},
		{[]string{"generate", "-format", "xml", "a"}, []string{`idemgen generate: -format must be text or json, not "xml"`, "Usage: " + cli.GenerateSynopsis, "Run 'idemgen generate -h' for help."}},
	} {
		code, stdout, stderr := run(tt.args...)
		assert.Equal(t, 2, code, "%v", tt.args)
		assert.Empty(t, stdout, "%v", tt.args)
		assert.Equal(t, strings.Join(tt.want, "\n")+"\n", stderr, "%v", tt.args)
	}
}
