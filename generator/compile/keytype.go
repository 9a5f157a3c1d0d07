package compile

import (
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/naming"
)

// keyGoKind tells how oapi-codegen's Go type of the key parameter p holds
// the key text (ir.KeyGoString, ir.KeyGoUUID), or, with kind "", why that
// type cannot hold it (why is "" when another rule reports it): the
// client helper writes the key into the typed parameter and the server
// wrapper reads it from there. is31 tells whether the spec is OpenAPI 3.1.
//
// A string schema's type is the one oapi-codegen's default type mapping
// (codegen.DefaultTypeMapping, which idemgen requires: it refuses
// output-options.type-mapping) gives its format (naming.StringType): string and
// openapi_types.Email (type Email string) hold the key as text,
// openapi_types.UUID as a UUID; every other type (json.RawMessage,
// openapi_types.Duration, openapi_types.Date, time.Time, []byte,
// openapi_types.File, ...) cannot hold it. A schema whose type is not
// string is left to key-declared-differently.
//
// A named type given with x-go-type whose underlying type idemgen cannot
// see (`x-go-type: MyKey`, `x-go-type: keys.Key`) is taken as a string
// type: the client helper converts with a type parameter constrained to
// ~string, so the Go compiler refuses the helper if it is not one.
func keyGoKind(p *openapi3.Parameter, is31 bool) (kind, goType, why string) {
	sref := p.Schema
	if sref == nil {
		if len(p.Content) > 0 {
			return "", "", "the parameter is declared with content, which oapi-codegen sends JSON-encoded (a string key in quotes)"
		}
		return ir.KeyGoString, "string", ""
	}
	if t, imp, ok := xGoType(sref); ok {
		return goTypeKind(t, imp)
	}
	s := sref.Value
	if s == nil || s.Type != nil && len(s.Type.Slice()) > 0 && !s.Type.Includes("string") {
		return ir.KeyGoString, "", ""
	}
	goType = naming.StringType(s, is31)
	from := "format: " + s.Format
	if naming.StringFormat(s, is31) != s.Format { // oapi-codegen reads the 3.1 forms of format
		from = "contentEncoding: " + s.ContentEncoding
		if s.ContentMediaType != "" {
			from = "contentMediaType: " + s.ContentMediaType
		}
	}
	enum := len(s.Enum) > 0 || is31 && s.Const != nil
	switch {
	case goType == "string" || goType == "openapi_types.Email":
		if enum {
			return ir.KeyGoString, "", "" // type <Op>Params<Name> string
		}
		return ir.KeyGoString, goType, ""
	case enum:
		return "", goType, from + " with an enum makes its Go type a named type of " + goType
	case goType == "openapi_types.UUID":
		return ir.KeyGoUUID, goType, ""
	}
	return "", goType, from + " makes its Go type " + goType
}

// xGoType returns the x-go-type of a parameter's schema (beside its $ref,
// or in the schema) and the path of its x-go-type-import.
func xGoType(sref *openapi3.SchemaRef) (t, imp string, ok bool) {
	for _, ext := range []map[string]any{sref.Extensions, valueExtensions(sref)} {
		if v, found := ext["x-go-type"]; found {
			t, _ = v.(string)
			if m, isMap := ext["x-go-type-import"].(map[string]any); isMap {
				imp, _ = m["path"].(string)
			}
			return strings.TrimSpace(t), imp, true
		}
	}
	return "", "", false
}

func valueExtensions(sref *openapi3.SchemaRef) map[string]any {
	if sref.Value == nil {
		return nil
	}
	return sref.Value.Extensions
}

// notStringTypes are Go types that can never hold a string key.
var notStringTypes = []string{
	"any", "bool", "byte", "complex128", "complex64", "error", "float32", "float64",
	"int", "int16", "int32", "int64", "int8", "rune", "uint", "uint16", "uint32", "uint64", "uint8", "uintptr",
	"time.Time", "time.Duration", "json.RawMessage", "openapi_types.Date", "openapi_types.File",
}

// goTypeKind classifies an x-go-type (and its import path).
func goTypeKind(t, imp string) (kind, goType, why string) {
	switch {
	case t == "string":
		return ir.KeyGoString, t, ""
	case t == "openapi_types.UUID", t == "uuid.UUID" && imp == "github.com/google/uuid", t == "types.UUID" && imp == "github.com/oapi-codegen/runtime/types":
		return ir.KeyGoUUID, t, ""
	case t == "":
		return "", t, "x-go-type is not a Go type name"
	case slices.Contains(notStringTypes, t):
		return "", t, "x-go-type: " + t + " is not a string type"
	}
	for _, prefix := range []string{"[", "map[", "*", "chan", "<-", "func", "struct", "interface"} {
		if strings.HasPrefix(t, prefix) {
			return "", t, "x-go-type: " + t + " is not a string type"
		}
	}
	return ir.KeyGoString, t, "" // a named type: the helper's ~string constraint checks it
}
