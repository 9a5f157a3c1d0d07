package naming

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// FromOapiCodegenConfig returns the Namer of an oapi-codegen configuration
// file (its output-options name-normalizer and additional-initialisms). It
// refuses the output options that rename what idemgen refers to in ways a
// Namer does not follow: resolve-type-name-collisions, a
// response-type-suffix other than Response, and type-mapping (which changes
// the types of parameters). Other options (which operations or schemas are
// generated, the client's type name) do not change the names idemgen
// derives.
func FromOapiCodegenConfig(data []byte) (Namer, error) {
	var cfg struct {
		OutputOptions codegen.OutputOptions `yaml:"output-options"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Namer{}, err
	}
	o := cfg.OutputOptions
	switch {
	case o.ResolveTypeNameCollisions:
		return Namer{}, fmt.Errorf("output-options.resolve-type-name-collisions: idemgen cannot follow the names it gives; remove it")
	case o.ResponseTypeSuffix != "" && o.ResponseTypeSuffix != "Response":
		return Namer{}, fmt.Errorf("output-options.response-type-suffix %q: idemgen's client helpers refer to <Op>Response; remove it", o.ResponseTypeSuffix)
	case o.TypeMapping != nil:
		return Namer{}, fmt.Errorf("output-options.type-mapping: idemgen restates oapi-codegen's default type mapping for parameters; remove it")
	}
	n, err := New(o.NameNormalizer, o.AdditionalInitialisms)
	if err != nil {
		return Namer{}, fmt.Errorf("output-options.%w", err)
	}
	return n, nil
}
