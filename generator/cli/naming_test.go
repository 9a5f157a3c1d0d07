package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/internal/gentest"
)

// TestNameNormalizerBuilds generates testdata/naming/initialisms with
// oapi-codegen under its own config file (name-normalizer
// ToCamelCaseWithInitialisms, additional-initialisms) and with idemgen
// generate -config, whose idemgen.yaml names that file
// (oapi-codegen-config:), then builds both together: idemgen's wrappers and
// client helpers must refer to oapi-codegen's names (CreateOrderRefundByIDParams,
// not CreateOrderRefundByIdParams).
func TestNameNormalizerBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	dir := filepath.Join(gentest.RepoRoot(t), "testdata", "naming", "initialisms")
	data, err := os.ReadFile(filepath.Join(dir, "oapi-codegen.yaml"))
	require.NoError(t, err)
	var cfg codegen.Configuration
	require.NoError(t, yaml.Unmarshal(data, &cfg))
	require.Equal(t, "ToCamelCaseWithInitialisms", cfg.OutputOptions.NameNormalizer)
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(dir, "openapi.yaml"))
	require.NoError(t, err)
	code, err := codegen.Generate(doc, cfg)
	require.NoError(t, err)
	require.Contains(t, code, "CreateOrderRefundByIDParams")
	require.Contains(t, code, "PostAPIUserIDShortUrls")
	require.Contains(t, code, "CreateJSONImportV2X")

	m := gentest.NewModule(t, "example.com/initialisms")
	m.Write(t, "api/api.gen.go", []byte(code))
	c, _, stderr := run("generate", "-config", filepath.Join(dir, "idemgen.yaml"), "-o", filepath.Join(m.Dir, "api"))
	require.Equal(t, 0, c, stderr)
	m.Go(t, "build", "./...")
	m.Go(t, "vet", "./...")
}

func TestNameNormalizerConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	spec := filepath.Join("..", "..", "testdata", "naming", "initialisms", "openapi.yaml")
	spec, _ = filepath.Abs(spec)
	ir := func(cfg string) (int, string, string) {
		return run("generate", "-config", write("idemgen.yaml", "spec: "+spec+"\ngenerate: {ir: true}\n"+cfg), "-o", "-")
	}
	c, out, stderr := ir("name-normalizer: ToCamelCaseWithInitialisms\n")
	require.Equal(t, 0, c, stderr)
	assert.Contains(t, out, `"CreateOrderRefundByIDParams"`)
	c, out, stderr = ir("")
	require.Equal(t, 0, c, stderr)
	assert.Contains(t, out, `"CreateOrderRefundByIdParams"`)

	for _, tt := range []struct{ cfg, oapi, want string }{
		{"name-normalizer: ToSnakeCase\n", "", `name-normalizer "ToSnakeCase": oapi-codegen knows ToCamelCase, ToCamelCaseWithDigits, ToCamelCaseWithInitialisms`},
		{"oapi-codegen-config: oapi.yaml\n", "output-options: {resolve-type-name-collisions: true}\n", "output-options.resolve-type-name-collisions"},
		{"oapi-codegen-config: oapi.yaml\n", "output-options: {response-type-suffix: Resp}\n", `output-options.response-type-suffix "Resp"`},
		{"oapi-codegen-config: oapi.yaml\n", "output-options: {type-mapping: {string: {default: {type: MyString}}}}\n", "output-options.type-mapping"},
		{"oapi-codegen-config: oapi.yaml\n", "output-options: {additional-initialisms: [ABC]}\n", "output-options.additional-initialisms goes with name-normalizer ToCamelCaseWithInitialisms only"},
		{"oapi-codegen-config: oapi.yaml\nname-normalizer: ToCamelCaseWithDigits\n", "output-options: {name-normalizer: ToCamelCaseWithInitialisms}\n", `name-normalizer "ToCamelCaseWithDigits" disagrees with oapi-codegen-config`},
		{"oapi-codegen-config: missing.yaml\n", "", "oapi-codegen-config: open"},
	} {
		write("oapi.yaml", tt.oapi)
		c, _, stderr := ir(tt.cfg)
		assert.Equal(t, 2, c, tt.cfg)
		assert.Contains(t, stderr, tt.want, tt.cfg)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	}
	// A file idemgen cannot decode: the error names it, whichever section
	// (output-options: for the namer, generate: for the server) is wrong.
	for _, oapi := range []string{"output-options: [\n", "output-options: {name-normalizer: [x]}\n", "generate: {chi-server: [x]}\n"} {
		write("oapi.yaml", oapi)
		c, _, stderr := ir("oapi-codegen-config: oapi.yaml\n")
		assert.Equal(t, 2, c, oapi)
		assert.Contains(t, stderr, "oapi.yaml: yaml: ", oapi)
	}
	write("oapi.yaml", "package: api\noutput-options: {name-normalizer: ToCamelCaseWithInitialisms, additional-initialisms: [V2X]}\n")
	c, out, stderr = ir("oapi-codegen-config: oapi.yaml\n")
	require.Equal(t, 0, c, stderr)
	assert.Contains(t, out, `"CreateJSONImportV2X"`)
}

