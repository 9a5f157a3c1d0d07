// Package naming holds every rule idemgen uses to name the Go identifiers
// oapi-codegen generates for an operation, so generated wrappers and client
// helpers refer to oapi-codegen's types by their exact names.
//
// The rules call oapi-codegen's own exported naming functions (package
// github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen) with its default
// configuration (name normalizer ToCamelCase, no type-name collision
// resolution); the few it keeps unexported are restated here and checked
// against its generated output in the tests.
package naming

import (
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"
)

// Operation returns oapi-codegen's Go name of an operation: its operationId
// camel-cased (with a prefix for a leading digit or symbol), or, without an
// operationId, the method and path ("post /pets/{id}" -> PostPetsId).
func Operation(operationID, method, path string) string {
	if operationID == "" {
		id := strings.ToLower(method)
		for part := range strings.SplitSeq(path, "/") {
			if part != "" {
				id += "-" + part
			}
		}
		return codegen.ToCamelCase(id)
	}
	id := codegen.ToCamelCase(operationID)
	return codegen.ToCamelCase(typeNamePrefix(id) + id)
}

// typeNamePrefix restates oapi-codegen's unexported prefix rule for the
// output of ToCamelCase, which holds letters and digits only: "Empty" for an
// empty name, "N" before a leading digit.
func typeNamePrefix(name string) string {
	if name == "" {
		return "Empty"
	}
	if c := name[0]; c >= '0' && c <= '9' {
		return "N"
	}
	return ""
}

// Param returns the Go field name of a parameter in <Op>Params (and the base
// of a path parameter's argument name); goName is the parameter's
// x-go-name extension, "" when absent.
func Param(name, goName string) string {
	if goName != "" {
		name = goName
	}
	return codegen.SchemaNameToTypeName(name)
}

// ParamVariable returns the Go variable name oapi-codegen gives a path
// parameter's argument, e.g. petId for PetId.
func ParamVariable(goName string) string {
	v := codegen.LowercaseFirstCharacters(goName)
	if codegen.IsGoKeyword(v) {
		v = "p" + codegen.UppercaseFirstCharacter(v)
	}
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		v = "n" + v
	}
	return v
}

// Schema returns the Go type name of a component schema; goName is its
// x-go-name extension, "" when absent.
func Schema(component, goName string) string {
	if goName != "" {
		return goName
	}
	return codegen.SchemaNameToTypeName(component)
}

// SchemaRef returns the Go type of a "#/components/schemas/Name" reference,
// "" for any other reference (oapi-codegen then declares a type of its own).
func SchemaRef(ref, goName string) string {
	const prefix = "#/components/schemas/"
	rest, ok := strings.CutPrefix(ref, prefix)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return ""
	}
	return Schema(unescape(rest), goName)
}

func unescape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// Op holds the names of one operation's generated identifiers.
type Op struct {
	Handler              string // <Op>: strict and plain server interface method, Client method
	RequestObject        string // <Op>RequestObject (strict server)
	ResponseObject       string // <Op>ResponseObject (strict server)
	Params               string // <Op>Params
	ResponseType         string // <Op>Response (ClientWithResponses)
	WithResponse         string // <Op>WithResponse
	WithBodyWithResponse string // <Op>WithBodyWithResponse
	ClientWithBody       string // <Op>WithBody
	JSONBody             string // <Op>JSONBody: the type declared for an inline JSON body
	JSONRequestBody      string // <Op>JSONRequestBody: alias of the JSON body type
}

// Names returns the identifiers of the operation whose Go name is goName.
func Names(goName string) Op {
	return Op{
		Handler:              goName,
		RequestObject:        codegen.UppercaseFirstCharacter(goName) + "RequestObject",
		ResponseObject:       codegen.UppercaseFirstCharacter(goName) + "ResponseObject",
		Params:               goName + "Params",
		ResponseType:         goName + "Response",
		WithResponse:         goName + "WithResponse",
		WithBodyWithResponse: goName + "WithBodyWithResponse",
		ClientWithBody:       goName + "WithBody",
		JSONBody:             goName + "JSONBody",
		JSONRequestBody:      goName + "JSONRequestBody",
	}
}

// IsJSONMediaType reports whether a media type is JSON as oapi-codegen
// judges it: application/json or any type ending in +json.
func IsJSONMediaType(mediaType string) bool { return util.IsMediaTypeJson(mediaType) }

