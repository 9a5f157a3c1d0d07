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
