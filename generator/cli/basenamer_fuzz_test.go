package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzBaseNamer feeds -base-config's reader (baseNamer) arbitrary files:
// it returns a naming or an error naming the file, and never panics. Seeds:
// an oapi-codegen configuration, an idemgen.yaml with a name normalizer,
// one naming none, one whose oapi-codegen-config is relative, and broken
// YAML.
func FuzzBaseNamer(f *testing.F) {
	for _, s := range []string{
		"package: api\noutput: api.gen.go\noutput-options:\n  name-normalizer: ToCamelCaseWithInitialisms\n  additional-initialisms: [KEYS]\n",
		"package: api\noutput: api\nname-normalizer: ToCamelCase\n",
		"package: api\noutput: api\n",
		"oapi-codegen-config: oapi-codegen.yaml\n",
		"generate:\n  chi-server: true\n",
		"generate: [1, 2]\noutput: 3\n",
		"name-normalizer: [x]\n",
		"output-options: {additional-initialisms: {a: b}}\n",
		"a: [\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), []byte("output-options:\n  name-normalizer: ToCamelCaseWithDigits\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, "base.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := baseNamer(path); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("the error does not name the file given: %v", err)
		}
	})
}