// TestCheckNaming: idemgen check SPEC names Go types as generate would
// with the spec's config: the -config file's name-normalizer, or without
// -config the idemgen.yaml beside SPEC (unless its spec: is another file).
// Under ToCamelCaseWithInitialisms, createUserId and createUserID are both
// CreateUserID: a collision the default normalizer does not see.
func TestCheckNaming(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	spec := write("openapi.yaml", `openapi: 3.0.3
info: {title: T, version: "1"}
paths:
  /a:
    post:
      operationId: createUserId
      x-idempotency: {semantics: strict, window: 24h, key: {header: Idempotency-Key}}
      responses: {'201': {description: created}}
  /b:
    post:
      operationId: createUserID
      x-idempotency: {semantics: strict, window: 24h, key: {header: Idempotency-Key}}
      responses: {'201': {description: created}}
`)
	write("other.yaml", "openapi: 3.0.3\ninfo: {title: T, version: '1'}\npaths: {}\n")
	initialisms := write("conf/initialisms.yaml", "name-normalizer: ToCamelCaseWithInitialisms\n")
	plain := write("conf/plain.yaml", "name-normalizer: ToCamelCase\n")
	withSpec := write("conf/with-spec.yaml", "spec: ../openapi.yaml\nname-normalizer: ToCamelCaseWithInitialisms\n")
	collision := "go-name-collision"

	c, _, stderr := run("check", spec)
	require.Equal(t, 0, c, stderr)
	assert.NotContains(t, stderr, "Go names as")

	c, _, stderr = run("check", "-config", initialisms, spec)
	assert.Equal(t, 1, c, stderr)
	assert.Contains(t, stderr, collision)
	c, _, stderr = run("check", "-config", withSpec) // the config's spec
	assert.Equal(t, 1, c, stderr)
	assert.Contains(t, stderr, collision)

	beside := write("idemgen.yaml", "name-normalizer: ToCamelCaseWithInitialisms\n")
	c, _, stderr = run("check", spec)
	assert.Equal(t, 1, c, stderr)
	assert.Contains(t, stderr, collision)
	c, _, stderr = run("check", "-config", plain, spec) // -config, not the file beside
	assert.Equal(t, 0, c, stderr)
	assert.Contains(t, stderr, "(Go names as "+plain+" sets them)")

	write("idemgen.yaml", "spec: openapi.yaml\noapi-codegen-config: conf/oapi.yaml\n")
	write("conf/oapi.yaml", "output-options: {name-normalizer: ToCamelCaseWithInitialisms}\n")
	c, _, stderr = run("check", spec)
	assert.Equal(t, 1, c, stderr)
	assert.Contains(t, stderr, collision)

	write("idemgen.yaml", "spec: other.yaml\nname-normalizer: ToCamelCaseWithInitialisms\n")
	c, _, stderr = run("check", spec) // another spec's config
	assert.Equal(t, 0, c, stderr)

	write("idemgen.yaml", "name-normalizer: ToSnakeCase\n")
	c, _, stderr = run("check", spec)
	assert.Equal(t, 2, c, stderr)
	assert.Contains(t, stderr, beside)
	assert.Contains(t, stderr, `name-normalizer "ToSnakeCase"`)
}