// ParamType returns the Go type oapi-codegen (v2.8, default type mapping)
// gives a parameter: the type of a path argument of the client's methods, or
// of a field of <Op>Params without its optional pointer. ref is the
// parameter's $ref ("" when declared inline), opGoName the operation's Go
// name, shared whether the parameter is declared on the path item rather
// than on the operation, is31 whether the spec is OpenAPI 3.1.
//
// Types outside the package are written as oapi-codegen writes them:
// openapi_types.X (github.com/oapi-codegen/runtime/types), time.Time,
// json.RawMessage. ParamType returns "" when it cannot tell: x-go-type
// overrides, objects, unions, nullable values, and enums declared on a path
// item or in a component parameter (oapi-codegen derives their names from
// scopes this function does not restate).
func ParamType(ref string, p *openapi3.Parameter, opGoName string, shared, is31 bool) string {
	if p == nil {
		return ""
	}
	if ref != "" {
		name, ok := componentParamType(ref, p)
		if !ok || p.Schema == nil || p.Schema.Value == nil || isEnum(p.Schema.Value, is31) && p.Schema.Ref == "" {
			return "" // an inline enum gets an operation-scoped name oapi-codegen then overrides
		}
		return name
	}
	sref := p.Schema
	if sref == nil {
		if len(p.Content) != 1 {
			return "string"
		}
		mt := p.Content.Get("application/json")
		if mt == nil {
			return "string"
		}
		sref = mt.Schema
	}
	if shared && hasInlineEnum(sref, is31) {
		return ""
	}
	return schemaType(sref, []string{opGoName + "Params", p.Name}, is31, 0)
}

// componentParamType is oapi-codegen's type name of a "#/components/parameters/Name"
// reference: the parameter's x-go-name, else Name as a type name.
func componentParamType(ref string, p *openapi3.Parameter) (string, bool) {
	const prefix = "#/components/parameters/"
	rest, ok := strings.CutPrefix(ref, prefix)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	if s, ok := p.Extensions["x-go-name"].(string); ok && s != "" {
		return s, true
	}
	return codegen.SchemaNameToTypeName(rest), true
}

func isEnum(s *openapi3.Schema, is31 bool) bool {
	return (len(s.Enum) > 0 || is31 && s.Const != nil) && !primaryType(s, is31).Is("array")
}

func hasInlineEnum(sref *openapi3.SchemaRef, is31 bool) bool {
	for depth := 0; sref != nil && sref.Ref == "" && sref.Value != nil && depth < 8; depth++ {
		if isEnum(sref.Value, is31) {
			return true
		}
		sref = sref.Value.Items
	}
	return false
}

// primaryType is the schema's type with "null" removed (OpenAPI 3.1).
func primaryType(s *openapi3.Schema, is31 bool) *openapi3.Types {
	if s.Type == nil || !is31 || len(s.Type.Slice()) <= 1 {
		return s.Type
	}
	var out openapi3.Types
	for _, t := range s.Type.Slice() {
		if t != "null" {
			out = append(out, t)
		}
	}
	return &out
}

// schemaType restates oapi-codegen's GenerateGoSchema for the schemas a
// parameter can have.
func schemaType(sref *openapi3.SchemaRef, path []string, is31 bool, depth int) string {
	if sref == nil || depth > 8 {
		return ""
	}
	if sref.Ref != "" {
		if _, ok := sref.Extensions["x-go-type"]; ok {
			return ""
		}
		goName := ""
		if sref.Value != nil {
			goName, _ = sref.Value.Extensions["x-go-name"].(string)
		}
		return SchemaRef(sref.Ref, goName)
	}
	s := sref.Value
	if s == nil {
		return ""
	}
	for _, ext := range []string{"x-go-type", "x-go-type-name"} {
		if _, ok := s.Extensions[ext]; ok && !(ext == "x-go-type-name" && isEnum(s, is31)) {
			return ""
		}
	}
	if s.AllOf != nil || s.OneOf != nil || s.AnyOf != nil || s.Not != nil || s.Nullable || is31 && s.Type != nil && s.Type.Includes("null") {
		return ""
	}
	t := primaryType(s, is31)
	if t == nil || len(t.Slice()) != 1 {
		return ""
	}
	if isEnum(s, is31) {
		if n, ok := s.Extensions["x-go-type-name"].(string); ok && n != "" {
			return n
		}
		parts := make([]string, len(path))
		for i, p := range path {
			parts[i] = codegen.ToCamelCase(p)
		}
		return codegen.SchemaNameToTypeName(strings.Join(parts, "_"))
	}
	m := codegen.DefaultTypeMapping
	switch {
	case t.Is("array"):
		item := schemaType(s.Items, path, is31, depth+1)
		if item == "" {
			return ""
		}
		return "[]" + item
	case t.Is("integer"):
		return m.Integer.Resolve(s.Format).Type
	case t.Is("number"):
		return m.Number.Resolve(s.Format).Type
	case t.Is("boolean"):
		return m.Boolean.Resolve(s.Format).Type
	case t.Is("string"):
		f := s.Format
		if is31 && f == "" {
			switch {
			case s.ContentMediaType != "":
				f = "binary"
			case s.ContentEncoding == "base64":
				f = "byte"
			}
		}
		return m.String.Resolve(f).Type
	}
	return ""
}
