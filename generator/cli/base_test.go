package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckBaseFlags: -base takes no -generated, -base-overlay and
// -base-config need -base (and a -base-config that can be read), a base spec with errors fails the check, and a rollout warning is
// silenced as any warning.
func TestCheckBaseFlags(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "check", "base-scope-key")
	spec, base := filepath.Join(dir, "openapi.yaml"), filepath.Join(dir, "base.yaml")

	code, _, stderr := run("check", "-generated", "-base", base, spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "-base compares two specs: not with -generated")
	code, _, stderr = run("check", "-base-overlay", base, spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "-base-overlay applies to the spec -base names")
	code, _, stderr = run("check", "-base-config", base, spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "-base-config names the Go identifiers of the spec -base names")
	code, _, stderr = run("check", "-base", base, "-base-config", filepath.Join(dir, "missing.yaml"), spec)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "idemgen check: -base-config ")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths:\n  /a:\n    post:\n      x-idempotency: {semantics: nope}\n      responses: {'200': {description: ok}}\n"), 0o644))
	code, _, stderr = run("check", "-base", bad, spec)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "idemgen check: -base "+bad+": "+bad+":6:34: error: semantics")

	code, _, stderr = run("check", "-base", base, spec)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "[rollout-scope]")
	code, _, stderr = run("check", "-base", base, "-ignore", "rollout-scope:POST /payments", spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "[rollout-scope]")
	assert.Contains(t, stderr, "[rollout-key-moved]")

	// A spec compared with itself: nothing.
	code, _, stderr = run("check", "-base", spec, spec)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "[rollout-")
}

// TestCheckBaseConfigFiles: what -base-config reads of the last release's
// configuration. OLD_SPEC (base.yaml) was named under
// ToCamelCaseWithInitialisms (PostAPIUserIDKeys), SPEC is named under the
// default (PostApiUserIdKeys). Only the naming is read, leniently (a key
// that names nothing, or one this version dropped, is not refused); an
// idemgen.yaml that names no naming, or whose relative
// oapi-codegen-config is not beside it, is refused with what to pass
// instead; an error names the file given.
func TestCheckBaseConfigFiles(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "check", "base-name-normalizer-oapi")
	spec, base := filepath.Join(dir, "openapi.yaml"), filepath.Join(dir, "base.yaml")
	tmp := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	initialisms := write("release/oapi-codegen.yaml", "package: api\noutput: api/api.gen.go\ngenerate: {chi-server: true, strict-server: true}\noutput-options: {name-normalizer: ToCamelCaseWithInitialisms}\n")
	const renamed = "[rollout-operation-renamed]"
	const pass = "pass the last release's oapi-codegen configuration as -base-config"
	for _, tt := range []struct {
		name, file, text string
		code             int
		want, not        []string
	}{
		{name: "relative oapi-codegen-config beside the file", file: "release/idemgen.yaml", text: "package: api\noapi-codegen-config: oapi-codegen.yaml\n",
			want: []string{renamed, "now that the name normalizer changed from ToCamelCaseWithInitialisms to ToCamelCase:", "/base.yaml's as -base-config " + filepath.Join(tmp, "release", "idemgen.yaml") + " sets them, name-normalizer ToCamelCaseWithInitialisms)"}},
		{name: "absolute oapi-codegen-config", file: "abs/idemgen.yaml", text: "oapi-codegen-config: " + initialisms + "\n", want: []string{renamed}},
		{name: "relative oapi-codegen-config not there", file: "copy/idemgen.yaml", text: "package: api\noapi-codegen-config: oapi-codegen.yaml\n", code: 2,
			want: []string{"oapi-codegen-config oapi-codegen.yaml is read relative to the file's directory, and " + filepath.Join(tmp, "copy", "oapi-codegen.yaml") + " is not there", pass}},
		{name: "idemgen.yaml without naming, beside an oapi-codegen.yaml", file: "release/idemgen-plain.yaml", text: "package: api\noutput: api\nignore: [{rule: put-delete, reason: x}]\n", code: 2,
			want: []string{"names no naming (no name-normalizer:, no oapi-codegen-config:)", pass}, not: []string{renamed}},
		{name: "empty", file: "empty.yaml", code: 2, want: []string{"names no naming"}},
		{name: "idemgen.yaml with a dropped key", file: "old/idemgen.yaml", text: "name-normalizer: ToCamelCaseWithInitialisms\nsome-dropped-setting: true\n", want: []string{renamed}},
		{name: "idemgen.yaml and its oapi-codegen-config disagree", file: "release/idemgen-both.yaml", text: "name-normalizer: ToCamelCaseWithDigits\noapi-codegen-config: oapi-codegen.yaml\n", code: 2,
			want: []string{`name-normalizer "ToCamelCaseWithDigits" disagrees with oapi-codegen-config`}},
		{name: "minimal oapi-codegen config, no output-options", file: "min.oapi.yaml", text: "package: api\noutput: api/api.gen.go\n",
			want: []string{"sets them, name-normalizer ToCamelCase)"}, not: []string{renamed}},
		{name: "oapi-codegen config with generate only", file: "gen.oapi.yaml", text: "package: api\ngenerate: {models: true, std-http-server: true}\n",
			want: []string{"sets them, name-normalizer ToCamelCase)"}, not: []string{renamed}},
		{name: "oapi-codegen config with options that name nothing", file: "tm.yaml", text: "package: api\noutput-options:\n  type-mapping: {string: {type: string}}\n  resolve-type-name-collisions: true\n  name-normalizer: ToCamelCaseWithInitialisms\n",
			want: []string{renamed}},
		{name: "additional-initialisms only", file: "ai.yaml", text: "output-options: {name-normalizer: ToCamelCaseWithInitialisms, additional-initialisms: [KEYS]}\n",
			want: []string{"now that the name normalizer changed from ToCamelCaseWithInitialisms to ToCamelCase and additional-initialisms changed from [KEYS] to []:"}},
		{name: "not YAML", file: "broken.yaml", text: "output-options: {name-normalizer: [a}\n", code: 2, want: []string{"idemgen check: -base-config " + filepath.Join(tmp, "broken.yaml") + ": yaml: "}},
		{name: "a value of the wrong type", file: "broken2.yaml", text: "output-options:\n  name-normalizer: [x]\n", code: 2,
			want: []string{"idemgen check: -base-config " + filepath.Join(tmp, "broken2.yaml") + ": yaml: unmarshal errors:\n  line 2: cannot unmarshal"}, not: []string{"-base-config oapi-codegen-config"}},
		{name: "unknown normalizer", file: "typo.yaml", text: "output-options: {name-normalizer: ToCamelCaseWithInitialism}\n", code: 2,
			want: []string{"idemgen check: -base-config " + filepath.Join(tmp, "typo.yaml") + `: output-options.name-normalizer "ToCamelCaseWithInitialism": oapi-codegen knows`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(tmp, tt.file)
			if _, err := os.Stat(p); err != nil {
				p = write(tt.file, tt.text)
			}
			code, _, stderr := run("check", "-base", base, "-base-config", p, spec)
			assert.Equal(t, tt.code, code, stderr)
			for _, w := range tt.want {
				assert.Contains(t, stderr, w)
			}
			for _, w := range tt.not {
				assert.NotContains(t, stderr, w)
			}
		})
	}
}
