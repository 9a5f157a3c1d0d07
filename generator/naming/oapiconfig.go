package naming

import (
	"fmt"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// FromOutputOptions returns the Namer of an oapi-codegen configuration
// file's output-options (its name-normalizer and additional-initialisms). It
// refuses the output options that rename what idemgen refers to in ways a
// Namer does not follow: resolve-type-name-collisions, a
// response-type-suffix other than Response, and type-mapping (which changes
// the types of parameters). prefer-skip-optional-pointer, which makes
// optional parameters plain values, is recorded in the Namer
// (PreferSkipOptionalPointer). Other options do not change the names idemgen
// derives: the operations oapi-codegen leaves out (include-tags, ...) and
// its client's type name (client-type-name) are the business of package
// cli, which reads them from the same file.
func FromOutputOptions(o codegen.OutputOptions) (Namer, error) {
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
	n.skipOptionalPointer = o.PreferSkipOptionalPointer
	return n, nil
}
