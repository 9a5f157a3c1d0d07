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
	write("oapi.yaml", "package: api\noutput-options: {name-normalizer: ToCamelCaseWithInitialisms, additional-initialisms: [V2X]}\n")
	c, out, stderr = ir("oapi-codegen-config: oapi.yaml\n")
	require.Equal(t, 0, c, stderr)
	assert.Contains(t, out, `"CreateJSONImportV2X"`)
}
